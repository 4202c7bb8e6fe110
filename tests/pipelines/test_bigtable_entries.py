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


def test_the_message_is_built_once_and_not_held_after_it_is_handed_over():
    row = mapped_rows()[1]
    entry = to_mutation_entry(row)
    size = entry.size()
    built = entry._pb
    assert built is not None and entry.size() == size and entry._pb is built
    first = entry._to_pb()
    assert entry._pb is None and entry.size() == size  # the size stays known without the message
    assert serialize(first) == serialize(entry._to_pb()) == serialize(reference_entry(row)._to_pb())
