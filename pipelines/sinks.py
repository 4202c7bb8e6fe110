"""The Bigtable sink (:class:`~.sink.Sink`) of rows: migrate, redrive, validate's repairs. The other sinks live beside
what they write: DynamoDB (rollback's target) is :class:`.dynamodb.sink.DynamoDBSink`, Beam-free, its writer wrapped in
one Beam step when a graph writes through it; the change sink (catch-up, tail) is
:class:`.cutover.change_sink.ChangeSink`.

A thin adapter: the writing itself is :mod:`.bigtable.sink`'s ``WriteToBigtable``.
"""

from __future__ import annotations

from typing import Any

from .bigtable.sink import Destination, FlowControl, WriteToBigtable, ensure_table
from .bigtable.target import describe_target, probe_target
from .sink import Sink


class BigtableSink(Sink):
    """Mapped rows into the spec's Bigtable table; rows Bigtable refuses for good come out as dead letters."""

    kind = "bigtable"

    def __init__(self, target: Any, flow: FlowControl | None = None, *, progress_dir: str | None = None,
                 must_exist: bool = False) -> None:
        self.target, self.flow, self.progress_dir, self.must_exist = target, flow, progress_dir, must_exist

    def describe(self) -> str:
        return describe_target(self.target)

    def check(self) -> None:
        probe_target(self.target, must_exist=self.must_exist)  # a dead Bigtable fails here, in seconds

    def prepare(self, *, create: bool = True) -> None:
        ensure_table(self.target, create=create)

    def write(self, batches: Any, label: str | None = None) -> Any:
        destination = Destination.from_target(self.target)
        return batches | (label or "WriteToBigtable") >> WriteToBigtable(destination, self.flow,
                                                                         progress_dir=self.progress_dir)

