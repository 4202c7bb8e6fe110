"""Issue 11: a spec that maps nothing on the sample is an error of the plan, not a run of dead letters."""

import yaml

from ddb2bt.mappers.checks import SampleFinding, sample_findings
from ddb2bt.mappers.compiler import compile_spec
from ddb2bt.mappers.loader import validate_data

SPEC = """
source: {table: T, partition_key: pk, sort_key: sk}
target: {table: t, families: {f: {max_versions: 1}}}
migration_time: "2024-01-01T00:00:00Z"
entities:
  - name: order
    match: {type: order}
    timestamp: {attribute: created_at}
    row_key: "{pk}"
    drop: [sk, type]
    columns:
      - {attribute: total, family: f}
      - {attribute: note, family: f, timestamp: {attribute: noted_at}}
  - name: customer
    match: {type: customer}
    row_key: "{pk}#{sk}"
    drop: [type]
    columns: [{attribute: name, family: f}]
  - name: audit
    match: {type: audit}
    action: skip
"""


def S(text):
    return {"S": text}


ORDERS = [
    {"pk": S(f"o{n}"), "sk": S("x"), "type": S("order"), "total": {"N": "3"}, "created_at": S("2024-02-01T00:00:00"),
     "note": S("hi"), "noted_at": S("2024-02-02T00:00:00")}
    for n in range(3)
]
CUSTOMERS = [{"pk": S(f"c{n}"), "sk": S("profile"), "type": S("customer"), "name": S("Ann")} for n in range(3)]


def findings(items, spec=SPEC):
    parsed = validate_data(yaml.safe_load(spec))
    compiled = compile_spec(parsed, now_ms=0)
    return sample_findings(parsed, items, [compiled.map_item(item) for item in items])


def test_a_spec_that_maps_the_sample_has_no_finding():
    half_broken = CUSTOMERS + [{**CUSTOMERS[0], "pk": S("a#b")}]  # one dead letter is an item's problem, not the spec's
    assert findings(ORDERS + half_broken + [{"pk": S("z"), "sk": S("z"), "type": S("audit")}]) == []


def test_a_timestamp_attribute_no_item_has_is_named_with_a_spelling_hint():
    spec = SPEC.replace("{attribute: created_at}", "{attribute: created}")
    found = findings(ORDERS + CUSTOMERS, spec)
    assert found[0] == SampleFinding(
        "timestamp-attribute-absent", "entities[0].timestamp.attribute",
        "none of the 3 sampled items of entity 'order' has the timestamp attribute 'created', so every one would be "
        "dead-lettered; did you mean 'created_at'?",
    )  # fmt: skip
    assert found[1].code == "entity-dead-letters-all" and found[1].where == "entities[0]"
    assert "(3 × entity 'order', attribute 'created': timestamp attribute 'created' is missing)" in found[1].message
    assert len(found) == 2


def test_a_column_timestamp_attribute_no_item_has_is_named():
    without_note_time = [{name: value for name, value in item.items() if name != "noted_at"} for item in ORDERS]
    for item in without_note_time:
        item["noted"] = S("2024-02-02T00:00:00Z")
    (found, _) = findings(without_note_time)
    assert found.where == "entities[0].columns[1].timestamp.attribute" and "did you mean 'noted'?" in found.message


def test_an_entity_that_dead_letters_every_sampled_item_is_an_error():
    spec = SPEC.replace('row_key: "{pk}#{sk}"', 'row_key: "{sk}#{pk}"')
    broken = [{**item, "sk": S("pro#file")} for item in CUSTOMERS]  # the delimiter in a leading key part
    (found,) = findings(ORDERS + broken, spec)
    assert found.code == "entity-dead-letters-all" and found.where == "entities[1]"
    assert found.message.startswith("all 3 sampled items of this entity would be dead-lettered (3 × entity 'customer', ")
    assert "delimiter" in found.message


def test_entities_the_sample_does_not_reach_are_not_judged():
    assert findings(CUSTOMERS, SPEC.replace("{attribute: created_at}", "{attribute: created}")) == []


def test_a_spec_that_matches_no_sampled_item_is_an_error():
    strangers = [{"pk": S("p"), "sk": S("s"), "kind": S("order")}]
    for spec in (SPEC, SPEC + "unmatched: skip\n"):
        (found,) = findings(strangers, spec)
        assert found.code == "no-entity-matches" and found.where == "entities"
        assert "no entity matches any of the 1 sampled items" in found.message and "kind, pk, sk" in found.message
    assert findings([], SPEC) == []
