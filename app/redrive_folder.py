"""A redrive's folder: where its dead letters go, what it records (redrive.json, a copy of its spec) and what a
later redrive reads back from it (the cutover it belongs to, if any); how an item redrive ended (``RedriveResult``).
Shared by the redrive of items (:mod:`.redrive`, :mod:`.redrive_current`) and of changes (:mod:`.change_redrive`)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from apache_beam.io.filesystems import FileSystems

from ..mappers.errors import UsageError
from ..mappers.loader import parse_document, validate_data
from ..pipelines.run.checkpoint import CHECKPOINT_FILE
from ..pipelines.run.json_files import json_object, read_json

if TYPE_CHECKING:
    from ..mappers.spec import MappingSpec

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
    nothing: bool = False
    """The file held no dead letter: nothing was done, and no run folder made (``run_dir`` is empty)."""
    reread: bool = False
    """A cutover's backfill letters: each item read again from DynamoDB, and written as it is now (or its cells
    deleted, when it was deleted since); counters ``deleted_since`` and ``changed_since`` say how many."""

    @property
    def ok(self) -> bool:
        return not self.problems


def _holds_dead_letters(path: str) -> bool:
    """Whether the file's first line is a dead letter as runs write them (any file name a --dead-letter was given)."""
    from ..pipelines.run.dead_letter_source import is_dead_letter

    with FileSystems.open(path) as handle:
        first = handle.readline(1 << 20)
    return is_dead_letter(first.decode("utf-8", "replace"))


def dead_letter_file(run_dir: str) -> str:
    """The dead-letter file of a run folder, or ``run_dir`` itself when it names a dead-letter file (``*.jsonl``).
    Another file (the run's checkpoint.json, say) is a UsageError naming it and what to give instead."""
    from ..pipelines.run.dead_letter_source import DeadLetterFileError

    if run_dir.endswith(".jsonl"):
        return run_dir
    if Path(run_dir).is_file() if "://" not in run_dir else FileSystems.exists(run_dir):  # an object, not a prefix
        if _holds_dead_letters(run_dir):  # migrate --dead-letter letters.txt: the file migrate's line names
            return run_dir
        folder = FileSystems.split(run_dir)[0] or "."
        fix = (f"give its run folder: ddb2bt redrive {folder} SPEC"
               if FileSystems.exists(FileSystems.join(folder, DEAD_LETTER_FILE))
               else f"give the run folder that holds {DEAD_LETTER_FILE}, or a dead-letter file (*.jsonl)")
        raise DeadLetterFileError(f"{run_dir} is a file, not a run folder (one holds {DEAD_LETTER_FILE})", fix)
    return FileSystems.join(run_dir, DEAD_LETTER_FILE)


def default_redrive_dir(table: str) -> str:
    """``runs/<table>-redrive-<UTC time>``: next to the migration runs, sortable by time."""
    return f"runs/{table}-redrive-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"


def read_text(path: str) -> str | None:

    if not FileSystems.exists(path):
        return None
    with FileSystems.open(path) as handle:
        return str(handle.read().decode("utf-8"))


def recorded_spec(folder: str) -> MappingSpec:
    """The spec a redrive folder keeps; the original migration's spec is not kept, so it must be given."""


    kept = sorted(m.path for m in FileSystems.match([FileSystems.join(folder, SPEC_FILE + ".*")])[0].metadata_list)
    text = read_text(kept[0]) if kept else None
    if text is None:
        raise UsageError(f"{folder} keeps no spec (a redrive keeps a copy of its spec; a migration run does not)",
                         "pass the fixed spec: ddb2bt redrive RUN_DIR SPEC")
    data, lines = parse_document(text, kept[0])
    return validate_data(data, kept[0], lines)


def _recorded(folder: str) -> Iterator[dict[str, Any]]:
    """What the run in ``folder`` recorded, first to last: a scan's checkpoint.json, an earlier redrive's redrive.json
    (either refused in one line if damaged)."""
    for name in (CHECKPOINT_FILE, RECORD_FILE):
        saved = read_json(FileSystems.join(folder, name), json_object)
        if saved:
            yield saved


def recorded_now(folder: str) -> int | None:
    """The "now" of the run in ``folder``: a scan's checkpoint.json, or an earlier redrive's redrive.json."""
    for saved in _recorded(folder):
        now = saved.get("now_ms")
        if isinstance(now, int):
            return now
    return None


def recorded_table(folder: str) -> str | None:
    """The source the run in ``folder`` read (a table name, or an export's path), if its folder says."""
    for saved in _recorded(folder):
        table = saved.get("table")
        if isinstance(table, str) and table:
            return table
    return None


def cutover_of(folder: str) -> str | None:
    """The cutover run folder whose backfill's dead letters ``folder`` holds: ``folder`` itself when it holds a cutover
    timeline, or the one a redrive recorded (a redrive of a cutover's backfill letters, whose own still-failing letters
    are images as old); None for a run no cutover goes on from."""
    from ..pipelines.cutover import timeline as tl

    if tl.peek(folder) is not None:
        return folder
    cutover = (read_json(FileSystems.join(folder, RECORD_FILE), json_object) or {}).get("cutover")
    return cutover if isinstance(cutover, str) and tl.peek(cutover) is not None else None


TAIL_QUIET_S = 30.0
"""A tail whose last heartbeat is younger than this (and that did not record a clean stop) is taken to be running."""


def refuse_while_the_tail_runs(folder: str) -> None:
    """UsageError when `ddb2bt tail` on the cutover ``folder`` is running: a redrive reads an item, then writes it, and
    a change the tail applied in between would be overwritten by the older version (cells without a time attribute
    all carry the timeline's one "now": no cell version tells the two apart)."""
    from ..pipelines.cutover.tail import load_state, stopped_since

    state = load_state(folder)
    if state is not None and not stopped_since(folder, state) \
            and time.time() - state.heartbeat_us / 1e6 < TAIL_QUIET_S:
        raise UsageError(f"`ddb2bt tail` on {folder} is running (last heartbeat "
                         f"{time.time() - state.heartbeat_us / 1e6:.0f} s ago): it and the redrive could write one item "
                         "out of order", "stop the tail, redrive, then start the tail again with the fixed spec")


def record(folder: str, letters: str, spec_path: Path | None, now_ms: int, table: str | None = None,
           cutover: str | None = None) -> None:
    """What this redrive read and with which "now" (redrive.json), and a copy of the spec file it was given."""

    record: dict[str, object] = {"redrive_of": letters, "now_ms": now_ms, "spec": str(spec_path) if spec_path else None}
    if table:  # so that a redrive of this redrive can check its spec reads the same source
        record["table"] = table
    if cutover:  # so that a redrive of this redrive reads its items again too (their images are as old)
        record["cutover"] = cutover
    files = [(RECORD_FILE, (json.dumps(record, indent=2) + "\n").encode("utf-8"))]
    if spec_path is not None:
        files.append((SPEC_FILE + spec_path.suffix.lower(), spec_path.read_bytes()))
    for name, data in files:
        path = FileSystems.join(folder, name)
        if "://" not in path:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        with FileSystems.create(path) as handle:
            handle.write(data)
