"""A change's old image is mapped for its cells' coordinates only, borrowing the new image's cells where a column
did not change (CompiledSpec.map_lending / map_coordinates): the outcome must be map_item's, exactly.

For generated specs (every encoding and layout, folded rows, versioning, TTL, two entities: the round-trip
property's ``cases``) and for the benchmark's spec (timestamps from attributes and from the sort key), an image
and a changed copy of it (attributes removed, added, given another item's value -- another key, entity or
timestamp -- or any value at all, which may not map) map with map_coordinates, borrowing from the other, to the
same row key, entity and cell coordinates as map_item, or to the same ItemError or Skipped.
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks import dataset
from benchmarks.cutover import modified
from ddb2bt.mappers.compiler import compile_spec
from ddb2bt.mappers.loader import load_spec
from ddb2bt.mappers.results import MappedRow
from tests.pipelines.test_roundtrip_property import ANY, NOW_MS, REST_NAMES, cases

SETTINGS = {"deadline": None, "suppress_health_check": list(HealthCheck)}
BENCH_ITEMS = list(dataset.generate(60))
BENCH = compile_spec(load_spec("benchmarks/spec.yaml"), now_ms=NOW_MS)


def check_same_outcome(compiled, image: dict, lender: dict) -> None:
    lent, loan = compiled.map_lending(lender)
    assert lent == compiled.map_item(lender)
    got, want = compiled.map_coordinates(image, loan), compiled.map_item(image)
    if not isinstance(want, MappedRow):
        assert got == want
        return
    assert isinstance(got, MappedRow), got
    assert (got.row_key, got.entity, got.warnings) == (want.row_key, want.entity, want.warnings)
    # the same coordinates, each once per cell; values only as long (a borrowed map's JSON may order its keys apart)
    assert Counter((c.family, c.qualifier, c.timestamp_micros, len(c.value)) for c in got.cells) == \
        Counter((c.family, c.qualifier, c.timestamp_micros, len(c.value)) for c in want.cells)


def changed_copy(draw, image: dict, others: list[dict]) -> dict:
    changed = dict(image)
    other = draw(st.sampled_from(others))
    for name in sorted(set(image) | set(other)):
        choice = draw(st.integers(0, 6))
        if choice == 0:
            changed.pop(name, None)  # removed
        elif choice == 1 and name in other:
            changed[name] = other[name]  # another item's: its key, entity or timestamp, or a value that maps
        elif choice == 2:
            changed[name] = draw(ANY)  # any value: may not map
    if draw(st.integers(0, 3)) == 0:
        changed[draw(REST_NAMES)] = draw(ANY)  # added
    return changed


@st.composite
def generated(draw):
    spec, items = draw(cases())
    image = draw(st.sampled_from(items))
    return compile_spec(spec, now_ms=NOW_MS), image, changed_copy(draw, image, items)


@st.composite
def benchmark_pairs(draw):
    image = draw(st.sampled_from(BENCH_ITEMS))
    if draw(st.booleans()):
        return image, modified(image, draw(st.integers(0, 10**6)))  # the benchmark's change
    return image, changed_copy(draw, image, BENCH_ITEMS)


@settings(max_examples=400, **SETTINGS)
@given(case=generated())
def test_coordinates_borrowed_from_another_image_are_map_items(case):
    compiled, image, changed = case
    check_same_outcome(compiled, image, changed)  # the old image borrows from the new
    check_same_outcome(compiled, changed, image)  # and the other way round


@settings(max_examples=300, **SETTINGS)
@given(pair=benchmark_pairs())
def test_coordinates_on_the_benchmark_spec_are_map_items(pair):
    image, changed = pair
    check_same_outcome(BENCH, image, changed)
    check_same_outcome(BENCH, changed, image)


def _review() -> dict:
    return next(item for item in BENCH_ITEMS if item["type"]["S"] == "review")


def test_unchanged_columns_borrow_the_lenders_cells_and_changed_ones_are_mapped():
    old = _review()
    new = dict(old, stars={"N": "1" if old["stars"]["N"] != "1" else "2"})
    lent, loan = BENCH.map_lending(new)
    got = BENCH.map_coordinates(old, loan)
    lent_cells = {(c.family, c.qualifier): c for c in lent.cells}
    for cell in got.cells:
        borrowed = lent_cells[(cell.family, cell.qualifier)]
        assert (cell is borrowed) == (cell.qualifier != b"stars")
    assert got.row_key is lent.row_key


def test_a_changed_timestamp_or_key_lends_nothing_of_it():
    old = _review()
    pk, (_, at, number) = old["pk"]["S"], old["sk"]["S"].split("#")
    moved = dict(old, sk={"S": f"REVIEW#{int(at) + 5000}#{number}"})  # the key and the timestamp come from sk
    lent, loan = BENCH.map_lending(moved)
    got = BENCH.map_coordinates(old, loan)
    assert got == BENCH.map_item(old)
    assert got.row_key != lent.row_key and not {c.timestamp_micros for c in got.cells} & {c.timestamp_micros for c in lent.cells}
    assert pk == moved["pk"]["S"]


@pytest.mark.parametrize("lender", [None, {"pk": {"S": "x"}, "sk": {"S": "y"}, "type": {"S": "nothing"}}])
def test_without_a_loan_coordinates_are_map_items(lender):
    old = _review()
    loan = BENCH.map_lending(lender)[1] if lender else None
    assert loan is None
    assert BENCH.map_coordinates(old, loan) == BENCH.map_item(old)
