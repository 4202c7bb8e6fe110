"""Changes to DynamoDB items, turned into cell-precise Bigtable mutations through the spec. Pure: no I/O.

A change is what DynamoDB Streams (NEW_AND_OLD_IMAGES) or an incremental export reports for one
item: its key, the image before (``old``) and after (``new``), and its position on the item's
timeline. :func:`diff` maps both images with the *same* compiled spec (the same "now" as the
backfill, so default timestamps match) and returns, per Bigtable row, the cells to set (everything
the new image produces) and the cells to delete: those the old image produced that the new one no
longer does, each named by family, qualifier *and timestamp* (a ``DeleteFromColumn`` over that one
millisecond). Other items folded into the same row are never touched: there is no row delete.
Only the old image's cells that the new image does not set matter, so where both images have the same
row and timestamps only the attributes that differ are mapped (``CompiledSpec.stale_coordinates``).

An item that changes entity, row key or timestamps needs nothing special: its old cells are
deleted wherever they were (another row included) and its new cells written wherever they go.

Several changes of one item (a batch of stream records) fold into one :class:`ChangeSet`:
delete every cell any of the old images produced that the last image does not, set the last
image's cells. Applied to any state, that has exactly the effect of applying the changes one
after the other (see docs/CUTOVER.md, "Why it converges"), and it is one mutation entry per row.

An image that does not map (an :class:`ItemError`) produces no cells, as in the backfill, which
dead-letters such items: its change still deletes the old cells, and is reported as a dead letter
carrying the change record.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from operator import itemgetter
from typing import Any, NamedTuple

from .results import Cell, IndexRow, ItemError, MappedRow, Skipped

Item = dict[str, Any]

INSERT, MODIFY, REMOVE = "INSERT", "MODIFY", "REMOVE"
KINDS = (INSERT, MODIFY, REMOVE)


class Change(NamedTuple):
    """One change of one item, in DynamoDB wire format (``B`` as bytes or base64 text)."""

    keys: Item
    old: Item | None
    new: Item | None
    kind: str
    """INSERT, MODIFY or REMOVE (for exports: inferred from which images are present)."""
    time_us: int
    """When it happened: WriteTimestampMicros (exports) or ApproximateCreationDateTime (streams), in µs."""
    sequence: str = ""
    """The stream sequence number (empty for exports); orders changes of one item within a shard."""
    ttl: bool = False
    """A deletion by DynamoDB's TTL process (stream userIdentity: Service dynamodb.amazonaws.com)."""

    def record(self) -> dict[str, Any]:
        """The change as a plain record, for dead letters."""
        return {"Keys": self.keys, "OldImage": self.old, "NewImage": self.new, "eventName": self.kind,
                "WriteTimestampMicros": self.time_us, "SequenceNumber": self.sequence or None, "ttl": self.ttl}


def kind_of_change(old: Item | None, new: Item | None) -> str:
    """INSERT (no old image), REMOVE (no new image) or MODIFY (both)."""
    if new is None:
        return REMOVE
    return INSERT if old is None else MODIFY


class CellDelete(NamedTuple):
    """One cell to delete: exactly ``family:qualifier`` at ``timestamp_micros`` (a 1 ms range)."""

    family: str
    qualifier: bytes
    timestamp_micros: int


class RowChange(NamedTuple):
    """What one item's changes do to one Bigtable row: cells to delete, then cells to set."""

    row_key: bytes
    deletes: tuple[CellDelete, ...]
    sets: tuple[Cell, ...]
    table: str | None = None
    """An index's own table (IndexRow.table); None: the main table."""

    @property
    def mutation_count(self) -> int:
        return len(self.deletes) + len(self.sets)


class ChangeSet(NamedTuple):
    """The mutations of one item's changes, and the changes whose new image did not map (dead letters)."""

    rows: tuple[RowChange, ...]
    entity: str | None
    failures: tuple[tuple[Change, ItemError], ...] = ()


_new = tuple.__new__  # a NamedTuple from a tuple without its Python __new__ (as the compiler builds cells)
_coordinates = itemgetter(slice(0, 3))
"""A cell's (family, qualifier, timestamp), as a CellDelete names it."""


class NothingToDo(NamedTuple):
    """Neither image produces cells (both skipped by the spec, or never mapped): counted as skipped."""

    reason: str


def _cells(result: Any) -> tuple[MappedRow | None, ItemError | None, Skipped | None]:
    if result is None:
        return None, None, None
    if isinstance(result, MappedRow):
        return result, None, None
    if isinstance(result, ItemError):
        return None, result, None
    return None, None, result


def diff(compiled: Any, change: Change) -> ChangeSet | NothingToDo:
    """The mutations for one change (see :func:`diff_many`)."""
    return diff_many(compiled, (change,))


def diff_many(compiled: Any, changes: Sequence[Change]) -> ChangeSet | NothingToDo:
    """The mutations for consecutive changes of one item, in order (first to last).

    Deletes: every cell an old image (or an intermediate new image) produced that the last new
    image does not produce, by exact coordinates; sets: the last new image's cells.
    """
    if not changes:
        return NothingToDo("no changes")
    if len(changes) == 1 and not getattr(compiled, "indexes", ()):
        quick = _one_change(compiled, changes[0])
        if quick is not None:
            return quick
    produced: dict[Any, dict[tuple[str, bytes, int], None]] = {}  # where (see _where) -> coordinates, in order
    failures: list[tuple[Change, ItemError]] = []
    entity = None
    skip_reason = None
    last_row: MappedRow | None = None
    for index, change in enumerate(changes):  # the new images, in order; one that does not map is a dead letter
        if change.new is None:
            continue
        row, error, skipped = _cells(compiled.map_item(change.new))
        if error is not None:
            failures.append((change, error))
        if skipped is not None:
            skip_reason = skipped.reason
        if index == len(changes) - 1:
            last_row = row
        elif row is not None:
            for also in row.rows():
                produced.setdefault(_where(also), {}).update(dict.fromkeys(cell[:3] for cell in also.cells))
            entity = row.entity
    # The old images, all of them (a redelivered change may break the chain), found against the last new image:
    # only the attributes that differ are mapped where the row and the timestamps are the same
    # (CompiledSpec.stale_coordinates); otherwise the whole image.
    last = changes[-1].new
    for image in {id(change.old): change.old for change in changes if change.old is not None}.values():
        for index_row in old_index_rows(compiled, image):  # where the old image's index rows were: moved or gone
            produced.setdefault(_where(index_row), {}).update(dict.fromkeys(cell[:3] for cell in index_row.cells))
        stale = compiled.stale_coordinates(image, last) if last_row is not None else None
        if stale is not None:
            produced.setdefault(last_row.row_key, {}).update(dict.fromkeys(stale))  # type: ignore[union-attr]
            continue
        row = _cells(compiled.map_item(image))[0]
        if row is not None:
            produced.setdefault(row.row_key, {}).update(dict.fromkeys(cell[:3] for cell in row.cells))
            entity = row.entity
    written: dict[Any, tuple[Cell, ...]] = {}
    if last_row is not None:
        entity = last_row.entity
        written = {_where(row): row.cells for row in last_row.rows()}
        for row_key in written:
            produced.setdefault(row_key, {})
    rows: list[RowChange] = []
    for where, coordinates in produced.items():
        sets: tuple[Cell, ...] = written.get(where, ())
        if sets:
            if coordinates:
                kept = {cell[:3] for cell in sets}
                coordinates = {c: None for c in coordinates if c not in kept}
        deletes = tuple(_new(CellDelete, c) for c in coordinates)
        if deletes or sets:
            rows.append(RowChange(where, deletes, sets) if where.__class__ is bytes
                        else RowChange(where[1], deletes, sets, where[0]))
    if not rows and not failures:
        return NothingToDo(skip_reason or "neither image produces cells")
    return ChangeSet(tuple(rows), entity, tuple(failures))


def _one_change(compiled: Any, change: Change) -> ChangeSet | NothingToDo | None:
    """diff_many's answer for the usual change of a catch-up (one change of an item, both images, the new one mapping
    to one row, the old one's stale coordinates found by the shortcut), without the general path's bookkeeping:
    the deletes are the stale coordinates the new image does not set. None: the general path answers."""
    new, old = change.new, change.old
    if new is None or old is None:
        return None
    row = compiled.map_item(new)
    if row.__class__ is not MappedRow or row.index_rows:
        return None
    stale = compiled.stale_coordinates(old, new, row.entity)
    if stale is None:
        return None
    sets = row.cells
    deletes: tuple[CellDelete, ...] = ()
    if stale:  # the stale coordinates the new cells do not set again; most name a qualifier no new cell has
        qualifiers = {cell[1] for cell in sets}
        kept: set | None = None
        found = []
        for coordinate in dict.fromkeys(stale):
            if coordinate[1] in qualifiers:
                if kept is None:
                    kept = set(map(_coordinates, sets))
                if coordinate in kept:
                    continue
            found.append(_new(CellDelete, coordinate))
        deletes = tuple(found)
    if not deletes and not sets:
        return NothingToDo("neither image produces cells")
    return _new(ChangeSet, ((_new(RowChange, (row.row_key, deletes, sets, None)),), row.entity, ()))


def _where(row: MappedRow | IndexRow) -> Any:
    """Where a row is: its key in the main table, (table, key) in an index's own table (keys of two tables may be
    equal)."""
    table = row.table if row.__class__ is IndexRow else None
    return row.row_key if table is None else (table, row.row_key)


def old_index_rows(compiled: Any, image: Item) -> tuple[IndexRow, ...]:
    """The index rows an old image had (an index row holds one item, so its cells are exactly the image's projection:
    deleting them removes the row). An image the backfill could not map wrote none; deleting them is a no-op."""
    if not getattr(compiled, "indexes", ()):
        return ()
    try:
        return compiled.index_rows(image)
    except Exception:  # noqa: BLE001 - a key too long for Bigtable: the row was never written
        return ()


def group_by_item(changes: Iterable[Change], key_attributes: Sequence[str]) -> dict[tuple, list[Change]]:
    """Changes grouped by item key, each group in the order given (callers give them in stream order)."""
    groups: dict[tuple, list[Change]] = {}
    for change in changes:
        groups.setdefault(item_key(change.keys, key_attributes), []).append(change)
    return groups


def item_key(keys: Item, key_attributes: Sequence[str]) -> tuple:
    """A hashable identity of an item from its key attributes (``B`` normalised to base64 text or bytes as given)."""
    parts: list[tuple] = []
    for name in key_attributes or sorted(keys):
        value = keys.get(name) or {}
        if len(value) == 1:  # a key attribute: one type tag
            ((tag, payload),) = value.items()
            parts.append(((tag, bytes(payload) if payload.__class__ is bytearray else payload),))
        else:
            parts.append(tuple(sorted((tag, payload if not isinstance(payload, bytearray) else bytes(payload))
                                      for tag, payload in value.items())))
    return tuple(parts)
