"""A change's entry (one-millisecond deletes, then SetCells: :class:`MutationsEntry`, the change sink's) written without
a message object (:func:`change_record`) is byte for byte protobuf's own serialisation of the same message, for
generated rows; any other entry, and anything protobuf's setters refuse, goes through protobuf's own path as before."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from ddb2bt.pipelines.bigtable import entries
from ddb2bt.pipelines.bigtable.entries import ADD, change_record, mutations_entry_class, request_entry_prefix
from tests.compiled import require_built

FAMILIES = st.sampled_from(["", "d", "meta", "ü", "f" * 200])
QUALIFIERS = st.binary(max_size=200) | st.sampled_from([b"", b"name", b"\x00\xff"])
MICROS = st.one_of(st.integers(-(1 << 63), (1 << 63) - 1001), st.sampled_from([0, -1000, 1000, -1, 1,
                                                                                  (1 << 63) - 1001, -(1 << 63)]),
                   st.integers(1_600_000_000_000_000, 1_800_000_000_000_000).map(lambda us: us // 1000 * 1000))
DELETES = st.tuples(FAMILIES, QUALIFIERS, MICROS)
CELLS = st.tuples(FAMILIES, QUALIFIERS, MICROS.filter(lambda us: us >= 0), st.binary(max_size=5000))


def protobufs(row_key: bytes, mutations: tuple) -> bytes:
    """The entry as protobuf serialises it (filled by the entry's own ``_fill``), as a request's field 2."""
    entry = mutations_entry_class()(row_key, mutations)
    data = entry._build().SerializeToString()
    return request_entry_prefix(len(data)) + data


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=5000), st.lists(DELETES, max_size=6), st.lists(CELLS, max_size=6))
def test_a_changes_entry_is_protobufs_own_bytes(row_key, deletes, cells):
    mutations = tuple(deletes) + tuple(cells)
    if not mutations:
        return
    record = change_record(row_key, mutations)
    assert record is not None
    size, wire, data = record
    assert wire == protobufs(row_key, mutations) and size == len(wire) - len(request_entry_prefix(size))
    assert data is None
    entry = mutations_entry_class()(row_key, mutations)
    assert entry.size() == size and entry.proto == wire


ODD = [
    (("d", b"q", 1000), ("d", b"q")),  # a whole-column delete: not a change's one-millisecond delete
    (("d", b"q", 1000, 5, ADD),),  # a counter's add
    (("d", b"q", 1000, b"v"), ("d", b"q", 1000)),  # a delete after a set
    (("d", "q", 1000),),  # a qualifier that is text
    ((b"d", b"q", 1000),),  # a family in bytes
    (("d", b"q", True),),  # a timestamp that is a bool
    (("d", b"q", 1.0),),
    (("d", b"q", (1 << 63) - 1000),),  # its millisecond's end outside int64
    (("d", b"q", -(1 << 63) - 1),),
]


@pytest.mark.parametrize("mutations", ODD)
def test_any_other_entry_goes_through_protobufs_path_with_its_answer_or_error(mutations):
    assert change_record(b"row", mutations) is None
    entry = mutations_entry_class()(b"row", mutations)
    try:
        expected: object = protobufs(b"row", mutations)
    except (TypeError, ValueError) as err:
        expected = type(err)
    try:
        found: object = entry.proto
    except (TypeError, ValueError) as err:
        found = type(err)
    assert found == expected


@settings(max_examples=100, deadline=None)
@given(st.sampled_from([b"", b"k"]), st.lists(st.tuples(FAMILIES, st.binary(min_size=4000, max_size=9000), MICROS),
                                            min_size=1, max_size=2),
       st.lists(CELLS, max_size=2))
def test_long_deletes_and_an_empty_row_key_are_protobufs_own_bytes_too(row_key, deletes, cells):
    """A delete whose column and time range take more than the precomputed heads cover (qualifiers of 4,000+
    bytes), and an entry without a row key (protobuf leaves the field out), byte for byte as protobuf writes them."""
    mutations = tuple(deletes) + tuple(cells)
    record = change_record(row_key, mutations)
    assert record is not None and record[1] == protobufs(row_key, mutations)


def python_answer(row_key: object, mutations: object) -> object:
    try:
        return entries._change_record(row_key, mutations)  # type: ignore[arg-type]
    except Exception as err:  # noqa: BLE001 - the error, type and words, is the answer compared
        return f"{type(err).__name__}: {err}"


def test_the_compiled_change_record_is_built_wherever_a_c_compiler_is():
    require_built(entries._compiled_change, "pipelines/bigtable/_wire.c (change_record)")


ODD_MUTATIONS = st.one_of(
    st.tuples(st.sampled_from(["d", "\ud800", b"d", 1]), st.sampled_from([b"q", "q", bytearray(b"q")]),
              st.sampled_from([0, -1000, True, 1.0, (1 << 63) - 1001, (1 << 63) - 1000, -(1 << 63), -(1 << 63) - 1,
                               1 << 70])),
    st.tuples(st.sampled_from(["d", "\ud800", 1]), st.sampled_from([b"q", "q"]), st.sampled_from([0, 1, -1, True]),
              st.sampled_from([b"v", "v", None])),
    st.sampled_from([("d", b"q"), ("d", b"q", 1000, 5, ADD), ["d", b"q", 1000], ()]))


@settings(max_examples=600, deadline=None)
@given(st.one_of(st.binary(max_size=300), st.sampled_from(["k", bytearray(b"k"), None])),
       st.lists(st.one_of(DELETES, DELETES, CELLS, ODD_MUTATIONS), max_size=40), st.booleans())
def test_the_compiled_change_record_gives_the_python_functions_bytes_or_leaves_it_to_it(row_key, mutations, as_list):
    """Deletes then sets (and more of each than the compiled function's stack holds), anything out of that order or of
    another form: its answer is the Python function's, or None where that one answers (a refusal, protobuf's path)."""
    compiled = entries._compiled_change
    if compiled is None:
        pytest.skip("pipelines/bigtable/_wire.c not built")
    mutations = list(mutations) if as_list else tuple(mutations)
    found = compiled(row_key, mutations)
    expected = python_answer(row_key, mutations)
    assert found is None or found == expected
    if isinstance(row_key, bytes) and all(type(m) is tuple for m in mutations) and (isinstance(expected, tuple)):
        taken = all(type(m[0]) is str and not any(0xD800 <= ord(c) <= 0xDFFF for c in m[0]) for m in mutations)
        assert found is not None or not taken  # everything of its own forms is answered by it
    assert (entries.change_record(row_key, mutations) if not isinstance(expected, str) else expected) == expected


class _SaysFour(tuple):
    def __len__(self) -> int:
        return 4


class _SaysThree(tuple):
    def __len__(self) -> int:
        return 3


@pytest.mark.parametrize("mutation", [_SaysFour(("cf", b"q", 5000)), _SaysThree(("cf", b"q", 5000, b"v"))])
def test_a_tuple_that_measures_itself_otherwise_is_left_to_the_python_function(mutation):
    """The Python function tells a delete from a cell by len(): the compiled one must not answer for a tuple subclass
    whose len() is not its items' count (it wrote the bytes where Python refuses; found by review)."""
    compiled = entries._compiled_change
    if compiled is None:
        pytest.skip("pipelines/bigtable/_wire.c not built")
    assert compiled(b"k", [mutation]) is None
    assert isinstance(python_answer(b"k", [mutation]), str)  # Python's refusal is the answer
