"""What a source of items is to every run: the one interface migrate, validate, redrive and the samples read through.

A source describes itself (its name, DescribeTable), checks itself before anything is written,
counts or estimates its items, splits into pieces that a checkpoint can mark (scan segments, an
export's data files) and, where it can, resume part way (a scan segment's savepoint), reads them
as a Beam graph of item batches, and gives samples without Beam. Implementations wrap what
exists: :mod:`.dynamodb.sources` (live scan, full export), :mod:`.run.dead_letter_source` (a
dead-letter file, for redrive) and :class:`ItemsSource` (items in hand: a ``--sample`` run).
:mod:`.sources` chooses one for a spec; adding a source is one module with a subclass and one
``register`` call (docs/PIPELINE.md, "Sources and sinks"). The rollback reads Bigtable rows through it
(:mod:`.bigtable.rows`).

Beam is imported where a graph is built, not here: the rollback's worker processes import this
interface with its Bigtable source, and none of them builds a Beam graph.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from ..mappers.table import SourceDescription


@dataclass(frozen=True)
class SourceRead:
    """What a source's read adds to a pipeline: item batches (each piece's followed by its done marker when asked),
    and, for a source that checks its counts against a manifest, the count mismatches as records."""

    batches: Any
    mismatches: Any = None


@dataclass(frozen=True)
class Snapshot:
    """A source that is one point in time (a full export): when, what it is, and which table it is of."""

    time: str | None
    """ISO-8601 (the export's exportTime); None when the source does not say."""
    detail: str
    where: str
    table: dict[str, Any] | None = None


class Source(ABC):
    """A source of items in DynamoDB's wire format; see the module doc."""

    kind: ClassVar[str]
    """The registry's name for this kind of source."""
    pieces_name: ClassVar[str] = "pieces"
    """What its pieces are called in messages ("scan segments", "export data files")."""
    positions: ClassVar[bool] = False
    """True: pieces are read in key order and saved part way (a scan segment's savepoint); False: whole units."""
    live: ClassVar[bool] = False
    """Reads a live table, which DescribeTable describes (keys, size, capacity), at a pace set by its capacity."""

    @abstractmethod
    def name(self) -> str:
        """What it is, in one word or path (a table's name, an export's folder)."""

    def describe(self) -> SourceDescription | None:
        """The table behind it, from the service (DescribeTable); None when there is none to ask."""
        return None

    def described(self, description: SourceDescription | None) -> Source:
        """This source with its :meth:`describe` of a moment ago, which its read then uses instead of asking the
        service again before its first request (a live table's read rate); itself where its read asks nothing."""
        return self

    def check(self, pipeline_options: Any = None) -> int | None:
        """Refuse (a ddb2bt error) what cannot be read, before anything is written; the number of pieces when the
        source fixes them (an export's data files), else None."""
        return None

    def locations(self) -> dict[str, str | None]:
        """Places it reads that every worker must reach, by the spec field or flag that names them."""
        return {}

    def choose_pieces(self, description: SourceDescription | None) -> int:
        """How many pieces to split into when nothing says (only sources with ``positions`` are asked)."""
        return 1

    def expected_items(self, description: SourceDescription | None, total: int, done: frozenset[int],
                       pipeline_options: Any = None) -> tuple[int | None, str]:
        """(items left to read with the pieces ``done`` skipped, where the figure comes from); None when unknown."""
        return None, ""

    def state(self, description: SourceDescription | None) -> dict[str, Any]:
        """What a reviewed plan records of it, to tell later whether it changed."""
        return {"source": self.kind, "name": self.name()}

    def snapshot(self) -> Snapshot | None:
        """The time it is a snapshot of (a full export); None for a source that is read over time."""
        return None

    @abstractmethod
    def read(self, p: Any, *, total_segments: int = 1, completed: frozenset[int] = frozenset(),
             mark_done: bool = False, segments_in_flight: int | None = None,
             start_keys: dict[int, dict[str, Any]] | None = None, progress_dir: str | None = None,
             count_read: bool = True) -> SourceRead:
        """Add the read to pipeline ``p``: the pieces not ``completed``, each followed by its done marker when
        ``mark_done``, from the positions ``start_keys`` where they have them. ``count_read``: count the items as
        read (Beam counter items_read) where the source does not count them itself."""

    @abstractmethod
    def items(self, limit: int | None = None) -> list[dict]:
        """The first ``limit`` items (a few pages, never a full read), or every item; without Beam."""

    def random_sample(self, n: int, *, item_count: int = 0, seed: int | None = None) -> list[dict]:
        """Up to ``n`` items picked at random across the source (by default: uniformly among every item)."""
        everything = self.items()
        return everything if len(everything) <= n else random.Random(seed).sample(everything, n)


def counted(batch: Any) -> Any:
    """Count a batch's items as read (Beam counter items_read) and pass it on: a step of a source's read graph."""
    from apache_beam.metrics import Metrics

    from .run.metrics import NAMESPACE

    Metrics.counter(NAMESPACE, "items_read").inc(len(batch))
    return batch


class ItemsSource(Source):
    """Items in hand (a ``--sample`` run's): one piece, no checkpoint."""

    kind = "items"

    def __init__(self, items: list[dict], label: str = "Sample") -> None:
        self._items, self._label = list(items), label

    def name(self) -> str:
        return f"{len(self._items)} items"

    def read(self, p: Any, *, total_segments: int = 1, completed: frozenset[int] = frozenset(),
             mark_done: bool = False, segments_in_flight: int | None = None,
             start_keys: dict[int, dict[str, Any]] | None = None, progress_dir: str | None = None,
             count_read: bool = True) -> SourceRead:
        import apache_beam as beam

        from .run.batches import BATCH_ITEMS, Batch

        batches = [Batch(self._items[start:start + BATCH_ITEMS]) for start in range(0, len(self._items), BATCH_ITEMS)]
        read = p | self._label >> beam.Create(batches)
        if count_read:
            read = read | "CountRead" >> beam.Map(counted)
        return SourceRead(read)

    def items(self, limit: int | None = None) -> list[dict]:
        return self._items if limit is None else self._items[:limit]
