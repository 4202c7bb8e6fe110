"""What a sink is to every run: the one interface the Beam graphs write through.

A sink says where it writes (one line), checks that it can be reached before anything is written,
prepares its target (creates the Bigtable table and families, or checks the DynamoDB table), and
writes a PCollection of batches. What it refused for good comes out of ``write`` as a
:class:`~.run.dead_letters.DeadLetter` per element, with the barriers (a segment's done marker,
a page's savepoint) passed on only after everything before them is stored or refused, so a
checkpoint never gets ahead of the data. A sink that keeps its refusals itself (the change sink,
whose dead letters are change records) says so in ``refusals``. Implementations: :mod:`.sinks` (Bigtable),
:mod:`.dynamodb.sink` (DynamoDB), :mod:`.cutover.change_sink` (changes).

A sink of items may also give a writer without Beam (``writer``: put a list of items, get back those
refused, with why): a process that builds no Beam graph (the rollback's workers) writes through that,
and the sink's Beam ``write`` is then one thin step around it (:func:`.run.writes.write_items`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar, Protocol


class ItemWriter(Protocol):
    def write(self, items: list[dict]) -> list[tuple[dict, str]]:
        """Put the items; (item, reason) for each the target refused for good."""


class Sink(ABC):
    kind: ClassVar[str]
    """What it writes into, in a word."""
    refusals: ClassVar[str] = "dead letters in the output"
    """Where what it refuses goes: out of ``write`` as DeadLetters, or (said here) a file of its own."""

    @abstractmethod
    def describe(self) -> str:
        """Where the writes go, one line."""

    @abstractmethod
    def check(self) -> None:
        """Refuse (a ddb2bt error) a target that cannot be reached or is not there when it must be; writes nothing."""

    @abstractmethod
    def prepare(self, *, create: bool = True) -> None:
        """Make the target ready for the writes (``create``: make what is missing), or refuse it."""

    @abstractmethod
    def write(self, batches: Any, label: str | None = None) -> Any:
        """Add the writes of ``batches`` (a PCollection) to their pipeline; returns the PCollection of what is passed
        on: barriers after their elements are stored, and a DeadLetter for each element refused for good."""

    def writer(self, share: int = 1) -> ItemWriter:
        """A writer without Beam for one of ``share`` processes (each gets its share of a write budget); a sink
        that writes only inside a Beam graph has none."""
        raise NotImplementedError(f"the {self.kind} sink writes only within a Beam graph")
