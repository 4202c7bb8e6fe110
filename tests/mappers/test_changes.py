"""The pure change diff: cells set and cells deleted (exact family, qualifier, timestamp), folded rows untouched."""

from __future__ import annotations

import pytest

from ddb2bt.mappers.changes import Change, CellDelete, ChangeSet, NothingToDo, diff, diff_many, kind_of_change
from ddb2bt.mappers.compiler import compile_spec
from ddb2bt.pipelines.cutover.workload import make_spec
from ddb2bt.mappers.results import Cell, MappedRow

NOW_MS = 1_700_000_000_000

SPEC = make_spec("T")  # posts, drafts, and comments folded into their post's row at their own time


@pytest.fixture(scope="module")
def compiled():
    return compile_spec(SPEC, now_ms=NOW_MS)


def post(**attributes):
    item = {"pk": {"S": "p1"}, "sk": {"S": "post"}, "kind": {"S": "post"}, "Title": {"S": "hello"}}
    item.update({name: {"S": value} for name, value in attributes.items()})
    return item


def comment(sk: str, text: str, at: int):
    return {"pk": {"S": "p1"}, "sk": {"S": sk}, "kind": {"S": "comment"}, "Text": {"S": text}, "At": {"N": str(at)}}


def change(old, new, time_us=1):
    keys = {k: (new or old)[k] for k in ("pk", "sk")}
    return Change(keys, old, new, kind_of_change(old, new), time_us)


def only(result) -> ChangeSet:
    assert isinstance(result, ChangeSet), result
    return result


def test_insert_sets_every_cell_and_deletes_nothing(compiled):
    result = only(diff(compiled, change(None, post(Body="b"))))
    (row,) = result.rows
    assert row.row_key == b"p1" and row.deletes == ()
    assert {(c.family, c.qualifier, c.value) for c in row.sets} == {("d", b"Title", b"hello"), ("x", b"Body", b'b')}


def test_removed_attribute_is_deleted_at_its_exact_coordinates(compiled):
    result = only(diff(compiled, change(post(Body="b", Tag="t"), post(Body="b2"))))
    (row,) = result.rows
    ts = compiled.migration_ms * 1000  # no timestamp attribute: the migration time, as the backfill wrote it
    assert row.deletes == (CellDelete("x", b"Tag", ts),)
    assert {(c.qualifier, c.value) for c in row.sets} == {(b"Title", b"hello"), (b"Body", b"b2")}


def test_remove_deletes_only_the_items_cells_never_the_row(compiled):
    # Two comments folded into the post's row: removing one deletes its one cell, nothing else.
    result = only(diff(compiled, change(comment("c#1", "first", 1_000), None)))
    (row,) = result.rows
    assert row.row_key == b"p1" and row.sets == ()
    assert row.deletes == (CellDelete("c", b"c#1", 1_000_000),)


def test_changed_timestamp_deletes_the_old_cell_and_writes_the_new(compiled):
    result = only(diff(compiled, change(comment("c#1", "x", 1_000), comment("c#1", "x", 5_000))))
    (row,) = result.rows
    assert row.deletes == (CellDelete("c", b"c#1", 1_000_000),)
    assert [(c.qualifier, c.timestamp_micros) for c in row.sets] == [(b"c#1", 5_000_000)]


def test_changed_entity_and_row_deletes_in_the_old_row_and_sets_in_the_new(compiled):
    draft = {**post(), "kind": {"S": "draft"}}
    result = only(diff(compiled, change(draft, post())))
    rows = {row.row_key: row for row in result.rows}
    assert set(rows) == {b"draft#p1#post", b"p1"}
    assert rows[b"draft#p1#post"].sets == () and len(rows[b"draft#p1#post"].deletes) == 1
    assert rows[b"p1"].deletes == () and result.entity == "post"


def test_unmappable_new_image_deletes_the_old_cells_and_is_a_failure(compiled):
    broken = post()
    del broken["Title"]  # required
    result = only(diff(compiled, change(post(), broken)))
    (row,) = result.rows
    assert row.sets == () and row.deletes == (CellDelete("d", b"Title", compiled.migration_ms * 1000),)
    ((failed, error),) = result.failures
    assert failed.new is broken and error.attribute == "Title"


def test_skipped_images_are_nothing_to_do(compiled):
    meta = {"pk": {"S": "p1"}, "sk": {"S": "m"}, "kind": {"S": "meta"}}
    assert isinstance(diff(compiled, change(meta, {**meta, "v": {"S": "2"}})), NothingToDo)


def test_identical_images_rewrite_the_same_cells(compiled):
    result = only(diff(compiled, change(post(), post())))
    (row,) = result.rows
    assert row.deletes == () and len(row.sets) == 1


def test_several_changes_fold_into_the_sequential_effect(compiled):
    v1, v2, v3 = post(A="1"), post(B="2"), post(C="3")
    result = only(diff_many(compiled, [change(None, v1), change(v1, v2), change(v2, v3)]))
    (row,) = result.rows
    assert {d.qualifier for d in row.deletes} == {b"A", b"B"}
    assert {c.qualifier for c in row.sets} == {b"Title", b"C"}
    # the last change a removal: every cell any image produced is deleted
    result = only(diff_many(compiled, [change(v1, v2), change(v2, None)]))
    (row,) = result.rows
    assert row.sets == () and {d.qualifier for d in row.deletes} == {b"Title", b"A", b"B"}


# --------------------------------------------------------------------------- the convergence argument, on a model

from hypothesis import given, settings, strategies as st  # noqa: E402

VERSIONS = st.one_of(st.none(), st.builds(lambda a, b, c: post(**{k: v for k, v in (("A", a), ("B", b), ("C", c)) if v}),
                                          st.sampled_from(["", "1", "2"]), st.sampled_from(["", "1"]),
                                          st.sampled_from(["", "x"])))


def apply(state: dict, result) -> None:
    """Apply a change set to a model of one Bigtable table: {(row, family, qualifier, ts): value}."""
    if isinstance(result, NothingToDo):
        return
    for row in result.rows:
        for d in row.deletes:
            state.pop((row.row_key, d.family, d.qualifier, d.timestamp_micros), None)
        for c in row.sets:
            state[(row.row_key, c.family, c.qualifier, c.timestamp_micros)] = c.value


def cells_of(compiled, image) -> dict:
    state: dict = {}
    if image is not None:
        apply(state, diff(compiled, change(None, image)))
    return state


@settings(max_examples=300, deadline=None)
@given(versions=st.lists(VERSIONS, min_size=2, max_size=6), read=st.integers(0, 5), replay=st.integers(0, 5),
       batch=st.integers(1, 3))
def test_a_suffix_replayed_in_order_converges_from_any_version(compiled, versions, read, replay, batch):
    """The backfill stored version `read`; the changes are then applied from any earlier point, in batches
    folded by diff_many, and again from a later point (a redelivery after a restart): the result is
    always exactly the last version's cells."""
    read = min(read, len(versions) - 1)
    chain = [(number, change(versions[number - 1], versions[number])) for number in range(1, len(versions))
             if (versions[number - 1], versions[number]) != (None, None)]
    first_after_read = next((k for k, (number, _) in enumerate(chain) if number > read), len(chain))
    state = cells_of(compiled, versions[read])
    for pass_start in (min(replay, first_after_read), min(replay, len(chain))):  # then a redelivered suffix
        pending = [c for _, c in chain[pass_start:]]
        for index in range(0, len(pending), batch):
            apply(state, diff_many(compiled, pending[index:index + batch]))
    assert state == cells_of(compiled, versions[-1])


def _with_tags() -> object:
    """SPEC with a set column on posts: a column of several cells, which an old and a new image may share in part."""
    data = SPEC.model_dump(by_alias=True, exclude_none=True)
    post_entity = next(entity for entity in data["entities"] if entity["name"] == "post")
    post_entity["columns"].append({"attribute": "Tags", "family": "d", "layout": "set", "qualifier": "t:",
                                   "encoding": "utf8"})
    return compile_spec(type(SPEC).model_validate(data), now_ms=NOW_MS)


TAGGED = _with_tags()
TAGS = st.one_of(st.none(), st.sets(st.sampled_from("abc"), min_size=1))


@settings(max_examples=300, deadline=None)
@given(old=VERSIONS, new=VERSIONS, other_sk=st.booleans(), old_tags=TAGS, new_tags=TAGS)
def test_one_change_shortcut_gives_the_general_paths_answer(old, new, other_sk, old_tags, new_tags):
    """diff_many's shortcut for a single change (the catch-up's usual case) answers exactly what the general path
    does: the same rows, deletes (in order) and sets, for any pair of versions (an image moved to another row, a set
    column whose members change in part)."""
    import ddb2bt.mappers.changes as changes_module

    if old is None and new is None:
        return
    if other_sk and old is not None:
        old = {**old, "sk": {"S": "post2"}}
    for image, tags in ((old, old_tags), (new, new_tags)):
        if image is not None and tags:
            image["Tags"] = {"SS": sorted(tags)}
    one = change(old, new)
    quick = diff_many(TAGGED, [one])
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(changes_module, "_one_change", lambda *_: None)
        general = diff_many(TAGGED, [one])
    assert quick == general


def _index_rows_after(compiled, changes, before: dict) -> dict:
    """Index rows ((table, key) -> {coordinate: value}) after applying a ChangeSet to `before`, as Bigtable would."""
    rows = {where: dict(cells) for where, cells in before.items()}
    result = diff_many(compiled, changes)
    for row in result.rows if isinstance(result, ChangeSet) else ():
        cells = rows.setdefault((row.table, row.row_key), {})
        for delete in row.deletes:
            cells.pop(tuple(delete), None)
        for cell in row.sets:
            cells[cell[:3]] = cell.value
    return {where: cells for where, cells in rows.items() if cells and _indexed(where)}


def _indexed(where: tuple) -> bool:
    """An index row: in an index's own table (by_b), or under an index's prefix in the main table (by_a)."""
    return where[0] is not None or where[1].startswith(b"~")


def _written(compiled, item) -> dict:
    mapped = compiled.map_item(item)
    return {(getattr(row, "table", None), row.row_key): {cell[:3]: cell.value for cell in row.cells}
            for row in (mapped, *mapped.index_rows)}


@pytest.mark.parametrize("old_attributes, new_attributes", [
    ({"A": "1", "B": "x"}, {"A": "2", "B": "x"}),   # by_a's key moves; by_b's row keeps its key, its cells change
    ({"A": "1", "B": "x"}, {"B": "y"}),             # by_a's key removed (sparse: the row goes); by_b's key changes
    ({"A": "1"}, {"A": "1", "B": "x"}),             # by_b's key appears
    ({"A": "1", "B": "x"}, None),                   # a delete removes both
])  # fmt: skip
def test_index_rows_follow_their_item_moved_removed_and_deleted(old_attributes, new_attributes):
    compiled = compile_spec(make_spec("T", indexes=True), now_ms=NOW_MS)
    old = {**post(**old_attributes), "C": {"N": "-1.5"}}  # by_a's sort key
    new = None if new_attributes is None else {**post(**new_attributes), "C": {"N": "7"}}
    before = _written(compiled, old)
    assert any(key.startswith(b"~a#") for _table, key in before)
    assert ("B" in old_attributes) == any(table == "T.by_b" for table, _key in before)  # by_b: its own table
    after = _index_rows_after(compiled, [change(old, new)], before)
    expected = {} if new is None else {k: v for k, v in _written(compiled, new).items() if _indexed(k)}
    assert after == expected  # exactly the new image's index rows: none left behind where the old key was


COORDINATES = st.tuples(st.sampled_from(["d", "m"]), st.sampled_from([b"a", b"b", b"c"]), st.sampled_from([1000, 2000]))


@settings(max_examples=300, deadline=None)
@given(sets=st.lists(st.builds(lambda c, v: (*c, v), COORDINATES, st.sampled_from([b"", b"v"])), max_size=6),
       stale=st.lists(COORDINATES, max_size=6))
def test_one_changes_deletes_are_the_stale_coordinates_the_new_cells_do_not_set(sets, stale):
    """_one_change's deletes, whatever the new cells and stale coordinates share (a qualifier in another family or
    at another time, the same coordinate, a coordinate named twice): each stale coordinate no new cell sets, once,
    in order."""
    from ddb2bt.mappers.changes import _one_change

    class Compiled:  # the new image's row and the old image's stale coordinates, as given
        @staticmethod
        def map_item(_image):
            return MappedRow(b"row", tuple(Cell(*cell) for cell in sets), "e", (), ())

        @staticmethod
        def stale_coordinates(_old, _new, _entity=None):
            return list(stale)

    image = {"pk": {"S": "x"}, "sk": {"S": "y"}}
    result = _one_change(Compiled, change(image, dict(image)))
    set_coordinates = {cell[:3] for cell in sets}
    want = [c for c in dict.fromkeys(stale) if c not in set_coordinates]
    if not want and not sets:
        assert result == NothingToDo("neither image produces cells")
        return
    (row,) = result.rows
    assert [tuple(d) for d in row.deletes] == want and row.sets == tuple(Cell(*cell) for cell in sets)
