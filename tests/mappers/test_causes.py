"""Issue 25 item 2: the plan's findings by cause (one per cause, its count, three examples, the fix), and every
problem class of a spec reported in one plan round (the errors an item's first error hides)."""

from __future__ import annotations

import io

import yaml
from rich.console import Console

from ddb2bt.cli.plan_text import render_text
from ddb2bt.mappers.analysis.causes import group_causes
from ddb2bt.mappers.loader import validate_data
from ddb2bt.mappers.analysis.plan import build_plan
from ddb2bt.mappers.results import ItemError

NOW_MS = 1_700_000_000_000


def S(text):
    return {"S": text}


def N(text):
    return {"N": text}


ORDER = """
source: {table: Orders, partition_key: pk, sort_key: sk}
target: {table: orders, families: {o: {max_versions: 1}}}
migration_time: "2024-01-01T00:00:00Z"
entities:
  - name: order
    row_key: "{pk}#{sk}"
    columns:
"""
"""An order entity keyed pk#sk, its columns to follow."""
ORDERS = ORDER + "      - {attribute: total, family: o}\n"


def plan_of(spec: str, items: list[dict]):
    return build_plan(validate_data(yaml.safe_load(spec)), items, now_ms=NOW_MS)


def text_of(plan) -> str:
    out = io.StringIO()
    render_text(plan, Console(file=out, width=200, color_system=None))
    return out.getvalue()


def test_a_hundred_delimiter_bearing_keys_are_one_finding_with_count_examples_and_fix():
    # 100 orders over 40 customers: ids like CUST#00007 hold the key delimiter.
    items = [{"pk": S(f"CUST#{n % 40:05d}"), "sk": S(f"ORDER#{n:04d}"), "total": N(str(n))} for n in range(100)]
    plan = plan_of(ORDERS, items)

    assert plan.dead_letters.total == 100
    [cause] = plan.dead_letters.causes
    assert cause.count == 100 and cause.distinct == 40 and cause.hidden == 0
    assert cause.examples == ("'CUST#00000'", "'CUST#00001'", "'CUST#00002'")
    assert cause.text == ("entity 'order', attribute 'pk': value … contains the key delimiter '#' "
                          "(set on_delimiter: escape to %-escape it)")
    assert plan.dead_letters.by_reason == {cause.text: 100}
    [finding] = [lint for lint in plan.lints if lint.code == "entity-dead-letters-all"]
    assert "100 × entity 'order', attribute 'pk': value … contains the key delimiter '#'" in finding.message
    assert "e.g. 'CUST#00000', 'CUST#00001', 'CUST#00002', …; 40 different values" in finding.message
    assert "on_delimiter: escape" in finding.message  # the fix

    text = text_of(plan)
    assert text.count("CUST#") == 2 * 3  # the examples, in the dead letters and in the finding: not a line per value
    dead = text.split("Dead letters in the sample: 100\n", 1)[1].splitlines()
    assert dead[0].startswith("  100 × entity 'order', attribute 'pk'") and not dead[1].startswith("  ")


FIVE = ORDER + """\
      - {attribute: customer, family: o}
      - {attribute: quantity, family: o, encoding: int64}
      - {attribute: note, family: o, timestamp: {attribute: noted_at}}
      - {attribute: city, family: o}
      - {attribute: total, family: o}
"""


def test_three_problem_classes_of_a_five_column_spec_are_reported_in_one_round():
    # Every item has all three problems: a key value with the delimiter, a quantity int64 cannot hold, a note
    # timestamped by a text that is no time. Mapping stops at the first (the key): the others were only seen after
    # fixing it, one plan round each.
    items = [
        {"pk": S(f"CUST#{n}"), "sk": S(f"{n}"), "customer": S("Ann"), "quantity": N(f"{n}.5"),
         "note": S("hi"), "noted_at": S("yesterday"), "city": S("Oslo"), "total": N("3")}
        for n in range(12)
    ]  # fmt: skip
    plan = plan_of(FIVE, items)

    causes = {cause.text.split(":")[0]: cause for cause in plan.dead_letters.causes}
    assert set(causes) == {"entity 'order', attribute 'pk'", "entity 'order', attribute 'quantity'",
                           "entity 'order', attribute 'noted_at'"}
    key, quantity, noted = (causes[f"entity 'order', attribute '{name}'"] for name in ("pk", "quantity", "noted_at"))
    assert (key.count, key.hidden) == (12, 0)
    assert (quantity.count, quantity.hidden) == (12, 12) and quantity.examples == ("0.5", "1.5", "2.5")
    assert "int64" in quantity.text and (noted.count, noted.hidden) == (12, 12)
    assert plan.dead_letters.by_reason == {key.text: 12}  # what the run dead-letters now: each item once

    [behind] = [lint for lint in plan.lints if lint.code == "errors-behind-errors"]
    assert "attribute 'quantity'" in behind.message and "attribute 'noted_at'" in behind.message
    text = text_of(plan)
    assert "12 behind another error" in text and "errors-behind-errors" not in text  # the code is for tooling

    # The round after fixing all three has no dead letters left.
    fixed = FIVE.replace('"{pk}#{sk}"', '{template: "{pk}#{sk}", on_delimiter: escape}').replace(", encoding: int64", "")
    fixed = fixed.replace("timestamp: {attribute: noted_at}", "timestamp: {fixed: '2024-01-01T00:00:00Z'}")
    fixed = fixed.replace("    columns:", "    drop: [noted_at]\n    columns:")
    assert plan_of(fixed, items).dead_letters.total == 0


def test_causes_keep_what_all_share_and_put_apart_what_differs():
    errors = [ItemError(f"{value!r} does not start with 'ORDER#'", "order", "sk") for value in ("A1", "B2", "A1")]
    errors.append(ItemError("the row key is empty", "order"))
    first, second = group_causes(errors)
    assert first.text == "entity 'order', attribute 'sk': … does not start with 'ORDER#'"
    assert (first.count, first.distinct, first.examples) == (3, 2, ("'A1'", "'B2'"))
    assert first.line() == ("3 × entity 'order', attribute 'sk': … does not start with 'ORDER#' "
                            "(e.g. 'A1', 'B2'; 2 different values)")
    assert second.line() == "1 × entity 'order': the row key is empty"
