"""The redrive use case: run a run's dead letters through the (fixed) spec again, as a run of its own.

``redrive(run_dir, spec)`` reads ``<run_dir>/dead_letters.jsonl`` (or a dead-letter file given
directly), checks every line before anything is written, and runs the items through the same
Beam pipeline as ``migrate`` with the file as its source (``build_pipeline(source=...)``). The
redrive has its own run folder, dead-letter file (only what still fails) and reconciliation:
items read = rows written + dead-lettered + skipped, where the items read are the file's items.
Lines that hold no item (an export's count mismatch) cannot be re-driven and are reported.

Cells that take the run's time (no ``migration_time`` in the spec, no timestamp attribute) get
the original run's "now" when its folder records one (``checkpoint.json`` of a scan), so a
redriven item is written as the original run would have written it.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..mappers.errors import UsageError
from .context import load_spec, unfinished, wait_for
from .options import RunOptions

if TYPE_CHECKING:
    from ..mappers.spec import MappingSpec
    from .change_redrive import ChangeRedriveResult

DEAD_LETTER_FILE = "dead_letters.jsonl"
RECORD_FILE = "redrive.json"
SPEC_FILE = "spec"
"""A redrive keeps a copy of its spec file (spec.yaml, spec.json) in its folder: redriving a redrive needs no spec."""


@dataclass(frozen=True)
class RedriveResult:
    """How a redrive ended: what the file held, what was written, what still fails and where it is."""

    source: str
    """The dead-letter file that was re-driven."""
    run_dir: str
    dead_letter: str
    """This redrive's own dead-letter file: the items that still fail."""
    target: str
    state: str
    now_ms: int
    inherited_now: bool
    """True when the cells' default time is the original run's "now" (from its folder)."""
    items_by_stage: dict[str, int]
    not_redriven: tuple[str, ...]
    """Reasons of the file's lines that hold no item (export count mismatches): reported, not re-driven."""
    counters: dict[str, int] = field(default_factory=dict)
    dead_letter_lines: int = 0
    problems: tuple[str, ...] = ()
    reasons: dict[str, dict[str, int]] = field(default_factory=dict)
    """Items skipped and dead-lettered, by reason (pipelines.metrics.by_reason), as migrate has them."""
    migration_time: str | None = None
    """The spec's migration_time (ISO 8601): cells without a time of their own carry it, not any run's "now"."""

    @property
    def ok(self) -> bool:
        return not self.problems


def dead_letter_file(run_dir: str) -> str:
    """The dead-letter file of a run folder, or ``run_dir`` itself when it names a file."""
    from apache_beam.io.filesystems import FileSystems

    if run_dir.endswith(".jsonl"):
        return run_dir
    return FileSystems.join(run_dir, DEAD_LETTER_FILE)


def default_redrive_dir(table: str) -> str:
    """``runs/<table>-redrive-<UTC time>``: next to the migration runs, sortable by time."""
    return f"runs/{table}-redrive-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"


def redrive(run_dir: str, spec: MappingSpec | str | Path | None = None, options: RunOptions = RunOptions(), *,
            now_ms: int | None = None) -> RedriveResult | ChangeRedriveResult:
    """Re-run the dead letters of ``run_dir`` through ``spec`` (default: the spec the folder keeps).

    Change dead letters (the tail's, a catch-up's) are re-applied as changes (:mod:`.change_redrive`).

    Cells that take the run's time get the original run's "now" when its folder records one, else
    ``now_ms``, else the time now. UsageError (nothing written) for a bad file, spec or folder.
    """
    import apache_beam as beam
    from apache_beam.io.filesystems import FileSystems
    from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

    from ..pipelines.bigtable_sink import ensure_table
    from ..pipelines.change_letters import holds_changes
    from ..pipelines.dead_letter_source import ReadDeadLetters, survey
    from ..pipelines.dead_letters import check_dead_letter_destination
    from ..pipelines.options import is_direct_runner
    from ..pipelines.metrics import by_reason
    from ..pipelines.pipeline import build_pipeline, reconcile
    from ..pipelines.target import describe_target, probe_target

    letters = dead_letter_file(run_dir)
    if holds_changes(letters):  # the tail's or a catch-up's: change records, re-applied as changes
        from .change_redrive import redrive_changes

        return redrive_changes(letters, spec, options)
    folder = run_dir if letters != run_dir else FileSystems.split(letters)[0] or "."
    found = survey(letters)  # every line checked before anything is written
    loaded = load_spec(spec if spec is not None else _recorded_spec(folder), options)
    pipeline_options = PipelineOptions(list(options.beam_args))
    runner = str(pipeline_options.view_as(StandardOptions).runner or "DirectRunner")
    new_dir = options.run_dir or default_redrive_dir(loaded.target.table)
    dead_letter = options.dead_letter or FileSystems.join(new_dir, DEAD_LETTER_FILE)
    if not is_direct_runner(runner) and not all(p.startswith(("gs://", "s3://")) for p in (letters, dead_letter)):
        raise UsageError(f"{runner} workers run on other machines and cannot read or write local files",
                         "give a run folder on gs:// or s3:// and pass --run-dir gs://BUCKET/...")
    inherited = _recorded_now(folder)
    now = inherited or now_ms or int(time.time() * 1000)

    probe_target(loaded.target)  # a dead Bigtable fails here, in seconds
    check_dead_letter_destination(dead_letter)  # never the file being read: that one exists
    ensure_table(loaded.target, create=True)  # a fixed spec may add a family
    _record(new_dir, letters, Path(spec) if isinstance(spec, (str, Path)) else None, now)

    pipeline = beam.Pipeline(options=pipeline_options)
    build_pipeline(pipeline, loaded, dead_letter=dead_letter, flow=options.flow_control(), now_ms=now,
                   source=ReadDeadLetters(letters))
    state, counters, lines = wait_for(pipeline.run(), dead_letter)
    counters, reasons = by_reason(counters)
    problems = unfinished(state) + reconcile(counters, loaded.unmatched)
    if counters["items_read"] != found.items:
        problems.append(f"{counters['items_read']} items read, but {letters} holds {found.items}")
    if found.without_item:  # nothing to re-drive, and nothing resolved: the run they belong to is still short
        problems.append(f"{len(found.without_item)} lines of {letters} hold no item (an export's count mismatch) and "
                        "stay there unresolved: fix the source and migrate it again")
    return RedriveResult(letters, new_dir, dead_letter, describe_target(loaded.target), state, now, inherited is not None,
                         found.items_by_stage, found.without_item, counters, lines, tuple(problems), reasons,
                         loaded.migration_time.isoformat() if loaded.migration_time else None)


def _read_text(path: str) -> str | None:
    from apache_beam.io.filesystems import FileSystems

    if not FileSystems.exists(path):
        return None
    with FileSystems.open(path) as handle:
        return str(handle.read().decode("utf-8"))


def _recorded_spec(folder: str) -> MappingSpec:
    """The spec a redrive folder keeps; the original migration's spec is not kept, so it must be given."""
    from apache_beam.io.filesystems import FileSystems

    from ..mappers.loader import parse_document, validate_data

    kept = sorted(m.path for m in FileSystems.match([FileSystems.join(folder, SPEC_FILE + ".*")])[0].metadata_list)
    text = _read_text(kept[0]) if kept else None
    if text is None:
        raise UsageError(f"{folder} keeps no spec (a redrive keeps a copy of its spec; a migration run does not)",
                         "pass the fixed spec: ddb2bt redrive RUN_DIR SPEC")
    data, lines = parse_document(text, kept[0])
    return validate_data(data, kept[0], lines)


def _recorded_now(folder: str) -> int | None:
    """The "now" of the run in ``folder``: a scan's checkpoint.json, or an earlier redrive's redrive.json."""
    from apache_beam.io.filesystems import FileSystems

    from ..pipelines.checkpoint import CHECKPOINT_FILE

    for name in (CHECKPOINT_FILE, RECORD_FILE):
        text = _read_text(FileSystems.join(folder, name))
        if text:
            now = json.loads(text).get("now_ms")
            if isinstance(now, int):
                return now
    return None


def _record(folder: str, letters: str, spec_path: Path | None, now_ms: int) -> None:
    """What this redrive read and with which "now" (redrive.json), and a copy of the spec file it was given."""
    from apache_beam.io.filesystems import FileSystems

    record = {"redrive_of": letters, "now_ms": now_ms, "spec": str(spec_path) if spec_path else None}
    files = [(RECORD_FILE, (json.dumps(record, indent=2) + "\n").encode("utf-8"))]
    if spec_path is not None:
        files.append((SPEC_FILE + spec_path.suffix.lower(), spec_path.read_bytes()))
    for name, data in files:
        path = FileSystems.join(folder, name)
        if "://" not in path:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        with FileSystems.create(path) as handle:
            handle.write(data)
