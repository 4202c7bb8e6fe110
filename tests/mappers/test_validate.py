"""compare(): missing rows and cells, different values, extras, and what GC may already have removed."""

from datetime import timedelta

from ddb2bt.mappers.results import Cell, ItemError, MappedRow
from ddb2bt.mappers.spec import GcPolicy
from ddb2bt.mappers.validate import compare, expected_rows

NOW = 1_700_000_000_000_000
F = {"f": GcPolicy(max_versions=2)}


def _row(key, *cells):
    return MappedRow(key, tuple(Cell("f", q, ts, v) for q, ts, v in cells), "e")


EXPECTED = expected_rows([_row(b"r1", (b"a", 1000, b"1"), (b"b", 1000, b"2")), _row(b"r2", (b"a", 1000, b"3")), ItemError("bad")])


def test_identical_is_ok():
    actual = {b"r1": [Cell("f", b"a", 1000, b"1"), Cell("f", b"b", 1000, b"2")], b"r2": [Cell("f", b"a", 1000, b"3")]}
    outcome = compare(EXPECTED, actual, F, full=True, now_us=NOW)
    assert outcome.ok and outcome.cells_matched == outcome.cells_expected == 3 and outcome.rows_found == 2


def test_every_kind_of_difference():
    actual = {b"r1": [Cell("f", b"a", 1000, b"X"), Cell("f", b"c", 1000, b"9")], b"r3": [Cell("f", b"a", 1000, b"1")]}
    outcome = compare(EXPECTED, actual, F, full=True, now_us=NOW)
    assert outcome.counts() == {"different_value": 1, "missing_cell": 1, "extra_cell": 1, "missing_row": 1, "extra_row": 1}
    described = [d.describe() for d in outcome.differences]
    assert "different value: r1 f:a@1000 expected 1 got X" in described
    assert "missing row: r2" in described


def test_a_sample_ignores_cells_and_rows_of_other_items():
    actual = {b"r1": [Cell("f", b"a", 1000, b"1"), Cell("f", b"b", 1000, b"2"), Cell("f", b"z", 5, b"other")],
              b"r2": [Cell("f", b"a", 1000, b"3")], b"r9": []}
    assert compare(EXPECTED, actual, F, full=False, now_us=NOW).ok


def test_cells_gc_may_have_dropped_are_not_missing():
    expected = expected_rows([_row(b"r", (b"a", 1000, b"old"), (b"a", 2000, b"mid"), (b"a", 3000, b"new"))])
    actual = {b"r": [Cell("f", b"a", 2000, b"mid"), Cell("f", b"a", 3000, b"new")]}
    assert compare(expected, actual, F, full=True, now_us=NOW).ok
    aged = {"f": GcPolicy(max_age=timedelta(days=1))}
    assert compare(expected, {b"r": []}, aged, full=True, now_us=NOW).ok
    assert not compare(expected, {b"r": []}, {"f": GcPolicy()}, full=True, now_us=NOW).ok


def test_two_items_writing_one_cell_accept_either_value():
    expected = expected_rows([_row(b"r", (b"a", 1000, b"x")), _row(b"r", (b"a", 1000, b"y"))])
    assert compare(expected, {b"r": [Cell("f", b"a", 1000, b"y")]}, F, full=True, now_us=NOW).ok
