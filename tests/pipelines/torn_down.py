"""Steps that pin the moment Beam's SDK harness tears the writer down under a bundle still in flight
(tests/pipelines/test_savepoints.py).

When a run ends early (a bundle failed, or stopped on request as Ctrl-C does), the runner stops its workers and each
worker's SDK harness tears down the steps of every bundle still in flight, from its own thread, while those bundles
go on (``BundleProcessorCache.shutdown`` discards the active bundle processors). Two elements, two bundles: one
bundle tells the writer about itself and waits; the other fails, as a stopped run's bundle does, once the first is
waiting. The run ends, the harness tears the waiting bundle's steps down (the writer before :class:`NoteTeardown`,
which is downstream of it), and the waiting bundle then sends its rows and its segment's done marker to the writer,
as a bundle part way through a page does.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Iterator

import apache_beam as beam

from ddb2bt.mappers.results import MappedRow
from ddb2bt.pipelines.run.batches import Batch, SegmentDone
from ddb2bt.pipelines.run.dead_letters import ItemsMapped
from ddb2bt.pipelines.run.progress import RunInterrupted

FAILS, WRITES = "fails", "writes"
"""The two elements: in this order each is a bundle of its own with two workers (the first the runner waits for)."""
WAITING, WAITED = "waiting", "waited"
"""Signal files: the writing bundle waits; it went on once its writer was torn down."""
GRACE = 20.0
"""Seconds the harness is held in the teardown (after the writer's) for the torn-down bundle to send its rows and
done marker through the writer: the worker process ends soon after the teardown, and the bundle with it. A writer
that passes the marker on releases it at once; one that stops the bundle holds it this long."""

_TORN_DOWN: dict[str, threading.Event] = {}
"""Per signals folder, in the worker process: set once the waiting bundle's writer is torn down."""


def _torn_down(signals: str) -> threading.Event:
    return _TORN_DOWN.setdefault(signals, threading.Event())


def _wait_for(path: Path, patience: float) -> bool:
    deadline = time.monotonic() + patience
    while not path.exists():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


class StageThenWait(beam.DoFn):
    """``FAILS``: fails once the other bundle waits. ``WRITES``: waits until its writer is torn down (at most
    ``patience`` seconds), then sends ``rows`` and the done marker of ``segment``."""

    def __init__(self, signals: str, rows: list[tuple[MappedRow, dict]], segment: int, patience: float = 120) -> None:
        self._signals, self._rows, self._segment, self._patience = signals, rows, segment, patience

    def process(self, role: str) -> Iterator[Any]:
        signals = Path(self._signals)
        if role == FAILS:
            _wait_for(signals / WAITING, self._patience)
            raise RunInterrupted("stop requested")  # how a stopped run's bundle ends (pipelines/pipeline.py MapFn)
        yield ItemsMapped(0)  # passed on by the writer at once: NoteTeardown knows this bundle for the one that waits
        (signals / WAITING).touch()
        if _torn_down(self._signals).wait(self._patience):
            (signals / WAITED).touch()
        yield Batch(self._rows)
        yield SegmentDone(self._segment)


class NoteTeardown(beam.DoFn):
    """Downstream of the writer, so torn down after it: tells the waiting bundle that its writer is torn down, and
    holds the harness until the bundle's done marker came through the writer (or :data:`GRACE` passed)."""

    def __init__(self, signals: str) -> None:
        self._signals = signals

    def setup(self) -> None:
        self._waiting = False
        self._through = threading.Event()

    def process(self, element: Any) -> Iterator[Any]:
        self._waiting = self._waiting or isinstance(element, ItemsMapped)
        if isinstance(element, SegmentDone):
            self._through.set()
        return iter(())

    def teardown(self) -> None:
        if self._waiting:
            _torn_down(self._signals).set()
            self._through.wait(GRACE)
