"""DynamoDB records written as Amazon Ion export lines by amazon.ion's own writer (not ours), and a documented
DYNAMODB_JSON export bucket copied as the ION export DynamoDB would have written of the same table."""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import shutil
from decimal import Decimal
from pathlib import Path
from typing import Any

from amazon.ion import simpleion
from amazon.ion.core import IonType
from amazon.ion.simple_types import IonPyBytes, IonPyList

SET_ANNOTATIONS = {"SS": "$dynamodb_SS", "NS": "$dynamodb_NS", "BS": "$dynamodb_BS"}


def _blob(value: Any) -> IonPyBytes:
    data = value if isinstance(value, bytes) else base64.b64decode(value)
    return IonPyBytes.from_value(IonType.BLOB, data)


def to_ion(value: dict[str, Any]) -> Any:
    """One AttributeValue (wire format, B as base64 text or bytes) as the Ion value DynamoDB's table says it exports."""
    (tag, inner), = value.items()
    if tag == "S":
        return inner
    if tag == "N":
        return Decimal(inner)
    if tag == "B":
        return _blob(inner)
    if tag == "BOOL":
        return inner
    if tag == "NULL":
        return None
    if tag in SET_ANNOTATIONS:
        members = [Decimal(m) if tag == "NS" else _blob(m) if tag == "BS" else m for m in inner]
        return IonPyList.from_value(IonType.LIST, members, annotations=(SET_ANNOTATIONS[tag],))
    if tag == "L":
        return [to_ion(member) for member in inner]
    if tag == "M":
        return {name: to_ion(member) for name, member in inner.items()}
    raise ValueError(tag)


def ion_line(record: dict[str, Any]) -> str:
    """An export line (``{"Item": {...}}`` or an incremental record) as amazon.ion writes it: ``$ion_1_0 {...}``."""
    value = {part: {name: to_ion(attr) for name, attr in attributes.items()} for part, attributes in record.items()}
    if "Metadata" in record:  # WriteTimestampMicros as the integer it is, not an AttributeValue
        value["Metadata"] = {"WriteTimestampMicros": int(record["Metadata"]["WriteTimestampMicros"]["N"])}
    text = simpleion.dumps(value, binary=False)
    assert "\n" not in text
    return text


def as_ion_bucket(source: Path, target: Path) -> Path:
    """A copy of an export bucket (manifests as AWS writes them) with every export in ION: each data file's lines
    rewritten by amazon.ion, renamed ``.ion.gz``, its manifest line's checksums and keys updated."""
    shutil.copytree(source, target)
    for summary_path in target.rglob("manifest-summary.json"):
        summary = json.loads(summary_path.read_text())
        summary["outputFormat"] = "ION"
        summary_path.write_text(json.dumps(summary, separators=(",", ":")))
        files_path = summary_path.parent / "manifest-files.json"
        entries = [json.loads(line) for line in files_path.read_text().splitlines()]
        for entry in entries:
            old = target / _bucket_key(summary, entry["dataFileS3Key"])
            lines = [ion_line(json.loads(line)) for line in gzip.decompress(old.read_bytes()).decode().splitlines()
                     if line.strip()]
            data = gzip.compress("".join(line + "\n" for line in lines).encode(), mtime=0)
            old.unlink()
            entry["dataFileS3Key"] = entry["dataFileS3Key"].replace(".json.gz", ".ion.gz")
            new = target / _bucket_key(summary, entry["dataFileS3Key"])
            new.write_bytes(data)
            digest = hashlib.md5(data)
            entry.update(md5Checksum=base64.b64encode(digest.digest()).decode(),
                         etag=hashlib.md5(digest.digest()).hexdigest() + "-1")
        files_path.write_text("".join(json.dumps(entry, separators=(",", ":")) + "\n" for entry in entries))
    return target


def _bucket_key(summary: dict, key: str) -> Path:
    """Where a manifest key lives in the bucket copy: keys with the prefix as they are, others under the prefix."""
    prefix = summary.get("s3Prefix") or ""
    if prefix and not key.startswith(prefix):
        return Path(prefix) / key
    return Path(key)
