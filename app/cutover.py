"""The cutover use cases: catch up from incremental exports, tail the stream, tell when the target is ready.

All three work on the run folder of the backfill (``ddb2bt migrate --run-dir R``), which holds one
timeline (:mod:`ddb2bt.pipelines.timeline`). The phases run one after the other: backfill → any
number of catch-up exports, each starting exactly where the timeline ends → the stream tail, from
where the timeline ends, until the user cuts over. docs/CUTOVER.md explains why the result is the
spec applied to the table's final state. Nothing here prints; results are typed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..mappers.errors import UsageError
from .context import load_spec, unfinished, wait_for
from .options import RunOptions

if TYPE_CHECKING:
    from ..mappers.spec import MappingSpec
    from ..pipelines.timeline import Timeline

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
    from ..pipelines.timeline import TimelineError, us_to_iso

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


def catch_up(spec: MappingSpec | str | Path, export: str, options: RunOptions = RunOptions()) -> CatchUpResult:
    """Apply one incremental export as a batch Beam job, then advance the timeline (only if it reconciled)."""
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    from ..pipelines import timeline as tl
    from ..pipelines.aws import s3_beam_args
    from ..pipelines.bigtable_sink import Destination
    from ..pipelines.change_sink import ApplyChangesFn
    from ..pipelines.dead_letters import DeadLetter, check_dead_letter_destination, write_part
    from ..pipelines.export_source import ExportError, file_problem, use_options
    from ..pipelines.incremental_export import ReadIncrementalExport, read_incremental_manifest
    from ..pipelines.target import probe_target

    run_dir = _need_run_dir(options)
    spec = load_spec(spec, options)
    pipeline_options = PipelineOptions(s3_beam_args(options.beam_args, spec.source))
    use_options(pipeline_options)
    timeline = tl.load(run_dir, spec)
    if timeline.tail_started_us is not None:
        raise tl.TimelineError(f"the stream tail of {run_dir} has started; catch-up exports no longer apply",
                               "keep `ddb2bt tail` running (it continues where it stopped)")
    if timeline.backfill == "scan":
        raise tl.TimelineError(SCAN_AND_EXPORTS.format(run_dir=run_dir), SCAN_AND_EXPORTS_HINT)
    manifest = read_incremental_manifest(export)
    check_window(timeline, manifest.from_us, manifest.to_us, f"export {manifest.export_id}")
    problems = [problem for data_file in manifest.files if (problem := file_problem(data_file))]
    if problems:
        raise ExportError(f"the export in {manifest.export_dir} is damaged: {'; '.join(problems)}",
                          "copy the export again; nothing was written")
    probe_target(spec.target, must_exist=True)
    dead_letter = options.dead_letter or tl.join(run_dir, f"catch-up-{manifest.export_id}.dead_letters.jsonl")
    check_dead_letter_destination(dead_letter, resume=True)  # a catch-up run again continues its own file

    started = time.monotonic()
    pipeline = beam.Pipeline(options=pipeline_options)
    read = pipeline | "ReadIncrementalExport" >> ReadIncrementalExport(manifest)
    _ = read["batches"] | "Apply" >> beam.ParDo(ApplyChangesFn(
        Destination.from_target(spec.target), spec.model_dump(by_alias=True), timeline.now_ms, dead_letter,
        options.flow_control()))
    _ = (read["count_mismatch"]
         | "MismatchLetters" >> beam.Map(lambda r: DeadLetter(None, "source", f"export count mismatch: {r}").to_json())
         | "PersistMismatches" >> beam.Map(lambda line: write_part(dead_letter, [line])))
    state, counters, lines = wait_for(pipeline.run(), dead_letter)
    outcome = CatchUpResult(run_dir, manifest.export_id, manifest.from_us, manifest.to_us, state,
                            {k: counters.get(k, 0) for k in (
                                "changes_read", "changes_applied", "changes_dead_lettered", "changes_skipped",
                                "cells_set", "cells_deleted", "export_count_mismatch")},
                            dead_letter, lines, seconds=time.monotonic() - started)
    outcome.problems = unfinished(state) + reconcile_changes(outcome.counters, manifest.item_count)
    if outcome.ok:
        timeline.phases.append(tl.Phase(manifest.export_id, manifest.from_us, manifest.to_us, outcome.counters,
                                        int(time.time() * 1_000_000)))
        timeline.applied_to_us = manifest.to_us
        timeline.spec = spec.model_dump(mode="json", by_alias=True)
        tl.save(run_dir, timeline)
    return outcome


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
        problems.append(f"{c['export_count_mismatch']} export count mismatch(es): see the dead-letter file")
    return problems


def describe_timeline(timeline: Timeline) -> list[str]:
    from ..pipelines.timeline import us_to_iso

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

    @property
    def ok(self) -> bool:
        return not self.problems


def tail(spec: MappingSpec | str | Path, options: RunOptions = RunOptions(), *, until_idle_s: float | None = None,
         max_seconds: float | None = None, poll_s: float = 1.0) -> TailResult:
    """Follow the table's stream from where the timeline ends until stopped (Ctrl-C, or the given limits)."""
    from ..mappers.compiler import compile_spec
    from ..pipelines import timeline as tl
    from ..pipelines.bigtable_sink import Destination
    from ..pipelines.change_sink import ChangeApplier
    from ..pipelines.dead_letters import consolidate
    from ..pipelines.dynamodb_client import ClientSettings, make_client
    from ..pipelines.stream_tail import TailRun, make_streams_client
    from ..pipelines.target import probe_target

    run_dir = _need_run_dir(options)
    spec = load_spec(spec, options)
    if spec.source.table is None:
        raise UsageError("the tail reads the table's stream: the spec needs source.table",
                         "name the table in source.table (an export spec can keep source.export for the backfill)")
    timeline = tl.load(run_dir, spec)
    probe_target(spec.target, must_exist=True)
    settings = ClientSettings.from_source(spec.source)
    dynamodb = make_client(settings)
    streams = make_streams_client(settings)
    applier = ChangeApplier(Destination.from_target(spec.target), compile_spec(spec, now_ms=timeline.now_ms),
                            options.flow_control())
    dead_letter = options.dead_letter or tl.join(run_dir, "tail.dead_letters.jsonl")
    run = TailRun(run_dir, spec.source.table, dynamodb, streams, applier, dead_letter, until_idle_s, max_seconds, poll_s)
    started = time.monotonic()
    try:
        state = run.start(timeline.applied_to_us)
        if timeline.tail_started_us is None:
            timeline.tail_started_us = int(time.time() * 1_000_000)
            timeline.spec = spec.model_dump(mode="json", by_alias=True)
            tl.save(run_dir, timeline)
        state = run.run(state)
    finally:
        applier.close()
        lines = consolidate(dead_letter)
    counters = run.outcome.counters()
    return TailResult(run_dir, counters, {k: vars(v) for k, v in state.shards.items()}, dead_letter, lines,
                      reconcile_changes(counters), time.monotonic() - started)


# --------------------------------------------------------------------------- cutover-status

LAG_THRESHOLD_S = 30.0
PARITY_SAMPLE = 20


@dataclass
class ShardLag:
    shard: str
    done: bool
    behind_s: float
    last_record: str | None


@dataclass
class Parity:
    checked: int = 0
    matching: int = 0
    absent: int = 0
    """Items deleted since: nothing left to compare in a shared row (their cells' deletion is exact by construction)."""
    mismatches: list[str] = field(default_factory=list)

    @property
    def holds(self) -> bool:
        return not self.mismatches


@dataclass
class CutoverStatus:
    run_dir: str
    phases: list[dict]
    """Each phase: name, state, what it applied up to, its counters."""
    shards: list[ShardLag]
    dead_letters: dict[str, int]
    parity: Parity
    ready: bool
    reasons: list[str]
    """Why it is not ready (empty when ready)."""
    lag_threshold_s: float

    def to_json(self) -> dict:
        from dataclasses import asdict

        data = asdict(self)
        data["parity"]["holds"] = self.parity.holds
        return data


def _count_lines(path: str) -> int:
    from apache_beam.io.filesystems import FileSystems

    with FileSystems.open(path) as handle:
        return sum(1 for line in handle.read().splitlines() if line.strip())


def _dead_letter_counts(run_dir: str) -> dict[str, int]:
    from apache_beam.io.filesystems import FileSystems

    from ..pipelines.timeline import join

    found = FileSystems.match([join(run_dir, "*dead_letters.jsonl")])[0].metadata_list
    return {meta.path.rsplit("/", 1)[-1]: _count_lines(meta.path) for meta in sorted(found, key=lambda m: m.path)}


def parity_check(spec: MappingSpec, now_ms: int, keys: list[dict], retry_s: float = 1.0) -> Parity:
    """Read each item now (consistent read) and check that Bigtable holds exactly its cells in its row.

    Cells of other items folded into the same row are left out of the comparison. A mismatch is
    checked once more after ``retry_s`` (the item may have changed between the two reads).
    """
    from ..mappers.attrvalue import to_export_json
    from ..mappers.compiler import compile_spec
    from ..mappers.results import MappedRow
    from ..pipelines.bigtable_read import read_cells
    from ..pipelines.dynamodb_client import ClientSettings, make_client

    compiled = compile_spec(spec, now_ms=now_ms)
    client = make_client(ClientSettings.from_source(spec.source))
    parity = Parity()

    def compare(key: dict) -> str | None:
        item = client.get_item(TableName=spec.source.table, Key=key, ConsistentRead=True).get("Item")
        if item is None:
            return "absent"
        result = compiled.map_item(item)
        if not isinstance(result, MappedRow):
            return None  # dead-lettered or skipped: nothing expected in Bigtable
        found = {(c.family, c.qualifier, c.timestamp_micros): c.value
                 for _key, cells in read_cells(spec.target, [result.row_key]) for c in cells}
        missing = [c for c in result.cells if found.get((c.family, c.qualifier, c.timestamp_micros)) != c.value]
        if missing:
            cell = missing[0]
            return (f"item {to_export_json(key)}: {len(missing)} of its {len(result.cells)} cells differ in row "
                    f"{result.row_key!r}, e.g. {cell.family}:{cell.qualifier!r} at {cell.timestamp_micros}")
        return None

    for key in keys:
        verdict = compare(key)
        if verdict not in (None, "absent"):
            time.sleep(retry_s)
            verdict = compare(key)
        parity.checked += 1
        if verdict == "absent":
            parity.absent += 1
        elif verdict is None:
            parity.matching += 1
        else:
            parity.mismatches.append(verdict)
    return parity


def status(run_dir: str, *, lag_threshold_s: float = LAG_THRESHOLD_S, sample: int = PARITY_SAMPLE,
           options: RunOptions = RunOptions()) -> CutoverStatus:
    """Where each phase stands, the stream lag per shard, dead letters, a parity sample; ready or not, and why."""
    from ..mappers.spec import MappingSpec
    from ..pipelines import timeline as tl
    from ..pipelines.stream_tail import load_state

    timeline = tl.peek(run_dir)
    if timeline is None:
        raise tl.TimelineError(f"{run_dir} has no cutover timeline yet",
                               "run `ddb2bt catch-up` or `ddb2bt tail` with this --run-dir first")
    now_us = int(time.time() * 1_000_000)
    phases: list[dict[str, Any]] = [{"phase": "backfill", "kind": timeline.backfill, "state": "done",
               "applied_up_to": tl.us_to_iso(timeline.start_us)}]
    phases += [{"phase": "catch-up", "export": p.export, "state": "done", "from": tl.us_to_iso(p.from_us),
                "applied_up_to": tl.us_to_iso(p.to_us), "counters": p.counters} for p in timeline.phases]
    reasons: list[str] = []
    shards: list[ShardLag] = []
    state = load_state(run_dir)
    parity = Parity()
    if state is None:
        reasons.append("the stream tail has not started")
    else:
        heartbeat_age = (now_us - state.heartbeat_us) / 1e6
        applied = [s.last_record_us for s in state.shards.values() if s.last_record_us]
        phases.append({"phase": "tail", "state": "running" if heartbeat_age <= lag_threshold_s else "stopped",
                       "last_heartbeat_s_ago": round(heartbeat_age, 1),
                       "applied_up_to": tl.us_to_iso(max(applied)) if applied else None, "counters": state.counters})
        if heartbeat_age > lag_threshold_s:
            reasons.append(f"the tail has not reported for {heartbeat_age:.0f} s (threshold {lag_threshold_s:.0f} s): "
                           "is `ddb2bt tail` running?")
        for shard_id, saved in sorted(state.shards.items()):
            shards.append(ShardLag(shard_id, saved.done, saved.behind_us / 1e6,
                                   tl.us_to_iso(saved.last_record_us) if saved.last_record_us else None))
        lagging = [s for s in shards if not s.done and s.behind_s > lag_threshold_s]
        if lagging:
            reasons.append(f"{len(lagging)} shard(s) lag more than {lag_threshold_s:.0f} s (worst "
                           f"{max(s.behind_s for s in lagging):.0f} s)")
        if timeline.spec is not None and state.recent:
            spec = load_spec(MappingSpec.model_validate(timeline.spec), options)
            parity = parity_check(spec, timeline.now_ms, state.recent[-sample:])
            if not parity.holds:
                reasons.append(f"parity: {len(parity.mismatches)} of {parity.checked} recently changed items differ")
    dead = _dead_letter_counts(run_dir)
    return CutoverStatus(run_dir, phases, shards, dead, parity, not reasons, reasons, lag_threshold_s)
