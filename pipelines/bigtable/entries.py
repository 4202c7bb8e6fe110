"""``RowMutationEntry`` objects for mapped rows, cheap enough for the hot path.

The data client's ``MutationsBatcher`` takes ``RowMutationEntry`` objects and asks each one for
``len(entry.mutations)`` and ``entry.size()`` (three times per entry; our batcher's ``append``, :mod:`.mutate`, reads
an entry of ours' count and kept size directly); the client's own MutateRows
(``bulk_mutate_rows``) asks for ``entry._to_pb()``, ours (:mod:`.mutate`) for the entry's bytes.
The client's own classes cost more per item than mapping the item does (docs/PERFORMANCE.md): a
``SetCell`` per cell with its argument checks; ``size()``, which builds a dict of every mutation
each time and returns ``sys.getsizeof`` of the outer dict, the same ~180 bytes whatever the row
holds, so the batcher's byte limits (``flush_limit_bytes``, ``flow_control_max_bytes``) never bite;
and ``_to_pb()`` through proto-plus per cell.

:class:`CellsEntry` keeps the mapper's cell tuples instead (``mutations`` is a tuple of them, :class:`LazyMutations`).
``SetCell`` objects are made only if something reads ``mutations`` item by item (the error path does); the entry's
protobuf bytes are written once, as the writer's entry is made (:func:`entry_maker`) or when the batcher first asks
for the size, by :func:`set_cells_record` (no message
object: filling a upb message cell by cell and serialising it cost more than the mapper's whole
row, docs/PERFORMANCE.md), and kept only as those bytes (``wire``: the entry as a request's field 2,
which our MutateRows call joins into the request); ``size()`` is its serialized size. What goes on
the wire is byte for byte what protobuf serialises for the client's classes, and what protobuf's
setters refuse is refused with their errors (tests/pipelines/test_bigtable_entries.py, hypothesis).

Counters (cells of aggregate families) are written whole, ``DeleteFromColumn`` then ``AddToCell``, by
:class:`MutationsEntry` (:func:`mutations_entry_class`), which the change sink uses for its deletes and sets too; a
change's entry (one-millisecond deletes, then SetCells) is written as bytes the same way (:func:`change_record`), any
other through protobuf's message.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Sequence
from typing import Any

from ...mappers.limits import MUTATIONS_PER_ENTRY_MAX
from ...mappers.results import IndexRow, MappedRow


def to_mutation_entry(row: MappedRow | IndexRow, counters: frozenset[str] = frozenset()) -> Any:
    """The ``RowMutationEntry`` that writes one mapped row (hot path: no checks beyond the mapper's).

    A cell of an aggregate family (``counters``) is written whole: ``DeleteFromColumn`` (every version) then
    ``AddToCell`` of its value, in the row's one mutation, which Bigtable applies atomically. Run twice (a
    retried batch, a resumed segment, a re-run) it leaves the same counter; a ``SetCell`` there would add.
    """
    if counters and any(cell[0] in counters for cell in row[1]):
        return mutations_entry_class()(row[0], with_counters(row[1], counters))
    return _cells_entry_class()(row[0], row[1])


def entry_maker(counters: frozenset[str] = frozenset()) -> Callable[[MappedRow | IndexRow], Any]:
    """:func:`to_mutation_entry` for ``counters``, its entries sized (their bytes written: what Bigtable cannot hold
    raises here), as fast as it can be had: without aggregate families, the entry class called directly (the writer
    makes one entry per row)."""
    if counters:
        def sized(row: MappedRow | IndexRow) -> Any:
            entry = to_mutation_entry(row, counters)
            entry.size()
            return entry
        return sized
    cells_entry = _cells_entry_class()
    return lambda row: cells_entry(row[0], row[1], True)


ADD = "add"
"""The last field of an ``AddToCell`` tuple: ``(family, qualifier, micros, int value, ADD)``."""


def whole_counter(cell: tuple) -> tuple[tuple, tuple]:
    """A counter cell ``(family, qualifier, micros, 8-byte int64)`` as the two mutations that set it whatever the
    column held: delete every version, add the value."""
    family, qualifier, micros, value = cell
    return (family, qualifier), (family, qualifier, micros, int.from_bytes(value, "big", signed=True), ADD)


def with_counters(cells: tuple, counters: frozenset[str]) -> tuple:
    """Mutation tuples for cells, those of aggregate families (``counters``) as :func:`whole_counter`."""
    found: list[tuple] = []
    for cell in cells:
        if cell[0] in counters:
            found += whole_counter(cell)
        else:
            found.append(cell)
    return tuple(found)


class LazyMutations(tuple):
    """Mutations held as tuples, read as the client's objects: ``len`` is the tuple's own (the batcher's flow control
    counts them, a Python ``__len__`` per count cost more than the entry's other work), the client's objects
    (``_make`` of each tuple, set per entry class) are made only when something reads them item by item (the error
    path does). A tuple of the mapper's tuples underneath: equality and hashing are the tuples'."""

    _make: Callable[[tuple], Any]
    _made: tuple | None = None

    def _objects(self) -> tuple:
        made = self._made
        if made is None:
            made = self._made = tuple(map(self._make, tuple.__iter__(self)))
        return made

    def __getitem__(self, index: Any) -> Any:
        return self._objects()[index]

    def __iter__(self) -> Any:
        return iter(self._objects())

    def __reversed__(self) -> Any:
        return reversed(self._objects())

    def __contains__(self, mutation: object) -> bool:
        return mutation in self._objects()

    def index(self, mutation: Any, *bounds: Any) -> int:
        return self._objects().index(mutation, *bounds)

    def count(self, mutation: Any) -> int:
        return self._objects().count(mutation)


ENTRIES_TAG = b"\x12"
"""A MutateRowsRequest's ``entries`` (field 2, length-delimited): each entry is this, its length, its bytes, and
a request's entries are their records one after the other."""


def request_entry_prefix(length: int) -> bytes:
    """The tag and length (a varint) that precede an entry of ``length`` bytes in a MutateRowsRequest."""
    return ENTRIES_TAG + varint(length)


def varint(number: int) -> bytes:
    """``number`` as a protobuf varint; a negative int64 as its 64-bit two's complement (ten bytes), as protobuf
    writes an int64 field. Outside int64 (and uint64 for lengths), the ValueError protobuf's setter raises."""
    if number < 0x80:
        if number >= 0:
            return bytes((number,))
        if number < -(1 << 63):
            raise ValueError(f"Value out of range: {number}")
        number += 1 << 64
    elif number >= 1 << 64:
        raise ValueError(f"Value out of range: {number}")
    out = bytearray()
    while number >= 0x80:
        out.append(number & 0x7F | 0x80)
        number >>= 7
    out.append(number)
    return bytes(out)


SMALL = 4096
"""Lengths below this have their varint heads precomputed (the benchmark's cells are a few dozen bytes)."""
_ROW_KEY_HEADS = tuple(b"\x0a" + varint(n) for n in range(SMALL))
"""An entry's ``row_key`` (field 1) head for a key of each length."""
_VALUE_HEADS = (b"",) + tuple(b"\x22" + varint(n) for n in range(1, SMALL))
"""A SetCell's ``value`` (field 4) head for a value of each length; an empty value is left out, as protobuf does."""


def _cell_head(length: int) -> bytes:
    """For a SetCell of ``length`` bytes: the entry's ``mutations`` (field 2) head of its Mutation, and the
    Mutation's ``set_cell`` (field 1) head."""
    return b"\x12" + varint(length + 1 + len(varint(length))) + b"\x0a" + varint(length)


_CELL_HEADS = tuple(_cell_head(n) for n in range(SMALL))
""":func:`_cell_head` of each length below :data:`SMALL`."""


def _column_head(family: str, qualifier: bytes) -> bytes:
    """A SetCell's ``family_name`` (field 1) and ``column_qualifier`` (field 2), each left out when empty; what
    protobuf's setters refuse raises as they do."""
    if isinstance(family, str):  # a subclass too, as protobuf's setter takes it (and the head cache would)
        name = str.encode(family)
    elif isinstance(family, bytes):  # protobuf takes UTF-8 bytes for a string field
        name = bytes.decode(family).encode()
    else:
        raise TypeError("bad argument type for built-in operation")
    _bytes_only(qualifier)
    return ((b"\x0a" + varint(len(name)) + name if name else b"")
            + (b"\x12" + varint(len(qualifier)) + qualifier if qualifier else b""))


def _bytes_only(value: Any) -> None:
    if not isinstance(value, bytes):  # as protobuf's setter of a bytes field words it (it takes a subclass)
        raise TypeError(f"expected bytes, {type(value).__name__} found")


def _stamp(micros: int) -> bytes:
    """A SetCell's ``timestamp_micros`` (field 3, int64), left out when 0; as protobuf's setter, anything with an
    ``__index__`` and nothing else, except a bool: protobuf 6 takes one with a deprecation warning and 7.34 refuses
    it, so it is refused here under either."""
    micros = operator.index(_no_bool(micros))
    if micros >= 1 << 63:
        raise ValueError(f"Value out of range: {micros}")
    return b"\x18" + varint(micros) if micros else b""


def _no_bool(micros: Any) -> Any:
    """``micros``, unless it is a bool: protobuf 6 takes one for an int64 timestamp with a deprecation warning and
    7.34 refuses it, so every path refuses it here under either (the bytes written directly and protobuf's setters)."""
    if micros.__class__ is bool:
        raise TypeError("Expected an int for timestamp_micros, got a boolean")
    return micros


def _int_stamp(micros: int) -> bytes:
    """:func:`_stamp` of an int, kept (the migration time, or an item's time, comes again and again)."""
    if len(_stamps) >= HEADS_MAX:
        _stamps.clear()
    stamp = _stamps[micros] = _stamp(micros)
    return stamp


_NOT_A_TIMESTAMP = object()
HEADS_MAX = 65536
"""Column heads and timestamps kept per process; past it a cache starts again (set members and map keys are
qualifiers too)."""
_column_heads: dict[Any, dict[Any, bytes]] = {}
"""Family -> qualifier -> :func:`_column_head` (a dict per family: no ``(family, qualifier)`` tuple made and
hashed per cell)."""
_heads_kept = 0
"""How many heads :data:`_column_heads` holds, all families together."""
_stamps: dict[int, bytes] = {}
_ENTRY_HEADS = tuple(ENTRIES_TAG + varint(n) for n in range(SMALL))


def _new_column_head(family: Any, qualifier: Any) -> bytes:
    """:func:`_column_head`, kept in :data:`_column_heads` (every family's heads start again once they hold
    :data:`HEADS_MAX` together)."""
    global _heads_kept
    column = _column_head(family, qualifier)
    if _heads_kept >= HEADS_MAX:
        _column_heads.clear()
        _heads_kept = 0
    heads = _column_heads.get(family)
    if heads is None:
        heads = _column_heads[family] = {}
    heads[qualifier] = column
    _heads_kept += 1
    return column


def _set_cells_record(row_key: bytes, cells: Sequence[tuple]) -> tuple[int, bytes, int]:
    """:func:`set_cells_record` in Python: the whole of it where the compiled module (``_wire``) is not built, and
    what it leaves to Python (whatever protobuf's setters refuse, raised here with their errors) where it is.

    The serialized size of the ``MutateRowsRequest.Entry`` that sets ``cells`` (``(family, qualifier, micros,
    value)`` tuples, each a ``SetCell`` mutation) in ``row_key``, the entry as a request's field 2 (tag, length,
    message): byte for byte what protobuf serialises for the same message, written without a message object
    (tests/pipelines/test_bigtable_entries.py); and the bytes of the cells' qualifiers and values (the sink's
    ``bytes_written``). Each cell is its Mutation's head, then its column's (cached per family and qualifier: the
    mapper's qualifiers are mostly its constants), its timestamp's (looked up again only when the cell's timestamp
    is not the previous cell's object: a row's cells share one), its value's head and its value."""
    _bytes_only(row_key)
    size = len(row_key)
    if size:
        key_head = _ROW_KEY_HEADS[size] if size < SMALL else b"\x0a" + varint(size)
        parts = [b"", key_head, row_key]
        size += len(key_head)
    else:  # an empty field is left out
        parts = [b""]
    extend = parts.extend
    families, stamps = _column_heads, _stamps
    last, stamp = _NOT_A_TIMESTAMP, b""
    data = 0
    for family, qualifier, micros, value in cells:
        try:
            column = families[family][qualifier]
        except KeyError:
            column = _new_column_head(family, qualifier)
        except TypeError:  # an unhashable family or qualifier, which protobuf refuses
            column = _column_head(family, qualifier)
        if micros is not last:
            if micros.__class__ is int:  # (the timestamp 0 is no field: b"", made again each time)
                stamp = stamps.get(micros) or _int_stamp(micros)
            else:
                stamp = _stamp(micros)
            last = micros
        if value.__class__ is not bytes:
            _bytes_only(value)
        length = len(value)
        data += length + len(qualifier)
        value_head = _VALUE_HEADS[length] if length < SMALL else b"\x22" + varint(length)
        length += len(column) + len(stamp) + len(value_head)
        head = _CELL_HEADS[length] if length < SMALL else _cell_head(length)
        size += len(head) + length
        extend((head, column, stamp, value_head, value))
    parts[0] = _ENTRY_HEADS[size] if size < SMALL else request_entry_prefix(size)
    return size, b"".join(parts), data


_compiled_record: Callable[[bytes, Sequence[tuple]], tuple[int, bytes, int] | None] | None
try:
    from ._wire import set_cells_record as _compiled_record
except ImportError:  # not built (no C compiler where the package was installed): the Python function, same bytes
    _compiled_record = None


def _with_compiled_record(row_key: bytes, cells: Sequence[tuple]) -> tuple[int, bytes, int]:
    return _compiled_record(row_key, cells) or _set_cells_record(row_key, cells)  # type: ignore[misc]


set_cells_record = _set_cells_record if _compiled_record is None else _with_compiled_record
"""The ``MutateRowsRequest.Entry`` that sets ``cells`` in ``row_key``, its size and data bytes
(:func:`_set_cells_record`): written by the compiled module ``_wire.c`` where it is built, which gives the same bytes
(tests/pipelines/test_bigtable_entries.py) and leaves to Python what it does not take (an entry's bytes were about a
quarter of a migrate's own CPU per item in Python, docs/PERFORMANCE.md "Entries compiled")."""


_INT64 = 1 << 63
_ranges: dict[int, bytes] = {}


def _one_millisecond(micros: int) -> bytes:
    """A DeleteFromColumn's ``time_range`` (field 3) over ``[micros, micros + 1000)``, each bound left out when 0."""
    if len(_ranges) >= HEADS_MAX:
        _ranges.clear()
    body = (b"\x08" + varint(micros) if micros else b"") + (b"\x10" + varint(micros + 1000) if micros != -1000 else b"")
    _ranges[micros] = found = b"\x1a" + bytes((len(body),)) + body  # at most 22 bytes: a one-byte length
    return found


def _delete_head(length: int) -> bytes:
    """For a one-millisecond delete whose column and time range take ``length`` bytes: the entry's ``mutations``
    (field 2) head of its Mutation, and the Mutation's ``delete_from_column`` (field 2) head."""
    inner = b"\x12" + varint(length)
    return b"\x12" + varint(len(inner) + length) + inner


_DELETE_HEADS = tuple(_delete_head(n) for n in range(SMALL))
""":func:`_delete_head` of each length below :data:`SMALL`."""


def _change_record(row_key: bytes, mutations: Sequence[tuple]) -> tuple[int, bytes, None] | None:
    """:meth:`MutationsEntry._record <mutations_entry_class>` for a change's entry, without a message object: one-
    millisecond deletes (``(family, qualifier, micros)``, a ``DeleteFromColumn`` each) then ``SetCell``s (the cells
    through :func:`set_cells_record`), byte for byte what protobuf serialises (tests/pipelines/test_change_entries.py).
    None for any other entry (counters, whole-column deletes, a family that is no str, a qualifier that is no bytes, a
    timestamp that is no int or whose millisecond leaves int64): protobuf's own path answers, or refuses, those."""
    lengths = bytes(map(len, mutations))
    cells = lengths.lstrip(b"\x03")
    if cells.lstrip(b"\x04"):
        return None
    count = len(lengths) - len(cells)
    parts = [b"", b""]  # the entry's head and its row key's field, written once the deletes are known to be ours
    size = 0
    if count:
        heads, ranges, append = _column_heads, _ranges, parts.append
        for family, qualifier, micros in mutations[:count]:
            if family.__class__ is not str or qualifier.__class__ is not bytes or micros.__class__ is not int \
                    or not -_INT64 <= micros < _INT64 - 1000:
                return None
            try:
                column = heads[family][qualifier]
            except KeyError:
                column = _new_column_head(family, qualifier)
            time_range = ranges.get(micros) or _one_millisecond(micros)
            length = len(column) + len(time_range)
            head = _DELETE_HEADS[length] if length < SMALL else _delete_head(length)
            size += len(head) + length
            append(head)
            append(column)
            append(time_range)
        mutations = mutations[count:]
    _bytes_only(row_key)
    if row_key:  # an empty field is left out
        parts[1] = (_ROW_KEY_HEADS[len(row_key)] if len(row_key) < SMALL else b"\x0a" + varint(len(row_key))) + row_key
        size += len(parts[1])
    if mutations:
        cells_size, cells_wire, _data = set_cells_record(b"", mutations)
        parts.append(cells_wire[len(cells_wire) - cells_size:])  # without its own entry head
        size += cells_size
    parts[0] = _ENTRY_HEADS[size] if size < SMALL else request_entry_prefix(size)
    return size, b"".join(parts), None


_compiled_change: Callable[[bytes, Sequence[tuple]], tuple[int, bytes, None] | None] | None
try:
    from ._wire import change_record as _compiled_change
except ImportError:  # not built, or built from an older _wire.c: the Python function, same bytes
    _compiled_change = None


def _with_compiled_change(row_key: bytes, mutations: Sequence[tuple]) -> tuple[int, bytes, None] | None:
    return _compiled_change(row_key, mutations) or _change_record(row_key, mutations)  # type: ignore[misc]


change_record = _change_record if _compiled_change is None else _with_compiled_change
"""A change's entry bytes (:func:`_change_record`): written by the compiled module ``_wire.c`` where it is built, deletes
and sets in one pass (docs/PERFORMANCE.md, "Catch-up round 10"), which gives the same bytes for what it takes and None
for the rest, which the Python function answers (tests/pipelines/test_change_entries.py)."""


@functools.cache
def prebuilt_entry_class() -> type:
    """The base of entries built as the wire message directly; built on first use, so importing this module
    does not import the Bigtable client. A subclass says how a tuple fills a raw mutation (``_fill``), how it
    reads as the client's object (``_client_mutation``), and whether the entry is idempotent."""
    from google.cloud.bigtable.data import RowMutationEntry
    from google.cloud.bigtable_v2.types import bigtable as types_pb

    wrap = types_pb.MutateRowsRequest.Entry.wrap
    raw_entry = types_pb.MutateRowsRequest.Entry.pb()
    entry_field = request_entry_prefix

    class PrebuiltEntry(RowMutationEntry):
        wire: bytes
        """The entry as field 2 of a MutateRowsRequest (tag, length, message), once sized (:meth:`size`)."""
        data_bytes: int | None
        """The bytes of its SetCells' qualifiers and values, where sizing counted them."""
        _size: int

        def __init__(self, row_key: bytes, tuples: tuple, sized: bool = False) -> None:
            # not super().__init__: it checks each object
            if not 0 < len(tuples) <= MUTATIONS_PER_ENTRY_MAX:  # the client's own limits
                raise ValueError(f"a row entry needs 1 to {MUTATIONS_PER_ENTRY_MAX} mutations, not {len(tuples)}")
            self.row_key = row_key
            self.tuples = tuples
            self.mutations = self._mutations(tuples)
            if sized:  # as size() would: the bytes written now, what Bigtable cannot hold raised now
                self._size, self.wire, self.data_bytes = self._record()
                return
            self.wire = b""
            self.data_bytes = None
            self._size = -1

        @staticmethod
        def _client_mutation(mutation: tuple) -> Any:
            raise NotImplementedError

        _mutations: type[LazyMutations]
        """:class:`LazyMutations` making ``_client_mutation`` of each tuple (set for each subclass)."""

        def __init_subclass__(cls, **kwargs: Any) -> None:
            super().__init_subclass__(**kwargs)
            cls._mutations = type(f"{cls.__name__}Mutations", (LazyMutations,),
                                  {"_make": staticmethod(cls._client_mutation), "__slots__": ()})

        def _fill(self, add: Callable[[], Any]) -> None:
            raise NotImplementedError

        def size(self) -> int:
            """Bytes on the wire; the batcher asks three times, the message is built and serialised on the first."""
            if self._size < 0:
                self._size, self.wire, self.data_bytes = self._record()
            return self._size

        def _record(self) -> tuple[int, bytes, int | None]:
            """The entry's serialized size, the entry as a request's field 2, and :attr:`data_bytes`."""
            data = self._build().SerializeToString()
            return len(data), entry_field(len(data)) + data, None

        @property
        def entry(self) -> Any:
            return self

        @property
        def proto(self) -> bytes:
            """Our MutateRows operation reads each entry's ``entry`` and request record (``proto``) from what it
            holds for it: an entry of ours is that itself, and the operation makes no holder per entry."""
            if self._size < 0:
                self.size()
            return self.wire

        def _to_pb(self) -> Any:
            # The client's own MutateRows (bulk_mutate_rows): its request takes the message, which the batcher's
            # path (ours, .mutate) never needs: it sends the serialised ``wire`` kept by size().
            return wrap(self._build())

        def _build(self) -> Any:
            entry = raw_entry(row_key=self.row_key)
            self._fill(entry.mutations.add)
            return entry

    return PrebuiltEntry


@functools.cache
def _cells_entry_class() -> type:
    from google.cloud.bigtable.data import SetCell

    compiled = _compiled_record

    class CellsEntry(prebuilt_entry_class()):  # type: ignore[misc]
        """``SetCell`` mutations held as the mapper's ``(family, qualifier, micros, value)`` tuples."""

        @staticmethod
        def _client_mutation(cell: tuple) -> Any:
            family, qualifier, micros, value = cell
            return SetCell(family, qualifier, value, micros)

        def is_idempotent(self) -> bool:
            return all(cell[2] >= 0 for cell in self.tuples)  # -1 would be a server-side timestamp

        def _record(self) -> tuple[int, bytes, int | None]:
            # set_cells_record, without its wrapper's call where the compiled module is built
            if compiled is None:
                return _set_cells_record(self.row_key, self.tuples)
            return compiled(self.row_key, self.tuples) or _set_cells_record(self.row_key, self.tuples)

        def _fill(self, add: Callable[[], Any]) -> None:
            for family, qualifier, micros, value in self.tuples:
                cell = add().set_cell
                cell.family_name = family
                cell.column_qualifier = qualifier
                cell.timestamp_micros = _no_bool(micros)
                cell.value = value

    return CellsEntry


def client_mutation(mutation: tuple) -> Any:
    """One mutation tuple as the client's own object, told apart by length: ``(family, qualifier)`` deletes the
    column (``DeleteRangeFromColumn`` over all time), ``(family, qualifier, micros)`` one millisecond of it,
    ``(family, qualifier, micros, value)`` is a ``SetCell``, ``(family, qualifier, micros, int, ADD)`` an
    ``AddToCell``."""
    from google.cloud.bigtable.data import AddToCell, DeleteRangeFromColumn, SetCell

    if len(mutation) == 2:
        return DeleteRangeFromColumn(*mutation)
    if len(mutation) == 3:
        family, qualifier, micros = mutation
        return DeleteRangeFromColumn(family, qualifier, micros, micros + 1000)
    if len(mutation) == 5:
        family, qualifier, micros, number, _ = mutation
        return AddToCell(family, qualifier, number, micros)
    family, qualifier, micros, value = mutation
    return SetCell(family, qualifier, value, micros)


@functools.cache
def mutations_entry_class() -> type:
    class MutationsEntry(prebuilt_entry_class()):  # type: ignore[misc]
        """Any of :func:`client_mutation`'s tuples: deletes (whole column or one millisecond), sets and adds."""

        _client_mutation = staticmethod(client_mutation)

        def _record(self) -> tuple[int, bytes, int | None]:
            return change_record(self.row_key, self.tuples) or super()._record()

        def is_idempotent(self) -> bool:
            # Explicit timestamps, exact ranges, and adds only after a delete of their whole column in the same
            # entry: applied twice, the row ends the same. (The client counts an AddToCell as never idempotent,
            # so it would not retry the entry; ours are idempotent by construction.)
            return True

        def _fill(self, add: Any) -> None:
            for mutation in self.tuples:
                size = len(mutation)
                if size == 4:
                    family, qualifier, micros, value = mutation
                    cell = add().set_cell
                    cell.family_name = family
                    cell.column_qualifier = qualifier
                    cell.timestamp_micros = _no_bool(micros)
                    cell.value = value
                elif size == 3:
                    family, qualifier, micros = mutation
                    delete = add().delete_from_column
                    delete.family_name = family
                    delete.column_qualifier = qualifier
                    delete.time_range.start_timestamp_micros = _no_bool(micros)
                    delete.time_range.end_timestamp_micros = micros + 1000
                elif size == 2:
                    delete = add().delete_from_column
                    delete.family_name, delete.column_qualifier = mutation
                else:
                    family, qualifier, micros, number, _ = mutation
                    counter = add().add_to_cell
                    counter.family_name = family
                    counter.column_qualifier.raw_value = qualifier
                    counter.timestamp.raw_timestamp_micros = _no_bool(micros)
                    counter.input.int_value = number

    return MutationsEntry
