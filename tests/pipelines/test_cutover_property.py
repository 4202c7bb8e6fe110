"""Convergence, as a property: random workloads of puts, updates (removed attributes, moved timestamps, switched
entities) and deletes run against a real local DynamoDB (moto_server, with Streams) *during* the backfill and after
it; changes are delivered twice (a redelivered stream suffix, a catch-up killed half-way and run again); at the end
Bigtable must equal a fresh migration of the final table, cell for cell — index rows included: the spec carries two
sparse GSIs whose key attributes the puts change and the updates remove (REMOVE A, C), and deletes take away.

Two timelines: a scan backfill followed by the stream tail, and a full-export backfill followed by two incremental
exports (compacted from the stream's own records by the fixture writer) and the tail.
"""

from __future__ import annotations

import json
import random
import threading
import time
import uuid

from hypothesis import HealthCheck, Phase, given, settings, strategies as st

from ddb2bt.app.cutover import catch_up, tail
from ddb2bt.app.migrate import migrate
from ddb2bt.app.options import RunOptions
from ddb2bt.mappers.compiler import compile_spec
from ddb2bt.mappers.index_rows import index_targets
from ddb2bt.mappers.spec import MappingSpec
from ddb2bt.pipelines.bigtable.sink import Destination, gc_rule_for
from ddb2bt.pipelines.cutover.change_sink import ChangeApplier
from ddb2bt.pipelines.dynamodb.incremental_export import parse_record
from ddb2bt.pipelines.cutover.timeline import us_to_iso

from .cells import read_cells
from ddb2bt.pipelines.cutover.workload import make_spec, random_item
from .export_fixtures import write_export
from ddb2bt.pipelines.dynamodb.export_writer import compact, write_incremental_export
from .streams import create_streamed_table, table_items
from .streams import FRESH, fresh_migration, index_cells, stream_changes

EXAMPLES = 4
OPS = st.lists(st.tuples(st.sampled_from(["put", "put", "put", "remove", "delete"]), st.integers(0, 4),
                         st.sampled_from(["post", "c#0", "c#1"]), st.integers(0, 2**16)), min_size=5, max_size=40)


def run_ops(client, name: str, ops) -> None:
    for op, pk_number, sk, seed in ops:
        key = {"pk": {"S": f"p{pk_number}"}, "sk": {"S": sk}}
        if op == "delete":
            client.delete_item(TableName=name, Key=key)
        elif op == "remove" and sk == "post":
            if "Item" in client.get_item(TableName=name, Key=key):
                client.update_item(TableName=name, Key=key, UpdateExpression="REMOVE A, C")
        else:
            client.put_item(TableName=name, Item=random_item(random.Random(seed), f"p{pk_number}", sk))


def assert_converged(spec, tmp_path, final: list[dict]) -> None:
    """Bigtable equals a fresh migration of the final table, cell by cell: the items' rows and their index rows."""
    cells = read_cells(spec.target)
    assert cells == fresh_migration(spec, tmp_path, final)
    tables = index_cells(spec)
    assert tables == index_cells(spec, FRESH)  # by_b, in a table of its own
    kinds = [(item.get("kind", {}).get("S"), item) for item in final]
    mapped = [item for kind, item in kinds if kind == "draft" or kind == "post" and "Title" in item]  # not dead letters
    # the index rows are there, not vacuously equal: by_a's under its prefix, by_b's in its table
    assert sum(key.startswith(b"~a#") for key in cells) == sum("A" in item and "C" in item for item in mapped)
    assert len(tables["by_b"]) == sum("B" in item for item in mapped)
    assert not any(key.startswith(b"~b#") for key in cells)


def spec_keeping_every_cell(table: str, **source) -> MappingSpec:
    """The workload's spec with its indexes, by_b's family declared with no GC rule (undeclared, its table would keep
    one version). The tail deletes an item's index row (a delete, B removed) and a later batch writes it again: the
    emulator's garbage collector, which passes over tables without a GC rule, may take such an emptied row with the
    write that follows (docs/PIPELINE.md, "Writes the emulator loses"). The convergence checked here is cell by
    cell, every version, so a table that keeps every cell also shows a stale version the GC rule would have hidden."""
    data = make_spec(table, indexes=True, **source).model_dump(mode="json", by_alias=True)
    data["target"]["families"]["b"] = {}
    spec = MappingSpec.model_validate(data)
    assert [gc_rule_for(policy) for _, target in index_targets(spec) for policy in target.families.values()] == [None]
    return spec


def now_ms_aligned() -> int:
    time.sleep(0.01)
    micros = int(time.time() * 1_000_000)
    time.sleep(0.01)
    return micros - micros % 1000


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True,
          phases=(Phase.explicit, Phase.generate))
@given(before=OPS, during=OPS, after=OPS, replay_from=st.floats(0, 1))
def test_scan_backfill_then_tail_converges(bigtable_env, moto_server, tmp_path_factory, before, during, after,
                                           replay_from):
    tmp_path = tmp_path_factory.mktemp("scan")
    name = f"s{uuid.uuid4().hex[:12]}"
    client = create_streamed_table(moto_server.endpoint, name)
    run_ops(client, name, before)
    spec = spec_keeping_every_cell(name, endpoint_url=moto_server.endpoint)
    run_dir = str(tmp_path / "run")
    backfill = threading.Thread(target=migrate, args=(spec, RunOptions(run_dir=run_dir, total_segments=3)))
    backfill.start()
    run_ops(client, name, during)  # while the scan reads
    backfill.join()
    run_ops(client, name, after)
    assert tail(spec, RunOptions(run_dir=run_dir), until_idle_s=0.3, poll_s=0.05).ok

    # A redelivery: the tail's positions set back to a random earlier record, as after a lost checkpoint.
    state_file = tmp_path / "run" / "tail.json"
    state = json.loads(state_file.read_text())
    changes = stream_changes(moto_server.endpoint, name)
    back = int(replay_from * len(changes))
    for shard in state["shards"].values():
        shard.update(sequence=changes[back - 1].sequence if back else None, done=False)
    state_file.write_text(json.dumps(state))
    assert tail(spec, RunOptions(run_dir=run_dir), until_idle_s=0.3, poll_s=0.05).ok

    final = table_items(client, name)
    assert_converged(spec, tmp_path, final)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True,
          phases=(Phase.explicit, Phase.generate))
@given(before=OPS, first=OPS, second=OPS, after=OPS, killed_at=st.floats(0, 1))
def test_export_backfill_catch_up_then_tail_converges(bigtable_env, moto_server, tmp_path_factory, before, first,
                                                      second, after, killed_at):
    tmp_path = tmp_path_factory.mktemp("export")
    name = f"e{uuid.uuid4().hex[:12]}"
    client = create_streamed_table(moto_server.endpoint, name)
    run_ops(client, name, before)
    t0 = now_ms_aligned()
    snapshot = table_items(client, name)  # the full export at t0 (nothing changes meanwhile)
    export_dir = write_export(tmp_path / "full", snapshot, files=2, table=name)
    summary = next((tmp_path / "full").rglob("manifest-summary.json"))
    summary.write_text(json.dumps({**json.loads(summary.read_text()), "exportTime": us_to_iso(t0)}))
    spec = spec_keeping_every_cell(name, endpoint_url=moto_server.endpoint, export={"path": export_dir})
    run_dir = str(tmp_path / "run")
    run_ops(client, name, first)  # while the export backfill runs
    assert migrate(spec, RunOptions(run_dir=run_dir)).ok
    t1 = now_ms_aligned()
    run_ops(client, name, second)
    t2 = now_ms_aligned()
    log = stream_changes(moto_server.endpoint, name)
    windows = [write_incremental_export(tmp_path / f"inc{i}", compact(log, start, end, ("pk", "sk")), start, end,
                                        table=name)
               for i, (start, end) in enumerate(((t0, t1), (t1, t2)))]

    # The second catch-up is killed half-way (part of its changes applied), then run again in full.
    assert catch_up(spec, windows[0], RunOptions(run_dir=run_dir)).ok
    records = compact(log, t1, t2, ("pk", "sk"))
    now_ms = json.loads((tmp_path / "run" / "cutover.json").read_text())["now_ms"]
    applier = ChangeApplier(Destination.from_target(spec.target), compile_spec(spec, now_ms=now_ms))
    applier.apply([(parse_record(record),) for record in records[:int(killed_at * len(records))]])
    applier.close()
    assert catch_up(spec, windows[1], RunOptions(run_dir=run_dir)).ok

    run_ops(client, name, after)
    assert tail(spec, RunOptions(run_dir=run_dir), until_idle_s=0.3, poll_s=0.05).ok

    final = table_items(client, name)
    assert_converged(spec, tmp_path, final)
