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
from ..run.batches import Batch
from ..run.progress import Tally
from .change_sink import ChangeSink


def _mismatch_line(record: Any) -> str:
    return DeadLetter(None, "source", f"export count mismatch: {record}").to_json()


def build_catch_up(p: beam.Pipeline, sink: ChangeSink, source: ChangeSource, *,
                   progress_dir: str | None = None) -> None:
    """Add the catch-up of ``source`` (an incremental export) to ``p``: its changes, grouped by item, written by
    ``sink`` (applied with its spec, cells at the backfill's time); changes Bigtable refuses and count mismatches to the
    sink's dead-letter file. ``progress_dir``: where the changes read are tallied live (``changes_read``)."""
    read = source.read(p)
    batches = read.batches
    if progress_dir is not None:
        # typed: Beam samples an untyped step's output sizes by pickling whole batches; Batch's coder knows its size
        batches = batches | "Tally" >> beam.Map(Tally(progress_dir, "changes_read")).with_output_types(Batch)
    sink.write(batches)
    dead_letter = sink.dead_letter
    if read.mismatches is None:
        return
    _ = (read.mismatches
         | "MismatchLetters" >> beam.Map(_mismatch_line)
         | "PersistMismatches" >> beam.Map(lambda line: write_part(dead_letter, [line])))
