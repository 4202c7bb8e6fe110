"""The cutover walkthrough's table and workload (docs/CUTOVER.md, "Worked example"), on a DynamoDB the user points at.

A single-table spec with folded rows and item-dependent timestamps: posts (one row per post id) and their comments
(cells of one column in the post's row, each at the comment's own time), so changes hit rows that other items
share, move cells in time, remove attributes and switch entities. About one post in ten lacks its required
``Title`` on purpose: its changes are dead letters until a spec maps it. ``ddb2bt local walkthrough`` runs it on the
local servers; the cutover tests share it.
"""

from __future__ import annotations

import random
from typing import Any

from ...mappers.changes import Change
from ...mappers.spec import MappingSpec
from ..dynamodb.aws import aws_client

MIGRATION_TIME = "2024-01-01T00:00:00Z"
FAMILIES: dict[str, Any] = {"d": None, "c": None, "x": None}
REGION = "us-east-1"
SORT_KEYS = ("post", "c#0", "c#1", "c#2")
"""A post's own item and its comments' sort keys: each post id has at most these four items."""


def index_specs(table: str) -> list[dict[str, Any]]:
    """Sparse GSIs on the posts' and drafts' optional attributes (puts move their index rows, REMOVE drops them):
    by_a under a key prefix of the main table, by_b in a table of its own, ``<table>.by_b``."""
    return [
        {"name": "by_a", "type": "global", "partition_key": "A", "sort_key": "C", "target": {"prefix": "~a#"},
         "projection": {"type": "INCLUDE", "non_key_attributes": ["Title", "kind"]}, "family": "i"},
        {"name": "by_b", "type": "global", "partition_key": "B", "target": {"table": f"{table}.by_b"},
         "projection": {"type": "ALL"}, "family": "b"},
    ]


def make_spec(table: str, indexes: bool = False, **source: Any) -> MappingSpec:
    """The workload's spec; with `indexes`, two sparse GSIs carried as index rows (:func:`index_specs`)."""
    return MappingSpec.model_validate({
        "source": {"table": table, "partition_key": "pk", "sort_key": "sk", "region": REGION, **source},
        "target": {"table": table, "families": {**FAMILIES, "i": None} if indexes else FAMILIES},
        "indexes": index_specs(table) if indexes else [],
        "migration_time": MIGRATION_TIME,
        "entities": [
            {"name": "meta", "match": {"kind": "meta"}, "action": "skip"},
            {"name": "comment", "match": {"kind": "comment"}, "row_key": "{pk}",
             "columns": [{"attribute": "Text", "family": "c", "qualifier": "{sk}", "encoding": "utf8",
                          "timestamp": {"attribute": "At", "format": "epoch_ms"}}],
             "drop": ["kind"]},
            {"name": "post", "match": {"kind": "post"}, "row_key": "{pk}",
             "columns": [{"attribute": "Title", "family": "d", "encoding": "utf8", "required": True}],
             "rest": {"family": "x"}, "drop": ["kind", "sk"]},
            {"name": "draft", "match": {"kind": "draft"}, "row_key": "draft#{pk}#{sk}",
             "columns": [{"attribute": "Title", "family": "d", "encoding": "utf8"}],
             "rest": {"family": "x"}, "drop": ["kind"], "lossy": ["Title"]},
        ],
    })


def random_item(rng: random.Random, pk: str, sk: str) -> dict[str, Any]:
    """A post, draft or comment (comments for sk c#..., posts/drafts for sk 'post'); some break the spec."""
    if sk.startswith("c#"):
        return {"pk": {"S": pk}, "sk": {"S": sk}, "kind": {"S": "comment"}, "Text": {"S": rng.choice("abc") * 3},
                "At": {"N": str(1_600_000_000_000 + rng.randrange(5) * 1000)}}
    item = {"pk": {"S": pk}, "sk": {"S": sk}, "kind": {"S": rng.choice(["post", "post", "draft"])}}
    if rng.random() < 0.9:  # a post without Title is unmappable (required): a dead letter
        item["Title"] = {"S": rng.choice(["hello", "world", "x"])}
    for name in ("A", "B", "C"):
        if rng.random() < 0.5:
            item[name] = {"S": rng.choice(["1", "2", "3"])} if name != "C" else {"N": str(rng.randrange(3))}
    return item


def random_keys(rng: random.Random, posts: int) -> tuple[str, str]:
    """A random key among ``posts`` post ids (keys repeat: a workload changes items it made before)."""
    pk = f"p{rng.randrange(posts)}"
    return pk, "post" if rng.random() < 0.5 else f"c#{rng.randrange(3)}"


def every_key(posts: int) -> list[tuple[str, str]]:
    """Every key :func:`random_keys` can draw for ``posts`` post ids: ``posts`` × 4, each once."""
    return [(f"p{number}", sk) for number in range(posts) for sk in SORT_KEYS]


def dynamodb(endpoint: str | None = None) -> Any:
    return aws_client("dynamodb", endpoint_url=endpoint, region=REGION)


def create_streamed_table(endpoint: str | None, name: str) -> Any:
    """A table keyed pk/sk with a NEW_AND_OLD_IMAGES stream; its client."""
    client = dynamodb(endpoint)
    client.create_table(TableName=name, BillingMode="PAY_PER_REQUEST",
                        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
                        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                              {"AttributeName": "sk", "AttributeType": "S"}],
                        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"})
    return client


def workload(client: Any, name: str, rng: random.Random, steps: int, posts: int = 6) -> None:
    """Puts (new items, changed timestamps and entities), attribute removals and deletes."""
    for _ in range(steps):
        pk, sk = random_keys(rng, posts)
        key = {"pk": {"S": pk}, "sk": {"S": sk}}
        roll = rng.random()
        if roll < 0.2:
            client.delete_item(TableName=name, Key=key)
        elif roll < 0.35 and sk == "post":
            if "Item" in client.get_item(TableName=name, Key=key):
                client.update_item(TableName=name, Key=key, UpdateExpression="REMOVE A, B")
        else:
            client.put_item(TableName=name, Item=random_item(rng, pk, sk))


def table_items(client: Any, name: str) -> list[dict[str, Any]]:
    return [item for page in client.get_paginator("scan").paginate(TableName=name) for item in page["Items"]]


def stream_changes(endpoint: str | None, name: str) -> list[Change]:
    """Every record of the table's stream, as changes, in order (shard by shard, from its trim horizon)."""
    from ..dynamodb.stream import to_change

    arn = dynamodb(endpoint).describe_table(TableName=name)["Table"]["LatestStreamArn"]
    streams = aws_client("dynamodbstreams", endpoint_url=endpoint, region=REGION)
    changes = []
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard["ShardId"],
                                              ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        while iterator:
            page = streams.get_records(ShardIterator=iterator, Limit=1000)
            changes += [to_change(record) for record in page["Records"]]
            if not page["Records"]:
                break
            iterator = page.get("NextShardIterator")
    return changes
