"""What mapping one DynamoDB item produces: a row, a deliberate skip, or an item error.

These are plain value objects so that the pipeline can pickle them cheaply and the
CLI can render them; converting a row into google-cloud-bigtable mutation objects
happens in :mod:`ddb2bt.pipelines` (see ``to_mutation_entry``).
"""

from __future__ import annotations

from typing import NamedTuple


class Cell(NamedTuple):
    """One Bigtable cell: ``family:qualifier`` = ``value`` at ``timestamp_micros``.

    Timestamps are microseconds since the epoch and always multiples of 1000,
    because Bigtable only keeps millisecond granularity.
    """

    family: str
    qualifier: bytes
    timestamp_micros: int
    value: bytes


class IndexRow(NamedTuple):
    """An item's row in one secondary index (see mappers/index_rows.py): its own row, one item per row."""

    row_key: bytes
    cells: tuple[Cell, ...]
    index_name: str
    table: str | None = None
    """The index's own table (spec `target: {table: ...}`); None: a row of the main table, under the index's prefix."""


class MappedRow(NamedTuple):
    """The mutations one item contributes to one Bigtable row (several items may share a row key)."""

    row_key: bytes
    cells: tuple[Cell, ...]
    entity: str
    warnings: tuple[str, ...] = ()
    index_rows: tuple[IndexRow, ...] = ()
    """The item's rows in the spec's secondary indexes (none for an item without an index's key attributes)."""

    def rows(self) -> tuple[MappedRow | IndexRow, ...]:
        """This row and the item's index rows: everything the item writes."""
        return (self, *self.index_rows)


class ItemError(NamedTuple):
    """Why an item could not be mapped; the pipeline dead-letters the item with this reason."""

    reason: str
    entity: str | None = None
    attribute: str | None = None
    stage: str = "map"

    def describe(self) -> str:
        where = []
        if self.entity:
            where.append(f"entity {self.entity!r}")
        if self.attribute:
            where.append(f"attribute {self.attribute!r}")
        return f"{', '.join(where)}: {self.reason}" if where else self.reason


class Skipped(NamedTuple):
    """An item left out on purpose (a skip rule, an expired TTL, a v0_ latest copy); counted, not lost."""

    reason: str
    entity: str | None = None


MapResult = MappedRow | ItemError | Skipped
