"""DynamoDB exports written locally in AWS's layout: full exports and incremental exports.

For the local examples, the benchmarks and the tests, which need exports without an AWS account. The layout is
AWS's own (docs: "DynamoDB table export output format"; tested field by field against real manifests in
tests/data/aws_exports): a full export's manifests and data in ``[prefix/]AWSDynamoDB/<exportId>/``; an
incremental export's manifests there too but its data files in the *shared* ``[prefix/]AWSDynamoDB/data/``
folder, with keys ``AWSDynamoDB/data/<name>.json.gz``; gzipped JSON lines, an empty partition as an empty file;
base64 MD5s (``md5Checksum`` and the ``.md5`` files, no newline) and one-part multipart ETags (``…-1``).

:func:`compact` turns an ordered log of changes (e.g. what a stream delivered) into what an incremental export
of a window holds: one record per item changed in it, with the item's image before the window's first change
(OldImage, absent if it did not exist) and after its last (NewImage, absent if deleted), stamped with the last
change's WriteTimestampMicros; an item created and deleted within the window does not appear.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import os
from collections.abc import Sequence
from typing import Any

from ...mappers.attrvalue import to_export_json
from ...mappers.changes import Change
from ...mappers.units import micros_to_iso

EXPORT_TIME = "2024-05-01T12:00:00.000Z"
"""The export time of a full export written here (the exports' point in time)."""


def write_export(
    root: str | os.PathLike[str],
    items: Sequence[dict[str, Any]],
    files: int = 4,
    *,
    export_id: str = "01714564800000-1a2b3c4d",
    prefix: str = "",
    table: str = "Table",
    export_time: str = EXPORT_TIME,
) -> str:
    """Write ``items`` (wire format; ``B`` bytes become base64) as an export under ``root``, taken at ``export_time``.

    Returns the export folder (the one holding manifest-summary.json) as a string path.
    """
    if files < 1:
        raise ValueError("an export has at least one data file")
    key_root = f"{prefix.strip('/')}/AWSDynamoDB/{export_id}" if prefix.strip("/") else f"AWSDynamoDB/{export_id}"
    export_dir = os.path.join(os.fspath(root), *key_root.split("/"))
    billed = write_data_files(export_dir, os.path.join(export_dir, "data"), f"{key_root}/data", export_id,
                              [{"Item": to_export_json(item)} for item in items], files)
    table_arn = f"arn:aws:dynamodb:us-east-1:123456789012:table/{table}"
    summary = {
        "version": "2020-06-30",
        "exportArn": f"{table_arn}/export/{export_id}",
        "startTime": export_time,
        "endTime": export_time,
        "tableArn": table_arn,
        "tableId": "00000000-0000-0000-0000-000000000000",
        "exportTime": export_time,
        "s3Bucket": "export-bucket",
        "s3Prefix": prefix.strip("/") or None,
        "s3SseAlgorithm": "AES256",
        "s3SseKmsKeyId": None,
        "manifestFilesS3Key": f"{key_root}/manifest-files.json",
        "billedSizeBytes": billed,
        "itemCount": len(items),
        "outputFormat": "DYNAMODB_JSON",
        "exportType": "FULL_EXPORT",
    }
    _write_with_md5(export_dir, "manifest-summary", json.dumps(summary, separators=(",", ":")).encode("utf-8"))
    return export_dir


def write_data_files(export_dir: str, data_dir: str, data_key: str, export_id: str,
                     records: Sequence[dict[str, Any]], files: int) -> int:
    """``records`` as gzipped JSON lines over ``files`` data files in ``data_dir`` (keys ``data_key/<name>``),
    the export folder's ``_started`` marker and manifest-files.json/.md5; returns the bytes billed."""
    os.makedirs(data_dir, exist_ok=True)
    with open(os.path.join(export_dir, "_started"), "wb"):
        pass
    manifest_lines, billed = [], 0
    for number, chunk in enumerate(_split(records, files)):
        text = "".join(json.dumps(record, separators=(",", ":")) + "\n" for record in chunk)
        billed += len(text)
        data = gzip.compress(text.encode("utf-8"), mtime=0) if chunk else b""  # an empty partition: an empty file
        name = hashlib.sha1(f"{export_id}/{number}".encode()).hexdigest()[:26] + ".json.gz"
        with open(os.path.join(data_dir, name), "wb") as handle:
            handle.write(data)
        md5, _hex = _md5(data)
        manifest_lines.append(json.dumps({"itemCount": len(chunk), "md5Checksum": md5, "etag": _etag(data),
                                          "dataFileS3Key": f"{data_key}/{name}"}, separators=(",", ":")))
    _write_with_md5(export_dir, "manifest-files", ("\n".join(manifest_lines) + "\n").encode("utf-8"))
    return billed


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
        "startTime": micros_to_iso(to_us),
        "endTime": micros_to_iso(to_us),
        "tableArn": table_arn,
        "tableId": table_id,
        "exportFromTime": micros_to_iso(from_us),
        "exportToTime": micros_to_iso(to_us),
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


def _md5(data: bytes) -> tuple[str, str]:
    digest = hashlib.md5(data)
    return base64.b64encode(digest.digest()).decode("ascii"), digest.hexdigest()


def _split(items: Sequence[Any], files: int) -> list[Sequence[Any]]:
    """Uneven chunks (weights 1, 2, 3, ...) like an export's per-partition files; some may be empty."""
    weights = list(range(1, files + 1))
    total, chunks, start = sum(weights), [], 0
    for number, weight in enumerate(weights):
        end = len(items) if number == files - 1 else start + len(items) * weight // total
        chunks.append(items[start:end])
        start = end
    return chunks


def _etag(data: bytes) -> str:
    """The ETag S3 gives an object uploaded in one multipart part (as export data files are): the MD5 of the
    part's MD5, then ``-1``; an empty object's is its plain MD5."""
    if not data:
        return hashlib.md5(data).hexdigest()
    return hashlib.md5(hashlib.md5(data).digest()).hexdigest() + "-1"


def _write_with_md5(export_dir: str, name: str, data: bytes) -> None:
    with open(os.path.join(export_dir, f"{name}.json"), "wb") as handle:
        handle.write(data)
    with open(os.path.join(export_dir, f"{name}.md5"), "w", encoding="ascii") as handle:
        handle.write(_md5(data)[0])  # base64, no newline, as DynamoDB writes it
