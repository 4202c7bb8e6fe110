"""Read migrated rows back from Bigtable as plain `Cell`s: many keys per request, key ranges, cell-precise deletes.

Uses the data client, so BIGTABLE_EMULATOR_HOST points it at the emulator as usual. `validate`
looks rows up in batches (`RowLookup.rows`: one ReadRows per up to 1,000 keys, never one request
per item), lists a table's row keys range by range for its target scan (`ScanRowKeys`), and
deletes single cell versions when it repairs (`delete_entries`): a `DeleteRangeFromColumn` over
exactly one timestamp, never a row delete that would take other items' cells with it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import apache_beam as beam
from apache_beam.metrics import Metrics

from ..mappers.results import Cell
from .metrics import NAMESPACE

if TYPE_CHECKING:
    from ..mappers.spec import TargetSpec
    from .bigtable_sink import Destination

KEYS_PER_REQUEST = 1000


def _cells(row: Any) -> list[Cell]:
    return [Cell(c.family, c.qualifier, c.timestamp_micros, c.value) for c in row.cells]


class RowLookup:
    """A data client and table for one worker: rows by key, in batches. Close it (or use ``with``)."""

    def __init__(self, destination: Destination):
        from google.cloud.bigtable.data import BigtableDataClient

        self._client = BigtableDataClient(project=destination.project)
        self.table = self._client.get_table(destination.instance, destination.table,
                                            app_profile_id=destination.app_profile)

    def rows(self, row_keys: Iterable[bytes]) -> dict[bytes, list[Cell]]:
        """The cells of each row that exists among ``row_keys``, in ReadRows requests of up to 1,000 keys."""
        from google.cloud.bigtable.data import ReadRowsQuery

        keys: list[str | bytes] = sorted(set(row_keys))
        found: dict[bytes, list[Cell]] = {}
        for start in range(0, len(keys), KEYS_PER_REQUEST):
            for row in self.table.read_rows(ReadRowsQuery(row_keys=keys[start:start + KEYS_PER_REQUEST])):
                found[row.row_key] = _cells(row)
        return found

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> RowLookup:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def read_cells(target: TargetSpec, row_keys: Iterable[bytes] | None = None) -> Iterator[tuple[bytes, list[Cell]]]:
    """(row key, cells) for the given keys (those that exist), or for every row when `row_keys` is None."""
    from google.cloud.bigtable.data import ReadRowsQuery

    from .bigtable_sink import Destination

    with RowLookup(Destination.from_target(target)) as lookup:
        if row_keys is not None:
            yield from lookup.rows(row_keys).items()
            return
        for row in lookup.table.read_rows_stream(ReadRowsQuery()):
            yield row.row_key, _cells(row)


def key_ranges(destination: Destination) -> list[tuple[bytes, bytes]]:
    """The table split at the keys Bigtable samples (about one range per tablet): (start, end), b"" open."""
    with RowLookup(destination) as lookup:
        splits = [key for key, _offset in lookup.table.sample_row_keys() if key]
    bounds = [b"", *sorted(set(splits)), b""]
    return list(zip(bounds[:-1], bounds[1:]))


class ScanRowKeys(beam.DoFn):
    """(start, end) key ranges in, the row keys of each range out: one cell per row, values stripped."""

    def __init__(self, destination: Destination):
        self._destination = destination
        self._rows = Metrics.counter(NAMESPACE, "target_rows_scanned")

    def setup(self) -> None:
        self._lookup = RowLookup(self._destination)

    def process(self, key_range: tuple[bytes, bytes]) -> Iterator[bytes]:
        from google.cloud.bigtable.data import ReadRowsQuery, RowRange
        from google.cloud.bigtable.data.row_filters import (CellsRowLimitFilter, RowFilterChain,
                                                            StripValueTransformerFilter)

        start, end = key_range
        query = ReadRowsQuery(row_ranges=RowRange(start or None, end or None),
                              row_filter=RowFilterChain([CellsRowLimitFilter(1), StripValueTransformerFilter(True)]))
        count = 0
        for row in self._lookup.table.read_rows_stream(query):
            count += 1
            yield row.row_key
        self._rows.inc(count)

    def teardown(self) -> None:
        lookup = getattr(self, "_lookup", None)
        if lookup is not None:
            lookup.close()


def delete_entries(row_key: bytes, cells: Iterable[Cell]) -> Any:
    """One mutation entry deleting exactly these cell versions (1 ms timestamp ranges), nothing else of the row."""
    from google.cloud.bigtable.data.mutations import DeleteRangeFromColumn, RowMutationEntry

    return RowMutationEntry(row_key, [DeleteRangeFromColumn(c.family, c.qualifier, c.timestamp_micros,
                                                            c.timestamp_micros + 1000) for c in cells])
