"""The per-item lossless checks are specialised when the spec is compiled (issue 24): a check that cannot fail for an
entity's columns is not run per item, and one that can still is, with the same item error as before.

Each "not run" test also maps items, so that a wrong specialisation shows as a wrong row, not only as a flag; each
"still run" test is an item the check must refuse, which would be written (one cell overwriting another, or a
timestamp text lost) if the specialisation dropped the check.
"""

import pytest
import yaml

from ddb2bt.mappers import compiler
from ddb2bt.mappers.compiler import compile_spec
from ddb2bt.mappers.loader import validate_data
from ddb2bt.mappers.results import ItemError, MappedRow

NOW_MS = 1_717_200_000_000


def compiled(text: str):
    data = yaml.safe_load(text)
    data.setdefault("source", {"table": "T", "partition_key": "pk"})
    return compile_spec(validate_data(data), now_ms=NOW_MS)


def S(text):
    return {"S": text}


@pytest.fixture
def no_duplicate_check(monkeypatch):
    """Fail the test if map_item runs the duplicate check."""

    def refuse(cells, spans):
        raise AssertionError("the duplicate check ran")

    monkeypatch.setattr(compiler, "_duplicates", refuse)


APART = """
target: {table: t, families: {c: {}, l: {}, x: {}}}
migration_time: "2024-01-01T00:00:00Z"
entities:
  - name: customer
    row_key: "{pk}"
    columns:
      - {attribute: name, family: c, qualifier: n, encoding: utf8}
      - {attribute: tags, family: c, qualifier: "tag:", layout: set, encoding: utf8}
      - {attribute: address, family: c, qualifier: "addr:", layout: map}
      - {attribute: phones, family: l, layout: list}
    rest: {family: x}
"""


def test_set_and_map_prefixes_no_other_qualifier_can_meet_get_no_duplicate_check(no_duplicate_check):
    entity = compiled(APART).entities[0]
    assert entity.spans is False
    row = compiled(APART).map_item({"pk": S("k"), "name": S("Ann"), "tags": {"SS": ["n", "addr:x"]},
                                    "address": {"M": {"tag:": S("y"), "n": S("z")}}, "phones": {"L": [S("1")]},
                                    "n": S("rest")})
    assert isinstance(row, MappedRow)
    assert sorted((cell.family, cell.qualifier) for cell in row.cells) == [
        ("c", b"addr:n"), ("c", b"addr:tag:"), ("c", b"n"), ("c", b"tag:addr:x"), ("c", b"tag:n"), ("l", b"phones"),
        ("x", b"n")]


def test_a_literal_qualifier_under_a_set_prefix_keeps_the_check_and_the_item_error():
    spec = APART.replace("{attribute: name, family: c, qualifier: n, encoding: utf8}",
                         "{attribute: name, family: c, qualifier: 'tag:red', encoding: utf8}")
    spec = spec.replace("    columns:", "    lossy: [tags]\n    columns:")  # the plan's lint: a member may meet it
    mapper = compiled(spec)
    assert mapper.entities[0].spans is True
    error = mapper.map_item({"pk": S("k"), "name": S("Ann"), "tags": {"SS": ["red"]}})
    assert isinstance(error, ItemError) and "c:tag:red is written by both" in error.reason
    assert "attribute 'name'" in error.reason and "attribute 'tags'" in error.reason
    assert isinstance(mapper.map_item({"pk": S("k"), "name": S("Ann"), "tags": {"SS": ["blue"]}}), MappedRow)


def test_two_prefixes_one_starting_the_other_keep_the_check():
    spec = APART.replace('qualifier: "addr:"', 'qualifier: "tag:a"').replace(
        "    columns:", "    lossy: [tags, address]\n    columns:")
    mapper = compiled(spec)
    assert mapper.entities[0].spans is True
    error = mapper.map_item({"pk": S("k"), "tags": {"SS": ["ab"]}, "address": {"M": {"b": S("v")}}})
    assert isinstance(error, ItemError) and "c:tag:ab is written by both" in error.reason


TEMPLATED_SET = """
target: {table: t, families: {f: {}}}
migration_time: "2024-01-01T00:00:00Z"
entities:
  - name: e
    row_key: "{pk}"
    lossy: [tags]
    columns:
      - {attribute: tags, family: f, qualifier: "{kind}:", layout: set, encoding: utf8}
      - {attribute: other, family: f, qualifier: "a:b", encoding: utf8}
"""


def test_a_set_under_a_qualifier_template_is_a_prefix_whatever_the_template_ends_with():
    # The member follows the template's text, so "{kind}:" + "b" can be "a:b" although "a:b" does not end with ":".
    mapper = compiled(TEMPLATED_SET)
    assert mapper.entities[0].spans is True
    error = mapper.map_item({"pk": S("k"), "kind": S("a"), "tags": {"SS": ["b"]}, "other": S("v")})
    assert isinstance(error, ItemError) and "f:a:b is written by both" in error.reason


REST_AND_TEMPLATE = """
target: {table: t, families: {f: {}}}
migration_time: "2024-01-01T00:00:00Z"
entities:
  - name: e
    row_key: "{pk}"
    lossy: [value]
    columns:
      - {attribute: value, family: f, qualifier: "{name}", encoding: utf8}
    rest: {family: f}
"""


def test_rest_in_the_family_of_a_qualifier_template_keeps_the_check():
    mapper = compiled(REST_AND_TEMPLATE)
    assert mapper.entities[0].spans is True
    error = mapper.map_item({"pk": S("k"), "name": S("colour"), "value": S("red"), "colour": S("blue")})
    assert isinstance(error, ItemError) and "f:colour is written by both" in error.reason
    assert "rest attribute 'colour'" in error.reason


def test_rest_beside_literal_qualifiers_is_refused_by_rest_itself_without_the_duplicate_check(no_duplicate_check):
    spec = """
target: {table: t, families: {f: {}}}
migration_time: "2024-01-01T00:00:00Z"
entities:
  - name: e
    row_key: "{pk}"
    columns:
      - {attribute: a, family: f, qualifier: b}
      - {attribute: tags, family: f, qualifier: "t:", layout: set, encoding: utf8}
    rest: {family: f}
"""
    mapper = compiled(spec)
    assert mapper.entities[0].spans is False
    error = mapper.map_item({"pk": S("k"), "a": S("1"), "b": S("2")})
    assert isinstance(error, ItemError) and "column 'a'" in error.reason and "rest attribute 'b'" in error.reason
    error = mapper.map_item({"pk": S("k"), "tags": {"SS": ["x"]}, "t:x": S("2")})
    assert isinstance(error, ItemError) and "would read back as part of 'tags'" in error.reason
