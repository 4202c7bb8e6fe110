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
