"""The stream tail across a shard split and through empty pages, against moto_server (behind ShardSplitProxy, which
shows its one shard as a closed parent and its child) and the Bigtable emulator: what real DynamoDB Streams do and
moto does not."""

from __future__ import annotations

import json
import random


from ddb2bt.app.cutover import tail
from ddb2bt.app.options import RunOptions

from .cells import expected_cells, read_cells
from .streams import fresh_migration
from .streams import table_items, workload
from .shard_splits import CHILD, PARENT, last_sequence, proxied_backfill

TAIL = {"until_idle_s": 1.0, "poll_s": 0.1, "max_seconds": 60}


def shards_of(run_dir: str) -> dict:
    with open(f"{run_dir}/tail.json") as file:
        return json.load(file)["shards"]


def test_changes_before_and_after_a_split_land_parent_first(bigtable_env, moto_server, unique_name, tmp_path):
    rng = random.Random(21)
    with proxied_backfill(moto_server, unique_name, tmp_path, rng) as (client, spec, run_dir, proxy):
        workload(client, unique_name, rng, 80)
        proxy.split_after = split = last_sequence(moto_server.endpoint, unique_name)
        workload(client, unique_name, rng, 80)  # the same items change again, now in the child
        end = last_sequence(moto_server.endpoint, unique_name)
        result = tail(spec, RunOptions(run_dir=run_dir), **TAIL)
    assert result.ok, result.problems
    assert result.counters["changes_read"] > end - split > 40
    child = [sequence for shard, sequence in proxy.served if shard == CHILD]
    assert child == list(range(split + 1, end + 1))
    assert proxy.served[-len(child):] == [(CHILD, sequence) for sequence in child]  # the whole parent first
    sequences = [sequence for _, sequence in proxy.served]
    assert sequences == sorted(set(sequences))  # each record once, in stream order
    saved = shards_of(run_dir)
    assert saved[PARENT]["done"] and saved[PARENT]["sequence"] == str(split)
    assert saved[CHILD]["parent"] == PARENT and saved[CHILD]["sequence"] == str(sequences[-1])
    assert read_cells(spec.target) == fresh_migration(spec, tmp_path, table_items(client, unique_name))


def test_empty_pages_in_the_middle_of_a_shard_do_not_stall_the_tail(bigtable_env, moto_server, unique_name, tmp_path):
    """Twelve empty pages (with a next iterator) after a record in the middle: every fresh iterator there meets them
    again, so a tail that starts over from its saved position after an empty page never gets past them."""
    rng = random.Random(22)
    with proxied_backfill(moto_server, unique_name, tmp_path, rng, empty_pages=12) as (client, spec, run_dir, proxy):
        workload(client, unique_name, rng, 40)
        proxy.gap_after = gap = last_sequence(moto_server.endpoint, unique_name)
        workload(client, unique_name, rng, 40)
        end = last_sequence(moto_server.endpoint, unique_name)
        result = tail(spec, RunOptions(run_dir=run_dir), **TAIL)
    assert result.ok, result.problems
    sequences = [sequence for _, sequence in proxy.served]
    assert sequences == sorted(set(sequences)) and [sequence for sequence in sequences if sequence > gap] == \
        list(range(gap + 1, end + 1)) and end - gap > 20
    assert shards_of(run_dir)[PARENT]["sequence"] == str(sequences[-1])
    assert read_cells(spec.target) == fresh_migration(spec, tmp_path, table_items(client, unique_name))


def test_a_tail_stopped_before_the_split_resumes_with_the_parent_end_then_the_child(bigtable_env, moto_server,
                                                                                 unique_name, tmp_path):
    rng = random.Random(23)
    with proxied_backfill(moto_server, unique_name, tmp_path, rng, split=False) as (client, spec, run_dir, proxy):
        workload(client, unique_name, rng, 60)
        proxy.split_after = split = last_sequence(moto_server.endpoint, unique_name)
        before = table_items(client, unique_name)
        workload(client, unique_name, rng, 60)
        end = last_sequence(moto_server.endpoint, unique_name)
        assert tail(spec, RunOptions(run_dir=run_dir), **TAIL).ok  # the parent still open: read up to the split
        saved = shards_of(run_dir)
        assert list(saved) == [PARENT] and saved[PARENT]["sequence"] == str(split) and not saved[PARENT]["done"]
        assert read_cells(spec.target) == expected_cells(spec, before)  # nothing after the split
        first = len(proxy.served)

        proxy.split = True  # the parent closes at the split; its child holds the rest
        result = tail(spec, RunOptions(run_dir=run_dir), **TAIL)
    assert result.ok, result.problems
    assert proxy.served[first:] == [(CHILD, sequence) for sequence in range(split + 1, end + 1)]  # the parent's end
    # holds no record
    sequences = [sequence for _, sequence in proxy.served]
    assert sequences == sorted(set(sequences))  # across the restart: nothing twice, nothing out of order
    saved = shards_of(run_dir)
    assert saved[PARENT]["done"] and saved[CHILD]["sequence"] == str(sequences[-1])
    assert read_cells(spec.target) == fresh_migration(spec, tmp_path, table_items(client, unique_name))
