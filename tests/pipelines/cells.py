"""What a migration should leave in Bigtable, and what it did: every cell, row by row, all versions."""

from __future__ import annotations

from ddb2bt.mappers.compiler import compile_spec
from ddb2bt.mappers.results import MappedRow
from ddb2bt.mappers.spec import TargetSpec
from ddb2bt.mappers.spec import MappingSpec


__all__ = ["drop_rows", "expected_cells", "read_cells"]


def expected_cells(spec: MappingSpec, items: list[dict], now_ms: int | None = None, table: str | None = None) -> dict:
    """The cells one uninterrupted run of ``spec`` over ``items`` writes, in :func:`read_cells`' form: in the main
    table, or (``table``) in that index table."""
    compiled = compile_spec(spec, now_ms=now_ms)
    found: dict = {}
    for item in items:
        result = compiled.map_item(item)
        if isinstance(result, MappedRow):
            for row in (result, *result.index_rows):  # an item's index rows are written with it (in the main table
                if getattr(row, "table", None) != table:  # or an index's own, `table`)
                    continue
                found.setdefault(row.row_key, []).extend(
                    (c.family, c.qualifier, c.timestamp_micros, c.value) for c in row.cells)
    return {key: sorted(cells) for key, cells in found.items()}


def read_cells(target: TargetSpec) -> dict[bytes, list[tuple[str, bytes, int, bytes]]]:
    """Every cell of the table, row by row (the data client honours BIGTABLE_EMULATOR_HOST)."""
    from google.cloud.bigtable.data import BigtableDataClient, ReadRowsQuery

    with BigtableDataClient(project=target.project) as client:
        table = client.get_table(target.instance, target.table)
        return {
            row.row_key: sorted((c.family, c.qualifier, c.timestamp_micros, c.value) for c in row.cells)
            for row in table.read_rows(ReadRowsQuery())
        }


def drop_rows(target: TargetSpec, keys: list[bytes]) -> None:
    """Delete whole rows, as a test that loses rows on purpose does, so that a later write of them (a repair) cannot
    be lost: DropRowRange with each key as the prefix, which takes the row out of the emulator's table at once.
    DeleteAllFromRow leaves the row there, empty, until the emulator's garbage collector removes it, and a write
    into it as it does is answered OK and lost, in a table with a GC rule (docs/PIPELINE.md, "Writes the emulator
    loses"). Each key is checked first to be a row that prefixes no other."""
    from google.cloud.bigtable import Client
    from google.cloud.bigtable.data import BigtableDataClient, ReadRowsQuery, RowRange

    with BigtableDataClient(project=target.project) as client:
        table = client.get_table(target.instance, target.table)
        for key in keys:  # rows that start with the key sort right after it: two rows read say whether there is one
            found = [row.row_key for row in table.read_rows(ReadRowsQuery(row_ranges=RowRange(start_key=key), limit=2))]
            assert found[:1] == [key] and not any(other.startswith(key) for other in found[1:]), (key, found)
    admin = Client(project=target.project, admin=True).instance(target.instance).table(target.table)
    for key in keys:
        admin.drop_by_prefix(key)
