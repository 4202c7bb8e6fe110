"""The catch-up's Beam graph: one incremental export's changes applied to Bigtable, its count mismatches dead-lettered.

``ddb2bt catch-up`` (:mod:`ddb2bt.app.cutover`) checks the export, the timeline and the target
(:class:`ChangeSink`'s ``check``), then builds this graph and runs it; the timeline moves on only when the counters reconcile.
"""

from __future__ import annotations

from typing import Any

import apache_beam as beam

from ..bigtable.sink import Destination, FlowControl
from ..dynamodb.incremental_export import IncrementalManifest, ReadIncrementalExport
from ..run.dead_letters import DeadLetter, write_part
from ..run.batches import Batch
from ..run.progress import Tally
from ..bigtable.target import describe_target, probe_target
from ..sink import Sink
from .change_sink import ApplyChangesFn


class ChangeSink(Sink):
    """Changes (an incremental export's) applied to Bigtable with the spec; what Bigtable refuses is written as change
    dead letters to ``dead_letter``, which `ddb2bt redrive` re-applies."""

    kind = "bigtable changes"
    refusals = "change dead letters in its own file"

    def __init__(self, spec: Any, now_ms: int, dead_letter: str, flow: FlowControl | None = None) -> None:
        self.spec, self.now_ms, self.dead_letter, self.flow = spec, now_ms, dead_letter, flow

    def describe(self) -> str:
        return describe_target(self.spec.target)

    def check(self) -> None:
        probe_target(self.spec.target, must_exist=True)

    def prepare(self, *, create: bool = True) -> None:
        """Changes go into the table the backfill made: nothing to create."""

    def write(self, batches: Any, label: str | None = None) -> Any:
        return batches | (label or "Apply") >> beam.ParDo(ApplyChangesFn(
            Destination.from_target(self.spec.target), self.spec.model_dump(by_alias=True), self.now_ms,
            self.dead_letter, self.flow))


def _mismatch_line(record: Any) -> str:
    return DeadLetter(None, "source", f"export count mismatch: {record}").to_json()


def build_catch_up(p: beam.Pipeline, sink: ChangeSink, manifest: IncrementalManifest, *,
                   progress_dir: str | None = None) -> None:
    """Add the catch-up of ``manifest``'s export to ``p``: its changes, grouped by item, written by ``sink`` (applied
    with its spec, cells at the backfill's time); changes Bigtable refuses and count mismatches to the sink's dead-letter
    file. ``progress_dir``: where the changes read are tallied live (``changes_read``)."""
    read = p | "ReadIncrementalExport" >> ReadIncrementalExport(manifest)
    batches = read["batches"]
    if progress_dir is not None:
        # typed: Beam samples an untyped step's output sizes by pickling whole batches; Batch's coder knows its size
        batches = batches | "Tally" >> beam.Map(Tally(progress_dir, "changes_read")).with_output_types(Batch)
    sink.write(batches)
    dead_letter = sink.dead_letter
    _ = (read["count_mismatch"]
         | "MismatchLetters" >> beam.Map(_mismatch_line)
         | "PersistMismatches" >> beam.Map(lambda line: write_part(dead_letter, [line])))
