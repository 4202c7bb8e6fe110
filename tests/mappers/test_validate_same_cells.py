"""validate's comparison of a row's cells (`compare.same_cells`, compiled in `_cells.c`): the answer of Python's two
sets, for cells in any order, with duplicates, differing in any one item, and None (the sets answer) for anything
that is not plain cells."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from ddb2bt.mappers.results import Cell
from ddb2bt.mappers.validate import compare

SETTINGS = settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def compiled():
    if compare._compiled_same_cells is None:
        pytest.skip("_cells.c not built: the sets serve (see the test below)")
    return compare._compiled_same_cells


def test_the_compiled_module_is_built_wherever_a_c_compiler_is():
    from tests.compiled import require_built

    require_built(compare._compiled_same_cells, "mappers/validate/_cells.c")


# few distinct values, so that cells collide, differ in one item, or repeat
items = st.tuples(st.sampled_from(["c", "o", "é", "c" * 3, "\U0001f600"]), st.sampled_from([b"", b"n", b"q" * 3]),
                  st.sampled_from([0, 1000, -1, 1 << 63, -(1 << 70), 1_704_067_200_000_000,
                                   1_704_067_200_000_000 + (1 << 32)]),
                  st.sampled_from([b"", b"1", b"\x00" * 3, "x".encode() * 40]))
cells = st.one_of(items.map(lambda fields: Cell(*fields)), items)  # Cell, or a plain tuple as equal


def copy(value):
    """An equal object that is not the same one (as a row read back is not the mapped row)."""
    if isinstance(value, str):
        return "".join(list(value)) if len(value) > 1 else (value + "!")[:-1]
    if isinstance(value, bytes):
        return bytes(bytearray(value))
    return int(str(value))


@SETTINGS
@given(expected=st.lists(cells, max_size=12), data=st.data())
def test_the_answer_is_the_two_sets(expected, data):
    """The row read back: the expected cells shuffled, copied (equal, not identical), some replaced or repeated."""
    found = [Cell(*map(copy, cell)) if data.draw(st.booleans()) else tuple(map(copy, cell)) for cell in expected]
    found = data.draw(st.permutations(found))
    for _ in range(data.draw(st.integers(0, 2))):  # a cell replaced, or one of its items changed
        if found:
            at = data.draw(st.integers(0, len(found) - 1))
            other = data.draw(cells)
            field = data.draw(st.integers(0, 4))
            found[at] = other if field == 4 else Cell(*found[at][:field], other[field], *found[at][field + 1:])
    as_list = data.draw(st.booleans())
    found = list(found) if as_list else tuple(found)
    expected = tuple(expected) if data.draw(st.booleans()) else list(expected)
    python = set(found) == set(expected)
    answer = compiled()(found, expected)
    if len(found) == len(expected):
        assert answer is python
    assert compare.same_cells(found, expected) is python


class Loose(tuple):
    def __eq__(self, other):
        return True

    __hash__ = tuple.__hash__


class Hashed(tuple):
    def __hash__(self):
        return 0


ODD = {
    "a bool timestamp": ([("c", b"q", True, b"")], [("c", b"q", 1, b"")]),
    "a float": ([("c", b"q", 1.0, b"")], [("c", b"q", 1, b"")]),
    "a bytearray value": ([("c", b"q", 1, bytearray(b"v"))], [("c", b"q", 1, b"v")]),
    "a str subclass": ([(type("S", (str,), {})("c"), b"q", 1, b"")], [("c", b"q", 1, b"")]),
    "three items": ([("c", b"q", 1)], [("c", b"q", 1)]),
    "a tuple with its own equality": ([Loose(("c", b"q", 1, b""))], [("d", b"q", 1, b"")]),
    "a tuple with its own hash": ([Hashed(("c", b"q", 1, b""))], [("c", b"q", 1, b"")]),
    "a list for a cell": ([["c", b"q", 1, b""]], [("c", b"q", 1, b"")]),
    "more than 64 cells": ([("c", b"q", n, b"") for n in range(65)], [("c", b"q", n, b"") for n in range(65)]),
    "lengths that differ": ([("c", b"q", 1, b"")], []),
    "an iterator": (iter([("c", b"q", 1, b"")]), [("c", b"q", 1, b"")]),
}


@pytest.mark.parametrize(("found", "expected"), ODD.values(), ids=ODD.keys())
def test_anything_but_plain_cells_is_left_to_the_sets(found, expected):
    assert compiled()(found, expected) is None


def test_duplicates_count_as_sets_do():
    a, b = Cell("c", b"a", 1, b""), Cell("c", b"b", 1, b"")
    assert compiled()([a, a, b], [a, b, b]) is True  # the same set: `plain_match` compared sets, and still does
    assert compiled()([a, a], [a, b]) is False
    assert compiled()([a, b], [b, a]) is True


def test_timestamps_are_compared_whole():
    stamp = 1_704_067_200_000_000
    assert compiled()([Cell("c", b"q", stamp, b"")], [Cell("c", b"q", stamp + (1 << 32), b"")]) is False
    assert compiled()([Cell("c", b"q", 1 << 64, b"")], [Cell("c", b"q", (1 << 64) + 1, b"")]) is False
    assert compiled()([Cell("c", b"q", 1 << 64, b"")], [Cell("c", b"q", int(str(1 << 64)), b"")]) is True
