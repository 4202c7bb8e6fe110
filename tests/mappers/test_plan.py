"""The plan over the seed specs, SourceDescription from DescribeTable, hotspot math and estimates."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from ddb2bt.mappers.analysis.estimates import estimate, gini, prefix_skew
from ddb2bt.mappers.loader import load_spec
from ddb2bt.mappers.gc import gc_text
from ddb2bt.mappers.analysis.plan import MigrationPlan, SourceDescription, build_plan
from ddb2bt.mappers.analysis.sample import analyse_sample, item_size, size_stats
from ddb2bt.mappers.spec import GcPolicy, MappingSpec
from tests.golden import seed_items, template_path

NOW_MS = 1_700_000_000_000

# entity -> (matched, mapped, skipped, errors, distinct row keys)
EXPECTED = {
    "product_catalog": {"product": (5, 5, 0, 0, 5)},
    "videos": {"video": (2, 2, 0, 0, 2), "comment": (4, 4, 0, 0, 2), "likes": (1, 1, 0, 0, 1),
               "views": (1, 1, 0, 0, 1), "stats": (1, 1, 0, 0, 1)},
    "invoices": {"invoice": (2, 2, 0, 0, 2), "payment": (4, 4, 0, 0, 2)},
}  # fmt: skip


def seed_plan(name, **kwargs):
    return build_plan(load_spec(template_path(name)), seed_items(name), now_ms=NOW_MS, **kwargs)


@pytest.mark.parametrize("name", EXPECTED)
def test_seed_plans_have_expected_counts_and_no_findings(name):
    plan = seed_plan(name)
    counts = {e.name: (e.matched, e.mapped, e.skipped, e.errors, e.distinct_row_keys) for e in plan.entities}
    assert counts == EXPECTED[name]
    assert not plan.has_errors and not plan.has_warnings and plan.lints == ()
    assert plan.dead_letters.total == 0 and plan.unmatched_examples == ()
    assert plan.sample.items == len(seed_items(name)) == plan.sample.mapped


@pytest.mark.parametrize("name", EXPECTED)
def test_plan_is_json_and_round_trips(name):
    plan = seed_plan(name)
    document = json.loads(json.dumps(plan.model_dump(mode="json")))
    assert document["has_errors"] is False and "has_warnings" in document
    assert MigrationPlan.model_validate(document) == plan
    with pytest.raises(Exception):
        plan.target_table = "other"  # frozen


def test_product_example_row_reads_like_the_brief():
    plan = seed_plan("product_catalog")
    example = plan.entities[0].examples[0]
    assert example.row_key == "hats#fedoras#brandA"
    cells = {cell.column: (cell.value, cell.encoding, cell.timestamp) for cell in example.cells}
    assert cells["SKU:Price"] == ("30", "decimal", "2024-01-01T00:00:00.000Z")
    assert cells["SKU:Description"][0].startswith("Crafted from premium wool")
    assert {a.name: a.type for a in example.item} == {"pk": "S", "sk": "S", "Description": "S", "Price": "N", "Thumbnail": "S"}
    assert [(f.name, f.gc) for f in plan.families] == [("SKU", "keep at most 1 version")]


def test_video_comments_and_counters_decode_per_encoding():
    plan = seed_plan("videos")
    by_name = {entity.name: entity for entity in plan.entities}
    comment = by_name["comment"].examples[0].cells[0]
    assert comment.column == "video:UserComments" and comment.encoding == "utf8"
    assert comment.timestamp == "2023-09-10T19:01:15.000Z"  # 9999999999 - 8305627524 seconds
    likes = by_name["likes"].examples[0].cells[0]
    assert (likes.column, likes.value, likes.encoding) == ("video:Likes", "3", "int64")
    assert by_name["video"].examples[0].cells[0].timestamp == "2023-09-10T15:21:48.000Z"
    assert plan.sample.distinct_row_keys == 2 and plan.estimates.target_rows == 2


def test_invoice_payments_become_columns_named_by_payment_id():
    plan = seed_plan("invoices")
    payment = next(e for e in plan.entities if e.name == "payment")
    assert [cell.column for ex in payment.examples for cell in ex.cells][:2] == ["Payment:0680", "Payment:0789"]
    assert plan.migration_time is None  # every cell takes its item's DateCreated, so no lint either


def test_dead_letters_and_unmatched_are_counted_with_reasons():
    spec = MappingSpec.model_validate({
        "source": {"table": "T", "partition_key": "pk"},
        "target": {"table": "t", "families": {"f": {"max_versions": 1}}},
        "migration_time": "2024-01-01T00:00:00Z",
        "entities": [{"name": "e", "match": {"kind": "x"}, "row_key": "{pk}", "columns": [{"attribute": "v", "family": "f"}], "drop": ["kind"]}],
    })  # fmt: skip
    items = [
        {"pk": {"S": "a"}, "kind": {"S": "x"}, "v": {"S": "1"}},
        {"pk": {"S": "b"}, "kind": {"S": "x"}, "v": {"S": "1"}, "extra": {"N": "2"}},
        {"pk": {"S": "c"}, "kind": {"S": "y"}},
    ]
    plan = build_plan(spec, items, now_ms=NOW_MS)
    entity = plan.entities[0]
    assert (entity.matched, entity.mapped, entity.errors) == (2, 1, 1)
    assert plan.dead_letters.total == 2 and len(plan.unmatched_examples) == 1
    assert any("not mapped" in reason for reason in plan.dead_letters.by_reason)
    assert plan.sample.entity_mix == {"e": 2, "(unmatched)": 1}
    assert plan.has_warnings and not plan.has_errors


DESCRIBE = {
    "Table": {
        "TableName": "Videos",
        "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "sk", "AttributeType": "S"}],
        "ItemCount": 9_000_000,
        "TableSizeBytes": 900 * 1024**3,
        "ProvisionedThroughput": {"ReadCapacityUnits": 10_000, "WriteCapacityUnits": 5},
        "BillingModeSummary": {"BillingMode": "PROVISIONED"},
        "GlobalSecondaryIndexes": [{"IndexName": "byUser", "KeySchema": [{"AttributeName": "user", "KeyType": "HASH"}],
                                    "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["Content"]}}],
        "LocalSecondaryIndexes": [{"IndexName": "byDate", "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"},
                                   {"AttributeName": "UploadDate", "KeyType": "RANGE"}], "Projection": {"ProjectionType": "KEYS_ONLY"}}],
        "StreamSpecification": {"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"},
    }
}  # fmt: skip


def test_source_description_from_raw_describe_responses():
    ttl = {"TimeToLiveDescription": {"TimeToLiveStatus": "ENABLED", "AttributeName": "expires"}}
    source = SourceDescription.from_describe_table(DESCRIBE, ttl)
    assert (source.table, source.partition_key, source.sort_key) == ("Videos", "pk", "sk")
    assert source.read_capacity == 10_000 and source.billing_mode == "PROVISIONED"
    assert source.global_indexes[0].projected_attributes == ("Content",) and source.global_indexes[0].sort_key is None
    assert (source.local_indexes[0].kind, source.local_indexes[0].sort_key) == ("LSI", "UploadDate")
    assert source.stream_view_type == "NEW_IMAGE" and source.ttl_active == "expires"
    on_demand = dict(DESCRIBE["Table"], BillingModeSummary={"BillingMode": "PAY_PER_REQUEST"})
    assert SourceDescription.from_describe_table(on_demand).read_capacity is None


def test_plan_with_source_estimates_scan_and_flags_uncarried_ttl():
    ttl = {"TimeToLiveDescription": {"TimeToLiveStatus": "ENABLED", "AttributeName": "expires"}}
    plan = seed_plan("videos", source=SourceDescription.from_describe_table(DESCRIBE, ttl), target_write_hours=2)
    estimates = plan.estimates
    assert estimates.items == 9_000_000 and estimates.items_from == "DescribeTable"
    assert estimates.scan_read_units == 900 * 1024**3 / 4096 / 2
    assert estimates.scan_seconds == pytest.approx(estimates.scan_read_units / 5_000)
    assert estimates.target_rows == 2_000_000  # 2 rows per 9 sampled items
    assert [lint.code for lint in plan.lints] == ["ttl-not-carried"]


# --------------------------------------------------------------------------- hotspot and estimate math


def test_gini():
    assert gini([5, 5, 5, 5]) == 0
    assert gini([0, 0, 0, 8]) == pytest.approx(0.75)
    assert gini([]) == 0


def test_prefix_skew_uses_first_varying_segment_and_flags_a_dominant_prefix():
    keys = [f"user#{'hot' if i < 30 else f'u{i}'}#{i}".encode() for i in range(40)]
    report = prefix_skew(keys, delimiter="#")
    assert report.common_prefix == "user#"
    assert report.shares[0].prefix == "user#hot" and report.shares[0].rows == 30
    assert report.max_share == 0.75 and report.distinct_prefixes == 11 and report.flagged
    assert "salt" in report.finding


def test_prefix_skew_is_quiet_for_even_or_tiny_samples():
    even = [f"{i % 10}#{i}".encode() for i in range(100)]
    assert not prefix_skew(even).flagged and prefix_skew(even).gini == pytest.approx(0)
    assert not prefix_skew([b"a#1", b"a#2", b"b#3"]).flagged


def test_byte_prefix_counts_the_byte_after_the_common_prefix():
    keys = [f"{i:06d}".encode() for i in range(1, 41)]
    report = prefix_skew(keys, delimiter=None)
    assert report.common_prefix == "0000" and report.distinct_prefixes == 5
    assert [(s.prefix, s.rows) for s in report.shares][-1] == ("00004", 1)
    assert report.max_share == 0.25 and not report.flagged  # uneven, but no single dominant prefix


def test_node_estimate_follows_the_binding_constraint():
    spec = load_spec(template_path("product_catalog"))
    items = seed_items("product_catalog")
    from ddb2bt.mappers.compiler import compile_spec

    sample = analyse_sample(items, [compile_spec(spec, NOW_MS).map_item(i) for i in items])
    common = dict(size_bytes=None, provisioned_rcu=None, on_demand_rcu=4000, read_budget=0.5)
    small = estimate(sample, item_count=1_000_000, target_write_hours=1, **common)
    assert small.suggested_nodes == 1
    large = estimate(sample, item_count=1_000_000_000, target_write_hours=1, **common)
    assert large.suggested_nodes == 28 and "rows/s" in large.node_basis  # 1e9 / (3600 s * 10,000 rows/s)
    assert any("estimate" in text for text in large.assumptions)
    export = estimate(sample, item_count=10, from_export=True, **common)
    assert export.scan_read_units == 0 and export.scan_seconds is None


def test_sizes_and_gc_text():
    assert item_size({"pk": {"S": "abc"}, "n": {"N": "12345"}}) == 2 + 3 + 1 + 4
    stats = size_stats([1, 100, 1000, 5000])
    assert (stats.minimum, stats.maximum, stats.count) == (1, 5000, 4)
    assert sum(b.count for b in stats.histogram) == 4
    assert gc_text(GcPolicy()) == "keep every version (no GC rule)"
    assert gc_text(GcPolicy(max_versions=1000, max_age=timedelta(days=30))) == (
        "drop a cell when it is past either rule: drop cells older than 30d or keep at most 1000 versions")
    assert gc_text(GcPolicy(max_age=timedelta(hours=36), combine="intersection")) == "drop cells older than 36h"


# --------------------------------------------------------------------------- issue 10: provenance, crashes

PROVENANCE = {
    "source": {"table": "T", "partition_key": "pk", "sort_key": "sk"},
    "target": {"table": "t", "families": {"o": {}, "tags": {}, "m": {}, "ttl": {"max_age": "7d"}}},
    "migration_time": "2024-01-01T00:00:00Z",
    "entities": [
        {"name": "line", "match": {"kind": "line"}, "row_key": "{pk}", "drop": ["kind"], "columns": [
            {"attribute": "qty", "family": "o", "qualifier": "{sk}", "encoding": "int64"},
            {"attribute": "tags", "family": "tags", "layout": "set", "encoding": "utf8"},
            {"attribute": "attrs", "family": "m", "layout": "map"},
            {"attribute": "flag", "family": "o", "encoding": "bool"},
        ]},
        {"name": "session", "match": {"kind": "session"}, "row_key": "{pk}#{sk}", "ttl": {"attribute": "expires"},
         "drop": ["kind"], "rest": {"family": "ttl"}},
    ],
}  # fmt: skip


def test_plan_shows_each_cell_as_the_column_that_wrote_it():
    spec = MappingSpec.model_validate(PROVENANCE)
    item = {"pk": {"S": "o1"}, "sk": {"S": "sku-9"}, "kind": {"S": "line"}, "qty": {"N": "3"}, "flag": {"BOOL": False},
            "tags": {"SS": ["a"]}, "attrs": {"M": {"colour": {"S": "red\x00"}, "n": {"N": "2"}}}}  # fmt: skip
    plan = build_plan(spec, [item], now_ms=NOW_MS)  # set/map without a prefix: was "unexpected TemplateError"
    cells = {cell.column: (cell.value, cell.encoding) for cell in plan.entities[0].examples[0].cells}
    assert cells["o:sku-9"] == ("3", "int64")  # template qualifier: was shown blank as utf8
    assert cells["o:flag"] == ("false", "bool")
    assert cells["tags:a"] == ("(set member)", "marker 0x00")
    assert cells["m:colour"] == ("red\\x00", "auto")
    assert cells["m:n"] == ('{"N":"2"}', "auto")  # as stored: typed DynamoDB JSON, not the plain value
    assert "\x00" not in json.dumps(plan.model_dump(mode="json"), ensure_ascii=False)


def test_ttl_in_milliseconds_is_a_dead_letter_not_a_crash():
    spec = MappingSpec.model_validate(PROVENANCE)
    item = {"pk": {"S": "s"}, "sk": {"S": "1"}, "kind": {"S": "session"}, "expires": {"N": str(NOW_MS + 3_600_000)}, "u": {"S": "x"}}
    plan = build_plan(spec, [item], now_ms=NOW_MS)  # was OverflowError
    assert plan.entities[1].errors == 1 and "9999" in next(iter(plan.dead_letters.by_reason))


def test_plan_finds_gc_risks_collisions_and_losses():
    spec = MappingSpec.model_validate({
        "source": {"table": "T", "partition_key": "pk", "sort_key": "sk"},
        "target": {"table": "t", "families": {"l": {"max_versions": 2}, "a": {"max_age": "30d"}, "o": {}}},
        "migration_time": "2020-01-01T00:00:00Z",
        "entities": [{"name": "order", "row_key": "{pk|lower}", "drop": ["note", "sk"], "columns": [
            {"attribute": "lines", "family": "l", "layout": "list"},
            {"attribute": "seen", "family": "a"},
            {"attribute": "qty", "family": "o", "qualifier": "{sku}"}]}],
    })  # fmt: skip
    items = [{"pk": {"S": "O1"}, "sk": {"S": str(i)}, "sku": {"S": "x"}, "qty": {"N": "1"}, "note": {"S": "n"},
              "lines": {"L": [{"S": "a"}, {"S": "b"}, {"S": "c"}]}, "seen": {"S": "y"}} for i in range(2)]  # fmt: skip
    plan = build_plan(spec, items, now_ms=NOW_MS)
    found = {lint.code for lint in plan.lints if lint.severity == "error"}
    assert {"gc-drops-versions", "gc-drops-cells", "cell-collision", "undeclared-loss"} <= found
    assert any("'note'" in loss and "drop" in loss for loss in plan.entities[0].losses)
    assert any("'pk'" in loss and "lower" in loss for loss in plan.entities[0].losses)


def test_sample_findings_are_plan_errors():
    spec = MappingSpec.model_validate({
        "source": {"table": "T", "partition_key": "pk", "sort_key": "sk"},
        "target": {"table": "t", "families": {"f": {"max_versions": 1}}},
        "migration_time": "2024-01-01T00:00:00Z",
        "entities": [
            {"name": "order", "match": {"type": "order"}, "row_key": "{pk}", "timestamp": {"attribute": "created_at"},
             "drop": ["sk", "type"], "columns": [{"attribute": "total", "family": "f"}]},
            {"name": "customer", "match": {"type": "customer"}, "row_key": "{pk}", "drop": ["sk", "type"],
             "columns": [{"attribute": "age", "family": "f", "encoding": "int64"}]},
            {"name": "line", "match": {"type": "line"}, "row_key": "{pk}#{sk}", "drop": ["type"],
             "columns": [{"attribute": "qty", "family": "f", "encoding": "int64"}]},
        ],
    })  # fmt: skip
    orders = [{"pk": {"S": f"o{n}"}, "sk": {"S": "x"}, "type": {"S": "order"}, "total": {"N": "3"},
               "createdAt": {"S": "2024-02-01T00:00:00Z"}} for n in range(2)]  # the attribute is spelled otherwise
    customers = [{"pk": {"S": f"c{n}"}, "sk": {"S": "x"}, "type": {"S": "customer"}, "age": {"S": "old"}}
                 for n in range(3)]  # int64 refuses a string: every customer is dead-lettered
    lines = [{"pk": {"S": "o1"}, "sk": {"S": "1"}, "type": {"S": "line"}, "qty": {"N": "2"}}]
    plan = build_plan(spec, orders + customers + lines, now_ms=NOW_MS)
    errors = {(lint.code, lint.where): lint.message for lint in plan.lints if lint.severity == "error"}
    absent = errors[("timestamp-attribute-absent", "entities[0].timestamp.attribute")]
    assert "'created_at'" in absent and "'createdAt'" in absent  # with the spelling hint
    assert "all 3 sampled items" in errors[("entity-dead-letters-all", "entities[1]")]
    assert not any(where.startswith("entities[2]") for _, where in errors)  # the line entity maps its sample
    assert plan.has_errors and plan.lints[0].severity == "error"


def test_many_colliding_or_collected_cells_are_one_finding_per_column():
    """983 colliding items of one column were 983 findings (cut at 20, hiding the GC ones): one each, with counts."""
    spec = MappingSpec.model_validate({
        "source": {"table": "T", "partition_key": "pk", "sort_key": "sk"},
        "target": {"table": "t", "families": {"d": {"max_versions": 1, "max_age": "1d"}}},
        "migration_time": "2020-01-01T00:00:00Z",
        "entities": [{"name": "thing", "row_key": "{pk}", "drop": ["sk"], "columns": [{"attribute": "n", "family": "d"}]}],
    })  # fmt: skip
    items = [{"pk": {"S": f"p{i % 7}"}, "sk": {"S": str(i)}, "n": {"N": str(i)}} for i in range(300)]
    lints = [lint for lint in build_plan(spec, items, now_ms=NOW_MS).lints if lint.severity == "error"]
    by_code = {code: [lint for lint in lints if lint.code == code] for code in ("cell-collision", "gc-drops-versions", "gc-drops-cells")}
    assert [len(found) for found in by_code.values()] == [1, 1, 1]
    assert by_code["cell-collision"][0].message.startswith("293 sampled cells of d:n overwrite one another item wrote")
    assert by_code["gc-drops-versions"][0].message.startswith("7 sampled rows get more d:n cells than the family keeps")
    assert "max_age (1d)" in by_code["gc-drops-cells"][0].message


def test_a_backfill_longer_than_the_stream_retention_is_a_plan_warning_in_text_and_json():
    """Issue 13's planning: migrate-plan itself (text and JSON, not only the report) warns and points to catch-up."""
    from io import StringIO

    from rich.console import Console

    from ddb2bt.cli.plan_text import render_text

    huge = SourceDescription(table="Videos", partition_key="pk", sort_key="sk", item_count=10**9, size_bytes=10**13)
    plan = seed_plan("videos", source=huge)  # 10 TB at 50% of 4,000 on-demand RCU: about 7 days
    assert plan.estimates.exceeds_stream_retention and plan.has_warnings
    (found,) = [lint for lint in plan.lints if lint.code == "backfill-exceeds-stream-retention"]
    assert "24-hour retention" in found.message and "incremental exports" in found.message
    assert "ddb2bt catch-up" in found.message
    document = plan.model_dump(mode="json")
    assert document["estimates"]["exceeds_stream_retention"] is True
    assert any(lint["code"] == "backfill-exceeds-stream-retention" for lint in document["lints"])
    out = StringIO()
    render_text(plan, Console(file=out, width=80))
    text = " ".join(out.getvalue().split())
    assert "warning" in text and "longer than DynamoDB Streams' 24-hour retention" in text
    assert "(0 errors, 1 warning)" in text
    small = seed_plan("videos", source=huge.model_copy(update={"item_count": 1000, "size_bytes": 10**6}))
    assert not small.estimates.exceeds_stream_retention and not small.has_warnings
    assert small.model_dump(mode="json")["estimates"]["exceeds_stream_retention"] is False


def test_the_preview_shows_typed_cells_as_stored():
    """A ddb_json or auto cell stores typed DynamoDB JSON: the plan shows those bytes, not plain JSON that reads
    as another value ({"a":[1.5,["x","y"]]} hid that the list holds a string set)."""
    spec = MappingSpec.model_validate({
        "source": {"table": "T", "partition_key": "pk"}, "target": {"table": "t", "families": {"f": {}}},
        "entities": [{"name": "e", "row_key": "{pk}", "columns": [
            {"attribute": "doc", "family": "f", "encoding": "ddb_json"},
            {"attribute": "nothing", "family": "f", "encoding": "auto"}]}]})  # fmt: skip
    item = {"pk": {"S": "k"}, "doc": {"M": {"a": {"L": [{"N": "1.5"}, {"SS": ["x", "y"]}]}}}, "nothing": {"NULL": True}}
    cells = {cell.column: cell.value for cell in build_plan(spec, [item], now_ms=NOW_MS).entities[0].examples[0].cells}
    assert cells["f:doc"] == '{"M":{"a":{"L":[{"N":"1.5"},{"SS":["x","y"]}]}}}'
    assert cells["f:nothing"] == '{"NULL":true}'
