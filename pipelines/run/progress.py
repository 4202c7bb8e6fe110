"""Live progress of a run on this machine, and a way to ask it to stop.

Beam's DirectRunner reports metrics only when the pipeline ends, and with
``--direct_running_mode multi_processing`` the counters live in other processes. So each process
that maps or writes keeps running totals and rewrites one small JSON file of its own in
``<run dir>/progress/`` at most every :data:`WRITE_SECONDS`; the launcher sums the files
(:func:`read_progress`). Per batch the cost is a few dictionary additions and a clock read.

Stopping: the launcher creates ``progress/STOP`` (:func:`request_stop`). Each process looks for
it when it writes its totals; the next batch then raises :class:`RunInterrupted`, the bundle
fails, and Beam tears the steps down (the writer closes its batcher). Scan segments already
stored stay marked done, so ``--resume`` continues from there.

Only for run folders on this machine (the DirectRunner); a remote runner has its own monitoring.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

PROGRESS_DIR = "progress"
STOP_FILE = "STOP"
WRITE_SECONDS = 0.5
FIELDS = ("items_read", "pages_read", "bytes_read", "rows_written", "cells_written", "bytes_written", "dead_lettered", "skipped")


class RunInterrupted(Exception):
    """Raised inside the pipeline once a stop was requested: the run ends at the next batch."""


def progress_dir(run_dir: str | None) -> str | None:
    """``<run_dir>/progress`` for a run folder on this machine; None for gs://, s3:// (or no run folder)."""
    if not run_dir or "://" in run_dir:
        return None
    return str(Path(run_dir) / PROGRESS_DIR)


class Reporter:
    """One process's running totals for one run, written to its own file now and then (thread-safe)."""

    def __init__(self, folder: str) -> None:
        self.folder = Path(folder)
        self.path = self.folder / f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}.json"
        self.totals: Counter[str] = Counter()
        self.stopping = False
        self._lock = threading.Lock()
        self._next_write = 0.0

    def add(self, counts: dict[str, int], *, check_stop: bool = True) -> None:
        """Add ``counts``; every :data:`WRITE_SECONDS` write the totals and, with ``check_stop``, raise
        :class:`RunInterrupted` if a stop was requested."""
        with self._lock:
            self.totals.update(counts)
            now = time.monotonic()
            due = now >= self._next_write
            if due:
                self._next_write = now + WRITE_SECONDS
                self._write()
                self.stopping = self.stopping or (self.folder / STOP_FILE).exists()
        if check_stop and self.stopping:
            raise RunInterrupted("stop requested")

    def count(self, counts: dict[str, int]) -> None:
        """Add ``counts`` without writing: they go out with the next :meth:`add` that writes (e.g. Scan pages, counted
        just before the map step adds the page's items, which should not wait a write interval for them)."""
        with self._lock:
            self.totals.update(counts)

    def flush(self) -> None:
        with self._lock:
            self._write()

    def _write(self) -> None:
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            partial = self.path.with_suffix(".tmp")
            partial.write_text(json.dumps(dict(self.totals)), encoding="utf-8")
            os.replace(partial, self.path)  # readers never see half a file
        except OSError:  # progress is a courtesy: never fail a run over it
            pass


_reporters: dict[str, Reporter] = {}
_reporters_lock = threading.Lock()


def reporter(folder: str | None) -> Reporter | None:
    """This process's reporter for ``folder`` (shared by every step and thread of the process), or None."""
    if folder is None:
        return None
    with _reporters_lock:
        found = _reporters.get(folder)
        if found is None:
            found = _reporters[folder] = Reporter(folder)
        return found


def flush_local(folder: str | None) -> None:
    """Write this process's totals for ``folder`` now (a run that failed may not have torn its steps down)."""
    with _reporters_lock:
        found = _reporters.get(folder) if folder is not None else None
    if found is not None:
        found.flush()


def read_progress(folder: str | None) -> dict[str, int]:
    """The totals of every process of the run so far (a file being replaced is skipped this time)."""
    totals: Counter[str] = Counter()
    if folder is None:
        return dict.fromkeys(FIELDS, 0)
    try:
        paths = list(Path(folder).glob("*.json"))
    except OSError:
        paths = []
    for path in paths:
        try:
            totals.update({k: int(v) for k, v in json.loads(path.read_text(encoding="utf-8")).items()})
        except (OSError, ValueError):
            continue
    return {**dict.fromkeys(FIELDS, 0), **totals}


def reset(folder: str | None) -> None:
    """Forget an earlier attempt's totals and stop request (a resumed run counts its own work)."""
    if folder is None:
        return
    with _reporters_lock:
        _reporters.pop(folder, None)
    for path in Path(folder).glob("*"):
        if path.suffix in (".json", ".tmp") or path.name == STOP_FILE:
            path.unlink(missing_ok=True)


def request_stop(folder: str | None) -> None:
    if folder is not None:
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / STOP_FILE).touch()


def stop_requested(folder: str | None) -> bool:
    return folder is not None and (Path(folder) / STOP_FILE).exists()


class Tally:
    """A Beam ``Map`` function that adds each batch's length to this process's live totals under ``field`` and passes
    the batch on (for runs whose steps keep no totals of their own, e.g. a catch-up's changes read)."""

    def __init__(self, folder: str, field: str) -> None:
        self.folder, self.field = folder, field

    def __call__(self, batch: list) -> list:
        found = reporter(self.folder)
        if found is not None:
            found.add({self.field: len(batch)}, check_stop=False)
        return batch
