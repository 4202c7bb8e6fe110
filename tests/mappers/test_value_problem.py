"""value_problem: what makes a value read from a file no DynamoDB AttributeValue, named by its path."""

import pytest

from ddb2bt.mappers.attrvalue import value_problem


@pytest.mark.parametrize("value", [
    {"S": ""}, {"N": "-0.5"}, {"N": "1234567890123456789012345678.9012345678"}, {"B": "AP8A/g=="}, {"B": b"\x00"},
    {"SS": ["a", "b"]}, {"NS": ["1", "2.50"]}, {"BS": ["AQ==", "AoA="]}, {"NULL": True}, {"BOOL": False},
    {"L": []}, {"M": {}}, {"M": {"a": {"L": [{"N": "1"}, {"M": {"b": {"NULL": True}}}]}}},
])
def test_every_type_as_exports_write_it_is_a_value(value):
    assert value_problem(value, "NewImage.x") is None


@pytest.mark.parametrize("value, problem", [
    ({"Oops": {"X": "1"}}, "NewImage.x: unknown DynamoDB type 'Oops'"),
    ({"S": "a", "N": "1"}, "NewImage.x is not a DynamoDB value"),
    ("text", "NewImage.x is not a DynamoDB value"),
    ({"N": "1e400"}, 'NewImage.x: "1e400" is not a valid N value'),
    ({"N": 5}, "NewImage.x: 5 is not a valid N value"),
    ({"B": "not base64!"}, "is not a valid B value"),
    ({"SS": []}, "NewImage.x: [] is not a valid SS value"),
    ({"NS": ["1", "x"]}, "is not a valid NS value"),
    ({"NULL": False}, "is not a valid NULL value"),
    ({"BOOL": "true"}, "is not a valid BOOL value"),
    ({"M": {"a": {"L": [{"S": "ok"}, {"Oops": 1}]}}}, "NewImage.x.a[1]: unknown DynamoDB type 'Oops'"),
    ({"L": {"S": "a"}}, "NewImage.x: an L value holds a list"),
])
def test_a_value_that_is_not_one_is_named_by_its_path(value, problem):
    found = value_problem(value, "NewImage.x")
    assert found is not None and problem in found


KEYED = """
source: {table: T, partition_key: pk, sort_key: sk}
target: {table: t, families: {f: {max_versions: 1}}}
migration_time: "2024-01-01T00:00:00Z"
entities:
  - name: item
    row_key: "{pk}#{sk}"
    columns: [{attribute: price, family: f, encoding: decimal}]
    rest: {family: f}
"""


@pytest.mark.parametrize("item, reason, attribute", [
    (5, "the item is 5, not a DynamoDB item (an object of attributes)", None),
    ([1, 2], "the item is [1, 2], not a DynamoDB item (an object of attributes)", None),
    ({"pk": [1], "sk": {"S": "a"}}, "pk is not a DynamoDB value", "pk"),
    ({"pk": {"S": "a"}, "sk": {"S": 5}}, "sk: 5 is not a valid S value", "sk"),
    ({"pk": {"B": "!!"}, "sk": {"S": "b"}}, 'B value "!!" is not base64 text', "pk"),  # was binascii's words alone
    ({"pk": {"S": "a"}, "sk": {"S": "b"}, "x": {"BS": ["QQ"]}}, 'B value "QQ" is not base64 text', "x"),
    ({"pk": {"S": "a"}, "sk": {"S": "b"}, "price": {"N": "1"}, "x": {"M": {"y": {"Oops": 1}}}},
     "unknown DynamoDB type 'Oops'", "x"),
])
def test_an_item_that_is_no_dynamodb_item_is_dead_lettered_with_what_is_wrong(item, reason, attribute):
    """An export line whose Item (or a value in it) is not DynamoDB's (a damaged file whose MD5 matches): its dead
    letter names the attribute and what is wrong with its value; it was Python's own text ("unexpected
    AttributeError: 'int' object has no attribute 'get'", "sequence item 2: expected str instance, int found")."""
    import yaml

    from ddb2bt.mappers.compiler import CompiledSpec
    from ddb2bt.mappers.loader import validate_data
    from ddb2bt.mappers.results import ItemError

    result = CompiledSpec(validate_data(yaml.safe_load(KEYED)), now_ms=0).map_item(item)
    assert isinstance(result, ItemError), result
    assert reason in result.reason and "unexpected" not in result.reason, result.reason
    assert result.attribute == attribute
