"""A redrive's folder: where its dead letters go, what it records (redrive.json, a copy of its spec) and what a
later redrive reads back from it. Shared by the redrive of items (:mod:`.redrive`) and of changes
(:mod:`.change_redrive`)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING

from apache_beam.io.filesystems import FileSystems

from ..mappers.errors import UsageError
from ..mappers.loader import parse_document, validate_data
from ..pipelines.run.checkpoint import CHECKPOINT_FILE

if TYPE_CHECKING:
    from ..mappers.spec import MappingSpec

DEAD_LETTER_FILE = "dead_letters.jsonl"
RECORD_FILE = "redrive.json"
SPEC_FILE = "spec"
"""A redrive keeps a copy of its spec file (spec.yaml, spec.json) in its folder: redriving a redrive needs no spec."""


def dead_letter_file(run_dir: str) -> str:
    """The dead-letter file of a run folder, or ``run_dir`` itself when it names a file."""

    if run_dir.endswith(".jsonl"):
        return run_dir
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


def recorded_now(folder: str) -> int | None:
    """The "now" of the run in ``folder``: a scan's checkpoint.json, or an earlier redrive's redrive.json."""


    for name in (CHECKPOINT_FILE, RECORD_FILE):
        text = read_text(FileSystems.join(folder, name))
        if text:
            now = json.loads(text).get("now_ms")
            if isinstance(now, int):
                return now
    return None


def recorded_table(folder: str) -> str | None:
    """The source the run in ``folder`` read (a table name, or an export's path), if its folder says."""

    for name in (CHECKPOINT_FILE, RECORD_FILE):
        text = read_text(FileSystems.join(folder, name))
        if text:
            table = json.loads(text).get("table")
            if isinstance(table, str) and table:
                return table
    return None


def record(folder: str, letters: str, spec_path: Path | None, now_ms: int, table: str | None = None) -> None:
    """What this redrive read and with which "now" (redrive.json), and a copy of the spec file it was given."""

    record = {"redrive_of": letters, "now_ms": now_ms, "spec": str(spec_path) if spec_path else None}
    if table:  # so that a redrive of this redrive can check its spec reads the same source
        record["table"] = table
    files = [(RECORD_FILE, (json.dumps(record, indent=2) + "\n").encode("utf-8"))]
    if spec_path is not None:
        files.append((SPEC_FILE + spec_path.suffix.lower(), spec_path.read_bytes()))
    for name, data in files:
        path = FileSystems.join(folder, name)
        if "://" not in path:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        with FileSystems.create(path) as handle:
            handle.write(data)
