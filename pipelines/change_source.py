"""What a source of item changes is to the catch-up and the stream tail: the one interface both read through.

A change source describes itself (its name, the window of time it covers, the table it is of), checks
itself before anything is written, splits into pieces with resumable positions (a DynamoDB stream's
shards, each read after its parent and resumed after a sequence number; an incremental export's data
files, each read whole), reads one piece from a position as pages of changes (each page with the
position after it, which the reader saves once the page is applied), and reads every piece at once as
a Beam graph of change batches (the catch-up). Sibling of :mod:`.source` (sources of items).

Implementations: :class:`.dynamodb.incremental_export.IncrementalExportChanges` and
:class:`.dynamodb.stream.StreamChanges`; :mod:`.change_sources` chooses one (``catch-up --export PATH``,
or the table's stream for ``tail``). Adding a change source is one module with a subclass and one
``register`` call. The catch-up applies :meth:`ChangeSource.read` through the change sink's Beam step;
the tail (:mod:`.cutover.tail`) follows :meth:`ChangeSource.pages` piece by piece, applying each page
through the change sink's applier and saving its position after it.

Beam is imported where a graph is built, not here.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from ..mappers.errors import UsageError
from .source import SourceRead

if TYPE_CHECKING:
    from ..mappers.changes import Change


@dataclass(frozen=True)
class ChangeWindow:
    """What a change source covers."""

    id: str
    """What names it in the run folder: an export's id, a stream's ARN."""
    from_us: int | None = None
    """The first moment it holds changes of (an export's ExportFromTime); None for a stream, read from any point."""
    to_us: int | None = None
    """Where it ends (an export's ExportToTime); None while it goes on (a stream)."""
    expected: int | None = None
    """How many changes it says it holds (a manifest's itemCount); None when it does not say."""
    table: Any = None
    """The table it is of (:class:`.dynamodb.export.SourceTable`), when it names one."""


@dataclass(frozen=True)
class Piece:
    """One part of a change source read in order: a shard, a data file. A piece with a ``parent`` is read only once
    its parent is finished (a stream's shard lineage)."""

    id: str
    parent: str | None = None


@dataclass(frozen=True)
class ChangePage:
    """Changes read from one piece, in order, and where a later read of the piece continues from after them."""

    changes: list[Change]
    position: str | None
    """After the page's last change (a sequence number); the position asked for when the page is empty."""
    done: bool = False
    """The piece is read to its end (a closed shard with no next page, a data file's last page)."""


@dataclass(frozen=True)
class PiecePlan:
    """What a reader of pieces reads now (see :func:`plan_pieces`)."""

    ready: list[str]
    """Pieces to read now, each after its ancestors."""
    waiting: list[str]
    """Pieces whose parent is still being read (unfinished)."""
    lost: list[str]
    """Pieces the reader's checkpoint has not finished that the source no longer lists."""


def plan_pieces(listed: list[Piece], saved: Mapping[str, Any]) -> PiecePlan:
    """Which pieces to read, from the pieces a source lists and a checkpoint (``saved``: piece id -> its state, with
    ``done``). Pure: no I/O. A piece is ready once its parent is finished or no longer listed; a piece the
    checkpoint holds unfinished that the source no longer lists is ``lost``."""
    by_id = {piece.id: piece for piece in listed}

    def finished(piece_id: str) -> bool:
        state = saved.get(piece_id)
        return state is not None and state.done

    def depth(piece_id: str) -> int:
        seen, parent = {piece_id}, by_id[piece_id].parent
        while parent is not None and parent in by_id and parent not in seen:
            seen.add(parent)
            parent = by_id[parent].parent
        return len(seen)

    ready: list[str] = []
    waiting: list[str] = []
    for piece_id in sorted(by_id, key=lambda piece_id: (depth(piece_id), piece_id)):
        if finished(piece_id):
            continue
        parent = by_id[piece_id].parent
        (waiting if parent is not None and parent in by_id and not finished(parent) else ready).append(piece_id)
    lost = sorted(piece_id for piece_id, state in saved.items() if not state.done and piece_id not in by_id)
    return PiecePlan(ready, waiting, lost)


class ChangeSource(ABC):
    """A source of item changes (:class:`~ddb2bt.mappers.changes.Change`); see the module doc."""

    kind: ClassVar[str]
    """The registry's name for this kind of change source."""
    pieces_name: ClassVar[str] = "pieces"
    """What its pieces are called in messages ("stream shards", "export data files")."""
    changes_name: ClassVar[str] = "change(s)"
    """What its changes are called in messages ("stream record(s)")."""

    @abstractmethod
    def name(self) -> str:
        """What it is, in one word or path (a table's stream, an export's folder)."""

    @abstractmethod
    def window(self) -> ChangeWindow:
        """What it covers; refuses (a ddb2bt error) a source that holds no changes that can be applied."""

    def check(self, key_names: tuple[str, ...] = (), *, from_us: int | None = None,
              resuming: str | None = None, keep: bool = False) -> None:
        """Refuse (a ddb2bt error) what cannot be applied, before anything is written: a record that is not a change
        of an item keyed by ``key_names``; changes from ``from_us`` on that it no longer holds; a checkpoint made of
        another source (``resuming``: the window id it recorded). ``keep``: the read will run in this process
        (DirectRunner in_memory), so a source may keep what it checked for it rather than read it twice."""

    @abstractmethod
    def pieces(self) -> list[Piece]:
        """Its pieces now (a stream's shard list changes as shards split and expire)."""

    def lost(self, piece: str) -> Exception:
        """The error for a piece a checkpoint has not finished that the source no longer lists."""
        return UsageError(f"{piece} is no longer in {self.name()} before it was read to its end")

    @abstractmethod
    def pages(self, piece: str, position: str | None) -> Iterator[ChangePage]:
        """The changes of ``piece`` after ``position`` (None: from its start), page by page; without Beam. A reader
        may stop between pages; the iterator is resumed only after the page it gave is applied."""

    def read(self, p: Any) -> SourceRead:
        """Add the read of every piece to pipeline ``p``: batches of changes (each item's once, in order) and, for a
        source that checks its counts, the mismatches as records. By default: the pieces spread over the workers,
        each read from its start by :meth:`pages`."""
        import apache_beam as beam

        from .run.batches import Batch

        return SourceRead(p | "Pieces" >> beam.Create([piece.id for piece in self.pieces()])  # its Reshuffle spreads
                          | "ReadChanges" >> beam.FlatMap(_piece_batches, self).with_output_types(Batch))


def _piece_batches(piece: str, source: ChangeSource) -> Iterator[Any]:
    from .run.batches import Batch

    for page in source.pages(piece, None):
        if page.changes:
            yield Batch(page.changes)
