"""Put the dataset where the runs read it: a DynamoDB table (BatchWriteItem) and an export folder.

The export has the layout of ``ddb2bt.pipelines.dynamodb.export_writer.write_export`` (and of a real
ExportTableToPointInTime): ``AWSDynamoDB/<id>/manifest-summary.json``, ``manifest-files.json`` and
gzipped JSON-lines data files of uneven sizes. It is written streaming (constant memory, so
1,000,000 items are fine) and cached under ``benchmarks/.cache`` keyed by the generator's source.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import os
import queue
import shutil
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ddb2bt.mappers.attrvalue import to_export_json
from ddb2bt.pipelines.dynamodb.client import create_table

from . import dataset

CACHE = Path(__file__).resolve().parent / ".cache"
EXPORT_ID = "01714564800000-be7c4a11"
EXPORT_TIME = "2024-05-01T12:00:00.000Z"


# --------------------------------------------------------------------------- DynamoDB


def load_table(endpoint: str, table: str, items: Iterable[dict], threads: int = 4) -> dict[str, Any]:
    """BatchWriteItem in batches of 25 from ``threads`` threads; unprocessed items are sent again."""
    import boto3
    from botocore.config import Config

    def client():
        return boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1",
                            config=Config(retries={"mode": "standard", "total_max_attempts": 10}))

    create_table(client(), table, "pk", "sk")
    batches: queue.Queue = queue.Queue(maxsize=threads * 8)
    stats = {"items": 0, "requests": 0, "unprocessed_retries": 0}
    lock = threading.Lock()
    errors: list[BaseException] = []

    def worker() -> None:
        ddb = client()
        while True:
            batch = batches.get()
            if batch is None:
                return
            try:
                requests = {table: [{"PutRequest": {"Item": item}} for item in batch]}
                attempt = 0
                while requests:
                    answer = ddb.batch_write_item(RequestItems=requests)
                    with lock:
                        stats["requests"] += 1
                    requests = answer.get("UnprocessedItems") or {}
                    if requests:
                        attempt += 1
                        with lock:
                            stats["unprocessed_retries"] += 1
                        time.sleep(min(1.0, 0.05 * 2**attempt))
                with lock:
                    stats["items"] += len(batch)
            except BaseException as err:  # noqa: BLE001 - reported after the join
                errors.append(err)

    workers = [threading.Thread(target=worker, daemon=True) for _ in range(threads)]
    for w in workers:
        w.start()
    start = time.perf_counter()
    batch: list[dict] = []
    for item in items:
        batch.append(item)
        if len(batch) == 25:
            batches.put(batch)
            batch = []
        if errors:
            break
    if batch:
        batches.put(batch)
    for _ in workers:
        batches.put(None)
    for w in workers:
        w.join()
    if errors:
        raise errors[0]
    stats["seconds"] = time.perf_counter() - start
    return stats


# --------------------------------------------------------------------------- export folder


def _md5(data: bytes) -> tuple[str, str]:
    digest = hashlib.md5(data)
    return base64.b64encode(digest.digest()).decode("ascii"), digest.hexdigest()


def _write_with_md5(export_dir: str, name: str, data: bytes) -> None:
    with open(os.path.join(export_dir, f"{name}.json"), "wb") as handle:
        handle.write(data)
    with open(os.path.join(export_dir, f"{name}.md5"), "w", encoding="ascii") as handle:
        handle.write(_md5(data)[1] + "\n")


def write_export_stream(root: str | os.PathLike[str], items: Iterable[dict], count: int, files: int,
                        table: str = "bench") -> str:
    """Like ``write_export`` (uneven files with weights 1, 2, 3, ...), for ``count`` streamed items."""
    key_root = f"AWSDynamoDB/{EXPORT_ID}"
    export_dir = os.path.join(os.fspath(root), *key_root.split("/"))
    os.makedirs(os.path.join(export_dir, "data"), exist_ok=True)
    open(os.path.join(export_dir, "_started"), "wb").close()
    weights = list(range(1, files + 1))
    bounds, start = [], 0
    for number, weight in enumerate(weights):
        end = count if number == files - 1 else start + count * weight // sum(weights)
        bounds.append(end - start)
        start = end
    iterator = iter(items)
    manifest_lines, billed, written = [], 0, 0
    for number, size in enumerate(bounds):
        name = hashlib.sha1(f"{EXPORT_ID}/{number}".encode()).hexdigest()[:26] + ".json.gz"
        path = os.path.join(export_dir, "data", name)
        with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, compresslevel=1) as out:
            for _ in range(size):
                line = json.dumps({"Item": to_export_json(next(iterator))}, separators=(",", ":")) + "\n"
                data = line.encode("utf-8")
                billed += len(data)
                out.write(data)
        written += size
        with open(path, "rb") as handle:
            md5, etag = _md5(handle.read())
        manifest_lines.append(json.dumps({"itemCount": size, "md5Checksum": md5, "etag": etag,
                                          "dataFileS3Key": f"{key_root}/data/{name}"}))
    _write_with_md5(export_dir, "manifest-files", ("\n".join(manifest_lines) + "\n").encode("utf-8"))
    table_arn = f"arn:aws:dynamodb:us-east-1:123456789012:table/{table}"
    summary = {
        "version": "2020-06-30", "exportArn": f"{table_arn}/export/{EXPORT_ID}", "startTime": EXPORT_TIME,
        "endTime": EXPORT_TIME, "tableArn": table_arn, "tableId": "00000000-0000-0000-0000-000000000000",
        "exportTime": EXPORT_TIME, "s3Bucket": "export-bucket", "s3Prefix": None, "s3SseAlgorithm": "AES256",
        "s3SseKmsKeyId": None, "manifestFilesS3Key": f"{key_root}/manifest-files.json", "billedSizeBytes": billed,
        "itemCount": written, "outputFormat": "DYNAMODB_JSON", "exportType": "FULL_EXPORT",
    }
    _write_with_md5(export_dir, "manifest-summary", json.dumps(summary).encode("utf-8"))
    return export_dir


def cached_export(count: int, files: int, seed: int = dataset.SEED) -> tuple[str, bool]:
    """The export folder for ``count`` items (written once, then reused); returns (folder, reused)."""
    source = Path(dataset.__file__).read_bytes() + Path(__file__).read_bytes()
    tag = hashlib.sha1(source).hexdigest()[:10]
    root = CACHE / f"export-{count}-{files}-{seed}-{tag}"
    export_dir = root / "AWSDynamoDB" / EXPORT_ID
    if (export_dir / "manifest-summary.json").exists():
        return str(export_dir), True
    shutil.rmtree(root, ignore_errors=True)
    tmp = CACHE / f".tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    write_export_stream(tmp, dataset.generate(count, seed), count, files)
    tmp.rename(root)
    return str(export_dir), False
