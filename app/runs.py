"""The parts of a migration run around the pipeline: what it will do (for the summary and the ETA), which earlier
run `--resume` continues, its live totals, and how a run that stops or fails early is reconciled.

Used by :mod:`.migrate`; nothing here prints.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from apache_beam.options.pipeline_options import DirectOptions

from ..mappers.analysis.estimates import read_units
from ..pipelines.bigtable.sink import mismatch_error
from ..pipelines.run.checkpoint import (
    CHECKPOINT_FILE,
    Checkpoint,
    ResumeError,
    completed_segments,
    saved_positions,
    spec_hash,
)
from ..pipelines.run.dead_letters import consolidate, kept_in_parts
from ..pipelines.run.metrics import by_reason
from ..pipelines.run.options import concurrent_segments, segments_at_once
from ..pipelines.run.progress import flush_local, progress_dir, read_progress, request_stop, reset
from ..pipelines.run.progress import stop_requested as requested
from ..mappers.index_rows import index_targets
from ..pipelines.source import Source
from ..pipelines.sources import source_for
from .target_diff import diff_target

if TYPE_CHECKING:
    from ..mappers.table import SourceDescription
    from ..mappers.spec import MappingSpec
    from .migrate import MigrateResult, PreparedRun
    from .options import RunOptions

RUNS_ROOT = "runs"
"""Where default run folders go (``runs/<table>-<UTC time>``), relative to the working directory."""


def source_name(spec: MappingSpec) -> str:
    """The source's name (the table, or the export's path)."""
    return source_for(spec).name()


def latest_run(spec_hash: str, root: str = RUNS_ROOT) -> str:
    """The run folder under ``root`` most recently started with this spec (by its checkpoint); ResumeError if none."""

    found = []
    for checkpoint in Path(root).glob(f"*/{CHECKPOINT_FILE}"):
        try:
            saved = json.loads(checkpoint.read_text(encoding="utf-8"))
            started = checkpoint.stat().st_mtime
        except (OSError, ValueError):
            continue
        if isinstance(saved, dict) and saved.get("spec_hash") == spec_hash:
            found.append((started, str(checkpoint.parent)))
    if not found:
        raise ResumeError(f"--resume: no run of this spec under {root}/ to continue",
                          "pass --run-dir RUN_DIR (the folder the run printed)")
    return max(found)[1]


def before_run(spec: MappingSpec, source: Source, options: RunOptions, description: SourceDescription | None,
               run_dir: str, resumable: bool, total_segments: int, dry_run: bool, pipeline_options: Any) -> dict[str, Any]:
    """The PreparedRun fields that say what the run will do: the target read (refused if migrate would refuse it),
    the items to expect and the pieces (scan segments, an export's data files) already stored. A dry run reads
    nothing."""

    found = {"source_description": description, "found_run_dir": bool(options.resume and not options.run_dir)}
    if dry_run:
        return found
    if resumable and options.resume:  # read-only with resume: nothing to resume, another spec, another segment count
        Checkpoint.start(run_dir, spec_hash(spec), total_segments, source.name(), resume=True,
                         export=not source.positions)
    diff = diff_target(spec.target, strict=True, indexes=index_targets(spec))  # a dead or refusing Bigtable fails
    if diff.blocking:  # here, in seconds
        raise mismatch_error(diff.refused or spec.target, diff.comparison)
    done = completed_segments(run_dir) if resumable and options.resume else frozenset()
    scanning = source.positions and options.sample is None
    part_way = len(saved_positions(run_dir)) if scanning and resumable and options.resume else 0
    expected: int | None = options.sample
    basis = "--sample"
    if expected is None:
        expected, basis = source.expected_items(description, total_segments, done, pipeline_options)
    return {**found, "target_diff": diff, "expected_items": expected, "expected_from": basis,
            "segments_done": len(done), "segments_part_way": part_way}


@dataclass(frozen=True)
class ReadPace:
    """How fast the scan may read: the source's read budget applied to its capacity, and what that means in time."""

    budget: float
    """Fraction of the capacity (source.read_budget)."""
    capacity_rcu: float
    provisioned: bool
    """False: on-demand, the capacity is the spec's assumption (source.on_demand_rcu)."""
    segments_in_flight: int
    scan_seconds: float | None
    """A scan of what is left at that rate (from DescribeTable's size), when the size is known."""

    @property
    def rate(self) -> float:
        return self.budget * self.capacity_rcu

    @property
    def per_segment(self) -> float:
        return self.rate / self.segments_in_flight


def read_pace(prepared: PreparedRun) -> ReadPace | None:
    """The scan's pace (None for an export, a sample or a dry run, which read no table by capacity)."""

    source, spec = prepared.source_description, prepared.spec.source
    if source is None or not prepared.scanning:
        return None
    capacity = source.capacity_rcu(spec.on_demand_rcu)
    left_segments = max(1, prepared.total_segments - prepared.segments_done)
    calls = min(concurrent_segments(prepared.pipeline_options, prepared.total_segments), prepared.total_segments)
    in_flight = segments_at_once(calls, left_segments)  # as the scan splits its budget (ScanDynamoDB)
    left = (prepared.total_segments - prepared.segments_done) / prepared.total_segments
    units = read_units(source.size_bytes * left, spec.consistent_read)
    rate = spec.read_budget * capacity
    return ReadPace(spec.read_budget, capacity, bool(source.read_capacity), max(1, in_flight),
                    units / rate if source.size_bytes and rate else None)


# --------------------------------------------------------------------------- live totals and stopping


def live_folder(prepared: PreparedRun) -> str | None:
    """Where a local run keeps its live totals; None for a dry run or a remote runner."""

    return progress_dir(prepared.run_dir) if prepared.direct and not prepared.dry_run else None


def worker_log(prepared: PreparedRun) -> str | None:
    """Where the worker processes of a multi-process local run should write their own output (their start-up
    chatter, their tracebacks of a requested stop); None when the run starts no such processes."""

    if live_folder(prepared) is None:
        return None
    if prepared.pipeline_options.view_as(DirectOptions).direct_running_mode != "multi_processing":
        return None
    return str(Path(prepared.run_dir) / "workers.log")


def reset_live(folder: str | None) -> None:

    reset(folder)


def read_live(folder: str | None) -> dict[str, int]:

    return read_progress(folder)


def stop(folder: str | None) -> None:

    request_stop(folder)


def stop_requested(folder: str | None) -> bool:

    return requested(folder)


def segments_done(run_dir: str) -> int:

    return len(completed_segments(run_dir))


def segments_part_way(run_dir: str) -> int:
    """Scan segments not done whose savepoint says where they go on."""

    return len(saved_positions(run_dir))


def join_dead_letters(path: str) -> tuple[int, str]:
    """The dead letters so far joined into ``path``: (their count, ""); or, when that cannot be written (a full disk),
    (the count the part files hold, why): they stay in the parts, which a resumed run joins again. It said 0 lines."""
    try:
        return consolidate(path), ""
    except Exception as err:  # noqa: BLE001 - the run's own error is what ends it; this is said beside it
        why = (err.strerror if isinstance(err, OSError) else None) or " ".join(str(err).split()) or type(err).__name__
        try:
            return kept_in_parts(path), why
        except Exception:  # noqa: BLE001 - not even readable: the count is unknown, and said so
            return -1, why


def ended_early(prepared: PreparedRun, result: MigrateResult, folder: str | None) -> MigrateResult:
    """The result of a local run that ended before its end, stopped on request or failed (``result.error``):
    what was done (the live totals of every process), its dead letters so far joined into one file, the segments
    stored, and why it ended as its problem. One reconciliation for both ways of ending early."""

    flush_local(folder)  # this process's steps (in_memory, multi_threading) may hold the last half second
    result.counters, result.reasons = by_reason(read_live(folder))
    result.dead_letter_lines, result.dead_letters_unjoined = join_dead_letters(prepared.dead_letter)
    stored = ""
    if prepared.resumable:
        result.segments_done = segments_done(prepared.run_dir)
        stored = (f"{result.segments_done} of {prepared.total_segments} "
                  f"{'scan segments' if prepared.scanning else 'export data files'} stored")
        part_way = segments_part_way(prepared.run_dir) if prepared.scanning else 0
        if part_way:
            stored += (f", {part_way} more stored up to a savepoint (--resume goes on from there, reading again at "
                       "most the pages that were in flight)")
    if result.error is not None:
        result.problems = [result.error.one_line()]
    elif stored:
        result.problems = [f"interrupted: {stored}"]
    else:
        result.problems = ["interrupted before the end (a --sample run keeps no checkpoint: run it again)"]
    return result
