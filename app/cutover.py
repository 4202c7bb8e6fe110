"""The cutover use cases: catch up from incremental exports, tail the stream, tell when the target is ready.

All three work on the run folder of the backfill (``ddb2bt migrate --run-dir R``), which holds one
timeline (:mod:`ddb2bt.pipelines.cutover.timeline`). The phases run one after the other: backfill → any
number of catch-up exports, each starting exactly where the timeline ends → the stream tail, from
where the timeline ends, until the user cuts over. docs/CUTOVER.md explains why the result is the
spec applied to the table's final state. Nothing here prints; results are typed.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any


from ..mappers.errors import Interrupted, ServiceError, UsageError
from ..pipelines.cutover.change_sink import CHANGE_COUNTERS
from ..pipelines.cutover.parity import Parity
from ..pipelines.sources import source_for
from ..pipelines.run.local_runner import new_pipeline
from .assembly import runner_for
from .context import load_spec, unfinished, wait_for
from .options import RunOptions

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..mappers.spec import MappingSpec
    from ..pipelines.dynamodb.export import SourceTable
    from ..pipelines.cutover.timeline import Timeline

SCAN_AND_EXPORTS = (
    "the backfill in {run_dir} was a scan, which is no point-in-time snapshot: an incremental export gives each item's "
    "image at the window's start only, so an item changed twice while the scan read it could keep cells of the "
    "version the scan saw")
SCAN_AND_EXPORTS_HINT = ("back-fill from a full export (its exportTime starts the timeline) to catch up with incremental "
                         "exports, or follow this scan with `ddb2bt tail` while the stream still holds its start "
                         "(24 hours)")


def _need_run_dir(options: RunOptions) -> str:
    if not options.run_dir:
        raise UsageError("the cutover phases need the backfill's run folder", "pass --run-dir RUN_DIR (the one "
                         "`ddb2bt migrate` used)")
    return options.run_dir


# --------------------------------------------------------------------------- catch-up


@dataclass
class CatchUpResult:
    run_dir: str
    export_id: str
    from_us: int
    to_us: int
    state: str
    counters: dict[str, int] = field(default_factory=dict)
    dead_letter: str = ""
    dead_letter_lines: int = 0
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems


def check_window(timeline: Timeline, from_us: int, to_us: int, where: str) -> None:
    """A catch-up export must start exactly where the applied timeline ends."""
    from ..pipelines.cutover.timeline import TimelineError, us_to_iso

    end = timeline.applied_to_us
    if from_us == end:
        return
    window = f"{where} covers {us_to_iso(from_us)} .. {us_to_iso(to_us)}"
    if to_us <= end:
        raise TimelineError(f"{window}, already applied (the timeline is applied up to {us_to_iso(end)})",
                            f"export the next window: ExportFromTime {us_to_iso(end)}")
    if from_us > end:
        raise TimelineError(f"{window}: a gap, the timeline is applied up to {us_to_iso(end)} only; changes between "
                            "would be lost", f"export from {us_to_iso(end)} (ExportFromTime) and apply that first")
    raise TimelineError(f"{window}: it overlaps what is applied (up to {us_to_iso(end)}); its old images are older "
                        "than what Bigtable holds", f"export from exactly {us_to_iso(end)}")


CATCH_UP_PROGRESS = "catch-up"
"""The folder of a catch-up's live totals, in the run folder's progress folder (migrate's own totals stay apart)."""


def catch_up_live_folder(run_dir: str) -> str | None:
    """Where a catch-up on this machine keeps its live totals (``changes_read``); None for a run folder elsewhere."""
    from ..pipelines.run.progress import progress_dir

    folder = progress_dir(run_dir)
    return str(Path(folder) / CATCH_UP_PROGRESS) if folder else None


def catch_up_progress(run_dir: str) -> dict[str, int]:
    """What the catch-up in ``run_dir`` has read so far (``changes_read``), from every process's totals; cheap."""
    from ..pipelines.run.progress import read_progress

    folder = catch_up_live_folder(run_dir)
    return {"changes_read": read_progress(folder).get("changes_read", 0)} if folder else {}


def catch_up(spec: MappingSpec | str | Path, export: str, options: RunOptions = RunOptions(),
             started: Callable[[int | None], None] | None = None) -> CatchUpResult:
    """Apply one incremental export as a batch Beam job, then advance the timeline (only if it reconciled).

    ``started`` is called with the export's item count (None when its manifest gives none) once the export is
    checked, just before the job starts; :func:`catch_up_progress` then says how far it got.
    """
    from apache_beam.options.pipeline_options import DirectOptions

    from ..pipelines.change_sources import change_source_for
    from ..pipelines.cutover import timeline as tl
    from ..pipelines.cutover.catchup import build_catch_up
    from ..pipelines.cutover.change_sink import ChangeSink
    from ..pipelines.run.dead_letters import check_dead_letter_destination
    from ..pipelines.run.progress import reset

    run_dir = _need_run_dir(options)
    spec = load_spec(spec, options)
    run = runner_for(spec, options)
    timeline = tl.load(run_dir, spec)
    if timeline.tail_started_us is not None:
        raise tl.TimelineError(f"the stream tail of {run_dir} has started; catch-up exports no longer apply",
                               "keep `ddb2bt tail` running (it continues where it stopped)")
    if timeline.backfill == "scan":
        raise tl.TimelineError(SCAN_AND_EXPORTS.format(run_dir=run_dir), SCAN_AND_EXPORTS_HINT)
    source = change_source_for(spec, export)
    window = source.window()
    if window.from_us is None or window.to_us is None:
        raise UsageError(f"{source.name()} is no window of changes ({source.kind})",
                         "catch up from an incremental export; a stream is followed by `ddb2bt tail`")
    table = check_export_table(window.table, spec, timeline, f"export {window.id}")  # before its window:
    check_window(timeline, window.from_us, window.to_us, f"export {window.id}")  # another table's is moot
    in_process = run.direct and run.pipeline_options.view_as(DirectOptions).direct_running_mode == "in_memory"
    source.check(tuple(k for k in (spec.source.partition_key, spec.source.sort_key) if k),  # nothing written yet
                 keep=in_process)
    dead_letter = options.dead_letter or tl.join(run_dir, f"catch-up-{window.id}.dead_letters.jsonl")
    sink = ChangeSink(spec, timeline.now_ms, dead_letter, options.flow_control())
    sink.check()
    check_dead_letter_destination(dead_letter, resume=True)  # a catch-up run again continues its own file

    live = catch_up_live_folder(run_dir) if run.direct else None
    reset(live)
    if started is not None:
        started(window.expected)
    began = time.monotonic()
    pipeline = new_pipeline(run.pipeline_options)
    build_catch_up(pipeline, sink, source, progress_dir=live)
    state, counters, lines = wait_for(pipeline.run(), dead_letter)
    outcome = CatchUpResult(run_dir, window.id, window.from_us, window.to_us, state,
                            {k: counters.get(k, 0) for k in (*CHANGE_COUNTERS, "export_count_mismatch")},
                            dead_letter, lines, seconds=time.monotonic() - began)
    outcome.problems = unfinished(state) + reconcile_changes(outcome.counters, window.expected)
    if outcome.ok:
        timeline.phases.append(tl.Phase(window.id, window.from_us, window.to_us, outcome.counters,
                                        int(time.time() * 1_000_000)))
        timeline.applied_to_us = window.to_us
        timeline.spec = spec.model_dump(mode="json", by_alias=True)
        timeline.table = timeline.table or table
        tl.save(run_dir, timeline)
    return outcome


def check_export_table(table: SourceTable | None, spec: MappingSpec, timeline: Timeline,
                       where: str) -> dict[str, Any]:
    """An incremental export must be of the cutover's source table: the one the backfill's full export is of
    (recorded in the timeline, or read from source.export) and the spec's source.table. Returns it as recorded."""
    from ..pipelines.dynamodb.export import ExportError, SourceTable
    from ..pipelines.cutover.timeline import us_to_iso

    if table is None:
        raise ExportError(f"{where} names no tableArn in its manifest-summary.json, so the table it is of cannot be "
                          "checked", "apply the export as DynamoDB wrote it (manifest-summary.json unchanged)")
    expected = timeline.table
    if expected is None:  # a backfill from a full export: the table it is of
        snapshot = source_for(spec).snapshot()
        expected = snapshot.table if snapshot is not None else None
    fix = (f"apply an export of the source table instead (ExportTableToPointInTime of {{table}}, ExportFromTime "
           f"{us_to_iso(timeline.applied_to_us)}); nothing was written")
    if expected is not None:
        ids_differ = bool(table.table_id and expected.get("table_id") and table.table_id != expected["table_id"])
        if table.arn != expected["arn"] or ids_differ:
            source = SourceTable(expected["arn"], expected.get("table_id"))
            raise ExportError(f"{where} is of {table.describe()}, but this cutover's backfill is of "
                              f"{source.describe()}", fix.format(table=source.arn))
    if spec.source.table and table.name != spec.source.table:
        raise ExportError(f"{where} is of {table.describe()}, but the spec's source table is {spec.source.table}",
                          fix.format(table=spec.source.table))
    return {"arn": table.arn, "table_id": table.table_id}


def reconcile_changes(counters: dict[str, int], expected: int | None = None) -> list[str]:
    """What does not add up: changes read = applied + dead-lettered + skipped (and = the manifest's count)."""
    c = counters
    problems = []
    accounted = c["changes_applied"] + c["changes_dead_lettered"] + c["changes_skipped"]
    if c["changes_read"] != accounted:
        problems.append(f"changes read ({c['changes_read']}) != applied + dead-lettered + skipped ({accounted})")
    if expected is not None and c["changes_read"] != expected:
        problems.append(f"the manifest lists {expected} changes, {c['changes_read']} were read")
    if c.get("export_count_mismatch"):
        problems.append(f"{c['export_count_mismatch']} export count mismatch(es) (a data file holds another number of "
                        "changes than its manifest says; each is a line of the catch-up's dead-letter file): copy the "
                        "incremental export again, or export that window again, and run the same catch-up with it")
    return problems


def describe_timeline(timeline: Timeline) -> list[str]:
    from ..pipelines.cutover.timeline import us_to_iso

    lines = [f"backfill ({timeline.backfill}) from {us_to_iso(timeline.start_us)}"]
    lines += [f"catch-up {phase.export}: {us_to_iso(phase.from_us)} .. {us_to_iso(phase.to_us)}"
              for phase in timeline.phases]
    return lines


# --------------------------------------------------------------------------- tail


@dataclass
class TailResult:
    run_dir: str
    counters: dict[str, int]
    shards: dict[str, dict]
    dead_letter: str
    dead_letter_lines: int
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0
    interrupted: bool = False
    """Stopped by Ctrl-C (the usual way to stop it): every page applied before is saved in ``tail.json``."""
    error: ServiceError | None = None
    """What stopped it part way: a service (the stream, DynamoDB, Bigtable) unreachable or refusing; every page
    applied before is saved in ``tail.json``, so the same command goes on once the service is back."""

    @property
    def ok(self) -> bool:
        return not self.problems and self.error is None


class TailNotStarted(Interrupted):
    """Ctrl-C before the tail read its stream: nothing of it was applied (the caller adds the command to start it)."""


def tail(spec: MappingSpec | str | Path, options: RunOptions = RunOptions(), *, until_idle_s: float | None = None,
         max_seconds: float | None = None, poll_s: float = 1.0, changes: str | None = None) -> TailResult:
    """Follow the table's stream from where the timeline ends until stopped (Ctrl-C, or the given limits).
    ``changes``: another change source to follow (where :mod:`~ddb2bt.pipelines.change_sources` finds it); None,
    the table's stream."""
    from ..pipelines.change_sources import change_source_for
    from ..pipelines.cutover import timeline as tl
    from ..pipelines.cutover.change_sink import ChangeSink
    from ..pipelines.cutover.tail import TailRun, record_stop
    from ..pipelines.run.dead_letters import consolidate

    try:  # checks only: nothing is read from the stream or written before the run below
        run_dir = _need_run_dir(options)
        spec = load_spec(spec, options)
        if spec.source.table is None:
            raise UsageError("the tail reads the table's stream: the spec needs source.table",
                             "name the table in source.table (an export spec can keep source.export for the backfill)")
        timeline = tl.load(run_dir, spec)
        dead_letter = options.dead_letter or tl.join(run_dir, "tail.dead_letters.jsonl")
        sink = ChangeSink(spec, timeline.now_ms, dead_letter, options.flow_control())
        sink.check()
        source = change_source_for(spec, changes)
        run = TailRun(run_dir, source, sink, until_idle_s, max_seconds, poll_s)
    except KeyboardInterrupt:
        raise TailNotStarted("tail stopped by Ctrl-C while it was starting: nothing was read from the stream or "
                             "applied") from None
    started = time.monotonic()
    record_stop(run_dir, 0)  # running from now on, until its heartbeat stops or it records its stop
    state = None
    interrupted = False
    stopped_by: ServiceError | None = None
    try:
        state = run.start(timeline.applied_to_us)
        if timeline.tail_started_us is None:
            timeline.tail_started_us = int(time.time() * 1_000_000)
            timeline.tail_changes = changes
            timeline.spec = spec.model_dump(mode="json", by_alias=True)
            tl.save(run_dir, timeline)
        state = run.run(state)  # the state it is given, kept up to date page by page
    except KeyboardInterrupt:  # Ctrl-C: a page is saved only once applied, so what was saved is in Bigtable
        interrupted = True
    except Exception as error:  # a service gone part way: what it applied is said before the error, as migrate does
        from ..pipelines.run.service_errors import as_ddb2bt_error

        failure = as_ddb2bt_error(error)
        if not isinstance(failure, ServiceError):
            raise  # bad input (one line, as ever) or a bug
        stopped_by = failure
    finally:
        run.close()
        lines = consolidate(dead_letter)
        record_stop(run_dir, int(time.time() * 1_000_000))
    counters = run.outcome.counters()
    return TailResult(run_dir, counters, {k: vars(v) for k, v in state.shards.items()} if state else {}, dead_letter,
                      lines, reconcile_changes(counters), time.monotonic() - started, interrupted, stopped_by)


# --------------------------------------------------------------------------- cutover-status

LAG_THRESHOLD_S = 30.0
PARITY_SAMPLE = 100
STATUS_FILE = "status.json"
"""cutover-status's own record in the run folder: per shard, the last record whose item it compared (never the
tail's checkpoint, which it only reads)."""
CONDITIONS = ("stream", "dead letters", "tail", "parity")


@dataclass
class ShardLag:
    shard: str
    done: bool
    behind_s: float
    """How long the oldest unread record of the shard has waited (0 when none is unread)."""
    last_record: str | None
    unread: int = 0
    oldest_unread: str | None = None
    capped: bool = False


@dataclass
class Condition:
    """One condition of READY, checked, with what it counted."""

    name: str
    holds: bool
    detail: str
    counts: dict[str, Any] = field(default_factory=dict)


@dataclass
class CutoverStatus:
    run_dir: str
    phases: list[dict]
    """Each phase: name, state, what it applied up to, its counters."""
    shards: list[ShardLag]
    dead_letters: dict[str, int]
    """Lines per dead-letter file of the run folder (the backfill's and the change dead letters)."""
    parity: Parity
    ready: bool
    reasons: list[str]
    """Why it is not ready (empty when ready)."""
    lag_threshold_s: float
    conditions: list[Condition] = field(default_factory=list)
    unresolved_dead_letters: dict[str, int] = field(default_factory=dict)
    """Change dead letters not resolved by a redrive, per file."""
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        from dataclasses import asdict

        data = asdict(self)
        data["parity"]["holds"] = self.parity.holds
        data["parity"]["mismatches"] = [m.text for m in self.parity.mismatches]  # the JSON keeps them as words
        return data


def _count_lines(path: str) -> int:
    from apache_beam.io.filesystems import FileSystems

    with FileSystems.open(path) as handle:
        return sum(1 for line in handle.read().splitlines() if line.strip())


def _backfill_letters(held: Parity, without_item: int, run_dir: str) -> tuple[int, str]:
    """(the backfill's dead letters Bigtable does not hold, what the condition says of them): each item read from
    DynamoDB now and mapped by the cutover's spec. Resolved: deleted since, skipped by the spec on purpose, or its
    cells in Bigtable (redriven through a fixed spec, or changed since and applied). Not: the spec still cannot map it,
    its cells are not in Bigtable, it was deleted since but its cells are in Bigtable, or the line holds no item to
    check (an export's count mismatch)."""
    left = held.failing + len(held.mismatches) + without_item
    if not left:
        return 0, ""
    missing = [m.text for m in held.mismatches if m.kind == "differs"]
    lingering = [m.text for m in held.mismatches if m.kind == "lingering"]
    parts = [f"{held.failing} the spec cannot map" if held.failing else "",
             f"{len(missing)} mapped but not in Bigtable (e.g. {missing[0]})" if missing else "",
             f"{len(lingering)} deleted in DynamoDB but still in Bigtable (e.g. {lingering[0]}; an earlier redrive wrote "
             "the backfill's image back)" if lingering else "",
             f"{without_item} without an item to check (an export's count mismatch)" if without_item else ""]
    resolved = held.checked - held.failing - len(held.mismatches)
    return left, (f"{left} backfill dead letter(s) are items Bigtable does not hold "
                  f"({', '.join(part for part in parts if part)}; {resolved} resolved since: deleted, skipped or "
                  f"in Bigtable): fix the spec (map those items, or skip them on purpose) and "
                  f"`ddb2bt redrive {run_dir} SPEC`")


def _dead_letter_counts(run_dir: str) -> dict[str, int]:
    from apache_beam.io.filesystems import FileSystems

    from ..pipelines.cutover.timeline import join

    found = FileSystems.match([join(run_dir, "*dead_letters.jsonl")])[0].metadata_list
    return {meta.path.rsplit("/", 1)[-1]: _count_lines(meta.path) for meta in sorted(found, key=lambda m: m.path)}


def _check_run_dir(run_dir: str) -> Timeline:
    """The run folder's timeline; a missing folder and a folder without one are usage errors (exit 2)."""
    import os

    from apache_beam.io.filesystems import FileSystems

    from ..pipelines.cutover import timeline as tl

    exists = os.path.isdir(run_dir) if "://" not in run_dir else \
        bool(FileSystems.match([tl.join(run_dir, "*")])[0].metadata_list)
    if not exists:
        raise UsageError(f"there is no run folder at {run_dir}",
                         "pass the --run-dir of the backfill (`ddb2bt migrate --run-dir`) that catch-up and tail use")
    timeline = tl.peek(run_dir)
    if timeline is None:
        raise tl.TimelineError(f"{run_dir} holds no cutover timeline ({tl.TIMELINE_FILE}): nothing has been applied "
                               "after the backfill, so the target cannot be ready",
                               "run `ddb2bt catch-up` or `ddb2bt tail` with this --run-dir first")
    return timeline


def _access_patterns(spec: MappingSpec, options: RunOptions) -> Condition:
    """The application's reads: each declared access pattern run on DynamoDB and, translated, on Bigtable
    (`ddb2bt parity`); READY needs every one served and returning the same items."""
    from .parity import check_parity

    found = check_parity(spec, options=options)
    served = [p for p in found.patterns if p.status == "served"]
    different = [p.name for p in served if not p.ok]
    unserved = [p.name for p in found.patterns if p.status != "served"]
    detail = (f"{len(served)} of {len(found.patterns)} pattern(s) compared, {found.cases} case(s): "
              f"{sum(p.same for p in served)} same, {sum(p.different for p in served)} different")
    if unserved:
        detail += f"; not served by Bigtable: {', '.join(unserved)}"
    if different:
        detail += f"; different: {', '.join(different)} (`ddb2bt parity SPEC` shows the items)"
    return Condition("access patterns", found.ok, detail,
                     {"patterns": len(found.patterns), "served": len(served), "cases": found.cases,
                      "different": sum(p.different for p in served)})


def status(run_dir: str, *, lag_threshold_s: float = LAG_THRESHOLD_S, sample: int = PARITY_SAMPLE,
           options: RunOptions = RunOptions(), retry_s: float = 1.0) -> CutoverStatus:
    """READY only when every condition holds, each checked against the source itself (docs/CUTOVER.md):

    * stream: every piece of the tail's change source (the stream's shards) read to its current end by the tail
      (the source read here through its interface, read-only, from the tail's checkpoint: the changes after it
      are counted, with the age of the oldest);
    * dead letters: no change dead letter of the tail or a catch-up left unresolved, and every item the backfill
      dead-lettered deleted since, skipped by the spec, or in Bigtable (each checked now);
    * tail: alive (a heartbeat saved with every page, within ``lag_threshold_s``), or stopped with nothing unread;
    * parity: random keys across the whole table and every key changed since the last check compare equal;
    * access patterns (when the spec declares them): each returns the same items from Bigtable as from DynamoDB.
    """
    from ..mappers.compiler import compile_spec
    from ..mappers.spec import MappingSpec
    from ..pipelines.cutover import letters as change_letters
    from ..pipelines.cutover import timeline as tl
    from ..pipelines.dynamodb.client import ClientSettings, make_client
    from ..pipelines.bigtable.target import probe_target
    from ..pipelines.cutover.parity import check, sample_keys
    from ..pipelines.change_sources import change_source_for
    from ..pipelines.cutover.backlog import read_backlog
    from ..pipelines.cutover.tail import load_state, stopped_since
    from ..pipelines.run.json_files import json_object, read_json
    from apache_beam.io.filesystems import FileSystems

    timeline = _check_run_dir(run_dir)
    now_us = int(time.time() * 1_000_000)
    phases: list[dict[str, Any]] = [{"phase": "backfill", "kind": timeline.backfill, "state": "done",
                                     "applied_up_to": tl.us_to_iso(timeline.start_us)}]
    phases += [{"phase": "catch-up", "export": p.export, "state": "done", "from": tl.us_to_iso(p.from_us),
                "applied_up_to": tl.us_to_iso(p.to_us), "counters": p.counters} for p in timeline.phases]
    conditions: list[Condition] = []
    shards: list[ShardLag] = []
    notes: list[str] = []
    parity = Parity()
    state = load_state(run_dir)
    spec = load_spec(MappingSpec.model_validate(timeline.spec), options) if timeline.spec is not None else None

    # dead letters: counted first, they need nothing but the folder
    unresolved = {}
    for path in change_letters.change_files(run_dir):
        total, left = change_letters.unresolved(path)
        unresolved[path.rsplit("/", 1)[-1]] = left
    left = sum(unresolved.values())
    changes = (f"{left} change dead letter(s) unresolved ({', '.join(f'{n}: {c}' for n, c in unresolved.items() if c)}): "
               "Bigtable does not hold those changes; fix the spec and `ddb2bt redrive FILE SPEC`") if left else ""
    backfill_file = tl.join(run_dir, tl.BACKFILL_LETTERS)
    backfill_left = 0  # the backfill's dead letters: checked below, item by item, once DynamoDB can be read
    backfill_detail = ""
    conditions.append(Condition("dead letters", False, ""))  # its place; filled in below

    if state is None or spec is None or spec.source.table is None:
        why = "the stream tail has not started" if state is None else "the timeline records no spec with a table"
        backfill_left = _count_lines(backfill_file) if FileSystems.exists(backfill_file) else 0
        backfill_detail = f"{backfill_left} backfill dead letter(s) not checked ({why})" if backfill_left else ""
        if backfill_left:
            unresolved[tl.BACKFILL_LETTERS] = backfill_left
        conditions += [Condition("stream", False, f"{why}: the stream cannot be compared with what is applied"),
                       Condition("tail", False, why),
                       Condition("parity", False, f"{why}: nothing compared")]
    else:
        probe_target(spec.target)  # a dead Bigtable fails here, in seconds (the parity's reads would wait 10 min each)
        settings = ClientSettings.from_source(spec.source)
        saved = read_json(tl.join(run_dir, STATUS_FILE), json_object) or {}
        checked = saved.get("checked", {}) if saved.get("stream_arn") == state.stream_arn else {}
        source = change_source_for(spec, timeline.tail_changes)  # the one the tail follows
        backlog = read_backlog(source, state, checked)
        notes += backlog.notes
        oldest = backlog.oldest_unread_us
        behind_s = max(0.0, (now_us - oldest) / 1e6) if oldest is not None else 0.0
        for lag in backlog.shards:
            saved_shard = state.shards.get(lag.shard)
            last = saved_shard.last_record_us if saved_shard is not None else None
            shards.append(ShardLag(lag.shard, lag.tail_done,
                                   max(0.0, (now_us - lag.oldest_unread_us) / 1e6) if lag.oldest_unread_us else 0.0,
                                   tl.us_to_iso(last) if last else None, lag.unread,
                                   tl.us_to_iso(lag.oldest_unread_us) if lag.oldest_unread_us else None, lag.capped))
        more = "at least " if any(lag.capped for lag in backlog.shards) else ""
        if backlog.problems:
            detail = "; ".join(backlog.problems)
        elif backlog.unread or not backlog.complete:
            detail = (f"{more}{backlog.unread} {source.changes_name} the tail has not applied, the oldest from "
                      f"{tl.us_to_iso(oldest) if oldest else '?'} ({behind_s:.1f} s behind)")
        else:
            detail = (f"0 unread {source.changes_name} in {source.name()} ({source.pieces_name}: "
                      f"{len(backlog.shards)}, each read to its end or tip)")
        conditions.append(Condition("stream", backlog.complete and not backlog.unread, detail,
                                    {"unread": backlog.unread, "shards": len(backlog.shards),
                                     "behind_s": round(behind_s, 1), "lower_bound": bool(more)}))

        heartbeat_age = (now_us - state.heartbeat_us) / 1e6
        alive = heartbeat_age <= lag_threshold_s and not stopped_since(run_dir, state)
        drained = backlog.complete and not backlog.unread
        applied = [s.last_record_us for s in state.shards.values() if s.last_record_us]
        # records from before the timeline's end are read and skipped (the earlier phases applied them): never
        # "applied up to" a time before what those phases applied
        phases.append({"phase": "tail", "state": "running" if alive else "stopped",
                       "last_heartbeat_s_ago": round(heartbeat_age, 1),
                       "applied_up_to": tl.us_to_iso(max(*applied, timeline.applied_to_us)) if applied else None,
                       "counters": state.counters})
        conditions.append(Condition("tail", alive or drained, (
            f"alive: last heartbeat {heartbeat_age:.1f} s ago" if alive else
            f"stopped (last heartbeat {heartbeat_age:.0f} s ago) after applying everything the stream holds" if drained
            else f"stopped (last heartbeat {heartbeat_age:.0f} s ago, threshold {lag_threshold_s:.0f} s) with "
            + ("what the stream holds after its position not counted (see stream)" if backlog.problems else
               f"{source.changes_name} unapplied: start `ddb2bt tail` again")), {"heartbeat_s_ago": round(heartbeat_age, 1),
                                                              "alive": alive}))

        compiled = compile_spec(spec, now_ms=timeline.now_ms)
        client = make_client(settings)
        drawn = sample_keys(client, spec.source.table, [name for name in (spec.source.partition_key,
                                                                          spec.source.sort_key) if name], sample)
        parity = check(client, spec.source.table, compiled, spec.target, drawn, backlog.changed_keys, retry_s,
                       backlog.removed)
        counted = (f"{parity.checked} items compared ({parity.random_keys} drawn across the table, "
                   f"{parity.changed_keys} changed since the last check): {parity.matching} match, "
                   f"{parity.absent} deleted since, {parity.unmapped} not mapped by the spec")
        conditions.append(Condition("parity", parity.holds and parity.checked > 0, (
            counted if parity.holds and parity.checked else f"{counted}; nothing to compare (an empty table?)"
            if parity.holds else f"{counted}; {len(parity.mismatches)} differ: {parity.mismatches[0].text}"),
            {"checked": parity.checked, "random": parity.random_keys, "changed": parity.changed_keys,
             "differences": len(parity.mismatches)}))
        key_names = [name for name in (spec.source.partition_key, spec.source.sort_key) if name]
        letter_items, without_item = change_letters.backfill_items(backfill_file, key_names)
        if letter_items or without_item:  # an item deleted since must not be in Bigtable: its letter's image is looked for
            letter_keys = [json.loads(text) for text in letter_items]
            backfill_left, backfill_detail = _backfill_letters(
                check(client, spec.source.table, compiled, spec.target, [], letter_keys, retry_s, letter_items),
                without_item, run_dir)
            unresolved[tl.BACKFILL_LETTERS] = backfill_left  # checked: shown even when 0
        if parity.holds and backlog.complete:  # the next check lists the keys changed after these
            tl.write_json(tl.join(run_dir, STATUS_FILE), {"stream_arn": state.stream_arn, "checked": {
                lag.shard: lag.checked_to for lag in backlog.shards if lag.checked_to}})

    conditions[0] = Condition("dead letters", not left and not backfill_left, "; ".join(
        part for part in (changes, backfill_detail) if part) or "no unresolved dead letter", {
        "unresolved": left + backfill_left, "changes": left, "backfill": backfill_left})
    if spec is not None and spec.access_patterns:
        conditions.append(_access_patterns(spec, options))
    reasons = [f"{c.name}: {c.detail}" for c in conditions if not c.holds]
    return CutoverStatus(run_dir, phases, shards, _dead_letter_counts(run_dir), parity, not reasons, reasons,
                         lag_threshold_s, conditions, unresolved, notes)
