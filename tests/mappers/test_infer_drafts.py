"""Drafts that map: `infer` on tables it has never seen drafts a spec whose own plan has no errors on the sample it
was drafted from (AWS's sample tables, the benchmark's single-table design, profiles with orders)."""

import random
from datetime import datetime, timezone

import pytest

from benchmarks import dataset
from ddb2bt.mappers.analysis.infer import infer_spec
from ddb2bt.mappers.loader import parse_document, validate_data
from ddb2bt.mappers.analysis.plan import build_plan
from ddb2bt.mappers.table import SourceDescription
from ddb2bt.mappers.spec_yaml import render_yaml
from tests import aws_samples
from tests.golden import seed_items

NOW = datetime(2026, 11, 1, tzinfo=timezone.utc)


def _describe(name: str, pk: str = "pk", sk: str = "sk") -> dict:
    return {"Table": {"TableName": name, "KeySchema": [{"AttributeName": pk, "KeyType": "HASH"},
                                                       {"AttributeName": sk, "KeyType": "RANGE"}],
                      "ItemCount": 0, "TableSizeBytes": 0}}


def profiles_and_orders(customers: int = 60) -> list[dict]:
    """A customer's profile and orders in one partition; order ids that look like epoch seconds (2034)."""
    rng, out = random.Random(7), []
    for c in range(customers):
        pk = {"S": f"CUST#{c:05d}"}
        out.append({"pk": pk, "sk": {"S": "PROFILE"}, "name": {"S": f"name {c}"}, "tags": {"SS": ["a", "b"]},
                    "balance": {"N": "12345678901234567890123456789012345678"}, "avatar": {"B": b"\x00\x01"}})
        for o in range(4):
            out.append({"pk": pk, "sk": {"S": f"ORDER#{2024000001 + c * 4 + o}"}, "status": {"S": "paid"},
                        "total": {"N": f"{rng.randint(1, 999)}.99"}})
    return out


def _draft_and_plan(describe: dict, items: list[dict]):
    draft = infer_spec(describe, items, now=NOW)
    data, lines = parse_document(render_yaml(draft.spec, draft.comments, draft.header), "draft.yaml")
    spec = validate_data(data, "draft.yaml", lines)
    return draft, build_plan(spec, items, SourceDescription.from_describe_table(describe["Table"]))


CASES = {
    **{name: (lambda name=name: (aws_samples.describe(name), aws_samples.items(name))) for name in aws_samples.KEYS},
    "benchmark": lambda: (_describe("Bench"), list(dataset.generate(2000))),
    "profiles-and-orders": lambda: (_describe("Customers"), profiles_and_orders()),
    "videos": lambda: (_describe("Videos"), seed_items("videos")),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_draft_maps_the_sample_it_was_drafted_from(case):
    describe, items = CASES[case]()
    _, plan = _draft_and_plan(describe, items)
    errors = [lint.message for lint in plan.lints if lint.severity == "error"]
    assert not plan.has_errors and plan.sample.errors == 0, errors


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_drafts_access_patterns_read_back_items_on_its_sample(case):
    """Each pattern the draft declares is tried on the sample: its rows decode and return items. The Videos draft
    folds five entities into one row, each with a rest in the same family; the first one's rest took the others'
    counters, and every pattern returned 0 items (and parity failed) on a plan that showed no reason. Nor does a
    draft leave cells of two entities to meet by chance (rests in a family other entities of the row write)."""
    describe, items = CASES[case]()
    _, plan = _draft_and_plan(describe, items)
    assert not [lint.message for lint in plan.lints
                if lint.code in ("access-pattern-undecodable", "shared-cells", "long-family-name")]
    for pattern in plan.access_patterns:
        assert pattern.status != "served" or (pattern.items_returned > 0 and not pattern.reason), pattern


def test_key_values_holding_the_delimiter_are_escaped_so_the_key_reads_back():
    draft, plan = _draft_and_plan(aws_samples.describe("Reply"), aws_samples.items("Reply"))
    assert draft.spec["entities"][0]["row_key"] == {"template": "{Id}#{ReplyDateTime}", "on_delimiter": "escape"}
    assert not [loss for entity in plan.entities for loss in entity.losses if "Id" in loss or "ReplyDateTime" in loss]


def test_ids_that_merely_look_like_epochs_are_not_timestamps_and_entities_keep_families_apart():
    draft, _ = _draft_and_plan(_describe("Customers"), profiles_and_orders())
    order = next(entity for entity in draft.spec["entities"] if entity["name"] == "order")
    assert "timestamp" not in order  # ORDER#2024000001 would be 2034-02-18
    assert {column["family"] for column in order["columns"]} == {"Order"}
    assert draft.spec["target"]["families"]["profile"] == {"max_versions": 1}


def test_timed_items_get_a_family_of_their_own_whose_gc_keeps_them():
    items = [{"pk": {"S": "v1"}, "sk": {"S": "Video"}, "Title": {"S": "t"}}] + [
        {"pk": {"S": "v1"}, "sk": {"S": f"Comment#{1_700_000_000 + i}"}, "Text": {"S": f"c{i}"}} for i in range(5)]
    draft, plan = _draft_and_plan(_describe("Videos"), items)
    families = draft.spec["target"]["families"]
    assert families["Comment"]["max_versions"] > 1 and families["video"] == {"max_versions": 1}
    assert not plan.has_errors


def test_an_unknown_count_is_said_to_be_unknown():
    draft = infer_spec(aws_samples.describe("Forum"), aws_samples.items("Forum"), now=NOW)
    assert "DescribeTable reports 0 items" in draft.header[0] and "~0 items" not in draft.header[0]
    known = infer_spec(aws_samples.describe("Forum", item_count=2), aws_samples.items("Forum"), now=NOW)
    assert "~2 items" in known.header[0]


def _reply_with_its_gsi() -> dict:
    """AWS's sample Reply table with the index the Developer Guide gives it ("Example tables and data":
    PostedBy-Message-Index, PostedBy + Message); the guide names its keys, not its projection: ALL assumed."""
    describe = aws_samples.describe("Reply")
    describe["Table"]["GlobalSecondaryIndexes"] = [{
        "IndexName": "PostedBy-Message-Index", "Projection": {"ProjectionType": "ALL"},
        "KeySchema": [{"AttributeName": "PostedBy", "KeyType": "HASH"}, {"AttributeName": "Message", "KeyType": "RANGE"}]}]
    return describe


def test_secondary_indexes_are_drafted_as_index_rows_that_serve_their_pattern():
    describe = _reply_with_its_gsi()
    describe["Table"]["LocalSecondaryIndexes"] = [{
        "IndexName": "ByAuthor", "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["Message"]},
        "KeySchema": [{"AttributeName": "Id", "KeyType": "HASH"}, {"AttributeName": "PostedBy", "KeyType": "RANGE"}]}]
    draft, plan = _draft_and_plan(describe, aws_samples.items("Reply"))
    indexes = {index["name"]: index for index in draft.spec["indexes"]}
    assert indexes["PostedBy-Message-Index"]["projection"] == {"type": "ALL"}
    assert indexes["ByAuthor"]["projection"] == {"type": "INCLUDE", "non_key_attributes": ["Message"]}
    assert indexes["ByAuthor"]["type"] == "local" and indexes["ByAuthor"]["sort_key"] == "PostedBy"
    # the key types DescribeTable declares (an item of another type is in no index); none where it declares none
    assert "partition_key_type" not in indexes["PostedBy-Message-Index"]
    describe["Table"]["AttributeDefinitions"] += [{"AttributeName": "PostedBy", "AttributeType": "S"},
                                                  {"AttributeName": "Message", "AttributeType": "S"}]
    typed = {index["name"]: index for index in _draft_and_plan(describe, aws_samples.items("Reply"))[0].spec["indexes"]}
    assert typed["PostedBy-Message-Index"]["partition_key_type"] == typed["PostedBy-Message-Index"]["sort_key_type"] == "S"
    assert typed["ByAuthor"]["partition_key_type"] == "S" and typed["ByAuthor"]["sort_key_type"] == "S"
    assert draft.spec["target"]["families"]["index"] == {"max_versions": 1}
    assert not plan.has_errors and plan.sample.errors == 0
    # every drafted index pattern is served by its index rows: no "needs index rows" finding
    assert not [lint.message for lint in plan.lints if "index rows" in lint.message], plan.lints


def test_an_index_prefix_no_sampled_row_key_starts_with():
    items = [{"pk": {"S": f"~user{i}"}, "sk": {"S": "a"}, "email": {"S": f"u{i}@x"}} for i in range(5)]
    describe = _describe("Users")
    describe["Table"]["GlobalSecondaryIndexes"] = [{"IndexName": "byEmail", "Projection": {"ProjectionType": "KEYS_ONLY"},
                                                    "KeySchema": [{"AttributeName": "email", "KeyType": "HASH"}]}]
    draft, plan = _draft_and_plan(describe, items)
    prefix = draft.spec["indexes"][0]["target"]["prefix"]
    assert not prefix.startswith("~") and prefix.endswith("by_email#")
    assert not plan.has_errors and plan.sample.errors == 0


def braces_and_bars_in_keys() -> list[dict]:
    """Sort keys whose type prefix holds a template's own characters: `{`, `}` and `|` cannot be a transform's argument."""
    out = []
    for p in range(6):
        pk = {"S": f"p{p}"}
        out.append({"pk": pk, "sk": {"S": f"{{json-{p}"}, "v": {"S": "x"}})
        out.append({"pk": pk, "sk": {"S": f"a|b#{p}"}, "w": {"N": "1"}})
        out.append({"pk": pk, "sk": {"S": f"c}}d#{p}"}, "z": {"BOOL": True}})
    return out


def test_a_draft_of_keys_holding_template_characters_loads_and_maps():
    _, plan = _draft_and_plan(_describe("Braces"), braces_and_bars_in_keys())
    assert not plan.has_errors and plan.sample.errors == 0, [lint.message for lint in plan.lints]


def test_names_read_as_words():
    """An index named byStatus gives the pattern by_status (was by_by_status); one entity's notes say 'sampled items'
    (was 'sampled item items')."""
    items = [{"pk": {"S": f"c{i}"}, "sk": {"S": "o"}, "status": {"S": "open"}, **({"note": {"S": "n"}} if i % 2 else {})}
             for i in range(6)]
    describe = _describe("Orders")
    describe["Table"]["GlobalSecondaryIndexes"] = [{"IndexName": "byStatus", "Projection": {"ProjectionType": "ALL"},
                                                    "KeySchema": [{"AttributeName": "status", "KeyType": "HASH"}]}]
    draft, plan = _draft_and_plan(describe, items)
    assert [p["name"] for p in draft.spec["access_patterns"] if "index" in p] == ["by_status"]
    notes = "\n".join(draft.comments.values())
    assert "present in 3 of 6 sampled items" in notes and "item items" not in notes
    assert not plan.has_errors


def test_a_set_of_items_sharing_a_row_is_drafted_one_cell_per_item_and_reads_back():
    """Orders folded into their customer's row, each with a set: one qualifier per member (tags:<member>) would mix
    the orders' sets in one row (the draft then declared tags and total lossy); one cell per order keeps them apart."""
    from ddb2bt.mappers.compiler import compile_spec
    from ddb2bt.mappers.rollback import verdict

    items = []
    for c in range(40):
        pk = {"S": f"CUST#{c:03d}"}
        items.append({"pk": pk, "sk": {"S": "PROFILE"}, "name": {"S": "n"}})
        items += [{"pk": pk, "sk": {"S": f"ORDER#{c * 3 + o:05d}"}, "tags": {"SS": ["x", f"t{o}"]},
                   "total": {"N": "1.5"}} for o in range(3)]
    draft, plan = _draft_and_plan(_describe("Customers"), items)
    order = next(entity for entity in plan.entities if entity.name == "order")
    assert not order.losses and not plan.has_errors
    data, lines = parse_document(render_yaml(draft.spec, draft.comments, draft.header), "draft.yaml")
    spec = validate_data(data, "draft.yaml", lines)
    assert not [loss for loss in verdict(spec).losses if loss.entity == "order"]
    compiled = compile_spec(spec)
    first, second = (compiled.map_item(item) for item in items[1:3])
    assert first.row_key == second.row_key
    assert not {c[:2] for c in first.cells} & {c[:2] for c in second.cells}  # no cell written by both orders
