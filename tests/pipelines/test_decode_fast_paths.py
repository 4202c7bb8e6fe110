"""The decoder's fast paths give what its general path gives: a row whose claimed cells are all one item's (no
templated qualifier, nothing folded), an entity of rest cells only, a row's DynamoDB JSON looked at once
(`wire_json.loader_for`), and the key delimiter's unescaping, over the round-trip tests' generated specs and items
(every encoding and layout, key transforms, salting, folded rows, versioning, TTL, two entities in one table)."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from ddb2bt.mappers.compiler import compile_spec
from ddb2bt.mappers.decode import DecodeError, Decoder, _unescaper
from ddb2bt.mappers.render import escape_delimiter, unescape_delimiter
from ddb2bt.mappers.results import MappedRow
from ddb2bt.pipelines.dynamodb.wire_json import loader_for, loads

from .roundtrip_cases import NOW_MS, SETTINGS, cases


def outcome(decode, row_key: bytes, cells: list) -> object:
    try:
        return decode(row_key, cells)
    except (ValueError, UnicodeDecodeError) as err:  # DecodeError, AttributeValueError, json's errors
        return type(err), str(err)


def general(decoder: Decoder) -> Decoder:
    for entity in decoder.entities:
        entity.one_item = entity.rest_only = False
        entity.row_values = None
    return decoder


@settings(max_examples=300, **SETTINGS)
@given(cases())
def test_the_fast_paths_decode_every_row_as_the_general_path_does(case):
    spec, items = case
    compiled = compile_spec(spec, NOW_MS)
    rows: dict[bytes, list] = {}
    for item in items:
        result = compiled.map_item(item)
        if isinstance(result, MappedRow):
            rows.setdefault(result.row_key, []).extend(result.cells)  # items folded into one row, as Bigtable holds them
    fast = Decoder(spec, json_loads=loads, json_loader_for=loader_for)
    slow = general(Decoder(spec, json_loads=loads))
    plain, plain_slow = Decoder(spec), general(Decoder(spec))
    for row_key, cells in rows.items():
        cells = sorted(cells, key=lambda c: (c.family, c.qualifier, -c.timestamp_micros))  # Bigtable's order
        want = outcome(slow.decode_entities, row_key, cells)
        assert outcome(fast.decode_entities, row_key, cells) == want
        assert outcome(plain.decode_entities, row_key, cells) == outcome(plain_slow.decode_entities, row_key, cells)


def test_a_cell_that_is_not_json_fails_the_row_as_before():
    """A rest cell that is not DynamoDB JSON, or holds a bare integer beyond 64 bits (which only json keeps exact):
    the same error, or the same value, with the row's cells looked at once."""
    from ddb2bt.mappers.results import Cell
    from ddb2bt.mappers.spec import MappingSpec

    spec = MappingSpec.model_validate({
        "source": {"table": "T", "partition_key": "pk"}, "target": {"table": "t", "families": {"d": {}}},
        "entities": [{"name": "e", "row_key": "{pk}", "rest": {"family": "d", "encoding": "ddb_json"}}]})
    fast = Decoder(spec, json_loads=loads, json_loader_for=loader_for)
    slow = general(Decoder(spec, json_loads=json.loads))
    for cells in ([Cell("d", b"a", 1, b'{"S": "x"}'), Cell("d", b"b", 1, b'{"S": ')],
                  [Cell("d", b"a", 1, b'{"L": [{"N": "1"}]}'), Cell("d", b"b", 1, b'{"X": 123456789012345678901234}')],
                  [Cell("d", b"a", 1, b'{"B": "AAE="}'), Cell("d", b"a", 0, b"older"), Cell("d", b"c", 1, b"nul")]):
        assert outcome(fast.decode_entities, b"k", cells) == outcome(slow.decode_entities, b"k", cells)
    assert fast.decode_entities(b"k", [Cell("d", b"a", 2, b'{"B": "AAE="}'), Cell("d", b"a", 1, b"older")]) == [
        ("e", {"pk": {"S": "k"}, "a": {"B": b"\x00\x01"}})]


@given(st.lists(st.sampled_from(["%", "2", "5", "3", "#", "|", "A", "c", "7", "é", "%25", "%23", "%7C", "%7c",
                                 "%C3%A9", "%2", "%zz"]), max_size=10).map("".join),
       st.sampled_from(["#", "|", ":", "2", "é", "##", "%"]))
def test_unescaping_a_key_value_is_unquoting_it(text, delimiter):
    def result(unescape):
        try:
            return unescape(text)
        except (ValueError, UnicodeDecodeError) as err:
            return type(err)

    assert result(_unescaper(delimiter)) == result(lambda t: unescape_delimiter(t, delimiter))
    if delimiter not in ("2", "%"):  # a hex digit or `%` as delimiter: escape_delimiter's own text is ambiguous
        assert _unescaper(delimiter)(escape_delimiter(text, delimiter)) == text


def test_the_decode_error_of_a_key_without_its_delimiter_is_kept():
    from ddb2bt.mappers.decode import TemplateReader

    reader = TemplateReader("{a}#{b}", on_delimiter="escape")
    assert reader.read("x%23y%25#z") == {"a": "x#y%", "b": "z"}
    try:
        reader.read("xz")
    except DecodeError as err:
        assert "lacks the delimiter after {a}" in str(err)
    else:
        raise AssertionError("read a key without its delimiter")
