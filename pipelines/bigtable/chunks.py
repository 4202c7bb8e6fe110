"""ReadRows answers as plain `Cell`s, straight from the raw protobuf chunks, without Beam (the rollback's workers
import this module; `read` imports it for validate's lookups).

The data client's ``read_rows`` builds a ``Row`` of ``Cell`` objects (labels and all) through a general
chunk state machine, which we would copy again into our ``Cell``s; :func:`merge_chunks` makes ours
from the chunks directly. :func:`read_range` reads one key range that way, resuming after the last
complete row when a retryable error (the table's own list) ends the stream, within the table's read
timeout, as the client's own reads do; it receives the responses raw (:func:`raw_read_rows`) and reads
them in groups (:func:`range_rows`: compiled where built, a row carried from one group to the next).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from itertools import chain
from typing import Any

from ...mappers.results import Cell
from .calls import ChannelCall, routing_metadata
from .retry import ReadRetry


def merge_chunks(responses: Iterable[Any]) -> Iterator[tuple[bytes, list[Cell]]]:
    """ReadRows responses -> (row key, cells) of each committed row, from the raw protobuf chunks.

    Follows the protocol of ``ReadRowsResponse.CellChunk``: a row key starts a row, a family comes
    with its qualifier, a qualifier alone changes the column, ``value_size`` > 0 announces that the
    value continues in the next chunks, ``reset_row`` drops the row so far, ``commit_row`` ends it.
    """
    from google.cloud.bigtable_v2.types import ReadRowsResponse

    raw = ReadRowsResponse.pb  # proto-plus's public way to the raw protobuf message, no copy
    return merge_response_chunks(raw(response) for response in responses)


def merge_response_chunks(messages: Iterable[Any]) -> Iterator[tuple[bytes, list[Cell]]]:
    """`merge_chunks` over raw protobuf ``ReadRowsResponse`` messages; a stream that ends inside a row is refused."""
    from google.cloud.bigtable.data.exceptions import InvalidChunk

    ended_inside = False
    for row_key, cells in _merge(messages):
        if row_key is None:
            ended_inside = True
        else:
            yield row_key, cells
    if ended_inside:
        raise InvalidChunk("the stream ended inside a row")


def _parsed_response_rows(data: bytes) -> dict[bytes, list[Cell]]:
    """:func:`response_rows` in Python: protobuf parses the bytes, :func:`merge_response_chunks` merges the chunks
    (raising protobuf's ``DecodeError`` or the client's ``InvalidChunk``)."""
    from google.cloud.bigtable_v2.types import ReadRowsResponse

    return dict(merge_response_chunks([ReadRowsResponse.pb().FromString(data)]))


_compiled_rows: Callable[[bytes, type], dict[bytes, list[Cell]] | None] | None
_compiled_range: Callable[[bytes, type, str, bytes], tuple[list, int, str, bytes] | None] | None
try:
    from ._rows import range_rows as _compiled_range, response_rows as _compiled_rows
except ImportError:  # not built (no C compiler where the package was installed): the Python functions, same rows
    _compiled_rows = _compiled_range = None


def response_rows(data: bytes) -> dict[bytes, list[Cell]]:
    """The committed rows of serialised ReadRowsResponses joined (``data``: one message, whose chunks are theirs in
    order), by row key; a stream that ends inside a row, or bytes protobuf refuses, raise as
    :func:`merge_response_chunks` and protobuf do.

    The compiled module ``_rows.c`` reads the bytes and merges the chunks in one pass, by the same rules, wherever
    they are well formed (several rows per response, fields left out where they do not change, a value over many
    chunks, resets, labels, unknown fields: tests/pipelines/test_bigtable_rows.py); anything else it leaves to
    protobuf and the Python merge, which were ~70 % of validate's lookup (docs/PERFORMANCE.md, "Validate round 10").
    """
    if _compiled_rows is not None:
        rows = _compiled_rows(data, Cell)
        if rows is not None:
            return rows
    return _parsed_response_rows(data)


def complete_rows(message: Any) -> Iterator[tuple[bytes, list[Cell]]]:
    """The committed rows of a stream cut short (a row left open at the cut is not one)."""
    for row_key, cells in _merge([message]):
        if row_key is not None:
            yield row_key, cells


def _merge(messages: Iterable[Any], family: str = "", qualifier: bytes = b"") -> Iterator[tuple[bytes | None, list[Cell]]]:
    """The chunk protocol (see `merge_chunks`); a last (None, []) when the chunks end inside a row. ``family`` and
    ``qualifier``: what the chunks before carried over (a chunk may leave them out; see `range_rows`)."""
    from google.cloud.bigtable.data.exceptions import InvalidChunk

    make = Cell._make
    cells: list[Cell] = []
    parts: list[bytes] | None = None
    row_key, ts = b"", 0
    for message in messages:
        for chunk in message.chunks:
            if chunk.reset_row:
                row_key, cells, parts = b"", [], None
                continue
            key = chunk.row_key  # each field read is a copy out of the message: once
            if key:
                if cells and key != row_key:
                    raise InvalidChunk("a new row key before the row was committed")
                row_key = key
            elif not row_key:
                raise InvalidChunk("a chunk with no row key")
            if chunk.HasField("qualifier"):
                name = chunk.family_name.value
                if name:
                    family = name
                qualifier = chunk.qualifier.value
            if parts is None:
                ts = chunk.timestamp_micros
                if chunk.value_size > 0:
                    parts = [chunk.value]
                    continue
                value = chunk.value
            else:
                parts.append(chunk.value)
                if chunk.value_size > 0:
                    continue
                value, parts = b"".join(parts), None
            cells.append(make((family, qualifier, ts, value)))
            if chunk.commit_row:
                yield row_key, cells
                row_key, cells = b"", []
    if cells or parts is not None:
        yield None, []


JOINED_RESPONSES = 100
JOINED_BYTES = 1 << 20
"""A range's serialised responses are joined and parsed as one message once this many (or this many bytes) have come:
one parse, and one message's chunks walked, where the emulator sends a response per row."""


def range_rows(groups: Iterable[bytes]) -> Iterator[tuple[bytes | None, list[Cell]]]:
    """`_merge` of a range's answer given as groups of serialised responses joined, each group one message (a row may
    begin in one group and end in a later one): the same rows, and the same last (None, []) when the answer ends
    inside a row.

    The compiled module ``_rows.c`` (``range_rows``) reads each group's bytes and merges its chunks in one pass, as
    it does validate's lookups (docs/PERFORMANCE.md, "Validate round 10"): it gives the group's committed rows and how
    far it read up to the last point between rows, with the family and qualifier the merge carries from there; the
    rest (an open row's chunks) is read again in front of the next group. Where it answers None (bytes protobuf would
    refuse, chunks the merge raises for, what is rare), and once an open row's bytes exceed :data:`JOINED_BYTES` (a
    huge row read again with every group), protobuf and the Python merge take the rest from that point, with the
    state there: the same rows, and their errors."""
    family, qualifier, rest = "", b"", b""
    groups = iter(groups)
    compiled = _compiled_range
    for group in groups:
        data = rest + group if rest else group
        answer = compiled(data, Cell, family, qualifier) if compiled is not None and len(rest) <= JOINED_BYTES else None
        if answer is None:
            from google.cloud.bigtable_v2.types import ReadRowsResponse

            parse = ReadRowsResponse.pb().FromString
            yield from _merge(chain([parse(data)], map(parse, groups)), family, qualifier)
            return
        rows, read, family, qualifier = answer
        yield from rows
        rest = data[read:]
    if rest:  # what was read again holds an open row's chunks: the answer ended inside it
        yield None, []


def raw_read_rows(client: Any) -> Callable[..., Iterator[bytes]]:
    """The data client's ReadRows on its own channel (:class:`.calls.ChannelCall`: its client info, error mapping
    and channel refreshes), answering each response's serialised bytes: ``read_rows(request, metadata=(),
    timeout=None)`` iterates over them, raising the client's errors (``google.api_core.exceptions``, as its own
    reads do). Joined, serialised ReadRowsResponses are one message whose chunks are theirs in order (repeated
    fields concatenate), so a caller parses many at once.

    grpc's default call, which receives each response on a thread of its own: its single-threaded variant (the
    caller's thread receives; validate's lookup uses it) cost less CPU here but was slower in every round
    measured, its stream making no progress while the caller decodes rows (docs/PERFORMANCE.md).
    """
    from google.cloud.bigtable_v2.types import ReadRowsRequest

    return ChannelCall(client, "ReadRows", ReadRowsRequest.serialize, None)


def read_range(client: Any, table: Any, key_range: tuple[bytes, bytes], after: bytes | None = None,
               row_filter: Any = None) -> Iterator[tuple[bytes, list[Cell]]]:
    """(row key, cells) of ``key_range`` ([start, end), b"" open-ended) in key order, from just after ``after`` when
    given; ``client`` and ``table`` are the data client's (``BigtableDataClient``, its ``get_table``).

    The responses come raw (:func:`raw_read_rows`) and are parsed in groups (:data:`JOINED_RESPONSES`). A retryable
    error (the table's own list) ends the answer: its complete rows are given, and the range is asked again from
    after the last one (:class:`.retry.ReadRetry`). The table's read timeout bounds the time without a row, not the whole range: each attempt
    ends at the attempt timeout (20 s by default), and a range read for longer than the operation timeout (a tablet
    of many GB, or a consumer held back by --wcu) failed with DEADLINE_EXCEEDED at every resume.
    """
    from google.cloud.bigtable.data import ReadRowsQuery, RowRange
    from google.cloud.bigtable.data.exceptions import InvalidChunk

    retry = ReadRetry(table)
    routing = routing_metadata(table)
    read_rows = raw_read_rows(client)
    start, end = key_range
    while True:
        if after is not None:
            span = RowRange(start_key=after, end_key=end or None, start_is_inclusive=False)
        else:
            span = RowRange(start_key=start or None, end_key=end or None)
        # the client's own request for this query (table path, app profile, filter)
        request = ReadRowsQuery(row_ranges=span, row_filter=row_filter)._to_pb(table)  # noqa: SLF001
        answers = read_rows(request, metadata=routing, timeout=retry.timeout())
        failed: list[Exception] = []
        progressed = False
        for row_key, cells in range_rows(_joined(answers, retry.retryable, failed)):
            if row_key is None:  # the answer ended inside a row
                if not failed:
                    raise InvalidChunk("the stream ended inside a row")
                break
            after, progressed = row_key, True
            yield row_key, cells
        if not failed:
            return
        if progressed:  # rows came: the timeout counts again from here
            retry.progressed()
        retry.wait(failed[0])


def _joined(answers: Iterable[bytes], retryable: tuple[type[Exception], ...], failed: list[Exception]) -> Iterator[bytes]:
    """Serialised responses joined in groups (each group one message: repeated fields concatenate); a retryable error
    ends them (after the group it cut short) and is put in ``failed``."""
    parts: list[bytes] = []
    size = 0
    try:
        for answer in answers:
            parts.append(answer)
            size += len(answer)
            if len(parts) >= JOINED_RESPONSES or size >= JOINED_BYTES:
                yield b"".join(parts)
                parts, size = [], 0
    except retryable as err:
        failed.append(err)
    if parts:
        yield b"".join(parts)
