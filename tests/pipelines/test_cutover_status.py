"""`ddb2bt cutover-status` cannot say READY while Bigtable differs from DynamoDB: each condition against moto_server's
DynamoDB Streams and the Bigtable emulator (the real CLI in process), NOT READY (exit 1) in each state of issue 20
item 6, READY once the backlog is applied; change dead letters redriven through the fixed spec."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ddb2bt.app.cutover import tail
from ddb2bt.app.migrate import migrate
from ddb2bt.app.options import RunOptions
from ddb2bt.cli.main import app
from ddb2bt.mappers.spec import MappingSpec
from ddb2bt.pipelines.cutover import tail as stream_tail
from ddb2bt.pipelines.dynamodb import stream as dynamodb_stream

from .cells import expected_cells, read_cells
from ddb2bt.pipelines.cutover.workload import make_spec
from .streams import create_streamed_table, table_items

POSTS = 12


def post(i: int, title: str | None = "hello", a: str = "1") -> dict:
    item = {"pk": {"S": f"p{i}"}, "sk": {"S": "post"}, "kind": {"S": "post"}, "A": {"S": a}}
    if title is not None:
        item["Title"] = {"S": title}
    return item


def comment(i: int, text: str = "abc") -> dict:
    return {"pk": {"S": f"p{i}"}, "sk": {"S": "c#0"}, "kind": {"S": "comment"}, "Text": {"S": text},
            "At": {"N": str(1_600_000_000_000 + i * 1000)}}


def cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, [str(arg) for arg in args])
    return result.exit_code, result.output


def status(run_dir: str) -> tuple[int, dict]:
    code, output = cli("cutover-status", "--run-dir", run_dir, "--format", "json")
    return code, json.loads(output)


def conditions(found: dict) -> dict[str, dict]:
    return {condition["name"]: condition for condition in found["conditions"]}


def ready_run(moto_server, name: str, tmp_path: Path, spec: MappingSpec | None = None):
    """A table of posts and comments, a scan backfill, the tail run to idle: READY."""
    client = create_streamed_table(moto_server.endpoint, name)
    for i in range(POSTS):
        client.put_item(TableName=name, Item=post(i))
        client.put_item(TableName=name, Item=comment(i))
    spec = spec or make_spec(name, endpoint_url=moto_server.endpoint)
    run_dir = str(tmp_path / "run")
    assert migrate(spec, RunOptions(run_dir=run_dir, total_segments=2)).counters["items_read"] == 2 * POSTS
    assert tail(spec, RunOptions(run_dir=run_dir), until_idle_s=0.5, poll_s=0.1).ok
    code, found = status(run_dir)
    assert code == 0 and found["ready"], found["reasons"]
    phases = {phase["phase"]: phase for phase in found["phases"]}  # the tail read only records the scan holds:
    assert phases["tail"]["applied_up_to"] >= phases["backfill"]["applied_up_to"]  # not the older records' time
    return client, spec, run_dir


def test_unread_stream_records_are_not_ready_whatever_the_tail_last_saved(bigtable_env, moto_server, unique_name,
                                                                          tmp_path):
    client, spec, run_dir = ready_run(moto_server, unique_name, tmp_path)
    tail_file = Path(run_dir) / "tail.json"
    for n in range(40):  # the application goes on writing; the tail has stopped
        client.put_item(TableName=unique_name, Item=post(n % POSTS, f"t{n}"))
    saved = tail_file.read_bytes()

    # (b) of item 6: the tail exited with 40 writes unapplied: NOT READY at once, not "0.0 s behind"
    code, found = status(run_dir)
    checks = conditions(found)
    assert code == 1 and not found["ready"]
    assert checks["stream"]["counts"]["unread"] == 40 and not checks["stream"]["holds"]
    assert "40 stream record(s) the tail has not applied" in checks["stream"]["detail"]
    assert not checks["tail"]["holds"] and "stopped" in checks["tail"]["detail"]
    assert sum(shard["unread"] for shard in found["shards"]) == 40
    assert tail_file.read_bytes() == saved  # read-only: the tail's checkpoint is untouched

    # (a): the tail looks alive (a fresh heartbeat, as one working through a backlog saves per page) but is behind
    state = json.loads(saved)
    state["heartbeat_us"] = int(time.time() * 1e6)
    tail_file.write_text(json.dumps(state))
    (Path(run_dir) / stream_tail.STOPPED_FILE).write_text('{"stopped_us": 0}')
    code, found = status(run_dir)
    checks = conditions(found)
    assert code == 1 and checks["tail"]["holds"] and not checks["stream"]["holds"]
    assert checks["stream"]["counts"]["unread"] == 40 and checks["stream"]["counts"]["behind_s"] >= 0
    assert not checks["parity"]["holds"]  # the changed items differ too (checked across the whole table)

    # A longer stream than one check reads: the keys before the tail's position are skipped (noted), and the unread
    # records counted from it are a lower bound, never READY.
    from ddb2bt.pipelines.cutover import backlog as stream_backlog
    from ddb2bt.pipelines.dynamodb.client import ClientSettings

    streams = dynamodb_stream.make_streams_client(ClientSettings.from_source(spec.source))
    stream_backlog.PAGE_LIMIT = 5
    try:
        backlog = stream_backlog.read_backlog(streams, stream_tail.TailState.from_json(state), {}, max_pages=2)
    finally:
        stream_backlog.PAGE_LIMIT = dynamodb_stream.PAGE_LIMIT
    assert backlog.unread == 10 and backlog.shards[0].capped and not backlog.complete
    assert "were not all listed" in backlog.notes[0]

    # The backlog applied: READY, and every item changed since the last READY check was compared.
    assert tail(spec, RunOptions(run_dir=run_dir), until_idle_s=0.5, poll_s=0.1).ok
    code, found = status(run_dir)
    assert code == 0 and found["ready"], found["reasons"]
    assert conditions(found)["stream"]["counts"]["unread"] == 0
    assert found["parity"]["changed_keys"] == POSTS and found["parity"]["random_keys"] == POSTS
    assert read_cells(spec.target) == expected_cells(spec, table_items(client, unique_name))


def test_the_heartbeat_is_saved_with_every_page(bigtable_env, moto_server, unique_name, tmp_path, monkeypatch):
    client, spec, run_dir = ready_run(moto_server, unique_name, tmp_path)
    for n in range(50):
        client.put_item(TableName=unique_name, Item=post(n % POSTS, f"t{n}"))
    first = json.loads((Path(run_dir) / "tail.json").read_text())
    saves: list[tuple[int, str | None]] = [(first["heartbeat_us"], next(iter(first["shards"].values()))["sequence"])]
    real = stream_tail.save_state

    def recording(where: str, state) -> None:
        saves.append((state.heartbeat_us, next(iter(state.shards.values())).sequence if state.shards else None))
        real(where, state)

    monkeypatch.setattr(stream_tail, "save_state", recording)
    monkeypatch.setattr(dynamodb_stream, "PAGE_LIMIT", 10)  # where the stream is read
    assert tail(spec, RunOptions(run_dir=run_dir), until_idle_s=0.3, poll_s=0.1).ok
    pages = [(beat, sequence) for (beat, sequence), before in zip(saves[1:], saves) if sequence != before[1]]
    assert len(pages) >= 5  # 50 records, 10 a page, all in the tail's first pass over the shard
    beats = [beat for beat, _sequence in pages]
    assert beats == sorted(beats) and len(set(beats)) == len(beats)  # a new heartbeat with each page


def spec_file(path: Path, spec: MappingSpec) -> Path:
    path.write_text(json.dumps(spec.model_dump(mode="json", by_alias=True)))
    return path


def fixed_spec(spec: MappingSpec) -> MappingSpec:
    """The fix: a post without a Title maps (Title no longer required)."""
    data = spec.model_dump(mode="json", by_alias=True)
    for entity in data["entities"]:
        for column in entity.get("columns") or []:
            if entity["name"] == "post" and column["attribute"] == "Title":
                column["required"] = False
    return MappingSpec.model_validate(data)


def test_a_tail_dead_letter_is_not_ready_until_redriven_through_the_fixed_spec(bigtable_env, moto_server, unique_name,
                                                                               tmp_path):
    client, spec, run_dir = ready_run(moto_server, unique_name, tmp_path)
    client.put_item(TableName=unique_name, Item=post(0, None, a="2"))  # no Title: the spec cannot map it
    client.put_item(TableName=unique_name, Item=post(1, None))  # dead-lettered, then superseded by a later change
    client.put_item(TableName=unique_name, Item=post(1, "later"))
    assert tail(spec, RunOptions(run_dir=run_dir), until_idle_s=0.5, poll_s=0.1).ok
    letters = Path(run_dir) / "tail.dead_letters.jsonl"
    assert len(letters.read_text().splitlines()) == 2
    assert b"p0" not in read_cells(spec.target) or not any(
        cell[0] == "d" for cell in read_cells(spec.target)[b"p0"])  # the old Title cell is gone, no new one

    # (c) of item 6: Bigtable does not hold a change: NOT READY, though the stream is drained and parity holds
    code, found = status(run_dir)
    checks = conditions(found)
    assert code == 1 and not checks["dead letters"]["holds"] and checks["dead letters"]["counts"]["unresolved"] == 2
    assert checks["stream"]["holds"] and found["unresolved_dead_letters"] == {"tail.dead_letters.jsonl": 2}

    fixed = spec_file(tmp_path / "fixed.json", fixed_spec(spec))
    # A redrive while the tail runs could land out of order with it: refused, nothing written.
    state_file = Path(run_dir) / "tail.json"
    state = json.loads(state_file.read_text())
    state["heartbeat_us"] = int(time.time() * 1e6)
    state_file.write_text(json.dumps(state))
    (Path(run_dir) / stream_tail.STOPPED_FILE).write_text('{"stopped_us": 0}')
    code, output = cli("redrive", letters, fixed, "--run-dir", tmp_path / "refused")
    assert code == 2 and "is running" in output and "stop the tail" in output, output
    assert not (tmp_path / "refused").exists()
    (Path(run_dir) / stream_tail.STOPPED_FILE).write_text(json.dumps({"stopped_us": int(time.time() * 1e6)}))

    code, output = cli("redrive", letters, fixed, "--run-dir", tmp_path / "redrive")
    assert code == 0, output
    assert "2 change dead letters of 2 items" in output and "re-applied 1 changes" in output, output
    assert "1 superseded" in output and "0 still failing" in output and "redrive OK" in output, output
    items = table_items(client, unique_name)
    assert read_cells(spec.target) == expected_cells(fixed_spec(spec), items)  # cell by cell

    code, found = status(run_dir)
    assert code == 0 and found["ready"], found["reasons"]
    assert found["unresolved_dead_letters"] == {"tail.dead_letters.jsonl": 0}
    # The cutover goes on with the fixed spec; a new dead letter of the tail is unresolved again.
    client.put_item(TableName=unique_name, Item={**post(2), "Title": {"N": "5"}})  # utf8 of a number: refused
    assert tail(fixed_spec(spec), RunOptions(run_dir=run_dir), until_idle_s=0.5, poll_s=0.1).ok
    code, found = status(run_dir)
    assert code == 1 and found["unresolved_dead_letters"] == {"tail.dead_letters.jsonl": 1}, found


def test_a_cell_lost_outside_the_recent_changes_is_found_by_the_whole_table_sample(bigtable_env, moto_server,
                                                                                   unique_name, tmp_path):
    from google.cloud.bigtable.data import BigtableDataClient

    from ddb2bt.mappers.results import Cell
    from ddb2bt.pipelines.bigtable.read import delete_entries

    client, spec, run_dir = ready_run(moto_server, unique_name, tmp_path)
    for n in range(25):  # 25 recent changes, none of them to p7
        client.put_item(TableName=unique_name, Item=post(n % 5, f"t{n}"))
    assert tail(spec, RunOptions(run_dir=run_dir), until_idle_s=0.5, poll_s=0.1).ok
    assert status(run_dir)[0] == 0
    family, qualifier, micros, value = next(c for c in read_cells(spec.target)[b"p7"] if c[0] == "d")
    with BigtableDataClient(project=spec.target.project) as bigtable:
        bigtable.get_table(spec.target.instance, spec.target.table).bulk_mutate_rows(
            [delete_entries(b"p7", [Cell(family, qualifier, micros, value)])])

    code, found = status(run_dir)
    checks = conditions(found)
    assert code == 1 and not checks["parity"]["holds"] and checks["stream"]["holds"]
    assert checks["parity"]["counts"] == {"checked": 2 * POSTS, "random": 2 * POSTS, "changed": 0, "differences": 1}
    assert '"p7"' in found["parity"]["mismatches"][0]

    client.put_item(TableName=unique_name, Item=post(7, "again"))  # its next change writes the item whole
    assert tail(spec, RunOptions(run_dir=run_dir), until_idle_s=0.5, poll_s=0.1).ok
    code, found = status(run_dir)
    assert code == 0 and found["ready"] and found["parity"]["changed_keys"] == 1, found["reasons"]


def test_status_without_a_timeline_is_exit_2_and_says_so(tmp_path):
    code, output = cli("cutover-status", "--run-dir", tmp_path / "nowhere")
    assert code == 2 and f"there is no run folder at {tmp_path / 'nowhere'}" in output, output
    (tmp_path / "run").mkdir()
    code, output = cli("cutover-status", "--run-dir", tmp_path / "run")
    assert code == 2 and "holds no cutover timeline" in output and "cannot be ready" in output, output
    code, output = cli("cutover-status", "--help")
    assert code == 0 and "Exit 0: READY" in output and "Exit 2" in output and "Exit 1: NOT READY" in output


@pytest.mark.parametrize("name", ["tail.dead_letters.jsonl"])
def test_change_dead_letters_outside_a_cutover_folder_are_refused(tmp_path, name):
    letters = tmp_path / name
    letters.write_text(json.dumps({"item": {"Keys": {"pk": {"S": "a"}}, "NewImage": {"pk": {"S": "a"}},
                                            "OldImage": None, "eventName": "INSERT"}, "stage": "map",
                                   "reason": "x"}) + "\n")
    code, output = cli("redrive", letters, tmp_path / "spec.json", "--run-dir", tmp_path / "new")
    assert code == 2 and "holds no cutover timeline" in output, output
    assert not (tmp_path / "new").exists()


def test_catch_up_dead_letters_redriven_in_order_converge(bigtable_env, moto_server, unique_name, tmp_path):
    """A catch-up's change dead letters (an export's: no sequence numbers, ordered by write time) re-applied through
    the fixed spec: Bigtable equals the fixed spec applied to the final table, cell by cell."""
    import random

    from ddb2bt.app.cutover import catch_up
    from ddb2bt.pipelines.cutover import letters as change_letters

    from .catchups import HOUR, T0, backfill, incremental, simulate

    rng = random.Random(41)
    table: dict = {}
    simulate(rng, table, 300, T0 - HOUR, T0, posts=30)
    for item in table.values():  # a clean backfill: every post has its Title
        if item["kind"]["S"] == "post":
            item.setdefault("Title", {"S": "hello"})
    spec = backfill(tmp_path, unique_name, list(table.values()))
    log = simulate(rng, table, 400, T0, T0 + HOUR, posts=30)
    window = incremental(tmp_path, log, T0, T0 + HOUR, unique_name)
    result = catch_up(spec, window, RunOptions(run_dir=str(tmp_path / "run")))
    assert result.ok and result.counters["changes_dead_lettered"] > 0, result
    letters = Path(result.dead_letter)

    client = create_streamed_table(moto_server.endpoint, unique_name)  # the table as it is now
    for item in table.values():
        client.put_item(TableName=unique_name, Item=item)
    fixed = fixed_spec(make_spec(unique_name, export=spec.source.export.model_dump(mode="json"),
                                 endpoint_url=moto_server.endpoint))
    assert read_cells(spec.target) != expected_cells(fixed, list(table.values()))  # the letters' items are missing
    code, output = cli("redrive", letters, spec_file(tmp_path / "fixed.json", fixed), "--run-dir", tmp_path / "rd")
    lines = result.dead_letter_lines
    assert code == 0 and f"{lines} change dead letters" in output and "0 still failing" in output, output
    assert read_cells(spec.target) == expected_cells(fixed, list(table.values()))
    assert change_letters.unresolved(str(letters)) == (lines, 0)


def test_unread_records_are_counted_across_a_shard_split(bigtable_env, moto_server, unique_name, tmp_path):
    """Behind ShardSplitProxy (moto's one shard shown as a closed parent and its child): the records after the tail's
    position in the parent and every record of the child it has not reached are unread; the tail then drains both."""
    import random

    from ddb2bt.pipelines.dynamodb.client import ClientSettings
    from ddb2bt.pipelines.cutover.backlog import read_backlog

    from .shard_splits import CHILD, PARENT, last_sequence, proxied_backfill

    with proxied_backfill(moto_server, unique_name, tmp_path, random.Random(3), split=False) as (
            client, spec, run_dir, proxy):
        assert tail(spec, RunOptions(run_dir=run_dir), until_idle_s=0.5, poll_s=0.1).ok
        before = last_sequence(moto_server.endpoint, unique_name)
        for n in range(15):
            client.put_item(TableName=unique_name, Item=post(n, f"t{n}"))
        proxy.split_after, proxy.split = last_sequence(moto_server.endpoint, unique_name), True
        for n in range(15):
            client.put_item(TableName=unique_name, Item=post(n, f"u{n}"))
        end = last_sequence(moto_server.endpoint, unique_name)
        state = stream_tail.load_state(run_dir)
        streams = dynamodb_stream.make_streams_client(ClientSettings.from_source(spec.source))
        backlog = read_backlog(streams, state, {})
        assert {shard.shard: shard.unread for shard in backlog.shards} == {PARENT: 15, CHILD: 15}
        assert backlog.unread == end - before == 30 and backlog.complete
        code, found = status(run_dir)
        assert code == 1 and conditions(found)["stream"]["counts"]["unread"] == 30

        assert tail(spec, RunOptions(run_dir=run_dir), until_idle_s=1.0, poll_s=0.1).ok
        backlog = read_backlog(streams, stream_tail.load_state(run_dir), {})
        assert backlog.unread == 0 and backlog.complete
        assert {shard.shard: shard.tail_done for shard in backlog.shards} == {PARENT: True, CHILD: False}


def with_patterns(table: str, endpoint: str, patterns: list[dict]) -> MappingSpec:
    """One row per item ({pk}#{sk}), every attribute kept: the items a pattern returns read back whole."""
    return MappingSpec.model_validate({
        "source": {"table": table, "partition_key": "pk", "sort_key": "sk", "region": "us-east-1",
                   "endpoint_url": endpoint},
        "target": {"table": table, "families": {"d": {"max_versions": 1}, "x": {"max_versions": 1}}},
        "migration_time": "2024-01-01T00:00:00Z",
        "entities": [{"name": kind, "match": {"kind": kind}, "row_key": "{pk}#{sk}", "rest": {"family": "x"},
                      "columns": [{"attribute": "Title", "family": "d"}] if kind == "post" else []}
                     for kind in ("post", "comment")],
        "access_patterns": patterns,
    })


def test_declared_access_patterns_are_part_of_ready(bigtable_env, moto_server, unique_name, tmp_path):
    """When the spec declares the application's reads, READY also needs each to return from Bigtable what it returns
    from DynamoDB (issue 22); a pattern Bigtable cannot serve (here a GSI without index rows) is NOT READY."""
    comments = {"name": "comments_of_post", "sort_key": {"operator": "begins_with", "values": ["c#"]}}
    spec = with_patterns(unique_name, moto_server.endpoint, [comments])
    client, spec, run_dir = ready_run(moto_server, unique_name, tmp_path, spec)
    checks = conditions(status(run_dir)[1])
    assert checks["access patterns"]["holds"] and checks["access patterns"]["counts"]["served"] == 1
    assert checks["access patterns"]["counts"]["cases"] > 0 and checks["access patterns"]["counts"]["different"] == 0

    by_text = {"name": "by_text", "operation": "query",
               "index": {"name": "ByText", "type": "global", "partition_key": "Text"}}
    timeline_file = Path(run_dir) / "cutover.json"
    timeline = json.loads(timeline_file.read_text())
    timeline["spec"] = with_patterns(unique_name, moto_server.endpoint, [comments, by_text]).model_dump(
        mode="json", by_alias=True)
    timeline_file.write_text(json.dumps(timeline))
    code, found = status(run_dir)
    checks = conditions(found)
    assert code == 1 and not checks["access patterns"]["holds"], found
    assert "not served by Bigtable: by_text" in checks["access patterns"]["detail"]
    assert [c for c in found["conditions"] if not c["holds"]] == [checks["access patterns"]]


def test_a_stream_disabled_after_the_tail_started_is_never_ready(bigtable_env, moto_server, unique_name, tmp_path):
    """The stream the tail followed is disabled: what it holds after the tail's position cannot be counted, which
    cutover-status says as such (NOT READY), not as a count or as records left unapplied."""
    client, spec, run_dir = ready_run(moto_server, unique_name, tmp_path)
    client.update_table(TableName=unique_name, StreamSpecification={"StreamEnabled": False})
    code, found = status(run_dir)
    checks = conditions(found)
    assert code == 1 and not found["ready"] and not checks["stream"]["holds"] and not checks["tail"]["holds"]
    assert f"the stream of {unique_name} cannot be read: the stream of {unique_name}" in checks["stream"]["detail"]
    assert "is no longer enabled" in checks["stream"]["detail"]
    assert "not counted (see stream)" in checks["tail"]["detail"] and "unapplied" not in checks["tail"]["detail"]
    assert read_cells(spec.target) == expected_cells(spec, table_items(client, unique_name))  # nothing written


def test_a_dead_bigtable_is_exit_3_before_the_parity_reads(bigtable_env, moto_server, unique_name, tmp_path,
                                                           monkeypatch):
    """cutover-status against a Bigtable that stopped answering says so (exit 3) after the bounded probe; it did not
    probe, and the parity's first read waited out the client's 10-minute read deadline."""
    from ddb2bt.pipelines.cutover import parity as cutover_parity

    _client, _spec, run_dir = ready_run(moto_server, unique_name, tmp_path)
    monkeypatch.setenv("BIGTABLE_EMULATOR_HOST", "127.0.0.1:9")  # nothing listens there

    def no_read(*args, **kwargs):
        raise AssertionError("Bigtable read before the target was probed")

    monkeypatch.setattr(cutover_parity, "compare", no_read)
    code, output = cli("cutover-status", "--run-dir", run_dir)
    assert code == 3 and "Bigtable is unreachable" in output, output


def test_the_backfills_dead_letters_are_not_ready_until_bigtable_holds_those_items(bigtable_env, moto_server,
                                                                                   unique_name, tmp_path):
    """An item the backfill dead-lettered is not in Bigtable: READY was given with it missing (the backfill's dead
    letters were shown, never checked). Each is now read from DynamoDB and mapped again at every status: NOT READY
    while the spec cannot map it, READY once a redrive through the fixed spec has put it in Bigtable."""
    client = create_streamed_table(moto_server.endpoint, unique_name)
    for i in range(POSTS):
        client.put_item(TableName=unique_name, Item=post(i))
        client.put_item(TableName=unique_name, Item=comment(i))
    client.put_item(TableName=unique_name, Item=post(POSTS, None))  # no Title: the spec cannot map it
    spec = make_spec(unique_name, endpoint_url=moto_server.endpoint)
    run_dir = str(tmp_path / "run")
    migrated = migrate(spec, RunOptions(run_dir=run_dir, total_segments=2))
    assert migrated.counters["dead_lettered"] == 1, migrated.counters
    assert tail(spec, RunOptions(run_dir=run_dir), until_idle_s=0.5, poll_s=0.1).ok

    code, found = status(run_dir)
    checks = conditions(found)
    assert code == 1 and not found["ready"]
    assert checks["stream"]["holds"] and checks["tail"]["holds"] and checks["parity"]["holds"]  # all READY looked at
    assert not checks["dead letters"]["holds"] and checks["dead letters"]["counts"]["backfill"] == 1
    detail = checks["dead letters"]["detail"]
    assert "1 backfill dead letter(s) are items Bigtable does not hold (1 the spec cannot map" in detail, detail
    assert f"ddb2bt redrive {run_dir} SPEC" in detail
    # the tail re-applies what the stream held from before the scan ended: the put is its dead letter too
    assert found["unresolved_dead_letters"] == {"dead_letters.jsonl": 1, "tail.dead_letters.jsonl": 1}

    fixed = spec_file(tmp_path / "fixed.json", fixed_spec(spec))
    code, output = cli("redrive", Path(run_dir) / "tail.dead_letters.jsonl", fixed, "--run-dir", tmp_path / "changes")
    assert code == 0, output
    code, found = status(run_dir)
    checks = conditions(found)  # the change is in Bigtable now: so is the item, and the backfill's letter resolved
    assert code == 0 and found["ready"], found["reasons"]
    code, output = cli("redrive", run_dir, fixed, "--run-dir", tmp_path / "redrive")  # a redrive again: harmless
    assert code == 0, output
    code, found = status(run_dir)
    assert code == 0 and found["ready"], found["reasons"]
    assert conditions(found)["dead letters"]["counts"] == {"unresolved": 0, "changes": 0, "backfill": 0}
    assert found["unresolved_dead_letters"]["dead_letters.jsonl"] == 0  # checked, and shown so
    assert read_cells(spec.target) == expected_cells(fixed_spec(spec), table_items(client, unique_name))  # cell by cell

    # the timeline goes on with the fixed spec: a Bigtable that loses the item again is NOT READY
    from google.cloud.bigtable.data import BigtableDataClient, RowMutationEntry
    from google.cloud.bigtable.data.mutations import DeleteAllFromRow

    with BigtableDataClient(project=spec.target.project) as bt:
        table = bt.get_table(spec.target.instance, spec.target.table)
        table.bulk_mutate_rows([RowMutationEntry(f"p{POSTS}".encode(), [DeleteAllFromRow()])])
    code, found = status(run_dir)
    checks = conditions(found)
    assert code == 1 and "1 mapped but not in Bigtable" in checks["dead letters"]["detail"], checks["dead letters"]


def put_cells(target, cells: dict) -> None:
    """Write ``cells`` ({row key: [(family, qualifier, timestamp, value)]}) into Bigtable by hand."""
    from google.cloud.bigtable.data import BigtableDataClient, RowMutationEntry, SetCell

    with BigtableDataClient(project=target.project) as bt:
        table = bt.get_table(target.instance, target.table)
        table.bulk_mutate_rows([RowMutationEntry(row, [SetCell(f, q, v, t) for f, q, t, v in found])
                                for row, found in cells.items()])


def test_a_redrive_of_the_backfills_dead_letters_writes_what_dynamodb_holds_now(bigtable_env, moto_server,
                                                                               unique_name, tmp_path, monkeypatch):
    """The backfill read three items the spec cannot map. Since, one was deleted and one changed in DynamoDB, and the
    tail applied both. A redrive through the fixed spec wrote the images the backfill read: the deleted item came back
    (and cutover-status said READY with it: a deleted item was counted as deleted without looking at its row) and the
    changed one went back to its old version. Now each item is read again (consistent) and what DynamoDB holds now is
    written; a deleted item's cells are deleted, and a deleted item whose cells are in Bigtable is NOT READY."""
    client = create_streamed_table(moto_server.endpoint, unique_name)
    for i in range(POSTS):
        client.put_item(TableName=unique_name, Item=post(i))
        client.put_item(TableName=unique_name, Item=comment(i))
    gone, changed, kept = POSTS, POSTS + 1, POSTS + 2
    for i in (gone, changed, kept):
        client.put_item(TableName=unique_name, Item=post(i, None))  # no Title: the spec cannot map them
    spec = make_spec(unique_name, endpoint_url=moto_server.endpoint)
    run_dir = str(tmp_path / "run")
    assert migrate(spec, RunOptions(run_dir=run_dir, total_segments=2)).counters["dead_lettered"] == 3
    assert tail(spec, RunOptions(run_dir=run_dir), until_idle_s=0.5, poll_s=0.1).ok
    client.delete_item(TableName=unique_name, Key={"pk": {"S": f"p{gone}"}, "sk": {"S": "post"}})
    client.put_item(TableName=unique_name, Item=post(changed, None, a="2"))
    assert tail(spec, RunOptions(run_dir=run_dir), until_idle_s=0.5, poll_s=0.1).ok

    from ddb2bt.app import redrive_current

    monkeypatch.setattr(redrive_current, "CHUNK", 2)  # the letters read again and applied a chunk at a time
    fixed_path = spec_file(tmp_path / "fixed.json", fixed_spec(spec))
    # read, then written: a change the tail applied in between would be overwritten: refused while it runs
    stopped = (Path(run_dir) / stream_tail.STOPPED_FILE).read_text()
    state = json.loads((Path(run_dir) / "tail.json").read_text())
    (Path(run_dir) / "tail.json").write_text(json.dumps({**state, "heartbeat_us": int(time.time() * 1e6)}))
    (Path(run_dir) / stream_tail.STOPPED_FILE).write_text('{"stopped_us": 0}')
    code, output = cli("redrive", run_dir, fixed_path, "--run-dir", tmp_path / "refused")
    assert code == 2 and "is running" in output and not (tmp_path / "refused").exists(), output
    (Path(run_dir) / stream_tail.STOPPED_FILE).write_text(stopped)
    (Path(run_dir) / "tail.json").write_text(json.dumps(state))
    code, output = cli("redrive", run_dir, fixed_path, "--run-dir", tmp_path / "redrive")
    assert code == 0, output
    assert "read again from DynamoDB" in output and "1 deleted since" in output and "1 changed since" in output, output
    items = table_items(client, unique_name)
    assert read_cells(spec.target) == expected_cells(fixed_spec(spec), items)  # cell by cell: p12 gone, p13 as now
    code, output = cli("redrive", Path(run_dir) / "tail.dead_letters.jsonl", fixed_path, "--run-dir", tmp_path / "ch")
    assert code == 0, output  # the tail's letter of the deleted item is older than its delete: superseded, not applied
    assert "4 change dead letters of 3 items" in output and "1 superseded" in output, output
    code, found = status(run_dir)
    assert code == 0 and found["ready"], found["reasons"]
    assert read_cells(spec.target) == expected_cells(fixed_spec(spec), items)

    # A row a redrive resurrected before this fix (the item's image as the backfill read it): not READY, and named
    letter = next(json.loads(line)["item"] for line in (Path(run_dir) / "dead_letters.jsonl").read_text().splitlines()
                  if json.loads(line)["item"]["pk"] == {"S": f"p{gone}"})
    put_cells(spec.target, expected_cells(fixed_spec(spec), [letter]))
    code, found = status(run_dir)
    checks = conditions(found)
    assert code == 1 and not checks["dead letters"]["holds"], found["reasons"]
    assert "1 deleted in DynamoDB but still in Bigtable" in checks["dead letters"]["detail"], checks["dead letters"]
    # the redrive deletes its cells (by exact coordinates: never a row delete), and it is READY again
    code, output = cli("redrive", run_dir, fixed_path, "--run-dir", tmp_path / "again")
    assert code == 0 and "1 deleted since" in output, output
    assert read_cells(spec.target) == expected_cells(fixed_spec(spec), items)
    code, found = status(run_dir)
    assert code == 0 and found["ready"], found["reasons"]


def test_an_item_deleted_through_the_stream_whose_cells_are_still_in_bigtable_is_not_ready(bigtable_env, moto_server,
                                                                                          unique_name, tmp_path):
    """parity counted a deleted item as deleted without looking at its row: the stream's delete carries the item's
    last image, whose cells must be gone from Bigtable."""
    client, spec, run_dir = ready_run(moto_server, unique_name, tmp_path)
    client.delete_item(TableName=unique_name, Key={"pk": {"S": "p3"}, "sk": {"S": "post"}})
    assert tail(spec, RunOptions(run_dir=run_dir), until_idle_s=0.5, poll_s=0.1).ok
    assert b"p3" in read_cells(spec.target)  # its comment's cell is in the same row: never a row delete
    assert read_cells(spec.target) == expected_cells(spec, table_items(client, unique_name))
    put_cells(spec.target, expected_cells(spec, [post(3)]))  # written back by hand (as a stale redrive would)
    code, found = status(run_dir)
    checks = conditions(found)
    assert code == 1 and not checks["parity"]["holds"], found["reasons"]
    assert 'deleted in DynamoDB, but 2 of its 2 cells are still in row' in checks["parity"]["detail"], checks["parity"]
    assert found["parity"]["lingering"] == 1
