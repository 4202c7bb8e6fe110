"""Resumable scans: which segments of a run are completely migrated.

Layout inside a run directory (local, gs:// or s3://, through Beam's FileSystems)::

    checkpoint.json        {"spec_hash": ..., "total_segments": N, "table": ...}   written by the launcher
    segments/<n>.done      one empty marker per completed segment                  written by workers

One file per segment rather than a shared list: workers on different machines mark segments
concurrently, and object stores have no atomic read-modify-write. A marker is written only
after every row of the segment is durably in Bigtable *and* its dead letters are in a part
file (see :mod:`.pipeline`), so ``--resume`` may skip it without losing anything. Re-running a
segment that was partly written is safe: cells carry deterministic timestamps, so the rewrite
replaces each cell with itself.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any
from ..mappers.errors import UsageError

CHECKPOINT_FILE = "checkpoint.json"
SEGMENTS_DIR = "segments"


class ResumeError(UsageError):
    """The run directory cannot be resumed with this spec or segment count."""


def spec_hash(spec: Any) -> str:
    """A stable hash of the spec's content (after key names were filled in)."""
    text = json.dumps(spec.model_dump(mode="json", by_alias=True), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _join(*parts: str) -> str:
    from apache_beam.io.filesystems import FileSystems

    return FileSystems.join(*parts)


def _write(path: str, data: bytes) -> None:
    from apache_beam.io.filesystems import FileSystems

    with FileSystems.create(path) as handle:
        handle.write(data)


@dataclass(frozen=True)
class Checkpoint:
    """A run directory's checkpoint: what it was started with, and how to mark progress."""

    run_dir: str
    spec_hash: str
    total_segments: int
    table: str

    @classmethod
    def start(cls, run_dir: str, spec_hash_: str, total_segments: int, table: str, resume: bool) -> Checkpoint:
        """Create the checkpoint of a new run, or check that a resumed run matches its own."""
        from apache_beam.io.filesystems import FileSystems

        path = _join(run_dir, CHECKPOINT_FILE)
        exists = FileSystems.exists(path)
        if not resume:
            if exists:
                raise ResumeError(
                    f"{run_dir} already holds a migration run; pass --resume to continue it or choose another run directory."
                )
            _write(path, json.dumps({"spec_hash": spec_hash_, "total_segments": total_segments, "table": table},
                                    indent=2).encode())
            return cls(run_dir, spec_hash_, total_segments, table)
        if not exists:
            raise ResumeError(f"nothing to resume: {path} does not exist.")
        with FileSystems.open(path) as handle:
            saved = json.loads(handle.read())
        if saved["spec_hash"] != spec_hash_:
            raise ResumeError(
                f"the spec changed since the run in {run_dir} started (different spec hash); segments already "
                "written used the old spec. Resume with the original spec, or start a new run."
            )
        if saved["total_segments"] != total_segments:
            raise ResumeError(
                f"the run in {run_dir} used {saved['total_segments']} scan segments, not {total_segments}; segment "
                "numbers only mean the same items with the same total. Resume without --total-segments "
                f"or with --total-segments {saved['total_segments']}."
            )
        return cls(run_dir, spec_hash_, total_segments, table)

    @staticmethod
    def saved_total_segments(run_dir: str) -> int | None:
        """The segment count a run directory was started with, if any (so resume needs no repeat of it)."""
        from apache_beam.io.filesystems import FileSystems

        path = _join(run_dir, CHECKPOINT_FILE)
        if not FileSystems.exists(path):
            return None
        with FileSystems.open(path) as handle:
            return int(json.loads(handle.read())["total_segments"])

    def completed(self) -> frozenset[int]:
        return completed_segments(self.run_dir)


def completed_segments(run_dir: str) -> frozenset[int]:
    from apache_beam.io.filesystems import FileSystems

    pattern = _join(run_dir, SEGMENTS_DIR, "*.done")
    found = FileSystems.match([pattern])[0].metadata_list
    names = (meta.path.rsplit("/", 1)[-1].rsplit("\\", 1)[-1] for meta in found)
    return frozenset(int(name[: -len(".done")]) for name in names)


def mark_segment_done(run_dir: str, segment: int) -> None:
    """Record one segment as completely migrated (idempotent)."""
    _write(_join(run_dir, SEGMENTS_DIR, f"{segment}.done"), b"")


def segment_progress(run_dir: str) -> tuple[int, int | None]:
    """(segments done, total segments or None before the run has started): what a progress bar shows.

    Markers are written as each segment's rows are stored, so polling them from another thread
    tracks a DirectRunner run that Beam itself reports only at the end.
    """
    total = Checkpoint.saved_total_segments(run_dir)
    return (len(completed_segments(run_dir)) if total is not None else 0), total
