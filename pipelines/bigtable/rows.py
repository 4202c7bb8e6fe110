"""The rollback's source: Bigtable rows in key order, range by range, from a row key on (to resume), as `Cell`s.

`ranges` splits the table (or the part of it between `--start` and `--end`) at the keys Bigtable
samples; `rows` reads one range from just after a row key, so that a resumed rollback starts
after the last row whose items are in DynamoDB. With `since_us` only rows holding a cell written
at or after that time are read, and then whole: a timestamp-range filter with one cell per row
and values stripped lists their keys, then the rows are read by key (a filter on the rows' own
read would return only the newer cells, and an item is rebuilt from all of its cells).

Only the data client, no Beam: a rollback's worker processes import this module, and each would pay
for importing Beam.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ...mappers.results import Cell

if TYPE_CHECKING:
    from ...mappers.spec import TargetSpec

KEYS_PER_LOOKUP = 500
MAX_RANGES = 32
"""At most this many ranges: each is one ReadRows call begun (and one entry of the checkpoint), and Bigtable (the
emulator even more) samples keys far more often than a rollback needs places to resume from."""


def _open(target: TargetSpec) -> tuple[Any, Any]:
    """(data client, table) of the target."""
    from google.cloud.bigtable.data import BigtableDataClient

    client = BigtableDataClient(project=target.project)
    return client, client.get_table(target.instance, target.table, app_profile_id=target.app_profile)


def ranges(target: TargetSpec, start: bytes = b"", end: bytes = b"") -> list[tuple[bytes, bytes]]:
    """[start, end) split at the table's sampled keys (b"" open-ended; at most MAX_RANGES, evenly picked among
    them), in key order."""
    client, table = _open(target)
    with client:
        splits = sorted({key for key, _offset in table.sample_row_keys() if key})
    inside = [key for key in splits if key > start and (not end or key < end)]
    if len(inside) >= MAX_RANGES:
        step = len(inside) / MAX_RANGES
        inside = [inside[int(step * (number + 1))] for number in range(MAX_RANGES - 1)]
    bounds = [start, *inside, end]
    return list(zip(bounds[:-1], bounds[1:]))


class RowSource:
    """One data client; rows of a key range, optionally only those touched since a time. Close it (or `with`)."""

    def __init__(self, target: TargetSpec, *, since_us: int | None = None, latest_only: bool = False):
        self._client, self._table = _open(target)
        self.since_us, self.latest_only = since_us, latest_only
        # A counter is the sum of its column's cells (one per timestamp): read whole, and the newest version
        # of other columns picked here (no ReadRows filter says "one version, but not in these families").
        self._counters = frozenset(name for name, family in target.families.items()
                                   if family.aggregate) if latest_only else frozenset()

    def rows(self, key_range: tuple[bytes, bytes], after: bytes | None = None) -> Iterator[tuple[bytes, list[Cell]]]:
        """(row key, cells) of the range in key order, from just after ``after`` (None: from the range's start)."""
        if self.since_us is None:
            yield from self._read(key_range, after, self._newest_filter())
            return
        from google.cloud.bigtable.data.row_filters import (CellsRowLimitFilter, RowFilterChain,
                                                            StripValueTransformerFilter,
                                                            TimestampRangeFilter)

        touched = RowFilterChain([TimestampRangeFilter(start=_datetime(self.since_us)),
                                  CellsRowLimitFilter(1), StripValueTransformerFilter(True)])
        keys: list[bytes] = []
        for row_key, _cells in self._read(key_range, after, touched):
            keys.append(row_key)
            if len(keys) == KEYS_PER_LOOKUP:
                yield from self._whole(keys)
                keys = []
        yield from self._whole(keys)

    def _whole(self, keys: list[bytes]) -> Iterator[tuple[bytes, list[Cell]]]:
        if not keys:
            return
        found = dict(self._read_keys(keys))
        for key in sorted(found):
            yield key, found[key]

    def _newest_filter(self) -> Any:
        if not self.latest_only or self._counters:
            return None
        from google.cloud.bigtable.data.row_filters import CellsColumnLimitFilter

        return CellsColumnLimitFilter(1)

    def _read_keys(self, keys: list[bytes]) -> Iterator[tuple[bytes, list[Cell]]]:
        from google.cloud.bigtable.data import ReadRowsQuery

        for row in self._table.read_rows_stream(ReadRowsQuery(row_keys=list[str | bytes](keys), row_filter=self._newest_filter())):
            yield row.row_key, self._cells(row)

    def _read(self, key_range: tuple[bytes, bytes], after: bytes | None, row_filter: Any) -> Iterator[tuple[bytes, list[Cell]]]:
        from google.cloud.bigtable.data import ReadRowsQuery, RowRange

        start, end = key_range
        if after is not None:
            span = RowRange(start_key=after, end_key=end or None, start_is_inclusive=False)
        else:
            span = RowRange(start_key=start or None, end_key=end or None)
        for row in self._table.read_rows_stream(ReadRowsQuery(row_ranges=span, row_filter=row_filter)):
            yield row.row_key, self._cells(row)

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> RowSource:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _cells(self, row: Any) -> list[Cell]:
        cells = [Cell(c.family, c.qualifier, c.timestamp_micros, c.value) for c in row.cells]
        if not self._counters:
            return cells
        seen: set[tuple[str, bytes]] = set()
        newest = []
        for cell in sorted(cells, key=lambda c: (c.family, c.qualifier, -c.timestamp_micros)):
            if cell.family in self._counters or (cell.family, cell.qualifier) not in seen:
                newest.append(cell)
                seen.add((cell.family, cell.qualifier))
        return newest


def _datetime(micros: int) -> Any:
    from datetime import datetime, timedelta, timezone

    return datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(microseconds=micros)
