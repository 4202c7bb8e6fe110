"""Attributes Bigtable keeps as text alone, as a property through the emulator and back: generated items whose
attribute `a` (of one type per table: S, N, B or BOOL, as a single-table design keeps an order number or a flag)
lives only in the row key, a qualifier template or both, written to the emulator as migrate writes them, then
`rollback` into a new DynamoDB table without `--type`: every item comes back exactly, type for type (the type comes
from a sample of the source: Bigtable holds the attribute's text, no type)."""

from __future__ import annotations

import itertools
import os
import tempfile

import boto3
import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from ddb2bt.app.options import RunOptions
from ddb2bt.app.rollback import RollbackRequest, rollback
from ddb2bt.mappers.compiler import compile_spec
from ddb2bt.mappers.decode import comparable
from ddb2bt.mappers.results import MappedRow
from ddb2bt.mappers.spec import MappingSpec
from ddb2bt.pipelines.bigtable.entries import to_mutation_entry
from ddb2bt.pipelines.bigtable.sink import ensure_table
from ddb2bt.pipelines.dynamodb.client import create_table, put_items

from .roundtrip_cases import KEY_TEXT, NUMBER, SETTINGS
from .streams import table_items

TABLES = itertools.count()
VALUES = {"S": KEY_TEXT.map(lambda s: {"S": s}), "N": NUMBER.map(lambda n: {"N": n}),
          "B": st.binary(min_size=1, max_size=6).map(lambda b: {"B": b}), "BOOL": st.booleans().map(lambda b: {"BOOL": b})}


@st.composite
def cases(draw) -> tuple[str, list[dict]]:
    kind, where = draw(st.sampled_from(sorted(VALUES))), draw(st.sampled_from(["key", "qualifier", "both"]))
    items = [{"pk": {"S": f"p{i % 2}"}, "sk": {"S": f"s{i}"}, "a": draw(VALUES[kind]), "v": {"S": f"v{i}"}}
             for i in range(draw(st.integers(1, 5)))]
    return where, items


def spec_for(name: str, endpoint: str, where: str) -> MappingSpec:
    key = "{pk}#{sk}#{a}" if where in ("key", "both") else "{pk}#{sk}"
    qualifier = "v#{a}" if where in ("qualifier", "both") else "v"
    return MappingSpec.model_validate({
        "source": {"table": name, "endpoint_url": endpoint, "region": "us-east-1", "partition_key": "pk",
                   "sort_key": "sk"},
        "target": {"table": name, "families": {"d": {"max_versions": 1}}},
        "migration_time": "2024-01-01T00:00:00Z",
        "entities": [{"name": "e", "row_key": {"template": key, "on_delimiter": "escape"},
                      "columns": [{"attribute": "v", "family": "d", "qualifier": qualifier, "encoding": "utf8"}]}],
    })  # fmt: skip


@pytest.mark.servers
@settings(max_examples=int(os.environ.get("TEXT_TYPE_EXAMPLES", 8)), phases=(Phase.explicit, Phase.reuse,
                                                                              Phase.generate), **SETTINGS)  # fmt: skip
@given(cases())
def test_attributes_kept_as_text_come_back_in_their_type(servers, case):
    from google.cloud.bigtable.data import BigtableDataClient

    where, items = case
    number = next(TABLES)
    name, back = f"tt{os.getpid()}x{number}", f"tt{os.getpid()}y{number}"
    spec = spec_for(name, servers.endpoint, where)
    dynamodb = boto3.client("dynamodb", endpoint_url=servers.endpoint, region_name="us-east-1")
    for table in (name, back):
        create_table(dynamodb, table, "pk", "sk")
    put_items(dynamodb, name, items)
    stored = table_items(dynamodb, name)  # what DynamoDB keeps is what a migration reads
    rows = [compile_spec(spec).map_item(item) for item in stored]
    assert all(isinstance(row, MappedRow) for row in rows), rows
    ensure_table(spec.target)
    with BigtableDataClient(project=spec.target.project) as client:
        client.get_table(spec.target.instance, name).bulk_mutate_rows([to_mutation_entry(row) for row in rows])
    with tempfile.TemporaryDirectory() as folder:
        result = rollback(spec, RollbackRequest(to_table=back, writers=2, processes=1), RunOptions(run_dir=f"{folder}/rb"))
    assert result.ok and result.compared == len(stored), result.problems

    def canonical(found: list[dict]) -> list[str]:
        return sorted(repr(sorted((key, comparable(value)) for key, value in item.items())) for item in found)

    assert canonical(table_items(dynamodb, back)) == canonical(stored)
