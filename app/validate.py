"""The validate use case: map the source again and compare with what Bigtable holds, as a Beam run of its own.

``prepare`` checks what a run needs, in migrate's order (spec, source, then the target, which
must exist), and writes nothing; ``execute`` runs the compare pass (resumable by scan segment,
in a run folder of its own), then the rows pass (what a single row group cannot decide, and the
optional target scan), joins the differences into one file and reconciles:
items read = compared + not mapped + skipped; with ``--repair``, rows to rewrite = rows written
+ refused, cells to delete = deleted + refused. See docs/VALIDATE.md.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from apache_beam.io.filesystems import FileSystems

from ..mappers.errors import UsageError
from ..mappers.analysis.lints import uses_default_time
from ..mappers.index_rows import index_targets
from ..mappers.validate.compare import times_from_items
from ..pipelines.run import checkpoint as ckpt
from ..pipelines.cutover import timeline as tl
from ..pipelines.validate import files
from ..pipelines.bigtable.sink import Destination
from ..pipelines.run.dead_letters import check_dead_letter_destination
from ..pipelines.run.json_files import json_object, read_json
from ..pipelines.run.options import concurrent_segments
from ..pipelines.run.progress import progress_dir, read_progress, reset
from ..pipelines.sources import source_for
from ..pipelines.bigtable.target import describe_target, probe_target
from ..pipelines.validate.files import discard_unfinished, finished_parts
from ..pipelines.validate.pipeline import build_compare_pass
from ..pipelines.validate.rows import LAUNCHER_BYTES, build_rows_pass, candidate_bytes, resolve_here
from ..pipelines.run.local_runner import new_pipeline
from .assembly import default_run_dir, runner_for, segments
from .context import Step, announce, load_spec, unfinished, wait_for, with_source_keys
from .migrate import pipeline_stages
from .options import FLOW_NAMES, RUN_OPTIONS, RunOptions
from .runs import source_name

__all__ = ["PreparedValidation", "ValidateResult", "execute", "prepare", "reconcile", "run_now_ms", "snapshot_time",
           "times_from_items", "validate"]

if TYPE_CHECKING:
    from ..mappers.spec import MappingSpec

DIFFERENCES_FILE = "differences.jsonl"
DECODE_EVERY = 256
"""Of the items whose cells all match, one in this many is read back through the decoder (--decode-all: every one)."""
ROWS_PASS_DIR = "rows"
SHOWN = 20


@dataclass(frozen=True)
class PreparedValidation:
    """A validation that passed every check, and what it will do."""

    spec: Any
    options: RunOptions
    pipeline_options: Any
    run_dir: str
    target: str
    """Where the rows are read (emulator or Cloud Bigtable, project/instance/table)."""
    runner: str
    direct: bool
    dry_run: bool
    scanning: bool
    total_segments: int
    repair: bool
    target_scan: bool
    now_ms: int
    item_count: int = 0
    """DescribeTable's item count (hours stale; 0 when unknown), which sizes a random sample's segments."""
    decode_every: int = DECODE_EVERY
    """Items whose cells differ are all read back through the decoder; of the others, one in this many."""
    after_us: int | None = None
    """The validated snapshot's time (``--as-of``): cells that changed after it are reported apart, not as
    differences (docs/VALIDATE.md, "Changes after the snapshot")."""
    snapshot: str = ""
    """Where ``after_us`` comes from, for the summary."""
    as_of: str | None = None
    """``--as-of`` as given (a time, or a run folder), for the command that resumes this validation."""
    now_unknown: bool = False
    """Cells of the spec take the run's "now" (no migration_time), which this validation does not know (no run folder
    to take it from): such cells show as differences."""
    source_description: Any = None
    """DescribeTable boiled down (None for an export or a dry run): a local run's scan takes its read rate from it."""

    @property
    def source(self) -> str:
        return source_name(self.spec)

    @property
    def compare_after_us(self) -> int | None:
        """The snapshot time the comparison excuses changes after: none when no cell of the spec takes its time
        from its item, since then no timestamp tells a change after the snapshot (docs/VALIDATE.md, "Limits")."""
        return self.after_us if times_from_items(self.spec) else None

    @property
    def differences(self) -> str:

        return str(FileSystems.join(self.run_dir, DIFFERENCES_FILE))

    @property
    def dead_letter(self) -> str:
        """Where the repairs Bigtable refuses go."""

        return self.options.dead_letter or str(FileSystems.join(self.run_dir, "dead_letters.jsonl"))

    def settings(self) -> dict[str, Any]:
        """What a resumed validation must do the same way."""
        return {"repair": self.repair, "target_scan": self.target_scan, "sample": self.options.sample,
                "after_us": self.after_us}


@dataclass
class ValidateResult:
    """How a validation ended: differences by kind (the whole run, every attempt), the first ones, the figures."""

    prepared: PreparedValidation
    state: str
    counts: dict[str, int] = field(default_factory=dict)
    first: list[dict[str, Any]] = field(default_factory=list)
    """The first differences of the file, as its JSON lines."""
    totals: dict[str, int] = field(default_factory=dict)
    """items_read, items_compared, not_mapped, skipped, rows_compared, rows_found, cells_expected (before
    de-duplication), cells_matched, repair_rows, repair_cells, repair_deletes: over every attempt of the run."""
    counters: dict[str, int] = field(default_factory=dict)
    """This attempt's Beam counters (both passes)."""
    problems: list[str] = field(default_factory=list)
    stages: tuple[str, ...] = ()
    after_snapshot: dict[str, int] = field(default_factory=dict)
    """By kind, what changed after the validated snapshot: reported apart, not differences."""

    @property
    def differences(self) -> int:
        return sum(self.counts.values())

    @property
    def finished(self) -> bool:
        return self.state != "DRY_RUN"

    @property
    def ok(self) -> bool:
        """Nothing differs and everything adds up."""
        return self.finished and not self.counts and not self.problems

    def resume_command(self, spec_path: str | None = None) -> str:
        """The command that continues this validation: the same options and flags, ``--resume --run-dir``."""
        return resume_command(self.prepared, spec_path)


def resume_command(p: PreparedValidation, spec_path: str | None = None) -> str:
    """The command that continues the validation ``p`` (finished, stopped or failed): ``--resume --run-dir``."""
    flags = ["--repair"] * p.repair + ["--target-scan"] * p.target_scan + ["--decode-all"] * (p.decode_every == 1)
    flags += ["--as-of", p.as_of] if p.as_of is not None else []
    return p.options.go_on("validate", spec_path or "SPEC", p.run_dir, *flags, without=("sample",), resume=True)


def prepare(spec: MappingSpec | str | Path, options: RunOptions = RunOptions(), *, repair: bool = False,
            target_scan: bool = False, decode_all: bool = False, now_ms: int | None = None,
            as_of: str | None = None, where: Step | None = None) -> PreparedValidation:
    """Check everything a validation needs, source before target, writing nothing; UsageError/ServiceError if not.

    ``where`` is told first, before anything is read, where the rows are read. ``as_of``: the
    validated snapshot, an ISO-8601 time or the run folder of the migration (its cutover
    timeline, else its backfill's start); see :func:`snapshot_time`.
    """


    spec = load_spec(spec, options)
    announce(where, f"validate {source_name(spec)} against {describe_target(spec.target)}")
    if options.no_wait:
        raise UsageError("--no-wait: validate waits for its job, whose files it joins at the end",
                         "run it without --no-wait")
    if not repair:
        _refuse_writer_options(options)
    if options.sample is not None and (options.resume or target_scan):
        raise UsageError("--sample compares a random sample: it has no segments to resume and cannot tell which "
                         "rows no item maps to", "drop --sample, or --resume/--target-scan")
    if options.resume and not options.run_dir:
        raise ckpt.ResumeError("--resume needs the folder of the validation to continue", "pass --run-dir RUN_DIR")
    source = source_for(spec)
    run = runner_for(spec, options, source=source)
    pipeline_options, runner, dry_run, direct = run.pipeline_options, run.name, run.dry_run, run.direct
    run_dir = options.run_dir or default_run_dir(spec.target.table, "validate")
    scanning = source.positions and options.sample is None
    total = options.total_segments or spec.source.total_segments
    item_count = 0
    description = None
    after_us, snapshot = None, ""
    if as_of is not None and not _is_folder(as_of):
        after_us, snapshot = snapshot_time(as_of, spec)  # a time: refused before anything is read if it does not parse
    if not dry_run:
        description = source.describe()  # the source is checked before the target
        spec = with_source_keys(spec, description)
        if as_of is not None and after_us is None:
            after_us, snapshot = snapshot_time(as_of, spec)
            if now_ms is None:  # the run's own "now": its cells at "now" are expected where it wrote them
                now_ms = run_now_ms(as_of, spec)
        item_count = description.item_count if description else 0
        fixed = source.check(pipeline_options)  # an export's damaged files: refused before anything is read
        probe_target(spec.target, must_exist=True)  # a dead Bigtable or a missing table fails here, in seconds
        for index, index_target in index_targets(spec):  # an index in a table of its own: the same, not at build
            probe_target(index_target, must_exist=True, holds=index)
        total, _assumed = segments(source, options, spec, description, fixed, run_dir=run_dir, resume=options.resume)

    now_unknown = now_ms is None and spec.migration_time is None and any(map(uses_default_time, spec.entities))
    return PreparedValidation(
        spec=spec, options=options, pipeline_options=pipeline_options, run_dir=run_dir,
        target=describe_target(spec.target), runner=runner, direct=direct, dry_run=dry_run, scanning=scanning,
        total_segments=total or 1, repair=repair, target_scan=target_scan,
        now_ms=now_ms if now_ms is not None else int(time.time() * 1000), item_count=item_count,
        decode_every=1 if decode_all else DECODE_EVERY, after_us=after_us, snapshot=snapshot, as_of=as_of,
        now_unknown=now_unknown, source_description=description)


def execute(prepared: PreparedValidation) -> ValidateResult:
    """Run a prepared validation to its end and reconcile it."""


    p, spec, options = prepared, prepared.spec, prepared.options
    completed: frozenset[int] = frozenset()
    now_ms = p.now_ms
    if not p.dry_run:
        files.start_marker(p.run_dir, p.settings(), options.resume)
        if p.scanning:
            checkpoint = ckpt.Checkpoint.start(p.run_dir, "validate-" + ckpt.spec_hash(spec), p.total_segments,
                                               spec.source.table, options.resume, now_ms=p.now_ms)
            completed = checkpoint.completed() if options.resume else frozenset()
            now_ms = checkpoint.now_ms or now_ms  # "now" decides default timestamps and TTL: the same for every attempt
        if options.resume:
            files.discard_unfinished(p.run_dir, completed)
        if p.repair:
            check_dead_letter_destination(p.dead_letter, resume=options.resume)
    sample = None
    if options.sample is not None:
        sample = [] if p.dry_run else source_for(spec).random_sample(options.sample, item_count=p.item_count)
    before = files.totals(p.run_dir) if options.resume else {}
    live = _live_folder(p)
    reset(live)  # this attempt's live totals only

    pipeline = new_pipeline(p.pipeline_options)
    # as migrate's: on this machine the scan's read rate comes from the description made while preparing, not from a
    # second DescribeTable before its first page; a remote runner's workers start later, and ask again
    source = source_for(spec).described(p.source_description) if p.direct else None
    build_compare_pass(pipeline, spec, run_dir=p.run_dir, now_ms=now_ms, total_segments=p.total_segments,
                       completed=completed, sample=sample, repair=p.repair, collect_keys=p.target_scan,
                       dead_letter=p.dead_letter if p.repair else None, flow=options.flow_control(),
                       segments_in_flight=concurrent_segments(p.pipeline_options, p.total_segments),
                       decode_every=p.decode_every, after_us=p.compare_after_us, progress_dir=live, source=source)
    if p.dry_run:
        return ValidateResult(p, "DRY_RUN", stages=pipeline_stages(pipeline))
    state, counters = _run(pipeline)
    rows_dir = str(FileSystems.join(p.run_dir, ROWS_PASS_DIR))
    if str(state).endswith("DONE"):
        state, more = _rows_pass(p, rows_dir)
        counters = {name: counters.get(name, 0) + more.get(name, 0) for name in set(counters) | set(more)}
    joined = files.join_differences([p.run_dir, rows_dir], p.differences, SHOWN)
    totals = files.totals(p.run_dir)
    for name, value in files.totals(rows_dir).items():
        totals[name] = totals.get(name, 0) + value
    if p.repair:
        from ..pipelines.run.dead_letters import consolidate

        consolidate(p.dead_letter)
    attempt = {name: totals.get(name, 0) - before.get(name, 0) for name in totals}
    problems = unfinished(str(state)) + reconcile(totals, attempt, counters, sample=sample is not None)
    return ValidateResult(p, str(state), joined.counts, joined.first, totals, counters, problems,
                          after_snapshot=joined.after_snapshot)


def progress(prepared: PreparedValidation) -> dict[str, int]:
    """What the validation has done so far: the figures of the parts it has finished (all attempts: items_compared,
    differences, …), for a scan ``segments_done``, and ``items_read`` as soon as the map step has the items (a local
    run's live totals, the files migrate's run keeps: :mod:`ddb2bt.pipelines.run.progress`), not only once their
    part is finished. Cheap enough to poll; a remote run folder gives the finished parts' figures."""

    live = read_progress(_live_folder(prepared))
    try:
        found = files.totals(prepared.run_dir)
        if prepared.scanning:
            found["segments_done"] = len(ckpt.completed_segments(prepared.run_dir))
    except (OSError, ValueError):  # a part being written while read: the next poll reads it whole
        found = {}
    # the live count is this attempt's, the parts' every attempt's: the larger never says more than was read
    found["items_read"] = max(found.get("items_read", 0), live["items_read"])
    return found


def _live_folder(prepared: PreparedValidation) -> str | None:
    """Where a local validation keeps its live totals (``<run dir>/progress``); None for a dry run or a remote
    runner."""
    return progress_dir(prepared.run_dir) if prepared.direct and not prepared.dry_run else None


def validate(spec: MappingSpec | str | Path, options: RunOptions = RunOptions(), *, repair: bool = False,
             target_scan: bool = False, decode_all: bool = False, now_ms: int | None = None,
             as_of: str | None = None) -> ValidateResult:
    """prepare + execute, for callers with nothing to show in between (demo, benchmarks, tests)."""
    return execute(prepare(spec, options, repair=repair, target_scan=target_scan, decode_all=decode_all,
                           now_ms=now_ms, as_of=as_of))


def snapshot_time(as_of: str, spec: Any) -> tuple[int, str]:
    """(microseconds, where from) of the snapshot ``as_of`` names: an ISO-8601 time, or a migration's run folder.

    From a run folder: the time up to which its cutover timeline has applied every change (the
    backfill's start before any catch-up; `ddb2bt catch-up` moves it on), else, with no timeline
    yet, its backfill's start (a scan's stored "now", an export's exportTime): the newest time up
    to which the target is known to hold the source's changes.
    """

    if not _is_folder(as_of):
        try:
            micros = tl.iso_to_us(as_of)
        except ValueError:
            raise UsageError(f"--as-of {as_of!r} is neither an ISO-8601 time nor a run folder",
                             "give a time such as 2025-01-01T12:00:00Z, or the --run-dir of the migration") from None
        return micros, f"--as-of {tl.us_to_iso(micros)}"
    timeline = tl.peek(as_of)
    if timeline is not None:
        return timeline.applied_to_us, (f"{as_of}: its timeline applied every change up to "
                                        f"{tl.us_to_iso(timeline.applied_to_us)}")
    backfill = _backfill(as_of, spec)
    return backfill.start_us, f"{as_of}: its backfill, {backfill.detail}"


def _backfill(run_dir: str, spec: Any) -> tl.Backfill:
    """The migration in ``run_dir``; one that ran with another spec (a redrive's fixed one, say) is refused with what
    validate can do instead (the timeline's own words are the catch-up's: 'catch up with the backfill's own spec')."""
    try:
        return tl.find_backfill(run_dir, spec)
    except tl.TimelineError:
        saved = read_json(tl.join(run_dir, ckpt.CHECKPOINT_FILE), json_object) or {}
        if saved.get("now_ms") is None or saved.get("spec_hash") == ckpt.spec_hash(spec):
            raise
        start = tl.us_to_iso(int(saved["now_ms"]) * 1000)
        raise UsageError(f"--as-of {run_dir}: that migration ran with another spec than this one",
                         f"validate with the spec it ran with, or give the time it started: --as-of {start}") from None


def run_now_ms(run_dir: str, spec: Any) -> int:
    """The "now" the migration in ``run_dir`` gave cells without a time of their own (and TTL): its timeline's,
    else its backfill's. Validating ``--as-of`` that run computes the expected cells at it, so that they match."""

    timeline = tl.peek(run_dir)
    return timeline.now_ms if timeline is not None else _backfill(run_dir, spec).now_ms


def _is_folder(as_of: str) -> bool:
    return "://" in as_of or Path(as_of).is_dir()


def _refuse_writer_options(options: RunOptions) -> None:
    """Without --repair validate writes nothing: the writer's options and --dead-letter would be ignored."""

    for option in RUN_OPTIONS:
        if (option.name in FLOW_NAMES or option.name == "dead_letter") and getattr(options, option.name) is not None:
            raise UsageError(f"{option.flags[0]} applies to the rewrites of --repair; without it validate writes "
                             "nothing", f"add --repair or drop {option.flags[0]}")


def _run(pipeline: Any) -> tuple[str, dict[str, int]]:
    state, counters, _lines = wait_for(pipeline.run())
    return state, counters


def _rows_pass(p: PreparedValidation, rows_dir: str) -> tuple[str, dict[str, int]]:
    """The second pass over the first one's files; fresh each attempt (its own files are replaced).

    Without the target scan and with few candidates it runs here, not as a Beam job.
    """


    discard_unfinished(rows_dir, frozenset())
    stale = [path for folder in ("differences", "stats") for path in finished_parts(rows_dir, folder)]
    if stale:
        FileSystems.delete(stale)
    if not p.target_scan:
        size = candidate_bytes(p.run_dir)
        if size == 0:
            return "DONE", {}
        if size <= LAUNCHER_BYTES:
            return "DONE", resolve_here(p.run_dir, rows_dir, Destination.from_target(p.spec.target), p.repair,
                                        p.compare_after_us)
    pipeline = new_pipeline(p.pipeline_options)
    if not build_rows_pass(pipeline, p.spec, run_dir=p.run_dir, rows_dir=rows_dir, repair=p.repair,
                           target_scan=p.target_scan, after_us=p.compare_after_us):
        return "DONE", {}
    return _run(pipeline)


def reconcile(totals: dict[str, int], attempt: dict[str, int], counters: dict[str, int], *,
              sample: bool) -> list[str]:
    """What does not add up, over the whole run (``totals``) and this attempt (``attempt``, ``counters``)."""
    t = totals
    problems = []
    accounted = t.get("items_compared", 0) + t.get("not_mapped", 0) + t.get("skipped", 0)
    if t.get("items_read", 0) != accounted:
        problems.append(f"items read ({t.get('items_read', 0)}) != compared + not mapped + skipped ({accounted})")
    if not sample and counters.get("items_read", 0) != attempt.get("items_read", 0):
        problems.append(f"the source gave {counters.get('items_read', 0)} items, the comparison saw "
                        f"{attempt.get('items_read', 0)}")
    if t.get("rows_found", 0) and t.get("cells_expected", 0) and not t.get("cells_matched", 0):
        problems.append(f"not one expected cell matched in the {t['rows_found']} rows found: the target holds other "
                        "cells than these items map to (another run's \"now\" or spec?), so nothing was validated")
    if counters.get("export_count_mismatch"):
        problems.append(f"{counters['export_count_mismatch']} export count mismatch(es): the export is incomplete")
    written = counters.get("rows_written", 0) + counters.get("index_rows_written", 0) + counters.get("write_failures", 0)
    if attempt.get("repair_rows", 0) != written:
        problems.append(f"repair: {attempt.get('repair_rows', 0)} rows to rewrite, {written} written or refused")
    deleted = counters.get("cells_deleted", 0) + counters.get("delete_failures", 0)
    if attempt.get("repair_deletes", 0) != deleted:
        problems.append(f"repair: {attempt.get('repair_deletes', 0)} cells to delete, {deleted} deleted or refused")
    refused = counters.get("write_failures", 0) + counters.get("delete_failures", 0)
    if refused:
        problems.append(f"repair: Bigtable refused {refused} rewrites or deletes (see the dead letters)")
    return problems
