"""Comparer and resolve_row: each kind of difference, collisions counted before de-duplication, GC, the decoder."""

from __future__ import annotations

from datetime import timedelta

from ddb2bt.mappers.compiler import compile_spec
from ddb2bt.mappers.results import Cell, MappedRow
from ddb2bt.mappers.spec import GcPolicy, MappingSpec
from ddb2bt.mappers.validate.compare import Candidate, Comparer, Difference, count_kinds, describe_counts, resolve_row

NOW = 1_700_000_000_000_000
TS = 1_704_067_200_000_000  # 2024-01-01, the spec's migration_time

SPEC = MappingSpec.model_validate({
    "source": {"table": "Orders", "partition_key": "pk", "sort_key": "sk"},
    "target": {"table": "orders", "families": {"o": {}, "line": {"max_versions": 1}}},
    "migration_time": "2024-01-01T00:00:00Z",
    "entities": [
        {"name": "order", "match": {"sk": "order"}, "row_key": "{pk}", "columns": [
            {"attribute": "total", "family": "o", "encoding": "decimal"}], "drop": ["sk"]},
        {"name": "line", "match": {"sk": {"prefix": "line#"}}, "row_key": "{pk}", "columns": [
            {"attribute": "qty", "family": "line", "qualifier": "{sku}", "encoding": "decimal"}],
         "drop": ["sk"]},
    ],
})
COMPILED = compile_spec(SPEC)
ORDER = {"pk": {"S": "o1"}, "sk": {"S": "order"}, "total": {"N": "30"}}
LINE_A = {"pk": {"S": "o1"}, "sk": {"S": "line#1"}, "sku": {"S": "hat"}, "qty": {"N": "2"}}
LINE_B = {"pk": {"S": "o1"}, "sk": {"S": "line#2"}, "sku": {"S": "cap"}, "qty": {"N": "1"}}
LINE_SAME_SKU = {"pk": {"S": "o1"}, "sk": {"S": "line#3"}, "sku": {"S": "hat"}, "qty": {"N": "5"}}


def members(*items):
    return [(COMPILED.map_item(item), item) for item in items]


def written(*items):
    """The row's cells as a migration would have left them (later items overwrite earlier ones)."""
    cells = {}
    for row, _ in members(*items):
        for cell in row.cells:
            cells[(cell.family, cell.qualifier, cell.timestamp_micros)] = cell
    return list(cells.values())


def comparer(**kwargs):
    return Comparer(SPEC, now_us=NOW, key_names=("pk", "sk"), **kwargs)


def test_a_row_as_migrated_has_no_difference_and_every_cell_counts():
    result = comparer().compare(b"o1", members(ORDER, LINE_A, LINE_B), written(ORDER, LINE_A, LINE_B),
                                scan_order=True)
    assert result.differences == [] and result.fixes == [] and result.candidate is None
    assert result.cells_expected == result.cells_matched == 3 and result.row_found


def test_missing_row_missing_cell_different_value_each_name_the_item():
    gone = comparer().compare(b"o1", members(ORDER, LINE_A), None)
    assert [(d.kind, d.item_key["sk"]["S"]) for d in gone.differences] == [("missing_row", "order"),
                                                                            ("missing_row", "line#1")]
    assert sorted(gone.fixes) == sorted(written(ORDER, LINE_A))  # --repair writes the whole row back

    actual = [c for c in written(ORDER, LINE_A, LINE_B) if c.qualifier != b"cap"]
    actual = [c._replace(value=b"31") if c.qualifier == b"total" else c for c in actual]
    result = comparer(decode_every=0).compare(b"o1", members(ORDER, LINE_A, LINE_B), actual)
    by_kind = {d.kind: d for d in result.differences}
    assert set(by_kind) == {"missing_cell", "different_value"}
    assert by_kind["missing_cell"].item_key == {"pk": {"S": "o1"}, "sk": {"S": "line#2"}}
    assert (by_kind["missing_cell"].family, by_kind["missing_cell"].qualifier) == ("line", b"cap")
    assert (by_kind["different_value"].expected, by_kind["different_value"].found) == (b"30", b"31")
    assert sorted(c.qualifier for c in result.fixes) == [b"cap", b"total"]
    assert result.cells_matched == 1


def test_the_decoder_names_the_attribute_and_both_values():
    actual = [c._replace(value=b"99") if c.qualifier == b"hat" else c for c in written(ORDER, LINE_A)]
    result = comparer().compare(b"o1", members(ORDER, LINE_A), actual)
    (decoded,) = [d for d in result.differences if d.kind == "different_attribute"]
    assert decoded.item_key == {"pk": {"S": "o1"}, "sk": {"S": "line#1"}}
    assert (decoded.attribute, decoded.expected, decoded.found) == ("qty", {"N": "2"}, {"N": "99"})
    assert "attribute 'qty' expected {'N': '2'} got {'N': '99'}" in decoded.describe()


def test_the_decoder_finds_what_cells_cannot_and_takes_key_types_from_the_item():
    spec = MappingSpec.model_validate({
        "source": {"table": "T", "partition_key": "id"}, "target": {"table": "t", "families": {"f": {}}},
        "migration_time": "2024-01-01T00:00:00Z",
        "entities": [{"name": "e", "row_key": "{id|pad(6)}", "columns": [{"attribute": "v", "family": "f"}]}]})
    check = Comparer(spec, now_us=NOW, key_names=("id",))
    for item, found in (({"id": {"N": "42"}, "v": {"S": "x"}}, []),  # 000042 reads back as the number 42
                        ({"id": {"S": "007"}, "v": {"S": "x"}}, [("id", {"S": "007"}, {"S": "7"})])):
        row = compile_spec(spec).map_item(item)
        result = check.compare(row.row_key, [(row, item)], list(row.cells))
        # every cell matches; what does not come back is the decoder's to say
        assert result.cells_matched == 1
        assert [(d.attribute, d.expected, d.found) for d in result.differences] == found


def test_two_items_on_one_cell_are_a_collision_counted_before_de_duplication():
    result = comparer(decode_every=0).compare(b"o1", members(ORDER, LINE_A, LINE_SAME_SKU),
                                            written(ORDER, LINE_A, LINE_SAME_SKU))
    (collision,) = result.differences
    assert collision.kind == "collision" and collision.qualifier == b"hat"
    assert [key["sk"]["S"] for key in collision.items] == ["line#1", "line#3"]
    assert collision.expected == [b"2", b"5"] and collision.found == b"5"
    assert result.cells_expected == 3 and result.cells_matched == 1
    assert result.fixes == []  # which item is right is the spec's to say: --repair leaves it


def test_cells_no_item_of_the_group_produces_become_a_candidate_and_resolve_into_extras():
    extra = Cell("line", b"scarf", TS, b"7")
    older = Cell("o", b"total", TS - 1000, b"29")
    result = comparer().compare(b"o1", members(ORDER, LINE_A), written(ORDER, LINE_A) + [extra, older])
    assert result.differences == [] and set(result.candidate.unclaimed) == {extra, older}
    differences, deletes = resolve_row([Candidate.from_json(result.candidate.to_json())])
    assert {(d.kind, d.qualifier) for d in differences} == {("extra_cell", b"scarf"), ("extra_version", b"total")}
    version = next(d for d in differences if d.kind == "extra_version")
    assert version.item_key == {"pk": {"S": "o1"}, "sk": {"S": "order"}} and version.found == b"29"
    assert set(deletes) == {extra, older}


def test_groups_of_one_row_far_apart_claim_each_others_cells_and_collide_across_groups():
    row = written(ORDER, LINE_A, LINE_B)
    first = comparer().compare(b"o1", members(ORDER, LINE_A), row).candidate
    second = comparer().compare(b"o1", members(LINE_B), row).candidate
    assert first and second  # each sees the other's cells as unclaimed
    assert resolve_row([first, second]) == ([], [])  # together they claim everything
    third = comparer().compare(b"o1", members(LINE_SAME_SKU), row).candidate
    differences, deletes = resolve_row([first, second, third])
    (collision,) = differences
    assert collision.kind == "collision" and collision.qualifier == b"hat" and len(collision.items) == 2
    assert deletes == []


def test_a_group_that_owns_its_row_keeps_another_groups_missing_cell_from_making_extras():
    row = written(ORDER, LINE_A)  # LINE_B's cell is missing from the row
    owner = comparer().compare(b"o1", members(ORDER, LINE_A), row).candidate
    missing = comparer().compare(b"o1", members(LINE_B), row)
    assert owner.owns_all and missing.candidate.unclaimed  # LINE_B's group sees the others' cells as unclaimed
    assert resolve_row([Candidate.from_json(c.to_json()) for c in (missing.candidate, owner)]) == ([], [])
    assert [d.kind for d in missing.differences] == ["missing_cell", "different_attribute", "different_attribute"]
    # a group that claims a cell its row holds, beside a group that owns every cell: they collide
    third = comparer().compare(b"o1", members(LINE_SAME_SKU), row).candidate
    differences, deletes = resolve_row([third, owner])
    assert [(d.kind, d.qualifier) for d in differences] == [("collision", b"hat")] and deletes == []


def test_cells_gc_may_have_dropped_are_neither_missing_nor_extra():
    spec = SPEC.model_copy(deep=True)
    spec.target.families["o"] = GcPolicy(max_age=timedelta(days=1))
    aged = Comparer(spec, now_us=NOW + 400 * 86_400_000_000, key_names=("pk", "sk"))
    result = aged.compare(b"o1", members(ORDER, LINE_A), [c for c in written(ORDER, LINE_A) if c.family != "o"])
    assert result.differences == [] and result.cells_matched == 2
    old_version = Cell("line", b"hat", TS - 1000, b"1")  # max_versions 1: the older version is due for GC
    result = comparer().compare(b"o1", members(ORDER, LINE_A), written(ORDER, LINE_A) + [old_version],
                                scan_order=True)
    assert result.candidate is None and result.differences == []


def test_only_rows_one_partition_can_make_are_decided_alone_in_scan_order():
    whole = comparer().compare(b"o1", members(ORDER, LINE_A), written(ORDER, LINE_A), scan_order=True)
    assert whole.candidate is None  # every entity's row key gives back pk "o1": no item elsewhere maps here
    exported = comparer().compare(b"o1", members(ORDER, LINE_A), written(ORDER, LINE_A))
    assert exported.candidate == Candidate(b"o1", owns_all=True, owner={"pk": {"S": "o1"}, "sk": {"S": "order"}},
                                           cells=2)  # in a few bytes: "this group makes the whole row"
    gone = comparer().compare(b"o1", members(ORDER), None)
    assert gone.candidate.claims and gone.candidate.unclaimed == ()
    spec = MappingSpec.model_validate({
        "source": {"table": "T", "partition_key": "pk"}, "target": {"table": "t", "families": {"f": {}}},
        "migration_time": "2024-01-01T00:00:00Z",
        "entities": [{"name": "e", "row_key": "{pk|lower}", "columns": [{"attribute": "v", "family": "f"}],
                      "lossy": ["pk"]}]})
    item = {"pk": {"S": "A"}, "v": {"S": "x"}}
    row = compile_spec(spec).map_item(item)
    lowered = Comparer(spec, now_us=NOW, key_names=("pk",), decode_every=0)
    assert not lowered.whole_row(row.row_key, [(row, item)])  # "A" and "a" both make row "a"


def test_a_row_key_another_template_cannot_hold_is_still_whole_and_one_it_can_is_not():
    """The literal test before reading a row key with another entity's template: a customer row lacks the order
    template's "#order#" (whole: no other partition can make it); an order row is one the customer template reads
    back as another partition key ("a#order#1"), so it is not."""
    spec = MappingSpec.model_validate({
        "source": {"table": "T", "partition_key": "pk", "sort_key": "sk"},
        "target": {"table": "t", "families": {"f": {}}}, "migration_time": "2024-01-01T00:00:00Z",
        "entities": [
            {"name": "customer", "match": {"sk": "profile"}, "row_key": "cust#{pk}", "drop": ["sk"],
             "columns": [{"attribute": "v", "family": "f"}]},
            {"name": "order", "match": {"sk": {"prefix": "order#"}}, "row_key": "cust#{pk}#order#{sk|part(1)}",
             "lossy": ["sk"], "columns": [{"attribute": "v", "family": "f"}]}]})
    compiled = compile_spec(spec)
    comparer = Comparer(spec, now_us=NOW, key_names=("pk", "sk"), decode_every=0)
    customer = {"pk": {"S": "a"}, "sk": {"S": "profile"}, "v": {"S": "x"}}
    order = {"pk": {"S": "a"}, "sk": {"S": "order#1"}, "v": {"S": "y"}}
    customer_row, order_row = compiled.map_item(customer), compiled.map_item(order)
    assert (customer_row.row_key, order_row.row_key) == (b"cust#a", b"cust#a#order#1")
    assert comparer.whole_row(customer_row.row_key, [(customer_row, customer)])
    assert not comparer.whole_row(order_row.row_key, [(order_row, order)])


def test_a_sample_leaves_other_items_cells_alone():
    result = comparer().compare(b"o1", members(LINE_A), written(ORDER, LINE_A, LINE_B), extras=False)
    assert result.differences == [] and result.candidate is None


def test_differences_round_trip_through_json_lines_with_binary_values():
    binary = Difference("different_value", b"\xff\x00key", {"pk": {"B": "AAE="}}, "f", b"\x80q", 1000, b"\x01", b"ok")
    assert binary.to_json()["row_key"] == {"base64": "/wBrZXk="} and binary.to_json()["found"] == "ok"
    assert Difference.from_json(binary.to_json()) == binary
    collision = Difference("collision", b"r", {"pk": {"S": "a"}}, "f", b"q", 1000, [b"1", b"2"], b"2",
                           items=({"pk": {"S": "a"}}, {"pk": {"S": "b"}}))
    assert Difference.from_json(collision.to_json()) == collision
    assert "from 2 items: pk=a, pk=b" in collision.describe()
    counts = count_kinds([binary, collision, binary._replace(kind="missing_row")])
    assert describe_counts(counts) == "1 collision, 1 different value, 1 missing row"
    stray = Difference("extra_row", b"~by_status#\x01", found=b"3 cells", index_name="by_status")
    assert stray.to_json()["index"] == "by_status" and "index" not in binary.to_json()
    assert Difference.from_json(stray.to_json()) == stray
    assert "(index by_status)" in stray.describe()


def test_group_rows_compare_whatever_the_member_order():
    row = MappedRow(b"r", (Cell("f", b"a", 1000, b"1"),), "e")
    spec = SPEC.model_copy(update={"target": SPEC.target.model_copy(update={"families": {"f": GcPolicy()}})})
    result = Comparer(spec, now_us=NOW, decode_every=0).compare(b"r", [(row, {})], [Cell("f", b"a", 1000, b"1")])
    assert result.differences == [] and result.cells_matched == 1


def test_cells_newer_than_the_snapshot_are_changes_after_it_not_differences():
    """An order whose cell time is after the snapshot (a change applied since) is reported apart and never repaired;
    the line, unchanged, keeps its difference; the row's older version of the order is no extra to delete."""
    after = TS  # the snapshot: every cell of this spec sits at TS, so a cell at TS + 1 was written after it
    order, line = members(ORDER, LINE_A)
    newer = MappedRow(order[0].row_key, tuple(c._replace(timestamp_micros=TS + 1) for c in order[0].cells),
                      order[0].entity)
    held = [*written(ORDER), Cell("line", b"hat", TS, b"7")]  # the order's old version; the line differs
    result = comparer(after_us=after).compare(b"o1", [(newer, ORDER), line], held)
    assert sorted((d.kind, d.after_snapshot) for d in result.differences) == [
        ("different_attribute", False), ("different_value", False), ("missing_cell", True)]  # the line's, the order's
    assert [c.qualifier for c in result.fixes] == [b"hat"]  # the change after the snapshot is not repaired
    differences, extra = resolve_row([result.candidate], after)
    assert [(d.kind, d.after_snapshot) for d in differences] == [("extra_version", True)] and extra == []
    assert resolve_row([result.candidate])[1] == written(ORDER)  # without a snapshot: an extra version to delete

    # the target ahead of the source: the row holds a newer version of the order than the item read (its cell at
    # an item's time before the snapshot)
    older = MappedRow(order[0].row_key, tuple(c._replace(timestamp_micros=TS - 1) for c in order[0].cells),
                      order[0].entity)
    ahead = [Cell("o", b"total", TS + 5, b"31"), *written(LINE_A)]
    result = comparer(after_us=after).compare(b"o1", [(older, ORDER), line], ahead)
    assert [(d.kind, d.after_snapshot) for d in result.differences] == [("missing_cell", True)]
    assert Difference.from_json(result.differences[0].to_json()).after_snapshot


def test_a_time_of_the_spec_never_marks_a_change_after_the_snapshot():
    """Cells at migration_time (or the run's "now", a fixed time) say nothing of when the item was written: a row
    deleted or a value changed stays a difference, even when that time is after the snapshot (QA: the validation's
    own "now" made every cell "newer" and the run said OK over a damaged table)."""
    before = TS - 1  # a snapshot before the spec's migration_time
    gone = comparer(after_us=before).compare(b"o1", members(ORDER, LINE_A), None)
    assert [(d.kind, d.after_snapshot) for d in gone.differences] == [("missing_row", False)] * 2
    tampered = [Cell("o", b"total", TS, b"99"), *written(LINE_A), Cell("line", b"hat", TS + 5, b"3")]
    result = comparer(after_us=before).compare(b"o1", members(ORDER, LINE_A), tampered)
    assert [(d.kind, d.after_snapshot) for d in result.differences if d.kind != "different_attribute"] == [
        ("different_value", False)]
    no_time = SPEC.model_copy(update={"migration_time": None})  # cells at the run's "now"
    row = compile_spec(no_time, now_ms=NOW // 1000).map_item(ORDER)
    assert {c.timestamp_micros for c in row.cells} == {NOW}
    unstamped = Comparer(no_time, now_us=NOW, key_names=("pk", "sk"), after_us=NOW - 1)  # a "now" after the snapshot
    assert [(d.kind, d.after_snapshot) for d in unstamped.compare(b"o1", [(row, ORDER)], None).differences] == [
        ("missing_row", False)]


def test_a_damaged_cell_is_a_difference_not_a_crash():
    """Bytes that are no number in a decimal column: the decoder reads back no valid DynamoDB value."""
    held = [*written(ORDER), Cell("line", b"hat", TS, b"\x00")]
    result = comparer().compare(b"o1", members(ORDER, LINE_A), held)
    assert sorted((d.kind, d.attribute) for d in result.differences) == [
        ("different_attribute", "qty"), ("different_value", None)]
    assert all(d.to_json() for d in result.differences)


def test_plain_match_counts_only_groups_compare_finds_nothing_in():
    one = comparer(decode_every=0)
    assert one.plain_match(members(ORDER), written(ORDER)) == 1
    assert one.plain_match(members(ORDER), list(reversed(written(LINE_A, ORDER)))) == -1  # an extra cell
    assert one.plain_match(members(ORDER), None) == -1  # no row
    assert one.plain_match(members(ORDER, LINE_A), written(ORDER, LINE_A)) == -1  # two items: compare decides
    changed = [cell._replace(value=b"x") for cell in written(ORDER)]
    assert one.plain_match(members(ORDER), changed) == -1
    older = [cell._replace(timestamp_micros=cell.timestamp_micros - 1000) for cell in written(ORDER)]
    assert one.plain_match(members(ORDER), older) == -1
    assert not one.compare(b"o1", members(ORDER), written(ORDER)).differences


def test_plain_match_leaves_the_decoders_turn_to_compare():
    """One in ``decode_every`` matching items is read back through the decoder: those go through `compare`, which
    reads them back, and the turn is counted once whichever way an item goes."""
    every_other = comparer(decode_every=2)
    turns = []
    for _ in range(4):
        cells = every_other.plain_match(members(ORDER), written(ORDER))
        turns.append(cells)
        if cells < 0:
            assert every_other.compare(b"o1", members(ORDER), written(ORDER)).decoded == 1
    assert turns == [1, -1, 1, -1]
    assert comparer(decode_every=1).plain_match(members(ORDER), written(ORDER)) == -1


def test_owner_line_is_left_out_only_where_nothing_else_writes_the_row():
    one = comparer()
    member = members(ORDER)[0]
    owner = one.owner_line(b"o1", member, 1, extras=True, scan_order=False)
    assert owner == Candidate(b"o1", owns_all=True, owner={"pk": {"S": "o1"}, "sk": {"S": "order"}}, cells=1)
    assert one.owner_line(b"o1", member, 1, extras=True, scan_order=True) is None  # a whole row of one partition
    assert one.owner_line(b"o1", member, 1, extras=False, scan_order=False) is None  # a sample


def test_the_decoder_shows_sets_in_order_on_both_sides():
    """A set has no order: its line shows the source's members sorted (numbers by value, exactly; binaries by bytes;
    at any depth), as the value read back comes out, not in the item's order beside a sorted one."""
    spec = MappingSpec.model_validate({
        "source": {"table": "T", "partition_key": "id"}, "target": {"table": "t", "families": {"f": {}}},
        "migration_time": "2024-01-01T00:00:00Z",
        "entities": [{"name": "e", "row_key": "{id}", "columns": [
            {"attribute": name, "family": "f", "encoding": "ddb_json"} for name in ("tags", "nums", "bins", "doc")]}]})
    item = {"id": {"S": "k"}, "tags": {"SS": ["pear", "apple", "Zed"]},
            "nums": {"NS": ["10", "9", "-1.5", "12345678901234567890123456789012345678"]},
            "bins": {"BS": ["/w==", "AA==", "fw=="]}, "doc": {"M": {"in": {"L": [{"SS": ["b", "a"]}]}}}}
    row = compile_spec(spec).map_item(item)
    damaged = {b"tags": b'{"SS":["pear"]}', b"nums": b'{"NS":["9"]}', b"bins": b'{"BS":["AA=="]}',
               b"doc": b'{"M":{"in":{"L":[]}}}'}
    cells = [c._replace(value=damaged[c.qualifier]) for c in row.cells]
    result = Comparer(spec, now_us=NOW, key_names=("id",)).compare(row.row_key, [(row, item)], cells)
    expected = {d.attribute: d.expected for d in result.differences if d.kind == "different_attribute"}
    assert expected == {"tags": {"SS": ["Zed", "apple", "pear"]},
                        "nums": {"NS": ["-1.5", "9", "10", "12345678901234567890123456789012345678"]},
                        "bins": {"BS": ["AA==", "fw==", "/w=="]}, "doc": {"M": {"in": {"L": [{"SS": ["a", "b"]}]}}}}
    (line,) = [d.describe() for d in result.differences if d.attribute == "tags"]
    assert "expected {'SS': ['Zed', 'apple', 'pear']} got {'SS': ['pear']}" in line
