"""Read migrated rows back from Bigtable as plain `Cell`s: many keys per request, key ranges, cell-precise deletes.

Uses the data client, so BIGTABLE_EMULATOR_HOST points it at the emulator as usual. `validate`
looks rows up in batches (`RowLookup.rows`: one ReadRows per up to 1,000 keys, up to 4 of them at once, never one
request per item), lists a table's row keys range by range for its target scan (`ScanRowKeys`), and
deletes single cell versions when it repairs (`delete_entries`): a `DeleteRangeFromColumn` over
exactly one timestamp, never a row delete that would take other items' cells with it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import apache_beam as beam
from apache_beam.metrics import Metrics

from ...mappers.results import Cell
from ..run.metrics import NAMESPACE
from .calls import ChannelCall, routing_metadata
from .chunks import complete_rows, response_rows
from .retry import ReadRetry

if TYPE_CHECKING:
    from ...mappers.spec import TargetSpec
    from .sink import Destination

KEYS_PER_REQUEST = 1000
LOOKUP_TIMEOUT = 60.0
"""How long one lookup (up to 1,000 keys) retries a Bigtable that does not answer, as the writer's operation timeout
(sink.FlowControl): the client's default of 600 s kept a validation going ten minutes after Bigtable died."""
REQUESTS_IN_FLIGHT = 4
"""ReadRows requests of one lookup sent at once: Bigtable (or the emulator) answers one while the client merges
another's chunks, instead of each request waiting for the one before."""


def _cells(row: Any) -> list[Cell]:
    return [Cell(c.family, c.qualifier, c.timestamp_micros, c.value) for c in row.cells]


class RowLookup:
    """A data client and table for one worker: rows by key, in batches. Close it (or use ``with``)."""

    def __init__(self, destination: Destination):
        from google.cloud.bigtable.data import BigtableDataClient

        self._client = BigtableDataClient(project=destination.project)
        self.table = self._client.get_table(destination.instance, destination.table,
                                            app_profile_id=destination.app_profile,
                                            default_read_rows_operation_timeout=LOOKUP_TIMEOUT,
                                            default_read_rows_attempt_timeout=min(20.0, LOOKUP_TIMEOUT))
        self._requests: ThreadPoolExecutor | None = None
        self._read_rows: Any = None

    def rows(self, row_keys: Iterable[bytes]) -> dict[bytes, list[Cell]]:
        """The cells of each row that exists among ``row_keys``, in ReadRows requests of up to 1,000 keys (up to
        :data:`REQUESTS_IN_FLIGHT` at once, each on its own thread).

        The client's ``read_rows`` builds a ``Row`` of ``Cell`` objects (labels and all) through a
        general chunk state machine, and we copied them into our ``Cell``s: a quarter of validate's CPU
        (docs/PERFORMANCE.md). Here the responses' raw chunks become our ``Cell``s directly
        (:func:`merge_chunks`); a retryable error (the table's own list: unavailable, deadline,
        aborted) asks again for the keys after the last complete row, within the table's read timeout.
        """
        keys = sorted(set(row_keys))
        parts = [keys[start:start + KEYS_PER_REQUEST] for start in range(0, len(keys), KEYS_PER_REQUEST)]
        if len(parts) <= 1:
            return self._read_keys(parts[0]) if parts else {}
        if self._requests is None:
            self._requests = ThreadPoolExecutor(max_workers=REQUESTS_IN_FLIGHT, thread_name_prefix="ddb2bt-readrows")
        found: dict[bytes, list[Cell]] = {}
        for part in [self._requests.submit(self._read_keys, part) for part in parts]:
            found.update(part.result())
        return found

    def _read_keys(self, keys: list[bytes]) -> dict[bytes, list[Cell]]:
        from google.cloud.bigtable_v2.types import ReadRowsRequest, ReadRowsResponse

        table = self.table
        retry = ReadRetry(table)  # the timeout bounds the whole lookup: rows coming do not extend it
        routing = routing_metadata(table)
        parse = ReadRowsResponse.pb().FromString
        read_rows = self._raw_read_rows()
        pending = keys
        found: dict[bytes, list[Cell]] = {}
        while pending:
            request = ReadRowsRequest(table_name=table.table_name, app_profile_id=table.app_profile_id,
                                      rows={"row_keys": pending})
            answers: list[bytes] = []
            try:
                answers.extend(read_rows(request, metadata=routing, timeout=retry.timeout()))
                rows = response_rows(b"".join(answers))
                if not found:
                    return rows
                found.update(rows)
                return found
            except retry.retryable as err:
                retry.wait(err)
                last = None
                for row_key, cells in complete_rows(parse(b"".join(answers))):
                    found[row_key] = cells
                    last = row_key
                if last is not None:
                    pending = [key for key in pending if key > last]
        return found

    def _raw_read_rows(self) -> Any:
        """The data client's ReadRows as its gapic layer sends it (its channel, client info, error mapping), but
        answering each response's serialised bytes: one parse of a request's joined responses is much cheaper
        than reading response by response, where a response may hold one row (docs/PERFORMANCE.md). Serialised
        ReadRowsResponses joined are one message whose chunks are theirs in order (repeated fields concatenate).
        Its streams are read on the thread that asks (``single_threaded``): gRPC's default hands every response
        over from a thread of its own, about half of what receiving a row cost on the emulator."""
        if self._read_rows is None:
            from google.cloud.bigtable_v2.types import ReadRowsRequest

            self._read_rows = ChannelCall(self._client, "ReadRows", ReadRowsRequest.serialize, None,
                                          single_threaded=True)
        return self._read_rows

    def close(self) -> None:
        if self._requests is not None:
            self._requests.shutdown()
        self._client.close()

    def __enter__(self) -> RowLookup:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def read_cells(target: TargetSpec, row_keys: Iterable[bytes] | None = None) -> Iterator[tuple[bytes, list[Cell]]]:
    """(row key, cells) for the given keys (those that exist), or for every row when `row_keys` is None."""
    from google.cloud.bigtable.data import ReadRowsQuery

    from .sink import Destination

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
