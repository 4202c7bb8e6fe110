"""An owner's line (a one-item row group that produces its whole row) is written without its dict, and for text keys
straight from the item: the same bytes as the general line writer's, so the rows pass reads it back unchanged."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddb2bt.mappers.validate.compare import Comparer
from ddb2bt.mappers.validate.records import Candidate
from ddb2bt.pipelines.validate.pipeline import json_line, owner_item_line, owner_json_line


@pytest.mark.parametrize("owner", [
    Candidate(b"cust#0001#order#8390295741043#00000001", owns_all=True,
              owner={"pk": {"S": "CUST#0001"}, "sk": {"S": "ORDER#1609704258956#00000001"}}, cells=12),
    Candidate(b"\x00\xff\x10binary", owns_all=True, owner={"pk": {"B": "AP8Q"}, "sk": {"N": "-1.5E+3"}}, cells=1),
    Candidate("prod#ü\"\\\n".encode(), owns_all=True, owner={"pk": {"S": "Zürich \"quoted\" \\ \u2028"}}, cells=3),
    Candidate(b"", owns_all=True, owner=None, cells=0),
])
def test_an_owners_line_is_the_general_writers_line(owner):
    line = owner_json_line(owner)
    assert line == json_line(owner.to_json())
    assert Candidate.from_json(json.loads(line)) == owner


# Attribute values as a scan page or an export line gives them, and what neither does (a payload of another type,
# two tags, a list): the fast line writes text keys, the general one everything else.
_text = st.text(max_size=12)
_value = st.one_of(
    st.builds(lambda t: {"S": t}, _text),
    st.builds(lambda t: {"N": t}, st.from_regex(r"-?[0-9]{1,5}(\.[0-9]{1,3})?", fullmatch=True)),
    st.builds(lambda b: {"B": b}, st.binary(max_size=6)),
    st.builds(lambda t: {"S": t, "N": "1"}, _text),
    st.just({"S": None}), st.just({}), st.builds(lambda t: ["S", t], _text), st.just(None))


@given(names=st.lists(st.sampled_from(["pk", "sk", "Zkey", "é", "a\"b"]), min_size=1, max_size=2, unique=True),
       values=st.dictionaries(st.sampled_from(["pk", "sk", "Zkey", "é", "a\"b", "other"]), _value),
       row_key=st.binary(max_size=20), cells=st.integers(min_value=0, max_value=10_000))
@settings(max_examples=500, deadline=None)
def test_an_owners_line_written_from_the_item_is_the_candidates_line(names, values, row_key, cells):
    """`owner_item_line` (the compare step's writer for one-item owners) gives `owner_json_line` of the candidate
    `Comparer.owner_line` makes, byte for byte, or None (then the general path writes it); it answers for every
    item whose key attributes are plain text."""
    item = {name: value for name, value in values.items() if value is not None}
    key_names = tuple(names)  # the comparer's: partition key, then sort key
    owner = Comparer.item_key(SimpleNamespace(key_names=key_names), item)
    line = owner_item_line(row_key, item, cells, tuple(sorted(key_names)))
    if line is not None:
        assert line == owner_json_line(Candidate(row_key, owns_all=True, owner=owner, cells=cells))
        assert Candidate.from_json(json.loads(line)) == Candidate(row_key, owns_all=True, owner=owner, cells=cells)
    plain = all(type(item[name]) is dict and list(item[name]) == ["S"] and type(item[name]["S"]) is str
                for name in key_names if name in item)
    assert (line is not None) == plain
