"""A row's cells as a read sees them after garbage collection (mappers.gc.GcView): what each policy condemns."""

from __future__ import annotations

from hypothesis import given, strategies as st

from ddb2bt.mappers.gc import GcView
from ddb2bt.mappers.results import Cell
from ddb2bt.mappers.spec import GcPolicy

DAY_US = 86_400_000_000
NOW_US = 100 * DAY_US


def view(**families: dict | None) -> GcView:
    return GcView({name: None if policy is None else GcPolicy.model_validate(policy)
                   for name, policy in families.items()}, NOW_US)  # fmt: skip


def kept(gc: GcView, cells: list[Cell]) -> list[tuple]:
    return [(cell.family, cell.qualifier, cell.timestamp_micros) for cell in gc(cells)]


def test_each_column_keeps_its_newest_max_versions_in_any_order_read():
    cells = [Cell("f", b"a", 1, b"old"), Cell("f", b"a", 3, b"new"), Cell("f", b"b", 2, b"only"), Cell("f", b"a", 2, b"mid")]
    assert kept(view(f={"max_versions": 2}), cells) == [("f", b"a", 3), ("f", b"b", 2), ("f", b"a", 2)]
    assert kept(view(f={"max_versions": 1}), cells) == [("f", b"a", 3), ("f", b"b", 2)]


def test_max_age_drops_cells_older_than_the_age_union_and_intersection_combine_the_rules():
    old, young = NOW_US - 3 * DAY_US, NOW_US - DAY_US // 2
    cells = [Cell("f", b"a", young, b"1"), Cell("f", b"a", old, b"2"), Cell("f", b"b", old, b"3")]
    assert kept(view(f={"max_age": "1d"}), cells) == [("f", b"a", young)]
    union = {"max_age": "1d", "max_versions": 2}
    assert kept(view(f=union), cells) == [("f", b"a", young)]
    # intersection: a cell goes only when it is both beyond 1 version and older than 1 day
    both = {"max_age": "1d", "max_versions": 1, "combine": "intersection"}
    assert kept(view(f=both), cells) == [("f", b"a", young), ("f", b"b", old)]


def test_families_without_a_policy_and_families_the_spec_does_not_name_are_read_as_they_are():
    cells = [Cell("f", b"a", 1, b"1"), Cell("f", b"a", 2, b"2"), Cell("app", b"x", 1, b"3"), Cell("app", b"x", 2, b"4")]
    gc = view(f=None, g={"max_versions": 1})
    assert gc(cells) is cells
    assert not view(f=None, c={"aggregate": "sum"})  # nothing to apply: callers skip it


@given(st.lists(st.tuples(st.sampled_from([b"a", b"b"]), st.integers(0, 200)), max_size=12, unique=True),
       st.integers(1, 4))
def test_max_versions_keeps_exactly_the_newest_n_of_every_column(cells, versions):
    row = [Cell("f", qualifier, at * DAY_US, b"") for qualifier, at in cells]
    seen = kept(view(f={"max_versions": versions}), row)
    for qualifier in (b"a", b"b"):
        times = sorted((at * DAY_US for q, at in cells if q == qualifier), reverse=True)
        assert sorted((t for _, q, t in seen if q == qualifier), reverse=True) == times[:versions]
