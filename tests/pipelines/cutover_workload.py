"""A single-table spec with folded rows and item-dependent timestamps, and random workloads for it.

Shared by the cutover tests and benchmarks: posts (one row per post id) and their comments (cells
of one column in the post's row, each at the comment's own time), so changes hit rows that other
items share, move cells in time, remove attributes and switch entities.
"""

from __future__ import annotations

import random
from typing import Any

from ddb2bt.mappers.spec import MappingSpec

MIGRATION_TIME = "2024-01-01T00:00:00Z"
FAMILIES: dict[str, Any] = {"d": None, "c": None, "x": None}


INDEXES: list[dict[str, Any]] = [
    # sparse GSIs on the posts' and drafts' optional attributes: puts move their index rows, REMOVE drops them
    {"name": "by_a", "type": "global", "partition_key": "A", "sort_key": "C", "target": {"prefix": "~a#"},
     "projection": {"type": "INCLUDE", "non_key_attributes": ["Title", "kind"]}, "family": "i"},
    {"name": "by_b", "type": "global", "partition_key": "B", "target": {"prefix": "~b#"},
     "projection": {"type": "ALL"}, "family": "i"},
]


def make_spec(table: str, indexes: bool = False, **source: Any) -> MappingSpec:
    """The workload's spec; with `indexes`, two sparse GSIs carried as index rows (INDEXES)."""
    return MappingSpec.model_validate({
        "source": {"table": table, "partition_key": "pk", "sort_key": "sk", "region": "us-east-1", **source},
        "target": {"table": table, "families": {**FAMILIES, "i": None} if indexes else FAMILIES},
        "indexes": INDEXES if indexes else [],
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
    pk = f"p{rng.randrange(posts)}"
    return pk, "post" if rng.random() < 0.5 else f"c#{rng.randrange(3)}"
