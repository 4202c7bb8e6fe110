"""A validation's run folder: part files written by workers, finished per segment, joined at the end.

Layout (local, gs:// or s3://, through Beam's FileSystems)::

    validate.json                what the run compares (repair, target scan), by the launcher
    checkpoint.json, segments/   when scanning: pipelines.checkpoint, as for migrate
    <folder>.parts/              workers' part files, one folder per kind of line (FOLDERS)
    differences.jsonl            every difference, joined from the parts at the end (mode 0600: user data)
    dead_letters.jsonl           with --repair: the repairs Bigtable refused

A worker writes lines to ``part-<uuid>.jsonl`` files while a scan segment is in progress, and
renames them to ``seg-<segment>-<k>.jsonl`` just before the segment is marked done (or, for
sources without segments, to ``done-<uuid>.jsonl`` at the end of its bundle). Only finished
parts are joined, so a part written by an attempt that was killed, or by a bundle the runner
retried, never counts; a resumed run deletes them, and the finished parts of the segments it
has to read again, before it starts. Joining streams the parts: memory stays flat however many
differences there are.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator
from typing import Any, NamedTuple

from apache_beam.io.filesystems import FileSystems

from ...mappers.errors import UsageError
from ..run.checkpoint import VALIDATION_MARKER, folder_writes
from ..run.dead_letters import create_private, parts_dir, write_part  # the one 0600 writer of run files
from ..run.json_files import json_object, read_json

FOLDERS = ("differences", "candidates", "owners", "row_keys", "stats")
"""``row_keys`` lines are the row keys the source maps to (for the target scan): base64, and for a row of an index
in a table of its own, that table's name and a space before it (a table id holds no space, base64 none either)."""
FLUSH_LINES = 5000


def key_line(row_key: bytes, table: str | None = None) -> str:
    """A ``row_keys`` line: the row key (base64), after ``<table> `` when the row is an index table's."""
    text = base64.b64encode(row_key).decode("ascii")
    return text if table is None else f"{table} {text}"


def key_of_line(line: str) -> tuple[str | None, bytes]:
    """(table, row key) of a ``row_keys`` line: None for the main table."""
    table, _, text = line.rpartition(" ")
    return table or None, base64.b64decode(text)


class PartWriter:
    """Lines of one folder from one DoFn instance, in part files finished per segment."""

    def __init__(self, run_dir: str, folder: str):
        self._run_dir = run_dir
        self._base = FileSystems.join(run_dir, folder)
        self._lines: list[str] = []
        self._open: list[str] = []

    def add(self, line: str) -> None:
        self._lines.append(line)
        if len(self._lines) >= FLUSH_LINES:
            self.flush()

    def flush(self) -> None:
        if self._lines:
            with folder_writes(self._run_dir):  # a full disk: one line and the resume command, not "a bug"
                self._open.append(write_part(self._base, self._lines))
            self._lines = []

    def finish(self, segment: int | None) -> None:
        """Everything so far is complete: name the parts for ``segment`` (None: a source without segments)."""
        self.flush()
        if not self._open:
            return
        folder = parts_dir(self._base)
        # a segment's names are fixed: a bundle the runner retries after renaming renames onto the same names
        names = [f"seg-{segment}-{k}.jsonl" if segment is not None else f"done-{uuid.uuid4().hex}.jsonl"
                 for k in range(len(self._open))]
        with folder_writes(self._run_dir):
            FileSystems.rename(self._open, [FileSystems.join(folder, name) for name in names])
        self._open = []


def _match(pattern: str) -> list[str]:
    return sorted(meta.path for meta in FileSystems.match([pattern])[0].metadata_list)


def finished_parts(run_dir: str, folder: str) -> list[str]:
    base = parts_dir(FileSystems.join(run_dir, folder))
    return _match(FileSystems.join(base, "seg-*.jsonl")) + _match(FileSystems.join(base, "done-*.jsonl"))


def discard_unfinished(run_dir: str, completed: frozenset[int]) -> int:
    """Before a resumed run: delete parts of killed attempts and of segments not marked done; how many."""
    doomed = []
    for folder in FOLDERS:
        base = parts_dir(FileSystems.join(run_dir, folder))
        doomed += _match(FileSystems.join(base, "part-*.jsonl"))
        doomed += [path for path in _match(FileSystems.join(base, "seg-*.jsonl"))
                   if int(path.rsplit("/", 1)[-1].split("-")[1]) not in completed]
    if doomed:
        FileSystems.delete(doomed)
    return len(doomed)


def lines(paths: list[str]) -> Iterator[bytes]:
    for path in paths:
        with FileSystems.open(path) as handle:
            for line in handle.read().splitlines():
                if line:
                    yield line


class Joined(NamedTuple):
    counts: dict[str, int]
    """Differences by kind."""
    first: list[dict[str, Any]]
    """The first differences, as their JSON lines."""
    after_snapshot: dict[str, int]
    """By kind, what changed after the validated snapshot (lines marked ``after_snapshot``): no differences."""


def join_differences(run_dirs: list[str], path: str, shown: int = 20) -> Joined:
    """Join the finished difference parts of ``run_dirs`` into ``path`` (0600), counting them by kind."""
    joined = Joined({}, [], {})
    with create_private(path) as out:
        for line in lines([part for run_dir in run_dirs for part in finished_parts(run_dir, "differences")]):
            out.write(line + b"\n")
            record = json.loads(line)
            counts = joined.after_snapshot if record.get("after_snapshot") else joined.counts
            counts[record["kind"]] = counts.get(record["kind"], 0) + 1
            if counts is joined.counts and len(joined.first) < shown:
                joined.first.append(record)
    return joined


def totals(run_dir: str) -> dict[str, int]:
    """The figures of every finished part of the run (all attempts), summed."""
    found: dict[str, int] = {}
    for line in lines(finished_parts(run_dir, "stats")):
        for name, value in json.loads(line).items():
            if name != "segment":
                found[name] = found.get(name, 0) + value
    return found


def start_marker(run_dir: str, settings: dict[str, Any], resume: bool) -> None:
    """Record what this validation compares; a resumed one must compare the same. ResumeError-like UsageErrors."""
    from ..run.checkpoint import CHECKPOINT_FILE, ResumeError

    path = FileSystems.join(run_dir, VALIDATION_MARKER)
    saved = read_json(path, json_object, error=ResumeError, fix="start the validation again with another --run-dir")
    if saved is not None:
        if not resume:
            raise ResumeError(f"{run_dir} already holds a validation run",
                              "pass --resume to continue it, or choose another --run-dir")
        differ = ", ".join(f"{k}: {saved.get(k)} then, {v} now" for k, v in settings.items() if saved.get(k) != v)
        if differ:  # a setting the marker lacks (written by an older ddb2bt) was its default, None
            raise ResumeError(f"the validation in {run_dir} was started with other settings ({differ})",
                              "resume it with the same flags, or start a new run")
        return
    if FileSystems.exists(FileSystems.join(run_dir, CHECKPOINT_FILE)):
        raise UsageError(f"{run_dir} is the run folder of a migration, not of a validation",
                         "give validate a --run-dir of its own")
    if resume:
        raise ResumeError(f"nothing to resume: {path} does not exist")
    with create_private(path) as handle:
        handle.write(json.dumps(settings, sort_keys=True).encode())
