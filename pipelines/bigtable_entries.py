"""``RowMutationEntry`` objects for mapped rows, cheap enough for the hot path.

The data client's ``MutationsBatcher`` takes ``RowMutationEntry`` objects and asks each one for
``len(entry.mutations)``, ``entry.size()`` (three times per entry) and ``entry._to_pb()``.
Profiled on the benchmark data (10 cells per item), the client's own classes cost more per item
than mapping the item does:

* a ``SetCell`` per cell, with its argument checks: ~10 us per item;
* ``size()`` builds a dict of every mutation each time and returns ``sys.getsizeof`` of the
  outer dict, which is the same ~180 bytes whatever the row holds, so the batcher's byte limits
  (``flush_limit_bytes``, ``flow_control_max_bytes``) never bite: ~3 x 3 us per item;
* ``_to_pb()`` goes through proto-plus per cell: ~100 us per item.

:class:`CellsEntry` keeps the mapper's cell tuples instead. ``SetCell`` objects are made only
if something reads ``mutations`` item by item (the error path does); the raw (upb) message is
filled directly, once, when the batcher first asks for the size, and ``size()`` is its serialized
size. What goes on the wire is byte for byte what the client's classes send
(tests/pipelines/test_bigtable_entries.py).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from ..mappers.limits import MUTATIONS_PER_ENTRY_MAX
from ..mappers.results import MappedRow

def to_mutation_entry(row: MappedRow) -> Any:
    """The ``RowMutationEntry`` that writes one mapped row (hot path: no checks beyond the mapper's)."""
    return _cells_entry_class()(row[0], row[1])


@functools.cache
def _cells_entry_class() -> type:
    """Built on first use, so importing this module does not import the Bigtable client."""
    from google.cloud.bigtable.data import RowMutationEntry, SetCell
    from google.cloud.bigtable_v2.types import bigtable as types_pb

    wrap = types_pb.MutateRowsRequest.Entry.wrap
    raw_entry = types_pb.MutateRowsRequest.Entry.pb()

    class SetCells(Sequence):
        """The cells as ``SetCell`` mutations: ``len`` is free, the objects are made when read."""

        __slots__ = ("_cells", "_made")

        def __init__(self, cells: tuple) -> None:
            self._cells = cells
            self._made: tuple | None = None

        def __len__(self) -> int:
            return len(self._cells)

        def __getitem__(self, index: Any) -> Any:
            if self._made is None:
                self._made = tuple(SetCell(family, qualifier, value, micros)
                                   for family, qualifier, micros, value in self._cells)
            return self._made[index]

    class CellsEntry(RowMutationEntry):
        """A ``RowMutationEntry`` of ``SetCell`` mutations held as ``(family, qualifier, micros, value)``."""

        def __init__(self, row_key: bytes, cells: tuple) -> None:  # not super().__init__: it builds SetCells
            if not 0 < len(cells) <= MUTATIONS_PER_ENTRY_MAX:  # the client's own limits
                raise ValueError(f"a row entry needs 1 to {MUTATIONS_PER_ENTRY_MAX} mutations, not {len(cells)}")
            self.row_key = row_key
            self.cells = cells
            self.mutations = SetCells(cells)  # type: ignore[assignment]  # a lazy tuple: the client takes len and items
            self._pb: Any = None
            self._size = -1

        def size(self) -> int:
            """Bytes on the wire; the batcher asks three times, the message is built on the first."""
            if self._size < 0:
                self._pb = self._build()
                self._size = self._pb.ByteSize()
            return self._size

        def is_idempotent(self) -> bool:
            return all(cell[2] >= 0 for cell in self.cells)  # -1 would be a server-side timestamp

        def _to_pb(self) -> Any:
            # Asked once per entry (the client keeps it for retries): hand the message over, hold it no longer.
            entry, self._pb = self._pb or self._build(), None
            return wrap(entry)

        def _build(self) -> Any:
            entry = raw_entry(row_key=self.row_key)
            add = entry.mutations.add
            for family, qualifier, micros, value in self.cells:
                cell = add().set_cell
                cell.family_name = family
                cell.column_qualifier = qualifier
                cell.timestamp_micros = micros
                cell.value = value
            return entry

    return CellsEntry
