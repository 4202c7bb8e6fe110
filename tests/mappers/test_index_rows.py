"""Index rows, pure: their keys sort as DynamoDB sorts (index pk, index sk, table key) so that an index query is one
byte range; sparse indexes; the three projections; what the spec refuses; index rows read back (decode)."""

from __future__ import annotations

import base64
import random

import pytest
from pydantic import ValidationError

from ddb2bt.mappers.access import holds, key_order, translate
from ddb2bt.mappers.compiler import compile_spec
from ddb2bt.mappers.decode import compile_decoder
from ddb2bt.mappers.changes import Change, diff_many
from ddb2bt.mappers.index_rows import decode_index_row, index_targets, key_part
from ddb2bt.mappers.results import ItemError, MappedRow
from ddb2bt.mappers.spec import GcPolicy, MappingSpec
from tests.access_cases import BINARIES, NUMBERS, STRINGS


def spec_with(index: dict | None = None, **extra) -> MappingSpec:
    gsi = {"name": "g", "type": "global", "partition_key": "gpk", "sort_key": "gsk", "family": "i",
           "projection": {"type": "KEYS_ONLY"}, "target": {"prefix": "~g#"}}
    return MappingSpec.model_validate({
        "source": {"table": "T", "partition_key": "pk", "sort_key": "sk"},
        "target": {"table": "t", "families": {"d": {}, "i": {}}},
        "migration_time": "2024-01-01T00:00:00Z",
        "entities": [{"name": "item", "row_key": {"template": "{pk}#{sk}", "on_delimiter": "escape"},
                      "rest": {"family": "d"}}],
        "indexes": [{**gsi, **(index or {})}], **extra})


def typed(kind: str, value) -> dict:
    return {kind: base64.b64encode(value).decode() if kind == "B" else value}


@pytest.mark.parametrize("kind, values", [("S", STRINGS), ("N", NUMBERS), ("B", BINARIES)])
def test_index_row_keys_sort_as_dynamodb_sorts_the_key_tuples(kind, values):
    rng = random.Random(7)
    typed_values = [typed(kind, v) for v in values]
    tuples = [(rng.choice(typed_values[:3]), rng.choice(typed_values), {"S": rng.choice(["a", "a\x00", "ab", ""])[:2] or "z"},
               {"S": str(i)}) for i in range(300)]  # fmt: skip
    by_key = sorted(tuples, key=lambda t: b"".join(key_part(v) for v in t))  # type: ignore[misc]
    by_dynamodb = sorted(tuples, key=lambda t: tuple(key_order(v) for v in t))
    assert [tuple(key_order(v) for v in t) for t in by_key] == [tuple(key_order(v) for v in t) for t in by_dynamodb]


@pytest.mark.parametrize("operator", ["=", "<", "<=", ">", ">=", "between", "begins_with"])
def test_an_index_condition_is_exactly_the_rows_of_its_byte_range(operator):
    spec = spec_with(access_patterns=[{"name": "q", "index": {"name": "g", "type": "global", "partition_key": "gpk",
                                                              "sort_key": "gsk"}, "sort_key": {"operator": operator}}])
    compiled = compile_spec(spec)
    items = [{"pk": {"S": f"p{i}"}, "sk": {"S": "x"}, "gpk": {"S": ["a", "a\x00", "ab"][i % 3]},
              "gsk": {"S": STRINGS[i % len(STRINGS)]}} for i in range(120)]
    rows = [row for item in items for row in compiled.map_item(item).index_rows]
    translation = translate(spec, spec.access_patterns[0], {"gsk": "S", "pk": "S", "sk": "S"})
    for operands in ([{"S": "b"}], [{"S": "é"}], [{"S": ""}], [{"S": "a"}, {"S": "中"}], [{"S": "z"}, {"S": "a"}]):
        operands = operands[:2] if operator == "between" else operands[:1]
        if operator == "between" and len(operands) < 2:
            continue
        read = translation.read({"S": "a"}, operands)
        touched = {row.row_key for row in rows if read.touches(row.row_key)}
        meets = {row.row_key for row, item in zip(rows, [i for i in items if "gpk" in i])
                 if item["gpk"] == {"S": "a"} and holds(operator, operands, item["gsk"])}
        assert touched == meets, (operator, operands)


def test_sparse_items_have_no_index_row_and_projections_carry_what_the_index_declares():
    item = {"pk": {"S": "p"}, "sk": {"S": "s"}, "gpk": {"S": "g"}, "gsk": {"N": "-1.5"}, "a": {"N": "1"},
            "b": {"SS": ["x"]}}
    for projection, expected in [({"type": "KEYS_ONLY"}, {"pk", "sk", "gpk", "gsk"}),
                                 ({"type": "INCLUDE", "non_key_attributes": ["b", "absent"]}, {"pk", "sk", "gpk", "gsk", "b"}),
                                 ({"type": "ALL"}, set(item))]:  # fmt: skip
        compiled = compile_spec(spec_with({"projection": projection}))
        (index_row,) = compiled.map_item(item).index_rows
        back = decode_index_row("i", list(index_row.cells))
        assert set(back) == expected and all(back[name] == item[name] for name in expected)
        sparse = compiled.map_item({name: value for name, value in item.items() if name != "gsk"})
        assert isinstance(sparse, MappedRow) and sparse.index_rows == ()
        wrong_type = compiled.map_item({**item, "gpk": {"BOOL": True}})  # not a key value: not in the index
        assert isinstance(wrong_type, MappedRow) and wrong_type.index_rows == ()


def test_an_items_row_key_under_an_index_prefix_is_a_dead_letter_and_decoders_skip_index_rows():
    compiled = compile_spec(spec_with())
    result = compiled.map_item({"pk": {"S": "~g"}, "sk": {"S": "s"}, "v": {"S": "x"}})
    assert isinstance(result, ItemError) and "index's prefix" in result.reason
    row = compiled.map_item({"pk": {"S": "p"}, "sk": {"S": "s"}, "gpk": {"S": "g"}, "gsk": {"S": "x"}})
    index_row = row.index_rows[0]
    assert compile_decoder(spec_with()).decode_entities(index_row.row_key, list(index_row.cells)) == []


@pytest.mark.parametrize("change, message", [
    ({"projection": {"type": "INCLUDE"}}, "names its non_key_attributes"),
    ({"projection": {"type": "ALL", "non_key_attributes": ["a"]}}, "apply to projection INCLUDE only"),
    ({"target": {}}, "say where the index rows go"),
    ({"target": {"prefix": "~g#", "table": "other"}}, "say where the index rows go, one of"),
    ({"target": {"table": "t"}}, "is the main table"),
    ({"target": {"table": "bad name"}}, "not a Bigtable table id"),
    ({"family": "nope"}, "not declared in target.families"),
    ({"type": "local", "partition_key": "other"}, "shares the table's partition key"),
    ({"type": "local", "partition_key": "pk", "sort_key": None}, "needs its sort_key"),
])  # fmt: skip
def test_the_spec_refuses_an_index_it_cannot_write(change, message):
    with pytest.raises(ValidationError, match=message):
        spec_with(change)


def test_the_spec_refuses_nested_prefixes_twins_and_a_pattern_that_disagrees():
    twice = {"name": "g", "type": "global", "partition_key": "x", "family": "i", "projection": {"type": "ALL"},
             "target": {"prefix": "~g#x"}}
    base = spec_with().model_dump(by_alias=True)
    with pytest.raises(ValidationError, match="declared twice"):
        MappingSpec.model_validate({**base, "indexes": [base["indexes"][0], twice]})
    with pytest.raises(ValidationError, match="starts with index 'g'"):
        MappingSpec.model_validate({**base, "indexes": [base["indexes"][0], {**twice, "name": "h"}]})
    with pytest.raises(ValidationError, match="make them agree"):
        spec_with(access_patterns=[{"name": "q", "index": {"name": "g", "type": "global", "partition_key": "gpk"}}])


def test_an_index_in_a_table_of_its_own():
    """Its rows carry the table's name and no prefix (an item's own key may then be anything); the table is a target
    of its own with the index's family alone; two indexes may not share one."""
    spec = spec_with({"target": {"table": "t-by-g"}, "family": "g"})
    compiled = compile_spec(spec)
    row = compiled.map_item({"pk": {"S": "~g"}, "sk": {"S": "s"}, "gpk": {"S": "a"}, "gsk": {"S": "b"}})
    assert isinstance(row, MappedRow) and row.row_key == b"~g#s"  # no prefix to collide with
    (index_row,) = row.index_rows
    assert (index_row.table, index_row.index_name) == ("t-by-g", "g")
    assert index_row.row_key == key_part({"S": "a"}) + key_part({"S": "b"}) + key_part({"S": "~g"}) + key_part({"S": "s"})
    assert {cell.family for cell in index_row.cells} == {"g"}
    ((name, target),) = index_targets(spec)
    assert (name, target.table, target.instance, target.families) == ("g", "t-by-g", spec.target.instance,
                                                                       {"g": GcPolicy(max_versions=1)})
    declared = spec_with({"target": {"table": "t-by-g"}})  # family i, declared in target.families: its policy
    assert index_targets(declared)[0][1].families == {"i": GcPolicy()}
    base = spec.model_dump(by_alias=True)
    with pytest.raises(ValidationError, match="another index's too"):
        MappingSpec.model_validate({**base, "indexes": [base["indexes"][0], {**base["indexes"][0], "name": "h"}]})


def test_a_change_moves_an_index_row_within_its_own_table():
    """diff_many names the index table on each row change, and keeps a main row and an index row apart even where
    their keys are equal."""
    compiled = compile_spec(spec_with({"target": {"table": "t-by-g"}, "family": "g"}))
    keys = {"pk": {"S": "p"}, "sk": {"S": "s"}}
    old = {**keys, "gpk": {"S": "a"}, "gsk": {"S": "b"}}
    new = {**keys, "gpk": {"S": "c"}, "gsk": {"S": "b"}}
    old_key, new_key = compiled.map_item(old).index_rows[0].row_key, compiled.map_item(new).index_rows[0].row_key
    changes = diff_many(compiled, [Change(keys, old, new, "MODIFY", 1)])
    by_where = {(row.table, row.row_key): row for row in changes.rows}
    assert set(by_where) == {(None, b"p#s"), ("t-by-g", old_key), ("t-by-g", new_key)}
    assert by_where["t-by-g", old_key].sets == () and len(by_where["t-by-g", old_key].deletes) == 4
    assert by_where["t-by-g", new_key].deletes == () and len(by_where["t-by-g", new_key].sets) == 4
    removed = diff_many(compiled, [Change(keys, new, None, "REMOVE", 2)])
    assert {(row.table, row.row_key) for row in removed.rows} == {(None, b"p#s"), ("t-by-g", new_key)}
    assert all(row.sets == () for row in removed.rows)
    gone = diff_many(compiled, [Change(keys, new, {**keys, "gsk": {"S": "b"}}, "MODIFY", 3)])  # sparse: no gpk
    assert [(row.table, len(row.deletes), row.sets) for row in gone.rows if row.table] == [("t-by-g", 4, ())]


def test_index_cells_and_key_parts_are_the_encodings_byte_for_byte():
    """ddb_json's shortcuts (S, canonical N) give exactly the ddb_json encoding; everything else goes through it; a
    value it cannot encode fails as the encoding does. key_part's shortcut for strings is value_bytes' escaped."""
    from benchmarks import dataset
    from ddb2bt.mappers.encodings import EncodingError, encoder_for
    from ddb2bt.mappers.index_rows import END, ddb_json, escaped, value_bytes
    from ddb2bt.mappers.spec import Encoding

    encode = encoder_for(Encoding.ddb_json)
    strings = [*STRINGS, "", 'q"uote\\', "tab\there\nline", "\x00nul\x1f", "\u2028\u2029", "é中😀", "\ud7ff"]
    values = [{"S": text} for text in strings] + [{"N": number} for number in (*NUMBERS, "01", "1.50", "1e3", "-0")]
    values += [{"B": "AAH/"}, {"B": b"\x00\xff"}, {"SS": ["b", "a"]}, {"NS": ["10", "9"]}, {"BOOL": True},
               {"NULL": True}, {"L": [{"S": "x"}, {"N": "1.0"}]}, {"M": {"b": {"S": "é"}, "a": {"N": "2"}}},
               {"BOOL": False}, {"BOOL": 1}, {"BS": [b"\x01", "AA=="]}, {"M": {}}, {"L": []},
               {"M": {"z": {"L": [{"M": {"é": {"BOOL": False}, "a\"b": {"NULL": True}}}, {"SS": ["é", "a", "Z"]}]},
                      "": {"NS": ["1e2", "-0.5"]}, "\u2028": {"N": "007"}}}]
    values += [value for item in dataset.generate(300) for value in item.values()]  # every type, nested
    for value in values:
        assert ddb_json(value) == encode(value), value
    refused = []
    for value in ({"S": "a", "N": "1"}, {"N": "1x"}, {"X": "y"}, {"S": "\ud800"}, {"M": {"a": {"N": "x"}}},
                  {"L": [{"S": "a"}, "not a value"]}, {"SS": ["a", 1]}):
        with pytest.raises(Exception) as by_encoding:  # noqa: PT011 - whatever it is, ddb_json raises the same
            encode(value)
        with pytest.raises(type(by_encoding.value)) as by_index:
            ddb_json(value)
        assert str(by_index.value) == str(by_encoding.value)
        refused.append(isinstance(by_index.value, EncodingError))
    assert refused[:5] == [True] * 5  # a malformed value is refused as the encoding refuses it
    for text in strings:
        assert key_part({"S": text}) == escaped(value_bytes({"S": text})) + END


@pytest.mark.parametrize("index, item, why", [
    ({}, {"gpk": {"S": ""}}, "an empty S index partition key"),
    ({}, {"gsk": {"S": ""}}, "an empty S index sort key"),
    ({}, {"gsk": {"B": ""}}, "an empty B index sort key"),
    ({}, {"gpk": {"S": "é" * 1025}}, "an index partition key over 2048 bytes (2050 in UTF-8)"),
    ({}, {"gsk": {"B": base64.b64encode(b"\x00" * 1025).decode()}}, "an index sort key over 1024 bytes"),
    ({"sort_key": None}, {"gpk": {"B": ""}}, "an empty B partition key of an index without a sort key"),
])
def test_an_item_whose_index_key_dynamodb_cannot_index_has_no_index_row(index, item, why):
    """DynamoDB's index key violations (developer guide, "Detecting and correcting index key violations"): an item whose
    index key value is an empty string or binary, or longer than a key may be (partition 2048 bytes, sort 1024), is
    left out of the index (a GSI added to a table that already holds such items: the backfill skips them, and DynamoDB
    refuses such writes afterwards). An index row for it would answer an index query with an item DynamoDB does not."""
    compiled = compile_spec(spec_with(index))
    base = {"pk": {"S": "p"}, "sk": {"S": "s"}, "gpk": {"S": "g"}, "gsk": {"S": "x"}}
    (edge,) = compiled.map_item({**base, "gpk": {"S": "é" * 1024}, "gsk": {"B": base64.b64encode(b"\x01" * 1024).decode()}}).index_rows
    assert edge.row_key  # at the limits exactly: in the index
    result = compiled.map_item({**base, **item})
    assert isinstance(result, MappedRow) and result.index_rows == (), why


def test_parity_picks_index_partitions_among_items_the_index_holds():
    """An item with an empty index key is in no index (above): its value is no partition to query (DynamoDB refuses
    an empty key value in a query), even where most sampled items have it."""
    from ddb2bt.mappers.analysis.access_plan import example_cases

    spec = spec_with(access_patterns=[{"name": "g", "index": {"name": "g", "type": "global", "partition_key": "gpk",
                                                               "sort_key": "gsk"}}])  # fmt: skip
    items = [{"pk": {"S": "p"}, "sk": {"S": f"s{i}"}, "gpk": {"S": ""}, "gsk": {"S": "x"}} for i in range(3)]
    items += [{"pk": {"S": "p"}, "sk": {"S": "t"}, "gpk": {"S": "g"}, "gsk": {"S": "x"}},
              {"pk": {"S": "p"}, "sk": {"S": "u"}, "gpk": {"S": "h"}, "gsk": {"B": b""}}]
    translation = translate(spec, spec.access_patterns[0], {"gsk": "S"})
    assert [partition for partition, _ in example_cases(translation, items, most=3)] == [{"S": "g"}]


@pytest.mark.parametrize("item, indexed", [
    ({"gpk": {"S": "g"}, "gsk": {"N": "1"}}, True),
    ({"gpk": {"N": "5"}, "gsk": {"N": "1"}}, False),  # the partition key of another type than the index declares
    ({"gpk": {"S": "g"}, "gsk": {"S": "1"}}, False),  # the sort key likewise
    ({"gpk": {"B": b"g"}, "gsk": {"B": b"1"}}, False),
])
def test_an_index_key_of_another_type_than_the_index_declares_is_in_no_index(item, indexed):
    """An overloaded attribute (GSI1SK a number on some items, a string on others) under a GSI declared N: DynamoDB
    leaves the items of the other type out of the index (an index key violation, like an empty value). The declared
    types (`partition_key_type`, `sort_key_type`, from DescribeTable's AttributeDefinitions; `infer` drafts them)
    say which; without them any S, N or B value is taken, as before."""
    base = {"pk": {"S": "p"}, "sk": {"S": "s"}}
    typed_spec = spec_with({"partition_key_type": "S", "sort_key_type": "N"})
    rows = compile_spec(typed_spec).map_item({**base, **item}).index_rows
    assert len(rows) == (1 if indexed else 0)
    assert len(compile_spec(spec_with()).map_item({**base, **item}).index_rows) == 1  # types not declared
    with pytest.raises(ValidationError, match="sort_key_type"):
        spec_with({"sort_key": None, "sort_key_type": "N"})
    from ddb2bt.mappers.analysis.access_plan import example_cases

    pattern = {"name": "g", "index": {"name": "g", "type": "global", "partition_key": "gpk", "sort_key": "gsk"}}
    typed_spec = spec_with({"partition_key_type": "S", "sort_key_type": "N"}, access_patterns=[pattern])
    translation = translate(typed_spec, typed_spec.access_patterns[0], {"gsk": "N"})
    sample = [{**base, "sk": {"S": f"s{i}"}, "gpk": {"N": "5"}, "gsk": {"N": "1"}} for i in range(3)]
    sample.append({**base, "gpk": {"S": "g"}, "gsk": {"N": "1"}})
    assert [partition for partition, _ in example_cases(translation, sample, most=3)] == [{"S": "g"}]
