"""The sink's RowMutationEntry: same wire bytes as the client's own classes, real sizes, lazy SetCells."""

from __future__ import annotations

import pytest
from google.cloud.bigtable.data import RowMutationEntry, SetCell
from google.cloud.bigtable_v2.types import bigtable as types_pb

from benchmarks import dataset
from benchmarks.run import HERE as BENCH_DIR
from ddb2bt.mappers.compiler import compile_spec
from ddb2bt.mappers.limits import MUTATIONS_PER_ENTRY_MAX
from ddb2bt.mappers.loader import load_spec
from ddb2bt.mappers.results import Cell, MappedRow
from ddb2bt.pipelines.bigtable.entries import to_mutation_entry

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
