"""DynamoDB incremental exports written locally, following the documented format, from a change log.

:func:`compact` turns an ordered log of changes (e.g. the records a DynamoDB stream delivered) into
what an incremental export of a window holds: one record per item changed in the window, with the
item's image before the window's first change (OldImage, absent if it did not exist) and after its
last (NewImage, absent if deleted), stamped with the last change's WriteTimestampMicros; an item
created and deleted within the window does not appear. :func:`write_incremental_export` writes those
records as AWS does: the manifests in ``[prefix/]AWSDynamoDB/<exportId>/``, the data files in the
*shared* ``[prefix/]AWSDynamoDB/data/`` folder, their keys ``AWSDynamoDB/data/<name>.json.gz``
(relative to the prefix; the summary's manifestFilesS3Key carries it), fields as in
export_fixtures.write_export.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from typing import Any

from ddb2bt.mappers.attrvalue import to_export_json
from ddb2bt.mappers.changes import Change
from ddb2bt.pipelines.timeline import us_to_iso

from .export_fixtures import _write_with_md5, write_data_files


def compact(changes: Sequence[Change], from_us: int, to_us: int, key_names: Sequence[str]) -> list[dict[str, Any]]:
    """Export records for the window [from_us, to_us) of ``changes`` (ordered per item)."""
    first: dict[tuple, Change] = {}
    last: dict[tuple, Change] = {}
    for change in changes:
        if not from_us <= change.time_us < to_us:
            continue
        key = tuple(json.dumps(to_export_json(change.keys[name]), sort_keys=True) for name in key_names)
        first.setdefault(key, change)
        last[key] = change
    records = []
    for key, change in last.items():
        old, new = first[key].old, change.new
        if old is None and new is None:
            continue
        record: dict[str, Any] = {"Metadata": {"WriteTimestampMicros": {"N": str(change.time_us)}},
                                  "Keys": change.keys}
        if old is not None:
            record["OldImage"] = old
        if new is not None:
            record["NewImage"] = new
        records.append(record)
    return records


def write_incremental_export(root: str | os.PathLike[str], records: Sequence[dict[str, Any]], from_us: int,
                             to_us: int, files: int = 2, *, export_id: str | None = None, table: str = "Table",
                             view: str = "NEW_AND_OLD_IMAGES", prefix: str = "",
                             table_id: str = "00000000-0000-0000-0000-000000000000") -> str:
    """Write ``records`` as an incremental export under ``root``; returns the export folder."""
    export_id = export_id or f"{to_us // 1000:014d}-{hashlib.sha1(str(from_us).encode()).hexdigest()[:8]}"
    prefix = prefix.strip("/")
    key_root = f"{prefix}/AWSDynamoDB/{export_id}" if prefix else f"AWSDynamoDB/{export_id}"
    export_dir = os.path.join(os.fspath(root), *key_root.split("/"))
    os.makedirs(export_dir, exist_ok=True)
    billed = write_data_files(export_dir, os.path.join(os.path.dirname(export_dir), "data"), "AWSDynamoDB/data",
                              export_id, [to_export_json(record) for record in records], files)
    table_arn = f"arn:aws:dynamodb:us-east-1:123456789012:table/{table}"
    summary = {
        "version": "2023-08-01",
        "exportArn": f"{table_arn}/export/{export_id}",
        "startTime": us_to_iso(to_us),
        "endTime": us_to_iso(to_us),
        "tableArn": table_arn,
        "tableId": table_id,
        "exportFromTime": us_to_iso(from_us),
        "exportToTime": us_to_iso(to_us),
        "s3Bucket": "export-bucket",
        "s3Prefix": prefix or None,
        "s3SseAlgorithm": "AES256",
        "s3SseKmsKeyId": None,
        "manifestFilesS3Key": f"{key_root}/manifest-files.json",
        "billedSizeBytes": billed,
        "itemCount": len(records),
        "outputFormat": "DYNAMODB_JSON",
        "outputView": view,
        "exportType": "INCREMENTAL_EXPORT",
    }
    _write_with_md5(export_dir, "manifest-summary", json.dumps(summary, separators=(",", ":")).encode("utf-8"))
    return export_dir
