"""The sink's RowMutationEntry: same wire bytes as the client's own classes, real sizes, lazy SetCells."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from google.cloud.bigtable.data import RowMutationEntry, SetCell
from google.cloud.bigtable_v2.types import bigtable as types_pb

from benchmarks import dataset
from benchmarks.run import HERE as BENCH_DIR
from ddb2bt.mappers.compiler import compile_spec
from ddb2bt.mappers.limits import MUTATIONS_PER_ENTRY_MAX
from ddb2bt.mappers.loader import load_spec
from ddb2bt.mappers.results import Cell, MappedRow
from ddb2bt.pipelines.bigtable.entries import request_entry_prefix, to_mutation_entry

serialize = types_pb.MutateRowsRequest.Entry.serialize


def reference_entry(row) -> RowMutationEntry:
    return RowMutationEntry(row.row_key, [SetCell(c.family, c.qualifier, c.value, c.timestamp_micros)
                                          for c in row.cells])


def mapped_rows():
    compiled = compile_spec(load_spec(BENCH_DIR / "spec.yaml"))
    return [compiled.map_item(item) for item in dataset.generate(500)]


def test_wire_bytes_are_the_clients_own():
    for row in mapped_rows():
        ours = to_mutation_entry(row)
        assert isinstance(ours, RowMutationEntry)
        assert serialize(ours._to_pb()) == serialize(reference_entry(row)._to_pb())


def test_mutations_read_as_set_cells_only_when_asked():
    row = mapped_rows()[0]
    entry = to_mutation_entry(row)
    assert len(entry.mutations) == len(row.cells) and entry.mutations._made is None
    assert [m._to_dict() for m in entry.mutations] == [m._to_dict() for m in reference_entry(row).mutations]
    assert all(type(m) is SetCell for m in entry.mutations)
    assert entry.is_idempotent()


def test_size_is_the_bytes_on_the_wire_unlike_the_clients_constant():
    rows = mapped_rows()
    for row in rows[:50]:
        assert to_mutation_entry(row).size() == len(serialize(reference_entry(row)._to_pb()))
    tiny = MappedRow(b"k", (Cell("f", b"q", 1000, b"v"),), "e")
    big = MappedRow(b"k", (Cell("f", b"q", 1000, b"v" * 1_000_000),), "e")
    assert to_mutation_entry(big).size() > 1_000_000 > 100 * to_mutation_entry(tiny).size()
    assert reference_entry(big).size() == reference_entry(tiny).size()


@pytest.mark.parametrize("count", [0, MUTATIONS_PER_ENTRY_MAX + 1])
def test_the_clients_mutation_count_limits_hold(count):
    cells = tuple(Cell("f", b"q%d" % i, 1000, b"v") for i in range(count))
    with pytest.raises(ValueError, match="mutations"):
        to_mutation_entry(MappedRow(b"row", cells, "entity"))


@pytest.mark.parametrize("length", [0, 1, 127, 128, 300, 16383, 16384, 2**21, 2**28 + 5])
def test_an_entrys_record_is_field_2_of_a_request(length):
    """The tag and varint length before an entry: what protobuf's own encoder writes for a request's entry."""
    from google.protobuf.internal.encoder import _VarintBytes  # the reference, in a test only

    from ddb2bt.pipelines.bigtable.entries import request_entry_prefix

    assert request_entry_prefix(length) == b"\x12" + _VarintBytes(length)


def test_the_entry_is_serialised_once_and_kept_as_its_request_record():
    """size() builds and serialises the message once and keeps only its bytes, as a request's field 2: a request
    of such records parses as the client's request of the same entries."""
    from ddb2bt.pipelines.bigtable.entries import request_entry_prefix

    rows = mapped_rows()[:20]
    entries = [to_mutation_entry(row) for row in rows]
    sizes = [entry.size() for entry in entries]
    records = [entry.wire for entry in entries]
    assert [entry.size() for entry in entries] == sizes and [entry.wire for entry in entries] == records
    assert all(record is entry.wire for record, entry in zip(records, entries))  # not serialised again
    assert not hasattr(entries[0], "_pb")  # no message held, its bytes only
    for record, row, size in zip(records, rows, sizes):
        theirs = serialize(reference_entry(row)._to_pb())
        assert size == len(theirs) and record == request_entry_prefix(size) + theirs
    joined = types_pb.MutateRowsRequest.pb().FromString(b"".join(records))
    client = types_pb.MutateRowsRequest(entries=[reference_entry(row)._to_pb() for row in rows])
    assert joined == client._pb
    assert [serialize(entry._to_pb()) for entry in entries] == [serialize(reference_entry(row)._to_pb())
                                                               for row in rows]  # the client's own path


# --------------------------------------------------------------------------- the entry's bytes, written by hand

from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

raw_entry = types_pb.MutateRowsRequest.Entry.pb()
INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
LENGTHS = st.sampled_from([0, 1, 127, 128, 4095, 4096, 16383, 16384, 70_000])  # the varints' and the tables' edges


def protobuf_entry(row_key, cells) -> bytes:
    """The reference: the protobuf library's own message, filled by its setters and serialised by it."""
    entry = raw_entry()
    entry.row_key = row_key
    for family, qualifier, micros, value in cells:
        cell = entry.mutations.add().set_cell
        cell.family_name, cell.column_qualifier, cell.timestamp_micros, cell.value = family, qualifier, micros, value
    return entry.SerializeToString()


def outcome(make):
    try:
        return make()
    except Exception as err:  # noqa: BLE001 - the error, type and words, is the outcome compared
        return f"{type(err).__name__}: {err}"


binaries = st.one_of(st.binary(max_size=300), LENGTHS.map(lambda n: b"v" * n))
cells = st.tuples(st.one_of(st.sampled_from(["c", "o", "x", ""]), st.text(max_size=40)),
                  st.one_of(st.sampled_from([b"n", b"status", b""]), binaries),
                  st.one_of(st.sampled_from([0, 1000, 1_704_067_200_000_000]), INT64), binaries)


def both_ways():
    """set_cells_record as the writer calls it (the compiled module where built) and the Python function alone."""
    from ddb2bt.pipelines.bigtable import entries

    return [pytest.param(entries.set_cells_record, id="as-called"), pytest.param(entries._set_cells_record, id="python")]


def test_the_compiled_module_is_built_wherever_a_c_compiler_is():
    """pyproject.toml builds pipelines/bigtable/_wire.c (optional: without a compiler the Python function serves);
    with a compiler here, a missing module would leave every test of the entries' bytes on the Python function."""
    from ddb2bt.pipelines.bigtable import entries
    from tests.compiled import require_built

    require_built(entries._compiled_record, "pipelines/bigtable/_wire.c")
    assert entries.set_cells_record is entries._with_compiled_record


@pytest.mark.parametrize("record", both_ways())
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(row_key=st.one_of(st.binary(max_size=200), LENGTHS.map(lambda n: b"k" * n)),
       cells=st.lists(cells, max_size=12).map(lambda found: [Cell(*cell) for cell in found]),
       shared=st.booleans())
def test_an_entrys_bytes_are_protobufs_own_serialisation(record, row_key, cells, shared):
    """set_cells_record writes the entry as protobuf does, byte for byte: fields in order, defaults (an empty key,
    family, qualifier or value, a 0 timestamp) left out, negative timestamps as ten-byte varints, lengths at every
    varint size; the record is field 2 of a request, and the size is the message's. The compiled module takes every
    such row itself (it leaves only what protobuf refuses to Python)."""
    from ddb2bt.pipelines.bigtable.entries import _compiled_record, request_entry_prefix

    if _compiled_record is not None:
        assert _compiled_record(row_key, cells) is not None
    if shared and cells:  # a row's cells share one timestamp object, as the mapper's do
        cells = [cell._replace(timestamp_micros=cells[0].timestamp_micros) for cell in cells]
    expected = protobuf_entry(row_key, cells)
    size, wire, data = record(row_key, cells)
    assert wire == request_entry_prefix(len(expected)) + expected
    assert size == len(expected) == raw_entry.FromString(expected).ByteSize()
    assert data == sum(len(cell.qualifier) + len(cell.value) for cell in cells)


ODD = [True, 1.5, "1000", 2**63, -(2**63) - 1, 2**63 - 1, -(2**63), -1, bytearray(b"v"), "v", b"\xff", "\ud800",
       1, None, (b"q",)]


@pytest.mark.parametrize("set_cells_record", both_ways())
@pytest.mark.parametrize("field", range(4))
@pytest.mark.parametrize("odd", ODD, ids=repr)
def test_what_protobuf_refuses_is_refused_alike(set_cells_record, field, odd):
    """A family, qualifier, timestamp or value of a type or range protobuf's setters refuse: the same error, type and
    words; one they take (UTF-8 bytes as a family), the same bytes; a bool timestamp refused under every protobuf."""
    cell = ["f", b"q", 1000, b"v"]
    cell[field] = odd
    if field == 2 and odd is True:  # protobuf 6 takes a bool timestamp with a deprecation warning, 7.34 refuses it
        assert outcome(lambda: set_cells_record(b"k", [tuple(cell)])) == \
            "TypeError: Expected an int for timestamp_micros, got a boolean"
        return
    assert outcome(lambda: set_cells_record(b"k", [tuple(cell)])[1][2:]) == outcome(lambda: protobuf_entry(b"k", [cell]))
    assert outcome(lambda: set_cells_record(odd, [("f", b"q", 1000, b"v")])[1][2:]) == \
        outcome(lambda: protobuf_entry(odd, [("f", b"q", 1000, b"v")]))


class _Family(str):
    pass


class _Bytes(bytes):
    pass


@pytest.mark.parametrize("warm", [False, True], ids=["cold caches", "warm caches"])
def test_subclasses_are_taken_as_protobuf_takes_them_whatever_the_caches_hold(warm, monkeypatch):
    """A str-subclass family and bytes-subclass key, qualifier and value: protobuf's setters take them, and so does
    every way here, whether a plain row of the same column was written before (the head caches hit) or not."""
    from ddb2bt.pipelines.bigtable import entries

    monkeypatch.setattr(entries, "_column_heads", {})
    monkeypatch.setattr(entries, "_heads_kept", 0)
    if warm:
        entries._set_cells_record(b"k", [("cf", b"q", 1, b"v")])
    odd = [(_Family("cf"), _Bytes(b"q"), 1, _Bytes(b"v"))]
    expected = protobuf_entry(_Bytes(b"k"), odd)
    for record in (entries.set_cells_record, entries._set_cells_record):
        assert record(_Bytes(b"k"), odd)[1][2:] == expected


def test_the_compiled_module_reads_only_what_python_would_read_the_same_way():
    """What the compiled function leaves to Python reaches it untouched: an iterator of cells (not walked first), a
    tuple subclass whose own iteration says otherwise (Python unpacks cells by iterating them)."""
    from ddb2bt.pipelines.bigtable import entries

    cells = [("cf", b"q", 1, "not bytes")]
    assert outcome(lambda: entries.set_cells_record(b"k", iter(cells))) == \
        outcome(lambda: entries._set_cells_record(b"k", iter(cells))) == "TypeError: expected bytes, str found"

    class Swapped(tuple):
        def __iter__(self):
            return iter(("cf", b"q", 1, b"from __iter__"))

    swapped = [Swapped(("cf", b"q", 1, b"stored"))]
    assert entries.set_cells_record(b"k", swapped) == entries._set_cells_record(b"k", swapped)
    assert entries.set_cells_record(b"k", swapped)[1].endswith(b"from __iter__")


def test_the_caches_start_again_when_full(monkeypatch):
    from ddb2bt.pipelines.bigtable import entries

    monkeypatch.setattr(entries, "HEADS_MAX", 3)
    monkeypatch.setattr(entries, "_column_heads", {})
    monkeypatch.setattr(entries, "_heads_kept", 0)
    monkeypatch.setattr(entries, "_stamps", {})
    rows = [(b"k%d" % n, [("fghij"[(n + m) % 5], b"q%d" % m, 1000 * (n + m), b"v") for m in range(n % 5)])
            for n in range(40)]
    for row_key, found in rows:
        assert entries._set_cells_record(row_key, found)[1][2:] == protobuf_entry(row_key, found)
        assert len(entries._column_heads) <= 3 and len(entries._stamps) <= 3
        assert sum(map(len, entries._column_heads.values())) <= 3  # every family's qualifiers together


def test_mutations_read_as_the_clients_objects_every_way_a_sequence_is_read():
    """LazyMutations is a tuple of the mapper's tuples (its len is the tuple's, no objects made), read item by item
    as the client's objects: indexing, slices, iteration, reversed, ``in``, index and count, tuple() and list()."""
    from ddb2bt.pipelines.bigtable.entries import mutations_entry_class

    row = mapped_rows()[0]
    mutations = to_mutation_entry(row).mutations
    assert len(mutations) == len(row.cells) and mutations._made is None
    expected = [m._to_dict() for m in reference_entry(row).mutations]
    dicts = lambda found: [m._to_dict() for m in found]  # noqa: E731
    assert dicts([mutations[i] for i in range(len(mutations))]) == expected == dicts(list(mutations))
    assert dicts(mutations[1:3]) == expected[1:3] and dicts(mutations[-1:]) == expected[-1:]
    assert dicts(reversed(mutations)) == expected[::-1] and dicts(tuple(mutations)) == expected
    assert mutations[0] in mutations and row.cells[0] not in mutations
    assert mutations.index(mutations[1]) == 1 and mutations.count(mutations[0]) == 1
    assert all(type(m) is SetCell for m in mutations) and isinstance(mutations, Sequence)
    changes = mutations_entry_class()(b"k", (("f", b"q"), ("f", b"q", 1000), ("f", b"q", 1000, b"v")))
    assert [type(m).__name__ for m in changes.mutations] == ["DeleteRangeFromColumn", "DeleteRangeFromColumn",
                                                             "SetCell"]


def test_the_writers_entries_are_sized_as_they_are_made():
    """entry_maker's entries (the writer's) have their bytes written when made, the same as size() later writes;
    what Bigtable cannot hold raises as they are made, the count limit before any cell is looked at."""
    from ddb2bt.pipelines.bigtable.entries import entry_maker

    counted = MappedRow(b"k", (Cell("f", b"q", 1000, b"v"), Cell("stats", b"n", 1000, (7).to_bytes(8, "big"))), "e")
    for counters in (frozenset(), frozenset({"stats"})):
        make = entry_maker(counters)
        for row in [*mapped_rows()[:30], counted]:
            made, later = make(row), to_mutation_entry(row, counters)
            assert made.wire and made._size == len(made.wire) - len(request_entry_prefix(made._size))
            assert (made.size(), made.wire, made.data_bytes) == (later.size(), later.wire, later.data_bytes)
        with pytest.raises(TypeError, match="expected bytes, str found"):
            make(MappedRow(b"k", (Cell("f", b"q", 1000, "text"),), "e"))
        too_many = tuple(Cell("f", b"q%d" % i, 1000, "text") for i in range(MUTATIONS_PER_ENTRY_MAX + 1))
        with pytest.raises(ValueError, match="mutations"):
            make(MappedRow(b"k", too_many, "e"))
