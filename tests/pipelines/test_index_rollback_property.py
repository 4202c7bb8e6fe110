"""Index rows and the way back, as a property: generated items of every type, some in two sparse GSIs (keys of type
S, N or B; one index under a prefix of the main table, one in a table of its own), written to the emulator as
migrate writes them (each item's row and its index rows), then `rollback` into a new DynamoDB table: the items come
back exactly, type for type, and no index row becomes an item (those in the main table are read and counted empty)."""

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
from ddb2bt.mappers.spec import MappingSpec
from ddb2bt.pipelines.bigtable.entries import to_mutation_entry
from ddb2bt.pipelines.bigtable.sink import ensure_table
from ddb2bt.pipelines.dynamodb.client import create_table, put_items

from .roundtrip_cases import ANY, KEY_TEXT, NUMBER, SETTINGS
from .streams import table_items

TABLES = itertools.count()
INDEX_KEY = st.one_of(KEY_TEXT.map(lambda s: {"S": s}), NUMBER.map(lambda n: {"N": n}),
                      st.binary(min_size=1, max_size=4).map(lambda b: {"B": b}))  # fmt: skip


@st.composite
def items(draw) -> list[dict]:
    kind = draw(st.sampled_from(["S", "N", "B"]))  # the GSIs' key type: one per table, as DynamoDB declares it
    key = INDEX_KEY.filter(lambda value: kind in value)
    found, seen = [], set()
    for _ in range(draw(st.integers(1, 6))):
        pk, sk = draw(KEY_TEXT), draw(KEY_TEXT)
        if (pk, sk) in seen:
            continue
        seen.add((pk, sk))
        item = {"pk": {"S": pk}, "sk": {"S": sk}, "n": {"N": str(len(found))}}  # an item of keys alone writes no cell
        item |= draw(st.dictionaries(st.sampled_from(["a", "b", "é", "x#y"]), ANY, max_size=3))
        if draw(st.booleans()):  # sparse: in the GSIs or not
            item["g"] = draw(key)
            if draw(st.booleans()):
                item["gs"] = draw(key)
        found.append(item)
    return found


def spec_for(name: str, endpoint: str) -> MappingSpec:
    by_g = {"name": "by_g", "type": "global", "partition_key": "g"}
    by_gs = {"name": "by_gs", "type": "global", "partition_key": "g", "sort_key": "gs"}
    return MappingSpec.model_validate({
        "source": {"table": name, "endpoint_url": endpoint, "region": "us-east-1", "partition_key": "pk",
                   "sort_key": "sk"},
        "target": {"table": name, "families": {"d": {"max_versions": 1}, "i": {"max_versions": 1}}},
        "migration_time": "2024-01-01T00:00:00Z",
        "entities": [{"name": "e", "row_key": {"template": "{pk}#{sk}", "on_delimiter": "escape"},
                      "rest": {"family": "d", "encoding": "ddb_json"}}],
        "indexes": [{**by_g, "projection": {"type": "ALL"}, "family": "i", "target": {"prefix": "~g#"}},
                    {**by_gs, "projection": {"type": "KEYS_ONLY"}, "family": "i", "target": {"table": f"{name}.gs"}}],
    })


@pytest.mark.servers
@settings(max_examples=int(os.environ.get("INDEX_EXAMPLES", 6)), phases=(Phase.explicit, Phase.reuse, Phase.generate),
          **SETTINGS)  # fmt: skip
@given(items())
def test_items_with_index_rows_come_back_exact_and_no_index_row_becomes_an_item(servers, items):
    from google.cloud.bigtable.data import BigtableDataClient

    number = next(TABLES)
    name, back = f"ir{os.getpid()}x{number}", f"ir{os.getpid()}y{number}"
    spec = spec_for(name, servers.endpoint)
    dynamodb = boto3.client("dynamodb", endpoint_url=servers.endpoint, region_name="us-east-1")
    for table in (name, back):
        create_table(dynamodb, table, "pk", "sk")
    put_items(dynamodb, name, items)
    stored = table_items(dynamodb, name)  # what DynamoDB keeps is what a migration reads
    compiled = compile_spec(spec)
    ensure_table(spec.target)
    own = spec.target.model_copy(update={"table": f"{name}.gs"})
    ensure_table(own.model_copy(update={"families": {"i": spec.target.families["i"]}}))
    rows = [compiled.map_item(item) for item in stored]
    main = [to_mutation_entry(row) for row in rows]
    prefixed = [index for row in rows for index in row.index_rows if index.table is None]
    elsewhere = [index for row in rows for index in row.index_rows if index.table is not None]
    with BigtableDataClient(project=spec.target.project) as client:
        client.get_table(spec.target.instance, name).bulk_mutate_rows(main + [to_mutation_entry(i) for i in prefixed])
        if elsewhere:
            client.get_table(spec.target.instance, own.table).bulk_mutate_rows([to_mutation_entry(i) for i in elsewhere])
    with tempfile.TemporaryDirectory() as folder:
        result = rollback(spec, RollbackRequest(to_table=back, writers=2), RunOptions(run_dir=f"{folder}/rb"))
    assert result.ok and result.compared == len(stored), result.problems
    assert result.counters["rows_empty"] == len(prefixed) and result.counters["items_written"] == len(stored)

    def canonical(found: list[dict]) -> list[str]:
        return sorted(repr(sorted((key, comparable(value)) for key, value in item.items())) for item in found)

    assert canonical(table_items(dynamodb, back)) == canonical(stored)
