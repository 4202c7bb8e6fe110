"""Counters the whole way, as a property: generated counters migrated into an Int64-sum aggregate family, an
application's increments made concurrently after cutover (at the current time, at the migrated cell's own time, at
other times, negative ones too), then `rollback` into a new DynamoDB table: every counter comes back as the exact N
(the migrated value plus every increment, never through a float), every other attribute as it was, and the rollback
says OK only because every item compared equal."""

from __future__ import annotations

import itertools
import os
import tempfile
from concurrent.futures import ThreadPoolExecutor

import boto3
import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from ddb2bt.app.options import RunOptions
from ddb2bt.app.rollback import RollbackRequest, rollback
from ddb2bt.mappers.compiler import compile_spec
from ddb2bt.mappers.decode import comparable
from ddb2bt.pipelines.bigtable.entries import to_mutation_entry
from ddb2bt.pipelines.bigtable.sink import ensure_table
from ddb2bt.pipelines.dynamodb.client import create_table

from .roundtrip_cases import SETTINGS
from .streams import table_items
from .counter_specs import MIGRATION_US, counter_spec

TABLES = itertools.count()
BOUND = 2**62  # a migrated counter and its increments' sum stay within Int64, as Bigtable's aggregate keeps them
PARTITIONS = st.sampled_from(["v1", "v#2", "é中", "😀"])
INCREMENT = st.tuples(st.sampled_from([b"Likes", b"Views"]), st.integers(-(2**40), 2**40),
                      st.sampled_from(["now", "migration", "old", "later"]))  # fmt: skip
VIDEOS = st.dictionaries(PARTITIONS, st.tuples(st.integers(-BOUND, BOUND), st.none() | st.integers(-BOUND, BOUND),
                                               st.lists(INCREMENT, max_size=6)), min_size=1, max_size=3)  # fmt: skip


@pytest.mark.servers
@settings(max_examples=int(os.environ.get("COUNTER_EXAMPLES", 6)), phases=(Phase.explicit, Phase.reuse, Phase.generate),
          **SETTINGS)  # fmt: skip
@given(VIDEOS)
def test_counters_incremented_concurrently_come_back_exact(servers, videos):
    from google.cloud.bigtable.data import AddToCell, BigtableDataClient

    number = next(TABLES)
    name, back = f"cr{os.getpid()}x{number}", f"cr{os.getpid()}y{number}"
    spec = counter_spec(name, servers.endpoint)
    items, expected = [], {}
    for pk, (likes, views, _) in videos.items():
        items.append({"pk": {"S": pk}, "sk": {"S": "Video"}, "Title": {"S": f"about {pk}"}})
        for sk, value in (("VideoStatsLikes", likes), ("VideoStatsViews", views)):
            if value is not None:
                items.append({"pk": {"S": pk}, "sk": {"S": sk}, "Count": {"N": str(value)}})
    expected = {(item["pk"]["S"], item["sk"]["S"]): item for item in items}
    # the migration, as migrate's sink writes it: each counter whole (DeleteFromColumn + AddToCell)
    ensure_table(spec.target)
    compiled = compile_spec(spec)
    with BigtableDataClient(project=spec.target.project) as client:
        table = client.get_table(spec.target.instance, spec.target.table)
        table.bulk_mutate_rows([to_mutation_entry(compiled.map_item(item), frozenset({"stats"})) for item in items])
        # the application after cutover: every increment its own AddToCell, four at a time
        now_us = MIGRATION_US + 3_600_000_000
        times = {"now": now_us, "migration": MIGRATION_US, "old": MIGRATION_US - 1000, "later": now_us + 5000}
        increments = [(pk, qualifier, value, times[when]) for pk, (_, _, adds) in videos.items()
                      for qualifier, value, when in adds]  # fmt: skip
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda add: table.mutate_row(add[0].encode(), [AddToCell("stats", add[1], add[2], add[3])]),
                          increments))  # fmt: skip
    for pk, qualifier, value, _ in increments:
        sk = "VideoStats" + qualifier.decode()
        old = expected.get((pk, sk), {"pk": {"S": pk}, "sk": {"S": sk}, "Count": {"N": "0"}})
        expected[(pk, sk)] = {**old, "Count": {"N": str(int(old["Count"]["N"]) + value)}}

    dynamodb = boto3.client("dynamodb", endpoint_url=servers.endpoint, region_name="us-east-1")
    create_table(dynamodb, back, "pk", "sk")
    with tempfile.TemporaryDirectory() as folder:
        result = rollback(spec, RollbackRequest(to_table=back, writers=2), RunOptions(run_dir=f"{folder}/rb"))
    assert result.ok and result.differences == 0 and result.compared == len(expected), result.problems
    got = {(item["pk"]["S"], item["sk"]["S"]): item for item in table_items(dynamodb, back)}
    assert set(got) == set(expected)
    for key, item in expected.items():
        assert {n: comparable(v) for n, v in got[key].items()} == {n: comparable(v) for n, v in item.items()}, key
        assert got[key].get("Count", {"N": "0"})["N"] == expected[key].get("Count", {"N": "0"})["N"]  # exact text
