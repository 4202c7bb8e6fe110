"""One timeline per run folder: the backfill's start, what the catch-up applied up to, the stream tail's position.

Files in the run folder (local, gs:// or s3://, through Beam's FileSystems; local files are replaced
atomically, so a kill -9 never leaves half a file)::

    checkpoint.json    the scan backfill's (pipelines/run/checkpoint.py): its "now", segments; start = that now
    dead_letters.jsonl written when a backfill ends (an export backfill's only trace in the folder)
    cutover.json       this module: backfill start, applied windows, the tail's start   (written by the launcher)
    tail.json          the stream tail's per-shard positions (pipelines/cutover/tail.py)

The backfill's start time ``T0`` is the export's ``exportTime`` for a full-export backfill (a
point-in-time snapshot) and the run's stored "now" for a scan (taken before the first page is read,
so no change after it is missed). Catch-up exports must continue the timeline exactly where it ends.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from typing import Any

from ...mappers.errors import UsageError
from ...mappers.units import iso_to_micros as iso_to_us, micros_to_iso as us_to_iso  # noqa: F401 - the cutover's names
from ..run import checkpoint as ckpt
from ..run.dead_letters import create_private
from ..run.json_files import read_json
from ..sources import source_for

TIMELINE_FILE = "cutover.json"
BACKFILL_LETTERS = "dead_letters.jsonl"


class TimelineError(UsageError):
    """The run folder's timeline does not allow this phase (a gap, an overlap, an unfinished backfill)."""


def join(*parts: str) -> str:
    from apache_beam.io.filesystems import FileSystems

    return FileSystems.join(*parts)


def write_json(path: str, data: Any) -> None:
    """Write ``data`` as JSON; a local file is replaced atomically (written aside, then renamed), mode 0600: tail.json
    holds the keys of the items changed last, user data like the dead letters and the savepoints."""
    text = json.dumps(data, indent=2, sort_keys=True).encode()
    if "://" not in path:
        aside = f"{path}.{os.getpid()}.tmp"
        with create_private(aside) as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(aside, path)
        return
    from apache_beam.io.filesystems import FileSystems

    with FileSystems.create(path) as handle:
        handle.write(text)


@dataclass
class Phase:
    """One applied catch-up export."""

    export: str
    from_us: int
    to_us: int
    counters: dict[str, int]
    finished_at_us: int


@dataclass
class Timeline:
    """What has been applied to the target, in order."""

    backfill: str
    """"scan" or "export"."""
    start_us: int
    """T0: the backfill's snapshot time (export) or start (scan)."""
    now_ms: int
    """The "now" every phase compiles the spec with (the backfill's), so default timestamps match."""
    applied_to_us: int
    """Every change before this time is applied (T0 before any catch-up)."""
    phases: list[Phase] = field(default_factory=list)
    tail_started_us: int | None = None
    tail_changes: str | None = None
    """Where the tail's change source is (:func:`~ddb2bt.pipelines.change_sources.change_source_for`'s place; None:
    the table's stream), so that `cutover-status` reads the source the tail follows."""
    spec: dict[str, Any] | None = None
    """The spec the phases apply (targets settled), so that `cutover-status` needs only the run folder."""
    table: dict[str, Any] | None = None
    """The source table as the backfill's full export names it (``arn``, ``table_id``): every catch-up export
    must be of this table (a table deleted and re-created under the same name has another tableId)."""

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        if data["tail_changes"] is None:  # the table's stream: the file an earlier ddb2bt also reads
            del data["tail_changes"]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Timeline:
        data = dict(data)
        data["phases"] = [Phase(**phase) for phase in data.get("phases", [])]
        return cls(**data)


@dataclass(frozen=True)
class Backfill:
    kind: str
    start_us: int
    now_ms: int
    complete: bool
    detail: str
    table: dict[str, Any] | None = None


def find_backfill(run_dir: str, spec: Any) -> Backfill:
    """The backfill recorded in ``run_dir`` for ``spec``: its kind, start, "now" and whether it finished."""
    from apache_beam.io.filesystems import FileSystems

    snapshot = source_for(spec).snapshot()
    if snapshot is not None:  # a full export: the timeline starts at its time
        if not snapshot.time:
            raise TimelineError(f"{snapshot.where} has no exportTime; the timeline cannot start")
        if spec.migration_time is None:
            raise TimelineError(
                "an export backfill does not record its run's \"now\", which gives cells without a timestamp theirs",
                "set migration_time in the spec (the same value the backfill ran with)")
        done = FileSystems.exists(join(run_dir, BACKFILL_LETTERS))
        now_ms = int(spec.migration_time.timestamp() * 1000)
        return Backfill("export", iso_to_us(snapshot.time), now_ms, done, snapshot.detail, snapshot.table)
    saved = ckpt.read_checkpoint(run_dir)
    if saved is None:
        raise TimelineError(f"{run_dir} holds no backfill (no {ckpt.CHECKPOINT_FILE} and the spec reads no export)",
                            "pass the --run-dir of the `ddb2bt migrate` run that back-filled this table")
    if saved.get("spec_hash") != ckpt.spec_hash(spec):
        raise TimelineError(f"the spec differs from the one the backfill in {run_dir} ran with",
                            "catch up with the backfill's own spec")
    stored_ms = saved.get("now_ms")
    if stored_ms is None:
        raise TimelineError(f"{run_dir}/{ckpt.CHECKPOINT_FILE} predates stored start times; the timeline cannot start")
    done = len(ckpt.completed_segments(run_dir)) >= int(saved["total_segments"])
    return Backfill("scan", int(stored_ms) * 1000, int(stored_ms), done,
                    f"scan of {saved['table']} started {us_to_iso(int(stored_ms) * 1000)}")


def load(run_dir: str, spec: Any) -> Timeline:
    """The run folder's timeline, started from its backfill on first use; refused while the backfill runs."""
    timeline = read_json(join(run_dir, TIMELINE_FILE), Timeline.from_json)
    if timeline is not None:
        if timeline.spec is not None and ckpt.spec_data_hash(timeline.spec) != ckpt.spec_hash(spec):
            raise TimelineError(  # one mapping for the whole cutover, or Bigtable ends matching neither spec
                f"the spec differs from the one the cutover in {run_dir} applies (saved in its {TIMELINE_FILE})",
                "go on with that spec; a changed mapping is a new migration into another table")
        return timeline
    backfill = find_backfill(run_dir, spec)
    if not backfill.complete:
        raise TimelineError(
            f"the backfill in {run_dir} ({backfill.detail}) has not finished",
            "changes are applied once the backfill is complete (see docs/CUTOVER.md); wait for `ddb2bt migrate` "
            "to end (or resume it with --resume)")
    return Timeline(backfill.kind, backfill.start_us, backfill.now_ms, backfill.start_us, table=backfill.table)


def save(run_dir: str, timeline: Timeline) -> None:
    write_json(join(run_dir, TIMELINE_FILE), timeline.to_json())


def peek(run_dir: str) -> Timeline | None:
    """The timeline if one was started (for status), without checking anything."""
    return read_json(join(run_dir, TIMELINE_FILE), Timeline.from_json)
