"""A change's old image is mapped only where it differs from the new one (CompiledSpec.stale_coordinates):
less the new image's cells, its coordinates must be exactly those map_item gives, less the same.

For generated specs (every encoding and layout, folded rows, versioning, TTL, two entities: the round-trip
property's ``cases``) and for the benchmark's spec (timestamps from attributes and from the sort key), an image
and a changed copy of it (attributes removed, added, given another item's value -- another key, entity or
timestamp -- or any value at all, which may not map), in both directions: where the later image maps and the
shortcut applies, the earlier image's stale coordinates less the later image's cells are map_item's cells of
the earlier image less the same; where the earlier image does not map as a whole (it was dead-lettered and
wrote nothing), they are still only coordinates its own columns and rest attributes would give.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks import dataset
from benchmarks.cutover import modified
from ddb2bt.mappers.changes import Change, ChangeSet, diff
from ddb2bt.mappers.compiler import compile_spec
from ddb2bt.mappers.loader import load_spec
from ddb2bt.mappers.results import MappedRow
from tests.pipelines.roundtrip_cases import ANY, NOW_MS, REST_NAMES, cases

SETTINGS = {"deadline": None, "suppress_health_check": list(HealthCheck)}
BENCH_ITEMS = list(dataset.generate(60))
BENCH = compile_spec(load_spec("benchmarks/spec.yaml"), now_ms=NOW_MS)


def coordinates(row: MappedRow) -> set[tuple[str, bytes, int]]:
    return {(cell.family, cell.qualifier, cell.timestamp_micros) for cell in row.cells}


def check_stale(compiled, earlier: dict, later: dict) -> bool:
    """Whether the shortcut applied; asserts what it gives when it does."""
    later_row = compiled.map_item(later)
    stale = compiled.stale_coordinates(earlier, later)
    if isinstance(later_row, MappedRow):  # told the entity later mapped with (as diff does), the same answer
        assert compiled.stale_coordinates(earlier, later, later_row.entity) == stale
    if stale is None or not isinstance(later_row, MappedRow):
        return False
    assert len(stale) == len(set(stale)), stale  # each cell once
    got = set(stale) - coordinates(later_row)
    want = compiled.map_item(earlier)
    if isinstance(want, MappedRow):
        assert want.row_key == later_row.row_key  # the shortcut holds only within one row
        assert got == coordinates(want) - coordinates(later_row)
    else:  # earlier wrote nothing; anything named must be a cell one of its attributes maps to
        entity = compiled.entity_for(earlier)
        families = {column.family for column in entity.columns} | ({entity.rest[0]} if entity.rest else set())
        assert {family for family, _q, _t in got} <= families
    return True


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
def test_stale_coordinates_are_map_items_less_the_new_cells(case):
    compiled, image, changed = case
    check_stale(compiled, image, changed)  # the old image against the new
    check_stale(compiled, changed, image)  # and the other way round


@settings(max_examples=300, **SETTINGS)
@given(pair=benchmark_pairs())
def test_stale_coordinates_on_the_benchmark_spec_are_map_items_less_the_new_cells(pair):
    image, changed = pair
    check_stale(BENCH, image, changed)
    check_stale(BENCH, changed, image)


def _review() -> dict:
    return next(item for item in BENCH_ITEMS if item["type"]["S"] == "review")


def test_only_what_differs_is_mapped_and_a_one_cell_column_only_where_it_is_gone():
    old = _review()
    new = dict(old, stars={"N": "1" if old["stars"]["N"] != "1" else "2"}, extra={"S": "new rest attribute"})
    del new["body"]
    old["gone"] = {"S": "a rest attribute the new image lacks"}
    stale = BENCH.stale_coordinates(old, new)
    # stars changed but is one cell at the same coordinates as the new image's: nothing to map or delete
    assert {qualifier for _family, qualifier, _t in stale} == {b"body", b"gone"}
    assert check_stale(BENCH, old, new)
    result = diff(BENCH, Change({}, old, new, "MODIFY", 0))
    assert isinstance(result, ChangeSet)
    (row,) = result.rows
    assert {d.qualifier for d in row.deletes} == {b"body", b"gone"}  # stars is set again at the same coordinate


def test_a_changed_timestamp_or_key_takes_the_whole_image():
    old = _review()
    _, at, number = old["sk"]["S"].split("#")
    moved = dict(old, sk={"S": f"REVIEW#{int(at) + 5000}#{number}"})  # the key and the timestamp come from sk
    assert BENCH.stale_coordinates(old, moved) is None
    result = diff(BENCH, Change({}, old, moved, "MODIFY", 0))
    old_row = BENCH.map_item(old)
    deleted = {(row.row_key, d.family, d.qualifier, d.timestamp_micros) for row in result.rows for d in row.deletes}
    assert deleted == {(old_row.row_key, *coordinate) for coordinate in coordinates(old_row)}


@pytest.mark.parametrize("other", [{"pk": {"S": "x"}, "sk": {"S": "y"}, "type": {"S": "nothing"}},
                                   {"pk": {"S": "PROD#1"}, "sk": {"S": "PRODUCT"}, "type": {"S": "product"}}])
def test_another_entity_or_no_entity_takes_no_shortcut(other):
    assert BENCH.stale_coordinates(_review(), other) is None


def test_two_entities_of_one_name_are_found_by_the_item_not_by_the_name():
    """Entity names are not required to be unique: where two share one, the name says nothing and the entity is
    found from the image, as without the hint."""
    import copy

    from ddb2bt.mappers.spec import MappingSpec

    data = copy.deepcopy(BENCH.spec.model_dump(by_alias=True))
    for entity in data["entities"]:
        entity["name"] = "same"
    compiled = compile_spec(MappingSpec.model_validate(data), now_ms=NOW_MS)
    old = _review()
    new = dict(old, stars={"N": "1" if old["stars"]["N"] != "1" else "2"})
    del new["body"]
    assert compiled.stale_coordinates(old, new, "same") == compiled.stale_coordinates(old, new) is not None
    assert check_stale(compiled, old, new)
