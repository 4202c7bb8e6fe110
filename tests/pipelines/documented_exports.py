"""The documented export bucket (tests/data/aws_exports/documented: one full, two incremental exports of `posts`) and
the spec the catch-up tests migrate it with."""

from __future__ import annotations

import json
from pathlib import Path

from ddb2bt.mappers.spec import MappingSpec
from ddb2bt.pipelines.cutover.workload import make_spec

DATA = Path(__file__).resolve().parents[1] / "data" / "aws_exports"
DOCUMENTED = DATA / "documented"
EXPORTS = "ddb/posts/AWSDynamoDB"
FULL, INC1, INC2 = "01714564800000-a1b2c3d4", "01714568400000-b2c3d4e5", "01714572000000-c3d4e5f6"


def posts_spec(name: str, full_export: str) -> MappingSpec:
    """The cutover workload's spec on the documented exports' table (`posts`), writing to a table of its own."""
    data = make_spec(name, export={"path": full_export}).model_dump(mode="json", by_alias=True)
    data["source"]["table"] = "posts"
    return MappingSpec.model_validate(data)


def final_state() -> list[dict]:
    """The table after the second incremental export, one item per line (the bucket's final-state.jsonl)."""
    return [json.loads(line) for line in (DOCUMENTED / "final-state.jsonl").read_text().splitlines()]
