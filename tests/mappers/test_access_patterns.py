"""Access patterns: the spec section, the translation into Bigtable reads, and the plan section.

The translation is checked against DynamoDB's key semantics written out here independently (sorted() on
Python values: Decimal for N, bytes for S's UTF-8 and B), on the rows the compiler really writes: the rows a
translated read touches must decode to exactly the items the condition selects, before any client-side step.
Against real DynamoDB servers and the emulator: tests/pipelines/test_parity.py.
"""

from decimal import Decimal
from importlib import resources

import pytest
import yaml

from ddb2bt.mappers.access import holds, key_order, translate
from ddb2bt.mappers.analysis.access_plan import decode_rows, run_read, sample_rows
from ddb2bt.mappers.compiler import compile_spec
from ddb2bt.mappers.decode import compile_decoder
from ddb2bt.mappers.loader import SpecError
from ddb2bt.mappers.loader import parse_document, validate_data
from ddb2bt.mappers.analysis.plan import build_plan
from ddb2bt.templates import catalog
from tests.access_cases import BINARIES, NUMBERS, STRINGS, operand_cases

OPERATORS = ["=", "<", "<=", ">", ">=", "between", "begins_with"]


def spec_with(patterns, row_key="{pk}#{sk}", **entity):
    data = {
        "source": {"table": "T", "partition_key": "pk", "sort_key": "sk"},
        "target": {"table": "t", "families": {"d": {"max_versions": 1}}},
        "migration_time": "2024-01-01T00:00:00Z",
        "entities": [{"name": "item", "row_key": row_key, "rest": {"family": "d", "encoding": "ddb_json"}, **entity}],
        "access_patterns": patterns,
    }
    return validate_data(data)


def seed(name):
    template = next(t for t in catalog.TEMPLATES.values() if t.seed == name)
    data, lines = parse_document(catalog.template_text(template.name), template.file)
    data.pop("$schema", None)
    return validate_data(data, template.file, lines), list(catalog.seed_items(template.seed))


# --------------------------------------------------------------------------- the spec section


@pytest.mark.parametrize("pattern, message", [
    ({"name": "p", "sort_key": {"operator": "begins-with"}}, "did you mean 'begins_with'"),
    ({"name": "p", "sort_key": {"operator": "between", "values": ["a"]}}, "between takes 2 values"),
    ({"name": "p", "sort_key": {"operator": "begins_with", "values": [5]}}, "S and B sort keys only"),
    ({"name": "p", "operation": "get_item", "limit": 3}, "get_item reads one item by its key: remove limit"),
    ({"name": "p", "sort_kee": {"operator": "="}}, "sort_kee"),
    ({"name": "p", "sort_key": {"operator": "=", "values": [{"B": "not base64!"}]}}, "is not base64"),
    ({"name": "p", "index": {"name": "ix", "type": "global", "partition_key": "g"}, "sort_key": {"operator": "="}},
     "has no sort key"),
])
def test_pattern_mistakes_are_one_line_naming_the_field(pattern, message):
    with pytest.raises(SpecError) as caught:
        spec_with([pattern])
    text = str(caught.value)
    assert message in text and "access_patterns" in text and "\n" not in text.strip()


def test_pattern_names_are_unique():
    with pytest.raises(SpecError, match="access pattern 'p' is declared twice"):
        spec_with([{"name": "p"}, {"name": "p"}])


def test_operands_are_typed_exactly():
    spec = spec_with([{"name": "p", "sort_key": {"operator": "between", "values": [{"N": "-1.50"}, 12345678901234567890123456789012345678]}},
                      {"name": "b", "sort_key": {"operator": "begins_with", "values": [{"B": "AAE="}]}}, {"name": "c", "sort_key": {"operator": "BETWEEN", "values": ["a", "b"]}}])
    low, high = spec.access_patterns[0].sort_key.values
    assert low == Decimal("-1.5") and high == Decimal("12345678901234567890123456789012345678")
    assert spec.access_patterns[1].sort_key.values[0].B == "AAE="
    assert spec.access_patterns[2].sort_key.operator == "between"


# --------------------------------------------------------------------------- DynamoDB's semantics, written out


def reference(items, operator, operands, forward=True, limit=None):
    """DynamoDB's Query on one partition, written independently of mappers.access."""
    def value(v):
        tag, payload = next(iter(v.items()))
        return Decimal(payload) if tag == "N" else payload.encode() if tag == "S" else bytes(payload)

    def meets(item):
        sk, ops = value(item["sk"]), [value(o) for o in operands]
        if operator is None:
            return True
        if operator == "begins_with":
            return sk.startswith(ops[0])
        if operator == "between":
            return ops[0] <= sk <= ops[1]
        return {"=": sk == ops[0], "<": sk < ops[0], "<=": sk <= ops[0], ">": sk > ops[0], ">=": sk >= ops[0]}[operator]

    kept = sorted((i for i in items if meets(i)), key=lambda i: value(i["sk"]), reverse=not forward)
    return kept[:limit] if limit else kept


def generated(kind):
    if kind == "N":
        return [{"pk": {"S": "p"}, "sk": {"N": n}, "v": {"S": n}} for n in NUMBERS], "{pk}#{sk|sortable_number}"
    if kind == "S":
        return [{"pk": {"S": "p"}, "sk": {"S": s}, "v": {"N": str(i)}} for i, s in enumerate(STRINGS) if s], "{pk}#{sk}"
    return [{"pk": {"S": "p"}, "sk": {"B": b}, "v": {"N": str(i)}} for i, b in enumerate(BINARIES)], "{pk}#{sk}"


def operand_sets(kind, items):
    for operator in OPERATORS:
        if kind == "N" and operator == "begins_with":
            continue
        for operands in operand_cases(kind, operator, [i["sk"] for i in items]):
            yield operator, operands


@pytest.mark.parametrize("kind", ["N", "S", "B"])
def test_every_operator_both_orders_and_limits_read_exactly_the_condition_rows(kind):
    items, row_key = generated(kind)
    spec = spec_with([{"name": "p", "sort_key": {"operator": "="}}], row_key=row_key)
    types = {"pk": "S", "sk": kind}
    compiled = compile_spec(spec)
    rows = sample_rows([compiled.map_item(item) for item in items])
    assert len(rows) == len(items)
    decoder = compile_decoder(spec, types)
    tried = 0
    for operator, operands in operand_sets(kind, items):
        for forward in (True, False):
            for limit in (None, 1, 3):
                pattern = spec.access_patterns[0].model_copy(update={
                    "sort_key": spec.access_patterns[0].sort_key.model_copy(update={"operator": operator}),
                    "scan_index_forward": forward, "limit": limit})
                translation = translate(spec, pattern, types)
                assert translation.served, translation.reason
                read = translation.read({"S": "p"}, operands)
                touched = run_read(read, rows)
                want = reference(items, operator, operands, forward, limit)
                raw = [item for _, item in decode_rows(decoder, touched)]
                if read.reverse_rows:
                    raw.reverse()
                if read.rows_limit is None and limit:  # descending with a limit: the range is read, then cut
                    raw = raw[:limit]
                # the rows read are exactly the condition's (no client-side filter needed)
                assert [key_order(i["sk"]) for i in raw] == [key_order(i["sk"]) for i in want], (operator, operands, forward, limit)
                got = translation.finish(decode_rows(decoder, touched), {"S": "p"}, operands)
                assert [(key_order(i["sk"]), i["v"]) for i in got] == [(key_order(i["sk"]), i["v"]) for i in want]
                tried += 1
    assert tried > 100


def test_holds_is_dynamodbs_comparison():
    assert holds("<", [{"N": "10"}], {"N": "9"}) and not holds("<", [{"S": "10"}], {"S": "9"})
    assert holds("begins_with", [{"B": b"\x80"}], {"B": b"\x80\x00"})
    assert holds("between", [{"N": "-1"}, {"N": "1"}], {"N": "1.0"})
    assert not holds("=", [{"S": "1"}], {"N": "1"})


def test_pad_and_reverse_timestamp_keys_serve_numeric_ranges():
    items = [{"pk": {"S": "p"}, "sk": {"N": str(n)}, "v": {"N": str(n)}} for n in (0, 3, 7, 42, 999)]
    for row_key in ("{pk}#{sk|pad(4)}", "{pk}#{sk|reverse_timestamp(9999)}"):
        spec = spec_with([{"name": "p", "sort_key": {"operator": "="}}], row_key=row_key)
        rows = sample_rows([compile_spec(spec).map_item(i) for i in items])
        decoder = compile_decoder(spec, {"sk": "N"})
        for operator, operands in [(">", [{"N": "2.5"}]), ("<=", [{"N": "7"}]), ("between", [{"N": "-5"}, {"N": "41.9"}]),
                                   (">=", [{"N": "100000"}]), ("<", [{"N": "-1"}]), ("=", [{"N": "42"}])]:
            for forward in (True, False):
                pattern = spec.access_patterns[0].model_copy(update={"sort_key": spec.access_patterns[0].sort_key.model_copy(
                    update={"operator": operator}), "scan_index_forward": forward, "limit": 2})
                translation = translate(spec, pattern, {"sk": "N"})
                read = translation.read({"S": "p"}, operands)
                got = translation.finish(decode_rows(decoder, run_read(read, rows)), {"S": "p"}, operands)
                assert got == reference(items, operator, operands, forward, 2), (row_key, operator, forward)
                want_all = reference(items, operator, operands)
                assert len(run_read(read, rows)) == (min(2, len(want_all)) if read.rows_limit else len(want_all))


# --------------------------------------------------------------------------- what cannot be served


@pytest.mark.parametrize("entity, reason, suggestion", [
    ({"row_key": {"template": "{pk}#{sk}", "salt_buckets": 4}}, "salted", "remove salt_buckets"),
    ({"row_key": "{pk}#{sk|reverse}"}, "order is lost", "order-preserving"),
    ({"row_key": "{sk}#{pk}"}, "does not end with the sort key", "'{pk}#{sk}'"),
    ({"row_key": "{pk}", "columns": [{"attribute": "sk", "family": "d", "encoding": "json"}], "rest": None},
     "cell value", "row key '{pk}#{sk}'"),
])
def test_unservable_specs_are_plan_errors_naming_the_pattern(entity, reason, suggestion):
    data = {
        "source": {"table": "T", "partition_key": "pk", "sort_key": "sk"},
        "target": {"table": "t", "families": {"d": {"max_versions": 1}}},
        "entities": [{"name": "item", "rest": {"family": "d"}, **entity}],
        "access_patterns": [{"name": "newest_first", "sort_key": {"operator": ">"}, "scan_index_forward": False}],
    }
    data["entities"][0] = {k: v for k, v in data["entities"][0].items() if v is not None}
    spec = validate_data(data)
    items = [{"pk": {"S": "p"}, "sk": {"S": f"s{i}"}} for i in range(5)]
    plan = build_plan(spec, items)
    errors = [lint for lint in plan.lints if lint.code == "access-pattern-unservable"]
    assert len(errors) == 1 and plan.has_errors
    assert "'newest_first'" in errors[0].message and reason in errors[0].message and suggestion in errors[0].message
    assert errors[0].where == "access_patterns[0]"
    assert plan.access_patterns[0].status == "unservable"


def test_a_global_index_pattern_is_a_warning_until_index_rows_exist():
    spec = spec_with([{"name": "by_status", "index": {"name": "ByStatus", "type": "global", "partition_key": "status"}}])
    plan = build_plan(spec, [{"pk": {"S": "p"}, "sk": {"S": "s"}, "status": {"S": "open"}}])
    assert [lint.code for lint in plan.lints if lint.code.startswith("access")] == ["access-pattern-needs-index"]
    assert not any(lint.severity == "error" for lint in plan.lints if lint.code.startswith("access"))


# --------------------------------------------------------------------------- the seed examples


@pytest.mark.parametrize("name", ["product_catalog", "videos", "invoices"])
def test_seed_patterns_are_served_and_planned(name):
    spec, items = seed(name)
    plan = build_plan(spec, items)
    assert spec.access_patterns
    for pattern in plan.access_patterns:
        assert pattern.status == "served", (pattern.name, pattern.reason)
        assert pattern.items_returned > 0 and pattern.rows_touched > 0
        assert "ReadRowsQuery(" in pattern.python and pattern.cbt
    assert not [lint for lint in plan.lints if lint.code.startswith("access")]


def test_newest_comments_read_one_column_of_one_row_with_a_cell_limit():
    spec, items = seed("videos")
    plan = {p.name: p for p in build_plan(spec, items).access_patterns}
    comments = plan["newest_comments"]
    assert "CellsColumnLimitFilter(10)" in comments.python and "row_keys=[b'0123']" in comments.python
    assert comments.rows_touched == 1 and comments.cells_touched == comments.items_returned == 2
    assert "cells-per-column=10" in comments.cbt[0] and comments.cbt[0].endswith("columns=video:UserComments cells-per-column=10")


def test_products_of_type_is_a_row_prefix_range():
    spec, items = seed("product_catalog")
    plan = {p.name: p for p in build_plan(spec, items).access_patterns}
    by_type = plan["products_of_type"]
    assert "RowRange(b'hats#fedoras#', b'hats#fedoras$'" in by_type.python
    assert by_type.items_returned == by_type.rows_touched == 2
    assert "start='hats#fedoras#' end='hats#fedoras$'" in by_type.cbt[0]


def test_infer_drafts_patterns_from_keys_indexes_and_prefixes():
    from ddb2bt.mappers.analysis.infer import infer_spec

    _, items = seed("invoices")
    describe = {"Table": {"TableName": "Invoices", "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"},
                                                                  {"AttributeName": "sk", "KeyType": "RANGE"}],
                          "LocalSecondaryIndexes": [{"IndexName": "ByDate", "KeySchema": [
                              {"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "DateCreated", "KeyType": "RANGE"}]}],
                          "GlobalSecondaryIndexes": [{"IndexName": "ByCustomer", "KeySchema": [
                              {"AttributeName": "customer", "KeyType": "HASH"}]}]}}
    drafted = infer_spec(describe, items)
    patterns = {p["name"]: p for p in drafted.spec["access_patterns"]}
    assert "item" not in patterns and "partition" in patterns  # one row per invoice: no GetItem drafted
    assert patterns["payment_items"]["sort_key"] == {"operator": "begins_with", "values": ["Payment-"]}
    assert patterns["by_date"]["index"] == {"name": "ByDate", "type": "local", "partition_key": "pk", "sort_key": "DateCreated"}
    assert patterns["by_customer"]["index"]["type"] == "global"
    spec = validate_data(drafted.spec)
    plan = {p.name: p for p in build_plan(spec, items).access_patterns}
    # the draft carries each index as index rows, so the index patterns are served too
    assert {index["name"] for index in drafted.spec["indexes"]} == {"ByDate", "ByCustomer"}
    assert {plan[name].status for name in ("partition", "by_customer", "by_date")} == {"served"}


def test_shipped_templates_parse_their_patterns():
    for name in ("product_catalog.yaml", "videos.yaml", "invoices.yaml"):
        data = yaml.safe_load((resources.files("ddb2bt.templates") / name).read_text(encoding="utf-8"))
        assert data["access_patterns"]


def test_migrate_plan_text_has_an_access_patterns_section():
    from ddb2bt.cli.plan_text import pattern_lines

    spec, items = seed("videos")
    lines = pattern_lines(build_plan(spec, items))
    assert lines[0].startswith("  video_with_newest_comments: Query pk = :pk AND sk < 'VideoStats', Limit=11")
    assert any(line.strip().startswith("cbt: cbt -project ddb2bt-local") for line in lines)
    salted = spec_with([{"name": "recent", "sort_key": {"operator": ">"}}], row_key={"template": "{pk}#{sk}", "salt_buckets": 3})
    lines = pattern_lines(build_plan(salted, [{"pk": {"S": "p"}, "sk": {"S": "a"}, "v": {"S": "x"}}]))
    assert lines[1].startswith("    NOT SERVED: entity 'item''s row key is salted")


def test_strip_prefix_keys_serve_ranges_with_bounds_outside_the_prefix():
    items = [{"pk": {"S": "p"}, "sk": {"S": f"s#{text}"}, "v": {"S": text}} for text in ("", "A", "a", "a#", "ab", "é", "😀")]
    spec = spec_with([{"name": "p", "sort_key": {"operator": "="}}], row_key="{pk}#{sk|strip_prefix('s#')}")
    rows = sample_rows([compile_spec(spec).map_item(i) for i in items])
    assert len(rows) == len(items)
    decoder = compile_decoder(spec)
    operands = [{"S": text} for text in ("", "a", "s", "s#", "s#a", "s#a#x", "s#b", "s$", "t", "\uffff")]
    tried = 0
    for operator in OPERATORS:
        cases = ([[low, high] for low in operands for high in operands if key_order(low) <= key_order(high)]
                 if operator == "between" else [[o] for o in operands])
        for case in cases:
            for forward in (True, False):
                pattern = spec.access_patterns[0].model_copy(update={"sort_key": spec.access_patterns[0].sort_key.model_copy(
                    update={"operator": operator}), "scan_index_forward": forward})
                translation = translate(spec, pattern, {"sk": "S"})
                read = translation.read({"S": "p"}, case)
                raw = [item for _, item in decode_rows(decoder, run_read(read, rows))]
                want = reference(items, operator, case, forward)
                assert sorted(i["v"]["S"] for i in raw) == sorted(i["v"]["S"] for i in want), (operator, case)
                tried += 1
    assert tried > 100


def test_a_pattern_over_items_no_entity_maps_is_a_warning():
    """With `unmatched: skip`, items no entity matches are not in Bigtable: a query on a partition that holds some
    returns them from DynamoDB only. The plan says so per pattern (parity then fails on such a partition)."""
    data = spec_with([{"name": "orders"}], match={"type": "order"}).model_dump(by_alias=True, exclude_none=True)
    items = [{"pk": {"S": "p"}, "sk": {"S": f"s{i}"}, "type": {"S": "order" if i else "note"}} for i in range(3)]
    quiet = build_plan(validate_data(data), items[1:])
    assert not [lint for lint in quiet.lints if lint.code.startswith("access")]
    plan = build_plan(validate_data({**data, "unmatched": "skip"}), items)
    (found,) = [lint for lint in plan.lints if lint.code == "access-pattern-unmatched"]
    assert found.severity == "warning" and found.where == "access_patterns[0]"
    assert "unmatched: skip" in found.message and "1 sampled item" in found.message


def test_a_pattern_is_tried_where_its_own_condition_returns_items():
    """The plan (and parity, through the same cases) tried `begins_with(sk, 'USER#')` on the partition with the most
    items, a game's scores: nothing against nothing, which proves nothing. It now tries a partition holding some."""
    spec = spec_with([{"name": "users", "sort_key": {"operator": "begins_with", "values": ["USER#"]}},
                      {"name": "everything"}], row_key={"template": "{pk}#{sk}", "on_delimiter": "escape"})
    items = [{"pk": {"S": "GAME#1"}, "sk": {"S": f"SCORE#{i:03d}"}, "score": {"N": str(i)}} for i in range(8)]
    items += [{"pk": {"S": "USER#7"}, "sk": {"S": "USER#7"}, "handle": {"S": "h"}}]
    plan = {p.name: p for p in build_plan(spec, items).access_patterns}
    assert plan["users"].example_key == "pk='USER#7'" and plan["users"].items_returned == 1
    assert plan["everything"].example_key == "pk='GAME#1'" and plan["everything"].items_returned == 8
