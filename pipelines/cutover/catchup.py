"""The catch-up's Beam graph: one change source's changes (an incremental export's) applied to Bigtable, its count
mismatches dead-lettered.

``ddb2bt catch-up`` (:mod:`ddb2bt.app.cutover`) checks the change source, the timeline and the target
(:class:`ChangeSink`'s ``check``), then builds this graph and runs it; the timeline moves on only when the counters reconcile.
"""

from __future__ import annotations

from typing import Any

import apache_beam as beam

from ..change_source import ChangeSource
from ..run.dead_letters import DeadLetter, write_part
from ..run.progress import Tally
from .change_sink import ChangeSink


def _mismatch_line(record: Any) -> str:
    return DeadLetter(None, "source", f"export count mismatch: {record}").to_json()


class _PersistMismatch:
    """A count mismatch written as a dead letter (one step: each step of the graph costs its construction)."""

    def __init__(self, dead_letter: str) -> None:
        self.dead_letter = dead_letter

    def __call__(self, record: Any) -> None:
        write_part(self.dead_letter, [_mismatch_line(record)])


def build_catch_up(p: beam.Pipeline, sink: ChangeSink, source: ChangeSource, *,
                   progress_dir: str | None = None) -> None:
    """Add the catch-up of ``source`` (an incremental export) to ``p``: its changes, grouped by item, written by
    ``sink`` (applied with its spec, cells at the backfill's time); changes Bigtable refuses and count mismatches to the
    sink's dead-letter file. ``progress_dir``: where the changes read are tallied live (``changes_read``)."""
    read = source.read(p)
    # the changes read are tallied by the apply step as they come in: a step of their own costs its construction,
    # translation and start (docs/PERFORMANCE.md, "Catch-up round 5")
    sink.write(read.batches, tally=None if progress_dir is None else Tally(progress_dir, "changes_read"))
    if read.mismatches is None:
        return
    _ = read.mismatches | "PersistMismatches" >> beam.Map(_PersistMismatch(sink.dead_letter))
