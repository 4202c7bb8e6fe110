"""A sink's writer without Beam (:meth:`~ddb2bt.pipelines.sink.Sink.writer`) as one Beam step: batches in, the items
refused out as dead letters, barriers passed on once everything before them is written or refused."""

from __future__ import annotations

from typing import Any, Iterator

import apache_beam as beam
from apache_beam.metrics import Metrics

from .dead_letters import DeadLetter
from .metrics import NAMESPACE


class _WriteItemsFn(beam.DoFn):
    def __init__(self, sink: Any) -> None:
        self._sink = sink
        self._written = Metrics.counter(NAMESPACE, "items_written")
        self._refused = Metrics.counter(NAMESPACE, "write_failures")

    def setup(self) -> None:
        self._writer = self._sink.writer()

    def process(self, element: Any) -> Iterator[Any]:
        if not isinstance(element, list):  # a barrier: every item before it is written or refused
            yield element
            return
        refused = self._writer.write(element)
        self._written.inc(len(element) - len(refused))
        self._refused.inc(len(refused))
        for item, reason in refused:
            yield DeadLetter(item, "write", reason)


def write_items(sink: Any, batches: Any, label: str) -> Any:
    """Add ``sink``'s writes of ``batches`` (each worker makes its own writer in ``setup``) to their pipeline."""
    return batches | label >> beam.ParDo(_WriteItemsFn(sink))
