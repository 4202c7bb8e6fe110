"""An owner's line (a one-item row group that produces its whole row) is written without its dict: the same bytes
as the general line writer's, so the rows pass reads it back unchanged."""

from __future__ import annotations

import json

import pytest

from ddb2bt.mappers.validate.records import Candidate
from ddb2bt.pipelines.validate.pipeline import json_line, owner_json_line


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
