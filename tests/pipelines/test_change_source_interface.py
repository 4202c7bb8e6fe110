"""Change sources behind one interface: the stream and the incremental export implement it, and a change source added
with one registration (a JSON-lines file of change records, below) is applied by the real use cases -- the catch-up's
Beam graph and the tail's checkpointed follower, killed and resumed from its saved positions -- with no other change."""

from __future__ import annotations

import inspect
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ddb2bt.app.cutover import catch_up, tail
from ddb2bt.app.migrate import migrate
from ddb2bt.app.options import RunOptions
from ddb2bt.cli.main import app
from ddb2bt.mappers.changes import Change, kind_of_change
from ddb2bt.mappers.errors import UsageError
from ddb2bt.pipelines.change_source import ChangePage, ChangeSource, ChangeWindow, Piece
from ddb2bt.pipelines.change_sources import KINDS, change_source_for, register, unregister
from ddb2bt.pipelines.cutover.tail import load_state
from ddb2bt.pipelines.cutover.workload import make_spec
from ddb2bt.pipelines.dynamodb.export import SourceTable

from .catchups import HOUR, T0, backfill, simulate
from .cells import expected_cells, read_cells
from .export_fixtures import write_export
from .tables import load_table

PIECES = 2
PAGE = 4


class Killed(Exception):
    """The reader's process dies between two pages (after the page before is applied and saved)."""


def _piece_of(change: dict) -> str:
    return f"part-{sum(change['Keys']['pk']['S'].encode()) % PIECES}"  # an item's changes all in one piece


class JsonLinesChanges(ChangeSource):
    """Change records, one JSON object a line after a header line naming the window and the table; an item's changes
    in order, in one of PIECES pieces (by its partition key); a position is the index of the piece's last change
    applied."""

    kind = "json lines changes"
    pieces_name = "line sets"
    kill_after: int | None = None
    """Die after giving this many pages (a test's kill -9)."""
    asked: list[tuple[str, str | None]] = []

    def __init__(self, path: str) -> None:
        self.path = path
        lines = Path(path).read_text(encoding="utf-8").splitlines()
        self.header = json.loads(lines[0])
        self.records = [json.loads(line) for line in lines[1:] if line.strip()]
        self.given = 0

    def name(self) -> str:
        return self.path

    def window(self) -> ChangeWindow:
        h = self.header
        return ChangeWindow(Path(self.path).stem, h["from_us"], h["to_us"], len(self.records),
                            SourceTable(h["table_arn"], None))

    def check(self, key_names: tuple[str, ...] = (), *, from_us: int | None = None,
              resuming: str | None = None, keep: bool = False) -> None:
        if resuming is not None and resuming != Path(self.path).stem:
            raise UsageError(f"the checkpoint was made of {resuming}, not {self.path}", "use its run folder")
        for number, record in enumerate(self.records, start=2):
            missing = [name for name in key_names if name not in record["Keys"]]
            if missing:
                raise UsageError(f"{self.path} line {number}: Keys has no {missing[0]}", "fix the line")

    def pieces(self) -> list[Piece]:
        return [Piece(f"part-{number}") for number in range(PIECES)]

    def pages(self, piece: str, position: str | None) -> Iterator[ChangePage]:
        JsonLinesChanges.asked.append((piece, position))
        mine = [record for record in self.records if _piece_of(record) == piece]
        start = 0 if position is None else int(position) + 1
        for begin in range(start, len(mine), PAGE):
            if JsonLinesChanges.kill_after is not None and self.given >= JsonLinesChanges.kill_after:
                raise Killed()
            end = min(begin + PAGE, len(mine))
            changes = [Change(r["Keys"], r.get("OldImage"), r.get("NewImage"),
                              kind_of_change(r.get("OldImage"), r.get("NewImage")), r["time_us"])
                       for r in mine[begin:end]]
            self.given += 1
            yield ChangePage(changes, str(end - 1), done=end == len(mine))
        if start >= len(mine):
            yield ChangePage([], position, done=True)


@pytest.fixture
def json_lines_changes():
    registration = register(JsonLinesChanges, lambda where, spec: bool(where and where.endswith(".jsonl")),
                            lambda where, spec: JsonLinesChanges(str(where)))
    JsonLinesChanges.kill_after, JsonLinesChanges.asked = None, []
    yield JsonLinesChanges
    unregister(registration)


def _signature(method: Any) -> list[tuple[str, Any]]:
    return [(p.name, p.kind) for p in inspect.signature(method).parameters.values()]


def test_every_change_source_implements_its_interface(json_lines_changes):
    assert {kind.kind for kind in KINDS} == {"dynamodb stream", "incremental export", "json lines changes"}
    for kind in KINDS:
        assert issubclass(kind, ChangeSource) and not inspect.isabstract(kind), f"{kind.__name__} leaves methods out"
        for name in ("check", "pages", "read", "window", "pieces"):
            assert _signature(getattr(kind, name)) == _signature(getattr(ChangeSource, name)), f"{kind.__name__}.{name}"


def _write_changes(path: Path, log: list[Change], start_us: int, end_us: int, table: str) -> str:
    header = {"from_us": start_us, "to_us": end_us, "table_arn": f"arn:aws:dynamodb:us-east-1:123456789012:table/{table}"}
    lines = [json.dumps(header)] + [json.dumps({"Keys": c.keys, "OldImage": c.old, "NewImage": c.new,
                                                "time_us": c.time_us}) for c in log]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def _backfilled(tmp_path: Path, name: str, seed: int) -> tuple[Any, dict, list[Change]]:
    rng = random.Random(seed)
    table: dict = {}
    simulate(rng, table, 40, T0 - HOUR, T0)  # the table as the full export saw it
    spec = backfill(tmp_path, name, list(table.values()))
    log = simulate(rng, table, 90, T0, T0 + HOUR)  # several changes of an item, in order
    assert len({json.dumps(c.keys, sort_keys=True) for c in log}) < len(log)
    return spec, table, log


def test_a_registered_change_source_is_caught_up_through_the_catch_up(json_lines_changes, bigtable_env, unique_name,
                                                                      tmp_path):
    spec, table, log = _backfilled(tmp_path, unique_name, 11)
    path = _write_changes(tmp_path / "changes.jsonl", log, T0, T0 + HOUR, unique_name)
    assert isinstance(change_source_for(spec, path), JsonLinesChanges)  # the one registration

    result = catch_up(spec, path, RunOptions(run_dir=str(tmp_path / "run")))
    assert result.ok, result.problems
    c = result.counters
    assert c["changes_read"] == len(log) == c["changes_applied"] + c["changes_dead_lettered"] + c["changes_skipped"]
    assert c["cells_deleted"] > 0
    assert read_cells(spec.target) == expected_cells(spec, list(table.values()))
    timeline = json.loads((tmp_path / "run" / "cutover.json").read_text())
    assert timeline["applied_to_us"] == T0 + HOUR and timeline["phases"][0]["export"] == "changes"
    assert result.dead_letter == str(tmp_path / "run" / "catch-up-changes.dead_letters.jsonl")  # named by its id


def test_a_registered_change_source_is_refused_by_its_check_before_anything_is_written(json_lines_changes,
                                                                                        bigtable_env, unique_name,
                                                                                        tmp_path):
    spec, _, log = _backfilled(tmp_path, unique_name, 12)
    before = read_cells(spec.target)
    broken = [log[0]._replace(keys={"pk": log[0].keys["pk"]}), *log[1:]]  # its first record has no sort key
    path = _write_changes(tmp_path / "changes.jsonl", broken, T0, T0 + HOUR, unique_name)
    with pytest.raises(UsageError, match="line 2: Keys has no sk"):
        catch_up(spec, path, RunOptions(run_dir=str(tmp_path / "run")))
    assert read_cells(spec.target) == before
    timeline = tmp_path / "run" / "cutover.json"
    assert not timeline.exists() or json.loads(timeline.read_text())["applied_to_us"] == T0  # nothing applied


def test_a_registered_change_source_is_followed_by_the_tail_killed_and_resumed_from_its_positions(
        json_lines_changes, bigtable_env, unique_name, tmp_path):
    spec, table, log = _backfilled(tmp_path, unique_name, 13)
    path = _write_changes(tmp_path / "changes.jsonl", log, T0, T0 + HOUR, unique_name)
    options = RunOptions(run_dir=str(tmp_path / "run"))

    JsonLinesChanges.kill_after = 5
    with pytest.raises(Killed):
        tail(spec, options, until_idle_s=0.2, poll_s=0.01, changes=path)
    state = load_state(options.run_dir)
    assert state is not None and state.stream_arn == "changes"  # the source's window id, kept as a stream's ARN is
    applied = state.counters["changes_read"]
    assert 0 < applied < len(log)  # the pages before the kill, each saved after it was applied
    positions = {piece: saved.sequence for piece, saved in state.shards.items()}
    saved_json = json.loads((tmp_path / "run" / "tail.json").read_text())  # the format older tails wrote and read
    assert set(saved_json) == {"stream_arn", "start_us", "counters", "heartbeat_us", "recent", "shards"}
    assert all(set(shard) == {"sequence", "done", "parent", "last_record_us", "behind_us", "caught_up_us"}
               for shard in saved_json["shards"].values())
    assert sum(int(p) + 1 for p in positions.values() if p is not None) == applied

    JsonLinesChanges.kill_after, JsonLinesChanges.asked = None, []
    result = tail(spec, options, until_idle_s=0.2, poll_s=0.01, changes=path)
    assert result.ok, result.problems
    assert set(JsonLinesChanges.asked[:PIECES]) == set(positions.items())  # resumed where each piece was saved
    assert result.counters["changes_read"] == len(log) - applied  # nothing applied twice, nothing left out
    assert read_cells(spec.target) == expected_cells(spec, list(table.values()))
    assert all(saved.done for saved in load_state(options.run_dir).shards.values())


def _status(run_dir: str) -> tuple[int, dict, dict[str, dict]]:
    result = CliRunner().invoke(app, ["cutover-status", "--run-dir", run_dir, "--format", "json"])
    found = json.loads(result.output)
    return result.exit_code, found, {condition["name"]: condition for condition in found["conditions"]}


def test_cutover_status_reads_the_backlog_of_a_registered_change_source(json_lines_changes, bigtable_env, moto_server,
                                                                        unique_name, tmp_path):
    """The tail follows a registered change source; cutover-status (the CLI, given only the run folder) reads that
    same source through the interface, read-only: the changes after the tail's saved positions are unread (NOT READY
    naming their count), and once the tail applied them all the backlog is 0, every changed key compared."""
    rng = random.Random(14)
    table: dict = {}
    simulate(rng, table, 40, T0 - HOUR, T0)
    backfilled = list(table.values())
    log = simulate(rng, table, 90, T0, T0 + HOUR)
    for item in [*backfilled, *(image for change in log for image in (change.old, change.new) if image)]:
        if item["sk"]["S"] == "post":  # a post without a Title is a dead letter, which is never READY
            item.setdefault("Title", {"S": "titled"})
    export_dir = write_export(tmp_path / "full", backfilled, files=2, table=unique_name)
    spec = make_spec(unique_name, export={"path": export_dir}, endpoint_url=moto_server.endpoint)
    options = RunOptions(run_dir=str(tmp_path / "run"))
    assert migrate(spec, options).counters["items_read"] == len(backfilled)
    load_table(moto_server.endpoint, unique_name, list(table.values()))  # DynamoDB as the log leaves it
    path = _write_changes(tmp_path / "changes.jsonl", log, T0, T0 + HOUR, unique_name)

    JsonLinesChanges.kill_after = 3
    with pytest.raises(Killed):
        tail(spec, options, until_idle_s=0.2, poll_s=0.01, changes=path)
    applied = load_state(options.run_dir).counters["changes_read"]
    assert 0 < applied < len(log)
    tail_file = tmp_path / "run" / "tail.json"
    saved = tail_file.read_bytes()
    assert json.loads((tmp_path / "run" / "cutover.json").read_text())["tail_changes"] == path  # for cutover-status

    JsonLinesChanges.kill_after, JsonLinesChanges.asked = None, []
    code, found, checks = _status(options.run_dir)
    assert code == 1 and not found["ready"]
    assert not checks["stream"]["holds"] and checks["stream"]["counts"]["unread"] == len(log) - applied
    assert f"{len(log) - applied} change(s) the tail has not applied, the oldest from " in checks["stream"]["detail"]
    assert checks["stream"]["counts"]["shards"] == PIECES and not checks["stream"]["counts"]["lower_bound"]
    assert sum(shard["unread"] for shard in found["shards"]) == len(log) - applied
    assert not checks["tail"]["holds"]  # stopped (killed) with changes unapplied
    assert tail_file.read_bytes() == saved  # read-only: the tail's checkpoint is untouched
    counted_from = {(piece, shard.sequence) for piece, shard in load_state(options.run_dir).shards.items()
                    if not shard.done}
    assert counted_from and counted_from <= set(JsonLinesChanges.asked)  # each piece read on from the tail's position

    result = tail(spec, options, until_idle_s=0.2, poll_s=0.01, changes=path)
    assert result.ok and result.counters["changes_read"] == len(log) - applied
    assert read_cells(spec.target) == expected_cells(spec, list(table.values()))
    code, found, checks = _status(options.run_dir)
    assert code == 0 and found["ready"], found["reasons"]
    assert checks["stream"]["holds"] and checks["stream"]["counts"]["unread"] == 0
    assert checks["stream"]["detail"] == f"0 unread change(s) in {path} (line sets: {PIECES}, each read to its end or tip)"
    changed = {json.dumps(change.keys, sort_keys=True) for change in log}
    assert found["parity"]["changed_keys"] == len(changed) and not found["parity"]["mismatches"]

    code, found, checks = _status(options.run_dir)  # the next check lists only the keys changed since this one
    assert code == 0 and found["parity"]["changed_keys"] == 0 and checks["stream"]["counts"]["unread"] == 0


def test_the_backlog_of_a_registered_change_source_is_never_a_false_zero(tmp_path):
    """read_backlog through the interface alone (no server): a capped read is a lower bound, a piece the tail had not
    finished that the source no longer lists and a source that is not the one the tail followed make the count
    impossible; changes from before the tail's start are not counted."""
    from ddb2bt.pipelines.cutover.backlog import read_backlog
    from ddb2bt.pipelines.cutover.tail import ShardState, TailState

    log = simulate(random.Random(15), {}, 60, T0, T0 + HOUR)
    source = JsonLinesChanges(_write_changes(tmp_path / "changes.jsonl", log, T0, T0 + HOUR, "t"))
    per_piece = {piece: sum(_piece_of({"Keys": c.keys}) == piece for c in log) for piece in ("part-0", "part-1")}

    whole = read_backlog(source, TailState("changes", T0), {})
    assert whole.complete and whole.unread == len(log) and whole.oldest_unread_us == log[0].time_us
    late = read_backlog(source, TailState("changes", log[10].time_us), {})  # the tail starts at the 11th change
    assert late.complete and late.unread == len(log) - 10

    capped = read_backlog(source, TailState("changes", T0), {}, max_pages=1)
    assert not capped.complete and capped.unread == 2 * PAGE < len(log)
    assert all(shard.capped for shard in capped.shards)

    at = str(per_piece["part-0"] - 2)  # the tail applied part-0 but its last 1 change, nothing of part-1
    state = TailState("changes", T0, {"part-0": ShardState(at), "part-9": ShardState("3")})
    lost = read_backlog(source, state, {})
    assert not lost.complete and lost.unread == 1 + per_piece["part-1"]
    assert lost.problems == [f"part-9: its unread change(s) cannot be counted: part-9 is no longer in {source.path} "
                             "before it was read to its end"]

    other = read_backlog(source, TailState("other-changes", T0), {})
    assert not other.complete and other.problems[0].startswith("the tail followed other-changes, and ")
