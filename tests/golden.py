"""The Bigtable rows docs/EXAMPLES.md §2 describes for the three seed tables, written out by hand.

Shape: {row_key: {"family:qualifier": [(ISO time, value bytes), ...newest first]}}. Both the
mapper golden tests and the end-to-end pipeline tests compare against these.
"""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path

from ddb2bt.templates import catalog

MIGRATION = "2024-01-01T00:00:00"
IMAGES = "https://storage.googleapis.com/ddb2bt-demo/"


def micros(iso: str) -> int:
    return int(datetime.fromisoformat(iso).replace(tzinfo=timezone.utc).timestamp()) * 1_000_000


def int64(value: int) -> bytes:
    return value.to_bytes(8, "big", signed=True)


def _product(description: str, price: str, image: str) -> dict:
    return {
        "SKU:Description": [(MIGRATION, description.encode())],
        "SKU:Price": [(MIGRATION, price.encode())],
        "SKU:Thumbnail": [(MIGRATION, (IMAGES + image).encode())],
    }


PRODUCT_CATALOG = {
    b"hats#fedoras#brandA": _product("Crafted from premium wool, a timeless fedora.", "30", "hats/fedoras-brandA.jpg"),
    b"hats#fedoras#brandB": _product("Durable water-resistant canvas, built for the outdoors.", "28", "hats/fedoras-brandB.jpg"),
    b"hats#newsboy#brandB": _product("Add a touch of vintage charm to your everyday look.", "25", "hats/newsboy-brandB.jpg"),
    b"shoes#sneakers#brandA": _product("Step out in style and comfort with these sneakers.", "40", "shoes/sneakers-brandA.jpg"),
    b"shoes#sneakers#brandB": _product("Classic features with contemporary materials.", "50", "shoes/sneakers-brandB.jpg"),
}


def _formats(video: str, names: list[str]) -> bytes:
    # JSON with sorted keys: "1080p" < "480" < "720" as text.
    return json.dumps({name: f"{IMAGES}videos/{video}/{name}.mp4" for name in sorted(names)}, separators=(",", ":")).encode()


VIDEOS = {
    b"0123": {
        "video:Formats": [("2023-09-10T15:21:48", _formats("0123", ["480", "720", "1080p"]))],
        "video:UserComments": [
            ("2023-09-10T19:01:15", b"I really like this idea. The special effects are amazing."),
            ("2023-09-10T16:30:42", b"There seems to be an audio problem at 1:05."),
        ],
        "video:Likes": [(MIGRATION, int64(3))],
        "video:Views": [(MIGRATION, int64(156))],
    },
    b"0124": {
        "video:Formats": [("2023-09-10T17:03:21", _formats("0124", ["480", "720"]))],
        "video:UserComments": [
            ("2023-10-12T07:08:51", b"The style reminds me of a director, but I don't know which one."),
            ("2023-09-11T08:15:00", b"I shared it with all my friends."),
        ],
        "video:Views": [(MIGRATION, int64(45))],
    },
}

INVOICES = {
    b"0123": {
        "Invoice:Details": [("2023-09-10T15:21:48", b'{"discount":0.1,"due_date":"2023-10-03","sales_tax_usd":"8"}')],
        "Payment:0680": [
            ("2023-09-10T15:21:40", b'{"address":"123 Abc St, Springfield","amount_usd":120,"bill_to":"John Smith"}')
        ],
        "Payment:0789": [
            ("2023-09-10T15:21:31", b'{"address":"13 Xyz St, Springfield","amount_usd":120,"bill_to":"Jane Doe"}')
        ],
    },
    b"0124": {
        "Invoice:Details": [("2023-09-09T10:11:28", b'{"discount":0.2,"due_date":"2023-10-03","sales_tax_usd":"11"}')],
        "Payment:0275": [
            ("2023-09-09T10:11:03", b'{"address":"21 Zyx St, Shelbyville","amount_usd":70,"bill_to":"Kate Green"}')
        ],
        "Payment:0327": [
            ("2023-09-09T10:11:10", b'{"address":"321 Cba St, Shelbyville","amount_usd":180,"bill_to":"Bob Brown"}')
        ],
    },
}

EXPECTED = {"product_catalog": PRODUCT_CATALOG, "videos": VIDEOS, "invoices": INVOICES}
SEEDS = tuple(EXPECTED)
KEYS = {"pk": "HASH", "sk": "RANGE"}


def expected_cells(name: str) -> dict[bytes, dict[str, list[tuple[int, bytes]]]]:
    """The golden rows with times in microseconds, for comparing with what Bigtable returns."""
    return {
        key: {column: [(micros(at), value) for at, value in cells] for column, cells in columns.items()}
        for key, columns in EXPECTED[name].items()
    }


def template_path(name: str) -> Path:
    return Path(str(resources.files("ddb2bt.templates") / f"{name}.yaml"))


def seed_items(name: str) -> list[dict]:
    """The seed table's items in DynamoDB JSON."""
    return list(catalog.seed_items(name))


def group_cells(rows) -> dict[bytes, dict[str, list[tuple[int, bytes]]]]:
    """MappedRows (or anything with row_key and cells) -> the golden shape, cells newest first."""
    grouped: dict[bytes, dict[str, list[tuple[int, bytes]]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        for cell in row.cells:
            grouped[row.row_key][f"{cell.family}:{cell.qualifier.decode()}"].append((cell.timestamp_micros, cell.value))
    return {
        key: {column: sorted(cells, key=lambda cell: -cell[0]) for column, cells in columns.items()}
        for key, columns in grouped.items()
    }
