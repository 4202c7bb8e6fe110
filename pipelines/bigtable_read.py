"""Read migrated rows back from Bigtable as plain `Cell`s, for `ddb2bt validate` and tests.

Uses the data client, so BIGTABLE_EMULATOR_HOST points it at the emulator as usual.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from ..mappers.results import Cell

if TYPE_CHECKING:
    from ..mappers.spec import TargetSpec

KEYS_PER_REQUEST = 1000


def read_cells(target: TargetSpec, row_keys: Iterable[bytes] | None = None) -> Iterator[tuple[bytes, list[Cell]]]:
    """(row key, cells) for the given keys (those that exist), or for every row when `row_keys` is None."""
    from google.cloud.bigtable.data import BigtableDataClient, ReadRowsQuery

    with BigtableDataClient(project=target.project) as client:
        table = client.get_table(target.instance, target.table, app_profile_id=target.app_profile)
        if row_keys is None:
            queries = [ReadRowsQuery()]
        else:
            keys = sorted(set(row_keys))
            queries = [ReadRowsQuery(row_keys=keys[i : i + KEYS_PER_REQUEST]) for i in range(0, len(keys), KEYS_PER_REQUEST)]
        for query in queries:
            if query.row_keys == [] and row_keys is not None:
                continue
            for row in table.read_rows_stream(query):
                yield row.row_key, [Cell(c.family, c.qualifier, c.timestamp_micros, c.value) for c in row.cells]
