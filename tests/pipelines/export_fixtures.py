"""Test items, an exact matcher for big item collections, and realistic DynamoDB exports.

For tests and benchmarks. :func:`write_export` writes a DynamoDB export (DYNAMODB_JSON) to a local folder.

The layout and fields follow what DynamoDB's ExportTableToPointInTime writes to S3 (compare the real
manifests in tests/data/aws_exports/): ``[prefix/]AWSDynamoDB/<exportId>/`` with ``_started``,
``manifest-summary.json`` (+ ``.md5``), ``manifest-files.json`` (+ ``.md5``) and gzipped JSON-lines
data files of uneven sizes in ``<exportId>/data/``; an empty partition is an empty file with
itemCount 0; md5Checksum is base64, the etag a multipart upload's (``<hex>-1``); manifest keys
carry the prefix, as a full export's do.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import os
from collections.abc import Sequence
from typing import Any

from apache_beam.testing.util import BeamAssertException

from ddb2bt.mappers.attrvalue import to_export_json

EXPORT_TIME = "2024-05-01T12:00:00.000Z"


def make_items(count: int, padding: int = 900) -> list[dict[str, Any]]:
    """``count`` distinct wire-format items (key ``pk`` S, ``sk`` N) of about ``padding`` + 250 bytes.

    They carry every attribute type with values that break careless code: exact decimals with
    trailing zeros, 38 significant digits, binary with non-UTF-8 bytes, sets, nested maps and lists.
    """
    return [
        {
            "pk": {"S": f"user#{number % 97:03d}"},
            "sk": {"N": str(number)},
            "price": {"N": f"{number}.50"},
            "exact": {"N": "1234567890123456789012345678.9012345678"},
            "blob": {"B": bytes([number % 256, 0xFF, 0x00, 0xFE])},
            "tags": {"SS": [f"t{number % 3}", "all"]},
            "scores": {"NS": ["1", "2.50", "-3"]},
            "bins": {"BS": [b"\x01", b"\x02\x80"]},
            "active": {"BOOL": number % 2 == 0},
            "nothing": {"NULL": True},
            "address": {"M": {"city": {"S": "Zürich"}, "zip": {"N": "8001"},
                              "lines": {"L": [{"S": "a"}, {"N": "0.10"}]}}},
            "padding": {"S": "x" * padding},
        }
        for number in range(count)
    ]


def item_key(item: dict[str, Any]) -> tuple[str, str]:
    """The (pk, sk) of a :func:`make_items` item, for comparing collections."""
    return item["pk"]["S"], item["sk"]["N"]


def fingerprint(item: dict[str, Any]) -> tuple[tuple[str, str], str]:
    """(key, digest of the whole item): cheap to shuffle into assert_that, yet any changed byte shows."""
    return item_key(item), hashlib.sha256(json.dumps(to_export_json(item), sort_keys=True).encode()).hexdigest()


def exactly(expected: Sequence[dict[str, Any]]) -> Any:
    """An assert_that matcher for big item collections: same keys, no duplicates, each item identical.

    Pipe the actual items through :func:`fingerprint` first (``items | beam.Map(fingerprint)``):
    shuffling digests instead of whole items keeps a 6 MB check to seconds on the DirectRunner.
    An export item (``B`` as base64 text) and its wire-format original have the same fingerprint.
    """
    want = dict(map(fingerprint, expected))

    def check(actual):
        got = dict(actual)
        if len(actual) != len(expected) or got != want:
            missing, extra = want.keys() - got.keys(), got.keys() - want.keys()
            changed = [key for key in want.keys() & got.keys() if want[key] != got[key]]
            raise BeamAssertException(
                f"{len(actual)} items read, {len(expected)} expected; missing {sorted(missing)[:5]}, "
                f"extra {sorted(extra)[:5]}, changed {sorted(changed)[:5]}")

    return check


def counter_totals(result: Any) -> dict[str, int]:
    """Committed Beam counters by name, summed over the steps that share a name."""
    totals: dict[str, int] = {}
    for metric in result.metrics().query()["counters"]:
        totals[metric.key.metric.name] = totals.get(metric.key.metric.name, 0) + metric.committed
    return totals


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


def write_export(
    root: str | os.PathLike[str],
    items: Sequence[dict[str, Any]],
    files: int = 4,
    *,
    export_id: str = "01714564800000-1a2b3c4d",
    prefix: str = "",
    table: str = "Table",
) -> str:
    """Write ``items`` (wire format; ``B`` bytes become base64) as an export under ``root``.

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
        "startTime": EXPORT_TIME,
        "endTime": EXPORT_TIME,
        "tableArn": table_arn,
        "tableId": "00000000-0000-0000-0000-000000000000",
        "exportTime": EXPORT_TIME,
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
