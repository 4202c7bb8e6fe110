"""AWS's Developer Guide sample tables (tests/data/aws_samples, with their provenance): items in wire format
and DescribeTable's answer for each, as freshly loaded tables give it (ItemCount 0 for hours)."""

from __future__ import annotations

import gzip
import json
from decimal import Decimal
from pathlib import Path

HERE = Path(__file__).resolve().parent / "data" / "aws_samples"

KEYS = {  # table: (partition key, type, sort key, type), from the Developer Guide
    "ProductCatalog": ("Id", "N", None, None),
    "Forum": ("Name", "S", None, None),
    "Thread": ("ForumName", "S", "Subject", "S"),
    "Reply": ("Id", "S", "ReplyDateTime", "S"),
    "Movies": ("year", "N", "title", "S"),
}


def items(table: str) -> list[dict]:
    if table == "Movies":
        from boto3.dynamodb.types import TypeSerializer

        serialize = TypeSerializer().serialize
        with gzip.open(HERE / "moviedata.json.gz") as data:
            movies = json.load(data, parse_float=Decimal)
        return [{name: serialize(value) for name, value in movie.items()} for movie in movies]
    return [request["PutRequest"]["Item"] for request in json.loads((HERE / f"{table}.json").read_text())[table]]


def describe(table: str, item_count: int = 0) -> dict:
    pk, pk_type, sk, sk_type = KEYS[table]
    schema = [{"AttributeName": pk, "KeyType": "HASH"}] + ([{"AttributeName": sk, "KeyType": "RANGE"}] if sk else [])
    types = [{"AttributeName": pk, "AttributeType": pk_type}] + (
        [{"AttributeName": sk, "AttributeType": sk_type}] if sk else [])
    return {"Table": {"TableName": table, "KeySchema": schema, "AttributeDefinitions": types,
                      "ItemCount": item_count, "TableSizeBytes": 0}}
