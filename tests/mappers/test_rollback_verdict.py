"""migrate-plan says whether a spec can be rolled back; the rollback's request shapes and item sizes."""

from __future__ import annotations

from io import StringIO

from rich.console import Console

from ddb2bt.cli.plan_text import render_text
from ddb2bt.mappers.loader import load_spec
from ddb2bt.mappers.analysis.plan import build_plan
from ddb2bt.mappers.rollback import item_size, latest_only, requests, verdict, write_units
from ddb2bt.mappers.spec import MappingSpec
from tests.golden import seed_items, template_path

NOW_MS = 1_700_000_000_000


def spec_of(entity: dict) -> MappingSpec:
    return MappingSpec.model_validate({
        "source": {"table": "T", "partition_key": "pk", "sort_key": "sk"},
        "target": {"table": "T", "families": {"f": {}}},
        "entities": [{"name": "e", "columns": [{"attribute": "v", "family": "f"}], "rest": {"family": "f"}, **entity}],
    })


def plan_text(plan) -> str:
    out = StringIO()
    render_text(plan, Console(file=out, width=100))
    return " ".join(out.getvalue().split())


def test_a_lossless_seed_spec_can_be_rebuilt_and_the_plan_says_so():
    spec = load_spec(template_path("product_catalog"))
    assert verdict(spec).complete
    plan = build_plan(spec, seed_items("product_catalog"), now_ms=NOW_MS)
    assert plan.rollback == ("every item can be rebuilt from Bigtable (ddb2bt rollback gives back each item, types "
                             "included)",)
    assert "Rollback (ddb2bt rollback: Bigtable → DynamoDB) every item can be rebuilt" in plan_text(plan)
    assert plan.model_dump(mode="json")["rollback"] == list(plan.rollback)


def test_declared_losses_are_named_attribute_by_attribute_with_why():
    spec = spec_of({"row_key": "{pk|lower}#{sk}", "drop": ["secret"], "lossy": ["pk"]})
    found = verdict(spec)
    assert not found.complete
    lines = found.lines()
    assert "cannot be rebuilt: entity 'e', attribute 'secret': in drop: not migrated" in lines
    assert "cannot be rebuilt: entity 'e', attribute 'pk': the row key lower lower-cases the value" in lines
    items = [{"pk": {"S": "A"}, "sk": {"S": "1"}, "v": {"S": "x"}, "secret": {"S": "s"}}]
    plan = build_plan(spec, items, now_ms=NOW_MS)
    assert plan.rollback == tuple(lines)
    assert "attribute 'secret': in drop: not migrated" in plan_text(plan)


def test_a_sampled_item_that_does_not_read_back_is_named():
    spec = spec_of({"row_key": "{pk}#{sk|pad(4)}"})  # text with leading zeros under pad: data-dependent
    plan = build_plan(spec, [{"pk": {"S": "a"}, "sk": {"S": "007"}, "v": {"S": "x"}}], now_ms=NOW_MS)
    assert not any(line.startswith("every item") for line in plan.rollback)
    assert any("a sampled item of entity 'e'" in line and "'sk'" in line for line in plan.rollback)



def test_two_entities_with_a_rest_in_one_family_of_shared_rows_cannot_be_rebuilt():
    """Read back, the first entity's rest claims every rest cell of the row: the order's `total` became the user's
    and the order item was gone, under a verdict that said every item could be rebuilt."""
    from ddb2bt.mappers.compiler import compile_spec
    from ddb2bt.mappers.decode import compile_decoder

    def spec(user_key: str, order_key: str) -> MappingSpec:
        return MappingSpec.model_validate({
            "source": {"table": "T", "partition_key": "pk", "sort_key": "sk"},
            "target": {"table": "t", "families": {"f": {}}}, "migration_time": "2024-01-01T00:00:00Z",
            "entities": [{"name": "user", "match": {"sk": "U"}, "row_key": user_key, "drop": ["sk"], "rest": {"family": "f"}},
                         {"name": "order", "match": {"sk": "O"}, "row_key": order_key, "drop": ["sk"],
                          "rest": {"family": "f"}}]})  # fmt: skip

    shared = spec("{pk}", "{pk}")
    cells = [cell for item in ({"pk": {"S": "a"}, "sk": {"S": "U"}, "name": {"S": "n"}},
                               {"pk": {"S": "a"}, "sk": {"S": "O"}, "total": {"N": "5"}})
             for cell in compile_spec(shared, NOW_MS).map_item(item).cells]  # fmt: skip
    assert compile_decoder(shared).decode_entities(b"a", cells) == [
        ("user", {"pk": {"S": "a"}, "name": {"S": "n"}, "total": {"N": "5"}})]  # what it reads (sk: rollback adds it)
    (loss,) = verdict(shared).losses
    assert loss.entity == "order" and loss.attribute is None and "entity 'user''s attributes" in loss.reason
    assert verdict(spec("user#{pk}", "order#{pk}")).complete  # rows that cannot meet
    assert verdict(spec("{pk}#{sk}", "{pk}#{sk}")).complete  # a row per item: two items never share one

def test_versioned_and_list_specs_read_every_version():
    assert latest_only(spec_of({"row_key": "{pk}#{sk}"}))
    assert not latest_only(spec_of({"row_key": "{pk}", "versioning": {}}))
    listed = spec_of({"row_key": "{pk}#{sk}"}).model_dump(by_alias=True)
    listed["entities"][0]["columns"][0]["layout"] = "list"
    assert not latest_only(MappingSpec.model_validate(listed))


def test_requests_never_name_a_key_twice_and_keep_the_later_item_later():
    items = [{"pk": {"S": str(i % 30)}, "sk": {"S": "s"}, "n": {"N": str(i)}} for i in range(60)]
    groups = requests(items, ("pk", "sk"))
    assert all(len(group) <= 25 for group in groups) and sum(map(len, groups)) == 60
    for group in groups:
        keys = [item["pk"]["S"] for item in group]
        assert len(keys) == len(set(keys))
    place = {id(item): index for index, group in enumerate(groups) for item in group}
    for first, later in zip(items[:30], items[30:]):
        assert place[id(first)] < place[id(later)]


def test_item_size_follows_dynamodbs_rules():
    # name bytes + value bytes: "pk"+"abc" = 5; "n" + 38 digits -> 1 + 20; "b" + 3 bytes; "m" + 3 + (1 + "k" + 1)
    item = {"pk": {"S": "abc"}, "n": {"N": "9" * 38}, "b": {"B": b"\x00\x01\x02"},
            "m": {"M": {"k": {"BOOL": True}}}}
    assert item_size(item) == 5 + 21 + 4 + 7
    assert write_units(item) == 1 and write_units({"s": {"S": "x" * 1024}}) == 2


def test_attributes_bigtable_keeps_as_text_alone_are_named():
    """An attribute that lives only in a row key, a qualifier or a timestamp is text in Bigtable: its DynamoDB type
    is stored nowhere (the rollback takes it from DescribeTable for the table's keys, else from --type or a sample of
    the source). One that is also a column reads back typed from its cell."""
    from ddb2bt.mappers.rollback import text_only_attributes

    spec = MappingSpec.model_validate({
        "source": {"table": "T", "partition_key": "pk", "sort_key": "sk"},
        "target": {"table": "t", "families": {"o": {}}},
        "entities": [
            {"name": "order", "match": {"type": "order"}, "row_key": "{pk}#{sk}#{order_no}",
             "timestamp": {"attribute": "placed"},
             "columns": [{"attribute": "total", "family": "o", "qualifier": "t#{flag}#{shown}", "encoding": "utf8"},
                         {"attribute": "shown", "family": "o", "encoding": "auto"},
                         {"attribute": "type", "family": "o", "encoding": "utf8"}]},
            {"name": "event", "match": {"type": "event"}, "row_key": "{pk}#{sk}", "drop": ["type"],
             "timestamp": {"template": "{at|reverse_timestamp(9999999999)}"}, "rest": {"family": "o"}},
        ],
    })
    assert text_only_attributes(spec) == ["at", "flag", "order_no", "pk", "placed", "sk"]
