"""Counters as Bigtable aggregates, through the emulator: an Int64-sum family created by migrate, each counter written
whole (DeleteFromColumn + AddToCell in one row mutation) so that re-runs, replays and retries never add twice, then an
application's AddToCell increments after cutover, read back through the decoder, as `cbt` shows them, and rolled back
to DynamoDB as N."""

from __future__ import annotations

import ast
import json
import os
import shutil
import struct
import subprocess
import time

import boto3
import pytest

from ddb2bt.app.cutover import tail
from ddb2bt.app.migrate import migrate
from ddb2bt.app.options import RunOptions
from ddb2bt.app.rollback import RollbackRequest, rollback
from ddb2bt.mappers.changes import Change, diff_many, kind_of_change
from ddb2bt.mappers.decode import Decoder
from ddb2bt.mappers.spec import MappingSpec
from ddb2bt.pipelines.bigtable.entries import to_mutation_entry
from ddb2bt.pipelines.bigtable.sink import Destination, admin_table, existing_families
from ddb2bt.pipelines.cutover.change_sink import ChangeApplier, row_entries
from ddb2bt.pipelines.dynamodb.client import create_table, put_items

from .bigtable_faults import LostResponse
from .cells import expected_cells, read_cells
from .counter_specs import MIGRATION_US, counter_spec
from .streams import create_streamed_table, table_items


def video(pk: str, title: str, likes: int, views: int | None) -> list[dict]:
    items = [{"pk": {"S": pk}, "sk": {"S": "Video"}, "Title": {"S": title}},
             {"pk": {"S": pk}, "sk": {"S": "VideoStatsLikes"}, "Count": {"N": str(likes)}}]
    if views is not None:
        items.append({"pk": {"S": pk}, "sk": {"S": "VideoStatsViews"}, "Count": {"N": str(views)}})
    return items


ITEMS = video("v1", "Intro", 5, 120) + video("v2", "Deep dive", 0, 2**62) + video("v3", "Outtakes", -3, None)


def counters(cells: dict) -> dict:
    """(row, qualifier) -> [(timestamp, int64)] of the stats family, as Bigtable holds them."""
    found: dict = {}
    for row, row_cells in cells.items():
        for family, qualifier, micros, value in row_cells:
            if family == "stats":
                assert len(value) == 8  # an Int64, as `cbt` and Increment read it
                found.setdefault((row, qualifier), []).append((micros, struct.unpack(">q", value)[0]))
    return found


def decoded(spec: MappingSpec) -> dict:
    decoder = Decoder(spec, {"pk": "S"})
    return {(item["pk"]["S"], entity): item for row, cells in _cells(spec).items()
            for entity, item in decoder.decode_entities(row, cells)}


def _cells(spec: MappingSpec) -> dict:
    from ddb2bt.mappers.results import Cell

    return {row: [Cell(*cell) for cell in cells] for row, cells in read_cells(spec.target).items()}


def add_to_cell(spec: MappingSpec, increments: list[tuple[bytes, bytes, int, int]]) -> None:
    """What the application does after cutover: AddToCell (row, qualifier, value, timestamp), its own mutations."""
    from google.cloud.bigtable.data import AddToCell, BigtableDataClient

    with BigtableDataClient(project=spec.target.project) as client:
        table = client.get_table(spec.target.instance, spec.target.table)
        for row, qualifier, value, micros in increments:
            table.mutate_row(row, [AddToCell("stats", qualifier, value, micros)])


def cbt(spec: MappingSpec, *args: str) -> str:
    return subprocess.run(["cbt", "-project", spec.target.project, "-instance", spec.target.instance, *args],
                          env=dict(os.environ), capture_output=True, text=True, check=True, timeout=60).stdout


def cbt_counters(spec: MappingSpec, row: str) -> list[tuple[str, int]]:
    """(family:qualifier, Int64) of each stats cell `cbt read` prints: a `  family:qualifier  @ time` line, then the
    value quoted (Go's escapes, which read as a Python bytes literal)."""
    lines = cbt(spec, "read", spec.target.table, f"prefix={row}").splitlines()
    found = []
    for line, value in zip(lines, lines[1:]):
        if line.startswith("  stats:"):
            raw = ast.literal_eval("b" + value.strip())
            found.append((line.split()[0], struct.unpack(">q", raw)[0]))
    return found


def test_counters_migrate_twice_then_application_increments(bigtable_env, moto_server, unique_name, tmp_path):
    client = boto3.client("dynamodb", endpoint_url=moto_server.endpoint, region_name="us-east-1")
    create_table(client, unique_name, "pk", "sk")
    put_items(client, unique_name, ITEMS)
    spec = counter_spec(unique_name, moto_server.endpoint)

    for run in ("first", "again"):  # a re-run writes every counter again: whole, never added to itself
        result = migrate(spec, RunOptions(run_dir=str(tmp_path / run)))
        assert result.ok, result.problems
        assert read_cells(spec.target) == expected_cells(spec, ITEMS)
        assert counters(read_cells(spec.target)) == {
            (b"v1", b"Likes"): [(MIGRATION_US, 5)], (b"v1", b"Views"): [(MIGRATION_US, 120)],
            (b"v2", b"Likes"): [(MIGRATION_US, 0)], (b"v2", b"Views"): [(MIGRATION_US, 2**62)],
            (b"v3", b"Likes"): [(MIGRATION_US, -3)]}
    families = existing_families(admin_table(spec.target))
    assert families["stats"].aggregate == "sum" and families["video"].aggregate is None

    # After cutover the application increments as it did with UpdateItem ... ADD: at the current time, at the
    # migrated cell's own time (Bigtable adds into that cell), and a first counter where there was none.
    now_us = int(time.time() * 1000) * 1000
    add_to_cell(spec, [(b"v1", b"Likes", 3, now_us), (b"v1", b"Likes", 2, now_us), (b"v1", b"Views", 10, MIGRATION_US),
                       (b"v3", b"Views", 7, now_us), (b"v2", b"Likes", -1, now_us)])
    assert counters(read_cells(spec.target)) == {
        (b"v1", b"Likes"): [(MIGRATION_US, 5), (now_us, 5)], (b"v1", b"Views"): [(MIGRATION_US, 130)],
        (b"v2", b"Likes"): [(MIGRATION_US, 0), (now_us, -1)], (b"v2", b"Views"): [(MIGRATION_US, 2**62)],
        (b"v3", b"Likes"): [(MIGRATION_US, -3)], (b"v3", b"Views"): [(now_us, 7)]}

    items = decoded(spec)  # a counter is the sum of its column's cells
    assert items[("v1", "likes")]["Count"] == {"N": "10"} and items[("v1", "views")]["Count"] == {"N": "130"}
    assert items[("v2", "likes")]["Count"] == {"N": "-1"} and items[("v2", "views")]["Count"] == {"N": str(2**62)}
    assert items[("v3", "likes")]["Count"] == {"N": "-3"} and items[("v3", "views")]["Count"] == {"N": "7"}
    assert items[("v1", "likes")] == {"pk": {"S": "v1"}, "Count": {"N": "10"}}  # sk: dropped, the match gives it

    if shutil.which("cbt"):  # what an operator sees: cbt shows each aggregate cell as its 8-byte Int64
        assert sorted(cbt_counters(spec, "v1")) == [("stats:Likes", 5), ("stats:Likes", 5), ("stats:Views", 130)]
        assert '{"aggregateType":{"inputType":{"int64Type":{}}, "sum":{}}}' in cbt(spec, "ls", spec.target.table)

    # The way back: rollback puts the counters into DynamoDB as N, increments included.
    back = unique_name + "back"
    create_table(client, back, "pk", "sk")
    result = rollback(spec, RollbackRequest(to_table=back), RunOptions(run_dir=str(tmp_path / "rb")))
    assert result.ok, result.problems
    rolled = {(i["pk"]["S"], i["sk"]["S"]): i for i in table_items(client, back)}
    assert rolled[("v1", "VideoStatsLikes")]["Count"] == {"N": "10"}
    assert rolled[("v1", "VideoStatsViews")]["Count"] == {"N": "130"}
    assert rolled[("v3", "VideoStatsViews")]["Count"] == {"N": "7"}
    assert rolled[("v2", "VideoStatsViews")]["Count"] == {"N": str(2**62)}
    assert rolled[("v1", "Video")] == ITEMS[0]

    # --since the cutover: only the rows an application incremented since then (at the current time) come back, into
    # the source table, which still holds the values of the cutover.
    more = ITEMS + video("v4", "Untouched", 1, 1)
    put_items(client, unique_name, more[len(ITEMS):])
    add_to_cell(spec, [(b"v4", b"Likes", 100, MIGRATION_US)])  # at an old time: --since cannot see it (COUNTERS.md)
    since = rollback(spec, RollbackRequest(since_us=now_us - 1000), RunOptions(run_dir=str(tmp_path / "since")))
    assert since.ok, since.problems
    source = {(i["pk"]["S"], i["sk"]["S"]): i for i in table_items(client, unique_name)}
    assert source[("v1", "VideoStatsLikes")]["Count"] == {"N": "10"} and source[("v3", "VideoStatsViews")]["Count"] == {
        "N": "7"}
    assert source[("v2", "VideoStatsLikes")]["Count"] == {"N": "-1"}
    assert source[("v4", "VideoStatsLikes")]["Count"] == {"N": "1"}  # its row has no cell since then: not read
    assert since.counters["rows_read"] == 3  # v1, v2, v3: the rows incremented since


def test_a_retried_counter_entry_leaves_the_same_counter(bigtable_env, moto_server, unique_name, tmp_path):
    """The client retries only entries that say they are idempotent, and counts an AddToCell as never idempotent;
    our entry (DeleteFromColumn + AddToCell) is idempotent by construction: sent twice, the counter is the same."""
    from google.cloud.bigtable.data import BigtableDataClient

    from ddb2bt.mappers.compiler import compile_spec
    from ddb2bt.pipelines.bigtable.sink import ensure_table

    spec = counter_spec(unique_name, moto_server.endpoint)
    ensure_table(spec.target)
    row = compile_spec(spec).map_item(ITEMS[1])
    entry = to_mutation_entry(row, Destination.from_target(spec.target).counters)
    assert entry.is_idempotent() and len(entry.mutations) == 2
    assert [type(m).__name__ for m in entry.mutations] == ["DeleteRangeFromColumn", "AddToCell"]
    with BigtableDataClient(project=spec.target.project) as client:
        table = client.get_table(spec.target.instance, spec.target.table)
        for _ in range(3):
            table.bulk_mutate_rows([to_mutation_entry(row, frozenset({"stats"}))])
    assert counters(read_cells(spec.target)) == {(b"v1", b"Likes"): [(MIGRATION_US, 5)]}
    # A plain SetCell into the aggregate family would have added (why every writer rewrites counters whole).
    with BigtableDataClient(project=spec.target.project) as client:
        table = client.get_table(spec.target.instance, spec.target.table)
        table.bulk_mutate_rows([to_mutation_entry(row)])
    assert counters(read_cells(spec.target)) == {(b"v1", b"Likes"): [(MIGRATION_US, 10)]}


def changes_of(before: dict, after: dict, time_us: int) -> list[Change]:
    """The changes that turn table ``before`` into ``after`` (both {(pk, sk): item}), one per changed item."""
    found = []
    for key in sorted(set(before) | set(after)):
        old, new = before.get(key), after.get(key)
        if old != new:
            keys = {"pk": {"S": key[0]}, "sk": {"S": key[1]}}
            found.append(Change(keys, old, new, kind_of_change(old, new), time_us))
    return found


def test_change_sink_converges_counters_on_the_new_image_and_replays_add_nothing(bigtable_env, moto_server,
                                                                                 unique_name, tmp_path):
    """catch-up's and tail's writer: an increment in DynamoDB (UpdateItem ADD) arrives as the new image's value and
    is written whole; a replay of the same changes, or of older ones, leaves the counters as they are; a counter
    attribute removed (or its item deleted) deletes the column, increments and all."""
    from ddb2bt.mappers.compiler import compile_spec
    from ddb2bt.pipelines.bigtable.sink import ensure_table

    spec = counter_spec(unique_name, moto_server.endpoint)
    ensure_table(spec.target)
    compiled = compile_spec(spec)
    before = {(i["pk"]["S"], i["sk"]["S"]): i for i in ITEMS}
    with BigtableDataClient_for(spec) as table:
        table.bulk_mutate_rows([to_mutation_entry(compiled.map_item(i), frozenset({"stats"})) for i in ITEMS])
    after = dict(before)
    after[("v1", "VideoStatsLikes")] = {**before[("v1", "VideoStatsLikes")], "Count": {"N": "6"}}  # ADD 1
    after[("v2", "VideoStatsViews")] = {**before[("v2", "VideoStatsViews")], "Count": {"N": str(2**62 + 9)}}
    after[("v1", "VideoStatsViews")] = {"pk": {"S": "v1"}, "sk": {"S": "VideoStatsViews"}}  # REMOVE Count
    del after[("v3", "VideoStatsLikes")]  # DeleteItem
    log = changes_of(before, after, MIGRATION_US + 1000)
    applier = ChangeApplier(Destination.from_target(spec.target), compiled)
    try:
        for _ in range(3):  # applied, then replayed twice
            outcome = applier.apply([(change,) for change in log])
            assert outcome.read == len(log) == outcome.applied + outcome.skipped + outcome.dead_lettered
            assert counters(read_cells(spec.target)) == {
                (b"v1", b"Likes"): [(MIGRATION_US, 6)], (b"v2", b"Likes"): [(MIGRATION_US, 0)],
                (b"v2", b"Views"): [(MIGRATION_US, 2**62 + 9)]}
        # After an application's increment at another time, a late replay of the same change converges the
        # counter on the image's value again (the tail runs before cutover; this is what a replay can do).
        add_to_cell(spec, [(b"v2", b"Likes", 4, MIGRATION_US + 5000)])
        assert counters(read_cells(spec.target))[(b"v2", b"Likes")] == [(MIGRATION_US, 0), (MIGRATION_US + 5000, 4)]
        change = Change({"pk": {"S": "v2"}, "sk": {"S": "VideoStatsLikes"}}, None, before[("v2", "VideoStatsLikes")],
                        "INSERT", MIGRATION_US)
        applier.apply([(change,)])
        assert counters(read_cells(spec.target))[(b"v2", b"Likes")] == [(MIGRATION_US, 0)]
    finally:
        applier.close()
    assert read_cells(spec.target) == expected_cells(spec, list(after.values()))


def test_row_entries_keep_a_counters_delete_with_its_add():
    change = Change({"pk": {"S": "v1"}, "sk": {"S": "VideoStatsLikes"}}, ITEMS[1], {**ITEMS[1], "Count": {"N": "9"}},
                    "MODIFY", 0)
    from ddb2bt.mappers.compiler import compile_spec

    result = diff_many(compile_spec(counter_spec("t", "http://127.0.0.1:9")), [change])
    (row,) = result.rows
    (entry,) = row_entries(row, frozenset({"stats"}))
    assert entry.tuples == (("stats", b"Likes"), ("stats", b"Likes", MIGRATION_US, 9, "add"))
    assert entry.is_idempotent()
    raw = entry._to_pb()
    assert raw.mutations[0].delete_from_column.family_name == "stats"
    assert not raw.mutations[0].delete_from_column.time_range  # every version
    assert raw.mutations[1].add_to_cell.input.int_value == 9


class BigtableDataClient_for:
    def __init__(self, spec: MappingSpec) -> None:
        from google.cloud.bigtable.data import BigtableDataClient

        self._client = BigtableDataClient(project=spec.target.project)
        self._table = self._client.get_table(spec.target.instance, spec.target.table)

    def __enter__(self):
        return self._table

    def __exit__(self, *_):
        self._client.close()


def test_tail_carries_dynamodb_increments_and_a_redelivery_adds_nothing(bigtable_env, moto_server, unique_name,
                                                                       tmp_path):
    """Before cutover the application increments in DynamoDB (UpdateItem ADD); the tail writes each new value whole;
    the stream delivered again from its start (a lost checkpoint) leaves every counter as it was."""
    import json

    client = create_streamed_table(moto_server.endpoint, unique_name)
    put_items(client, unique_name, ITEMS)
    spec = counter_spec(unique_name, moto_server.endpoint)
    run_dir = str(tmp_path / "run")
    assert migrate(spec, RunOptions(run_dir=run_dir)).ok
    for _ in range(4):
        client.update_item(TableName=unique_name, Key={"pk": {"S": "v1"}, "sk": {"S": "VideoStatsLikes"}},
                           UpdateExpression="ADD #c :one", ExpressionAttributeNames={"#c": "Count"},
                           ExpressionAttributeValues={":one": {"N": "1"}})
    client.update_item(TableName=unique_name, Key={"pk": {"S": "v2"}, "sk": {"S": "VideoStatsViews"}},
                       UpdateExpression="ADD #c :n", ExpressionAttributeNames={"#c": "Count"},
                       ExpressionAttributeValues={":n": {"N": "-5"}})
    client.update_item(TableName=unique_name, Key={"pk": {"S": "v1"}, "sk": {"S": "VideoStatsViews"}},
                       UpdateExpression="REMOVE #c", ExpressionAttributeNames={"#c": "Count"})
    client.delete_item(TableName=unique_name, Key={"pk": {"S": "v3"}, "sk": {"S": "VideoStatsLikes"}})
    result = tail(spec, RunOptions(run_dir=run_dir), until_idle_s=0.5, poll_s=0.1)
    assert result.ok, result.problems
    final = table_items(client, unique_name)
    want = {(b"v1", b"Likes"): [(MIGRATION_US, 9)], (b"v2", b"Likes"): [(MIGRATION_US, 0)],
            (b"v2", b"Views"): [(MIGRATION_US, 2**62 - 5)]}
    assert counters(read_cells(spec.target)) == want
    assert read_cells(spec.target) == expected_cells(spec, final)

    state = json.loads((tmp_path / "run" / "tail.json").read_text())
    for shard in state["shards"].values():
        shard.update(sequence=None, done=False)
    (tmp_path / "run" / "tail.json").write_text(json.dumps(state))
    again = tail(spec, RunOptions(run_dir=run_dir), until_idle_s=0.5, poll_s=0.1)
    assert again.ok and again.counters["changes_read"] >= result.counters["changes_read"]
    assert counters(read_cells(spec.target)) == want


@pytest.mark.parametrize("family, message", [
    ({"aggregate": "sum", "max_versions": 1}, "an aggregate family keeps no GC rule"),
    ({"aggregate": "max"}, "Input should be 'sum'"),
])
def test_aggregate_family_shape_errors(family, message):
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match=message):
        MappingSpec.model_validate({
            "source": {"table": "t"}, "target": {"table": "t", "families": {"stats": family}},
            "entities": [{"name": "e", "row_key": "{pk}", "rest": {"family": "stats"}}]})


def test_catch_up_writes_counters_whole_and_a_replayed_export_adds_nothing(bigtable_env, unique_name, tmp_path):
    """catch-up through its Beam step: a full export backfilled, then an incremental export of DynamoDB increments,
    a removed counter and a deleted item; the same records applied again (a bundle retried, an export replayed by
    hand into a fresh timeline) leave every counter as it is."""
    from ddb2bt.app.cutover import catch_up
    from ddb2bt.pipelines.dynamodb.export_writer import compact, write_export, write_incremental_export

    from .catchups import HOUR, T0

    table = {(i["pk"]["S"], i["sk"]["S"]): i for i in ITEMS}
    data = counter_spec(unique_name, "http://127.0.0.1:9").model_dump(mode="json", by_alias=True)
    data["source"] = {"export": {"path": write_export(tmp_path / "full", ITEMS, files=1, table=unique_name)},
                      "partition_key": "pk", "sort_key": "sk"}
    spec = MappingSpec.model_validate(data)
    assert migrate(spec, RunOptions(run_dir=str(tmp_path / "run"))).ok
    after = dict(table)
    after[("v1", "VideoStatsLikes")] = {**table[("v1", "VideoStatsLikes")], "Count": {"N": "8"}}
    after[("v2", "VideoStatsViews")] = {**table[("v2", "VideoStatsViews")], "Count": {"N": "-1"}}
    after[("v1", "VideoStatsViews")] = {"pk": {"S": "v1"}, "sk": {"S": "VideoStatsViews"}}
    del after[("v3", "VideoStatsLikes")]
    log = changes_of(table, after, T0 + 1000)
    export = write_incremental_export(tmp_path / "inc", compact(log, T0, T0 + HOUR, ("pk", "sk")), T0, T0 + HOUR,
                                      table=unique_name)
    want = {(b"v1", b"Likes"): [(MIGRATION_US, 8)], (b"v2", b"Likes"): [(MIGRATION_US, 0)],
            (b"v2", b"Views"): [(MIGRATION_US, -1)]}
    result = catch_up(spec, export, RunOptions(run_dir=str(tmp_path / "run")))
    assert result.ok, result.problems
    assert counters(read_cells(spec.target)) == want
    assert read_cells(spec.target) == expected_cells(spec, list(after.values()))

    shutil.copytree(tmp_path / "run", tmp_path / "replay")  # the same export once more, on a copy of the timeline
    timeline = tmp_path / "replay" / "cutover.json"
    state = json.loads(timeline.read_text())
    state["applied_to_us"], state["phases"] = T0, state["phases"][:-1]
    timeline.write_text(json.dumps(state))
    replayed = catch_up(spec, export, RunOptions(run_dir=str(tmp_path / "replay")))
    assert replayed.ok, replayed.problems
    assert replayed.counters["changes_applied"] == result.counters["changes_applied"] > 0
    assert counters(read_cells(spec.target)) == want


def test_validate_finds_a_counter_off_and_repair_rewrites_it_whole(bigtable_env, moto_server, unique_name, tmp_path):
    from ddb2bt.app.validate import validate

    client = boto3.client("dynamodb", endpoint_url=moto_server.endpoint, region_name="us-east-1")
    create_table(client, unique_name, "pk", "sk")
    put_items(client, unique_name, ITEMS)
    spec = counter_spec(unique_name, moto_server.endpoint)
    assert migrate(spec, RunOptions(run_dir=str(tmp_path / "run"))).ok
    clean = validate(spec, RunOptions(run_dir=str(tmp_path / "clean")), target_scan=True)
    assert clean.ok and clean.counts == {}, clean.first  # an aggregate cell reads back as the int64 written

    add_to_cell(spec, [(b"v1", b"Likes", 10, MIGRATION_US), (b"v2", b"Views", 1, MIGRATION_US + 7000)])
    looked = validate(spec, RunOptions(run_dir=str(tmp_path / "look")), target_scan=True)
    # v1's cell now holds 15 (and its item reads back so); v2's increment at another time is a second cell, an
    # extra version of that item's counter column
    assert looked.counts == {"different_value": 1, "extra_version": 1, "different_attribute": 1}, looked.first
    kinds = {(record["kind"], record["row_key"]) for record in looked.first}
    assert kinds == {("different_value", "v1"), ("different_attribute", "v1"), ("extra_version", "v2")}
    repaired = validate(spec, RunOptions(run_dir=str(tmp_path / "repair")), repair=True, target_scan=True)
    assert repaired.problems == [], repaired.problems
    assert read_cells(spec.target) == expected_cells(spec, ITEMS)  # 5 again, not 5 + 15
    again = validate(spec, RunOptions(run_dir=str(tmp_path / "again")), target_scan=True)
    assert again.ok and again.counts == {}, again.first


def test_a_batch_retried_after_a_lost_response_leaves_the_same_counter(bigtable_env, moto_server, unique_name):
    """Pins the client's retry rule our entries rely on (it retries an entry only if ``is_idempotent()``, and the
    client's own AddToCell says it is not): a batch applied, its answer lost, sent again: each counter once."""
    from google.cloud.bigtable.data import AddToCell, BigtableDataClient, DeleteRangeFromColumn, RowMutationEntry
    from google.cloud.bigtable.data.exceptions import MutationsExceptionGroup

    from ddb2bt.mappers.compiler import compile_spec
    from ddb2bt.pipelines.bigtable.sink import ensure_table

    spec = counter_spec(unique_name, moto_server.endpoint)
    ensure_table(spec.target)
    compiled = compile_spec(spec)
    rows = [compiled.map_item(item) for item in ITEMS]
    with BigtableDataClient(project=spec.target.project) as client:
        table = client.get_table(spec.target.instance, spec.target.table)
        lost = LostResponse(client._gapic_client.mutate_rows)
        client._gapic_client.mutate_rows = lost  # the transport the client's MutateRows operation calls
        table.bulk_mutate_rows([to_mutation_entry(row, frozenset({"stats"})) for row in rows])
        assert lost.calls == 2  # applied twice
        assert read_cells(spec.target) == expected_cells(spec, ITEMS)

        # The client's own objects: the same entry is not retried (AddToCell is never idempotent to the client).
        lost.calls = 0
        plain = RowMutationEntry(b"v1", [DeleteRangeFromColumn("stats", b"Likes"), AddToCell("stats", b"Likes", 5,
                                                                                              MIGRATION_US)])
        with pytest.raises(MutationsExceptionGroup):
            table.bulk_mutate_rows([plain])
        assert lost.calls == 1
