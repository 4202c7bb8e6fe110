"""The hand-written migration a user would write instead of ddb2bt: the reference in every comparison.

What a careful engineer writes in an afternoon for ``benchmarks/spec.yaml``:

* boto3 ``scan`` page by page (one segment), or the export's gzipped JSON lines file by file;
* one translation function per entity type, straight Python over the wire format (no
  TypeDeserializer: it would turn numbers into Decimals and lose the exact text we must write,
  and this way it is also the faster, i.e. stronger, baseline);
* the Bigtable data client's ``MutationsBatcher`` with its default settings.

``translate`` must give exactly the cells ddb2bt gives for the spec (the smoke test checks it).
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import struct
import time
from datetime import datetime
from decimal import Decimal
from typing import Any

MIGRATION_US = 1_704_067_200_000_000  # the spec's migration_time, 2024-01-01T00:00:00Z
REVERSE_MAX = 9_999_999_999_999

Cell = tuple  # (family, qualifier: bytes, timestamp_micros, value: bytes)


# --------------------------------------------------------------------------- value helpers


def _raw(payload: Any) -> bytes:
    return payload if isinstance(payload, bytes) else base64.b64decode(payload)


def to_json(value: dict) -> str:
    """Compact JSON with exact numbers, sorted keys, sorted set members, base64 binary."""
    (tag, payload), = value.items()
    if tag == "S":
        return json.dumps(payload, ensure_ascii=False)
    if tag == "N":
        return payload
    if tag == "BOOL":
        return "true" if payload else "false"
    if tag == "NULL":
        return "null"
    if tag == "B":
        return json.dumps(base64.b64encode(_raw(payload)).decode())
    if tag == "SS":
        return json.dumps(sorted(payload), ensure_ascii=False, separators=(",", ":"))
    if tag == "NS":
        return "[" + ",".join(sorted(payload, key=Decimal)) + "]"
    if tag == "BS":
        return json.dumps([base64.b64encode(m).decode() for m in sorted(_raw(m) for m in payload)],
                          separators=(",", ":"))
    if tag == "L":
        return "[" + ",".join(to_json(element) for element in payload) + "]"
    return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + to_json(payload[k]) for k in sorted(payload)) + "}"


def typed(value: dict) -> Any:
    """The AttributeValue as JSON-ready data: binaries as base64, set members sorted (strings and binaries
    by bytes, numbers by value). Numbers are kept as DynamoDB returns them: already canonical text."""
    (tag, payload), = value.items()
    if tag == "B":
        return {"B": base64.b64encode(_raw(payload)).decode()}
    if tag == "SS":
        return {"SS": sorted(payload)}
    if tag == "NS":
        return {"NS": sorted(payload, key=Decimal)}
    if tag == "BS":
        return {"BS": [base64.b64encode(m).decode() for m in sorted(_raw(m) for m in payload)]}
    if tag == "L":
        return {"L": [typed(element) for element in payload]}
    if tag == "M":
        return {"M": {name: typed(element) for name, element in payload.items()}}
    return {tag: payload}  # S, N, BOOL, NULL


def ddb_json(value: dict) -> bytes:
    """Typed JSON, compact, keys sorted: ``{"N":"42"}``, ``{"M":{"a":{"S":"x"}}}``, ``{"NULL":true}``."""
    return json.dumps(typed(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def auto(value: dict) -> bytes:
    """A non-empty string not starting with ``{`` as its UTF-8 text; anything else as typed JSON."""
    text = value.get("S")
    if text and text[0] != "{":
        return text.encode()
    return ddb_json(value)


def map_cells(family: str, prefix: bytes, ts: int, value: dict | None, encode) -> list[Cell]:
    """One cell per map key; an empty map is one empty cell at the bare prefix (absent: no cell)."""
    if value is None:
        return []
    members = value["M"]
    if not members:
        return [(family, prefix, ts, b"")]
    return [(family, prefix + name.encode(), ts, encode(element)) for name, element in members.items()]


def list_cells(family: str, qualifier: bytes, ts: int, value: dict | None, encode) -> list[Cell]:
    """One cell per element, 1 ms apart; an empty list is one empty cell (absent: no cell)."""
    if value is None:
        return []
    elements = value["L"]
    if not elements:
        return [(family, qualifier, ts, b"")]
    return [(family, qualifier, ts + index * 1000, encode(element)) for index, element in enumerate(elements)]


def int64(text: str) -> bytes:
    return int(text).to_bytes(8, "big", signed=True)


def float64(text: str) -> bytes:
    return struct.pack(">d", float(text))


def iso_us(text: str) -> int:
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    us = int(moment.timestamp()) * 1_000_000 + moment.microsecond
    return us - us % 1000


def reverse_ts(text: str) -> str:
    return str(REVERSE_MAX - int(text)).rjust(13, "0")


def boolean(value: dict) -> bytes:
    return b"\x01" if value["BOOL"] else b"\x00"


# --------------------------------------------------------------------------- per entity


def _customer(item: dict) -> tuple[bytes, list[Cell]]:
    ts = iso_us(item["created_at"]["S"])
    cells = [("c", b"n", ts, item["name"]["S"].encode())]
    for name in ("email", "tier"):
        if name in item:
            cells.append(("c", name.encode(), ts, item[name]["S"].encode()))
    for name in ("balance", "lifetime_value"):
        if name in item:
            cells.append(("c", name.encode(), ts, item[name]["N"].encode()))
    if "loyalty_points" in item:
        cells.append(("c", b"loyalty_points", ts, int64(item["loyalty_points"]["N"])))
    for tag in item.get("tags", {}).get("SS", ()):
        cells.append(("c", b"tag:" + tag.encode(), ts, b"\x00"))
    cells += map_cells("c", b"addr:", ts, item.get("address"), auto)
    cells += list_cells("l", b"phones", ts, item.get("phones"), auto)
    if "marketing_opt_in" in item:
        cells.append(("c", b"optin", ts, boolean(item["marketing_opt_in"])))
    known = {"pk", "sk", "type", "created_at", "name", "email", "tier", "balance", "lifetime_value",
             "loyalty_points", "tags", "address", "phones", "marketing_opt_in"}
    for name, value in item.items():
        if name not in known:
            cells.append(("x", name.encode(), ts, auto(value)))
    return ("cust#" + item["pk"]["S"][5:]).encode(), cells


def _order(item: dict) -> tuple[bytes, list[Cell]]:
    _, placed, order_id = item["sk"]["S"].split("#")
    ts = int(item["placed_at"]["N"]) * 1000
    key = f"cust#{item['pk']['S'][5:]}#order#{reverse_ts(placed)}#{order_id}"
    cells = []
    for name in ("status", "currency"):
        if name in item:
            cells.append(("o", name.encode(), ts, item[name]["S"].encode()))
    cells.append(("o", b"total", ts, item["total"]["N"].encode()))
    if "line_count" in item:
        cells.append(("o", b"line_count", ts, int64(item["line_count"]["N"])))
    for name in ("shipping", "discounts"):
        if name in item:
            cells.append(("o", name.encode(), ts, to_json(item[name]).encode()))
    for code in item.get("coupon_codes", {}).get("SS", ()):
        cells.append(("o", b"coupon:" + code.encode(), ts, b"\x00"))
    if "gift" in item:
        cells.append(("o", b"gift", ts, boolean(item["gift"])))
    if "notes" in item:
        cells.append(("o", b"notes", ts, item["notes"]["S"].encode()))
    known = {"pk", "sk", "type", "placed_at", "status", "currency", "total", "line_count", "shipping", "discounts",
             "coupon_codes", "gift", "notes"}
    for name, value in item.items():
        if name not in known:
            cells.append(("x", name.encode(), ts, auto(value)))
    return key.encode(), cells


def _line(item: dict) -> tuple[bytes, list[Cell]]:
    ts = MIGRATION_US
    key = f"order#{item['pk']['S'][6:]}#{item['sk']['S'][5:]}"
    cells = []
    if "product_id" in item:
        cells.append(("o", b"product", ts, item["product_id"]["S"].encode()))
    if "sku" in item:
        cells.append(("o", b"sku", ts, item["sku"]["S"].encode()))
    if "qty" in item:
        cells.append(("o", b"qty", ts, int64(item["qty"]["N"])))
    if "unit_price" in item:
        cells.append(("o", b"unit_price", ts, item["unit_price"]["N"].encode()))
    if "weight_kg" in item:
        cells.append(("o", b"weight_kg", ts, float64(item["weight_kg"]["N"])))
    cells += map_cells("o", b"opt:", ts, item.get("options"), lambda element: element["S"].encode())
    for serial in item.get("serials", {}).get("NS", ()):
        cells.append(("o", b"serial:" + serial.encode(), ts, b"\x00"))
    if "backordered" in item:
        cells.append(("o", b"backordered", ts, boolean(item["backordered"])))
    known = {"pk", "sk", "type", "product_id", "sku", "qty", "unit_price", "weight_kg", "options", "serials",
             "backordered"}
    for name, value in item.items():
        if name not in known:
            cells.append(("x", name.encode(), ts, auto(value)))
    return key.encode(), cells


def _product(item: dict) -> tuple[bytes, list[Cell]]:
    ts = MIGRATION_US
    cells = []
    if "title" in item:
        cells.append(("p", b"title", ts, item["title"]["S"].encode()))
    if "description" in item:
        cells.append(("p", b"desc", ts, item["description"]["S"].encode()))
    cells.append(("p", b"price", ts, item["price"]["N"].encode()))
    if "stock" in item:
        cells.append(("p", b"stock", ts, int64(item["stock"]["N"])))
    if "rating" in item:
        cells.append(("p", b"rating", ts, float64(item["rating"]["N"])))
    for category in item.get("categories", {}).get("SS", ()):
        cells.append(("p", b"cat:" + category.encode(), ts, b"\x00"))
    cells += map_cells("p", b"dim:", ts, item.get("dimensions"), lambda element: element["N"].encode())
    cells += map_cells("p", b"spec:", ts, item.get("specs"), auto)
    if "image" in item:
        cells.append(("p", b"image", ts, _raw(item["image"]["B"])))
    for thumb in item.get("thumbs", {}).get("BS", ()):
        cells.append(("p", b"thumb:" + _raw(thumb), ts, b"\x00"))
    cells += list_cells("l", b"related", ts, item.get("related"), auto)
    known = {"pk", "sk", "type", "title", "description", "price", "stock", "rating", "categories", "dimensions",
             "specs", "image", "thumbs", "related"}
    for name, value in item.items():
        if name not in known:
            cells.append(("x", name.encode(), ts, auto(value)))
    return ("prod#" + item["pk"]["S"][5:]).encode(), cells


def _review(item: dict) -> tuple[bytes, list[Cell]]:
    _, at, review_id = item["sk"]["S"].split("#")
    ts = int(at) * 1000
    key = f"prod#{item['pk']['S'][5:]}#review#{reverse_ts(at)}#{review_id}"
    cells = []
    if "customer_id" in item:
        cells.append(("r", b"customer", ts, item["customer_id"]["S"].encode()))
    if "stars" in item:
        cells.append(("r", b"stars", ts, int64(item["stars"]["N"])))
    for name in ("title", "body"):
        if name in item:
            cells.append(("r", name.encode(), ts, item[name]["S"].encode()))
    if "helpful_votes" in item:
        cells.append(("r", b"votes", ts, int64(item["helpful_votes"]["N"])))
    if "verified" in item:
        cells.append(("r", b"verified", ts, boolean(item["verified"])))
    if "language" in item:
        cells.append(("r", b"lang", ts, item["language"]["S"].encode()))
    if "score" in item:
        cells.append(("r", b"score", ts, item["score"]["N"].encode()))
    known = {"pk", "sk", "type", "customer_id", "stars", "title", "body", "helpful_votes", "verified", "language",
             "score"}
    for name, value in item.items():
        if name not in known:
            cells.append(("x", name.encode(), ts, ddb_json(value)))
    return key.encode(), cells


TRANSLATORS = {"customer": _customer, "order": _order, "line": _line, "product": _product, "review": _review}


def translate(item: dict) -> tuple[bytes, list[Cell]] | None:
    """(row key, cells) for one item, or None for an item of no known type (a real script would log it)."""
    translator = TRANSLATORS.get(item.get("type", {}).get("S"))
    return translator(item) if translator else None


# --------------------------------------------------------------------------- the runs


def _entry(key: bytes, cells: list[Cell]) -> Any:
    from google.cloud.bigtable.data import RowMutationEntry, SetCell

    return RowMutationEntry(key, [SetCell(family, qualifier, value, ts) for family, qualifier, ts, value in cells])


def _write(items, project: str, instance: str, table_id: str) -> dict[str, int]:
    from google.cloud.bigtable.data import BigtableDataClient, RowMutationEntry, SetCell

    read = written = failed = 0
    with BigtableDataClient(project=project) as client:
        table = client.get_table(instance, table_id)
        with table.mutations_batcher() as batcher:
            for item in items:
                read += 1
                translated = translate(item)
                if translated is None:
                    failed += 1
                    continue
                key, cells = translated
                batcher.append(RowMutationEntry(key, [SetCell(f, q, v, ts) for f, q, ts, v in cells]))
                written += 1
    return {"items_read": read, "rows_written": written, "failed": failed}


def scan_items(endpoint: str, table: str):
    """Every item of the table, one Scan page after the other."""
    import boto3

    client = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1")
    request: dict[str, Any] = {"TableName": table}
    while True:
        page = client.scan(**request)
        yield from page["Items"]
        if "LastEvaluatedKey" not in page:
            return
        request["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def export_items(export_dir: str):
    """Every item of a DynamoDB export folder, data file after data file."""
    with open(os.path.join(export_dir, "manifest-files.json")) as handle:
        files = [json.loads(line)["dataFileS3Key"] for line in handle if line.strip()]
    for key in files:
        with gzip.open(os.path.join(export_dir, "data", key.rsplit("/", 1)[1]), "rt", encoding="utf-8") as handle:
            for line in handle:
                yield json.loads(line)["Item"]


def migrate_scan(endpoint: str, table: str, project: str, instance: str, target: str) -> dict[str, Any]:
    start = time.perf_counter()
    counts = _write(scan_items(endpoint, table), project, instance, target)
    return {**counts, "seconds": time.perf_counter() - start}


def migrate_export(export_dir: str, project: str, instance: str, target: str) -> dict[str, Any]:
    start = time.perf_counter()
    counts = _write(export_items(export_dir), project, instance, target)
    return {**counts, "seconds": time.perf_counter() - start}
