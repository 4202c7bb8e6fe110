"""The one-orjson-call-per-block parse that ``benchmarks.export_ab --parse-rounds`` times against the reader's per-line
parse (docs/PERFORMANCE.md, "Export round 9"): it is only a fair comparison if the joined parse gives exactly the
per-line reading's items whenever it gives any, and hands every other block (blank or bad lines, a possible bare
integer beyond 64 bits, lines that are only valid JSON once joined) back to the per-line reading."""

from __future__ import annotations

import base64
import json

from hypothesis import given, settings, strategies as st

from benchmarks.export_ab import joined_block_items
from ddb2bt.pipelines.dynamodb import wire_json


def per_line(block: bytes) -> list | str:
    """The reader's reading of a block: each non-blank line's ``Item``, or the first line it refuses."""
    loads, items = wire_json.loader_for(block), []
    for number, line in enumerate(block.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            items.append(loads(line)["Item"])
        except (ValueError, KeyError, TypeError):
            return f"line {number}"
    return items


def _item_line(number: int) -> bytes:
    item = {"pk": {"S": f"k{number}"}, "n": {"N": "1234567890123456789012345678901234.5678"},
            "b": {"B": base64.b64encode(bytes([number % 256, 0, 255])).decode()}, "l": {"L": [{"N": "1"}]}}
    return json.dumps({"Item": item}, separators=(",", ":")).encode()


# lines that are not one whole JSON value alone, but would be valid in a joined array: a line cut short whose next
# line closes it (and a line of two values making up the count), a string left open, two values on a line
SPLIT_VALUES = [
    [b'{"Item":{"a":{"L":[[{"N":"1"}', b'{"N":"2"}]]}}}', b'{"Item":{}},{"Item":{}}'],
    [b'{"Item":{"a":{"S":"x', b'{"Item":{}}'],
    [b'{"Item":{"a":{"M":{"b":{"S":"c"}', b'{"Item":{}}}}}'],
    [b'{"Item":{}} {"Item":{}}', b'{"Item":{}}'],
]
# good lines the joined parse must not take: one writing the mark's key, one with a bare integer beyond 64 bits
HANDED_BACK = [
    [b'{"Item":{}}', b'{"\\u0000":0,"Item":{}}'],
    [b'{"Item":{"n":123456789012345678901234567890}}'],
]

LINES = st.one_of(
    st.integers(0, 10**6).map(_item_line),
    st.sampled_from([
        b"", b"   ", b"\r",
        b'{"Item": {"pk": {"S": "\\u00e9 caf\\u00e9"}}}',
        b'{"Item": {"pk": {"S": "a"}, "n": 123456789012345678901234567890}}',
        b'{"Item": {"pk": {"N": 1.5}}}',
        b'{"NotAnItem": 1}', b"[1, 2]", b'"text"', b'{"Item": {"pk": {"S": "a"}}',
        b'{"Item": {"pk": {"S": "a"}, "x": Infinity}}', b'\xff\xfe{"Item": {}}',
        b'{"Item": {"pk": {"S": "\\ud800"}}}', b'  {"Item": {"pk": {"S": "spaced"}}}  ', b'{}',
    ]),
    st.sampled_from([line for lines in SPLIT_VALUES + HANDED_BACK for line in lines]),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(LINES, min_size=1, max_size=30))
def test_the_joined_parse_gives_the_per_line_items_or_hands_the_block_back(lines):
    block = b"\n".join(lines)
    joined = joined_block_items(block, block.count(b"\n") + 1)
    assert joined is None or joined == per_line(block)


def test_lines_valid_only_when_joined_are_handed_back():
    for lines in SPLIT_VALUES:
        block = b"\n".join(lines)
        assert isinstance(per_line(block), str), lines  # the per-line reading refuses a line of each
        assert joined_block_items(block, len(lines)) is None, lines
    for lines in HANDED_BACK:
        block = b"\n".join(lines)
        assert len(per_line(block)) == len(lines)
        assert joined_block_items(block, len(lines)) is None, lines
    assert per_line(HANDED_BACK[1][0])[0]["n"] == 123456789012345678901234567890  # exact, through json


def test_good_lines_are_parsed_joined():
    block = b"\n".join(_item_line(number) for number in range(50))
    assert joined_block_items(block, 50) == per_line(block)
    assert len(per_line(block)) == 50


def test_a_plain_comma_join_would_take_lines_the_per_line_reading_refuses():
    """Why the joined parse marks each line: joined with bare commas, three lines of which none is a whole value
    alone parse as three objects, each with an ``Item``."""
    import orjson

    block = b"\n".join(SPLIT_VALUES[0])
    records = orjson.loads(b"[" + block.replace(b"\n", b",") + b"]")
    assert len(records) == 3 and all("Item" in record for record in records)
    assert per_line(block) == "line 1"
    assert joined_block_items(block, 3) is None
