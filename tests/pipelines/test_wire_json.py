"""wire_json.loads is json.loads, faster: the same value (ints exact, key order, floats) or the same error."""

from __future__ import annotations

import copy
import gc
import json
import weakref

import boto3
import pytest
from hypothesis import given, settings, strategies as st

from ddb2bt.mappers.attrvalue import to_export_json
from ddb2bt.pipelines.dynamodb import wire_json
from ddb2bt.pipelines.dynamodb.client import put_items
from ddb2bt.pipelines.dynamodb.scan import ClientSettings, scan_client, scan_pages

from .export_fixtures import item_key, make_items

REGION = "us-east-1"

big_ints = st.integers(min_value=-(10**40), max_value=10**40) | st.sampled_from([2**63, 2**64 - 1, 2**64, -(2**63) - 1])
scalars = (st.none() | st.booleans() | big_ints | st.floats(allow_nan=True, allow_infinity=True)
           | st.text() | st.text(alphabet="0123456789 -", min_size=18))
documents = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                         | st.dictionaries(st.text(max_size=5), inner, max_size=4), max_leaves=12)


def outcome(parse, data: bytes):
    """What a parser makes of ``data``: the value's repr (types, key order, float digits) or the error."""
    try:
        return "value", repr(parse(data))
    except ValueError as err:
        return "error", type(err).__name__, str(err)


@settings(max_examples=400, deadline=None)
@given(documents, st.booleans(), st.sampled_from([(", ", ": "), (",", ":")]), st.sampled_from(["", " ", "\n", "\t"]))
def test_any_json_document_parses_to_what_json_loads_gives(document, ascii_only, separators, pad):
    text = pad + json.dumps(document, ensure_ascii=ascii_only, separators=separators) + pad
    data = text.encode("utf-8", "surrogatepass")  # a lone surrogate: bytes json refuses, so must wire_json
    assert outcome(wire_json.loads, data) == outcome(json.loads, data)


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=60) | st.from_regex(rb'\A[\[\]{}":,0-9 eE.+\-tfrunlsa\\]{0,40}\Z'))
def test_any_bytes_give_the_same_value_or_the_same_error(data):
    assert outcome(wire_json.loads, data) == outcome(json.loads, data)


@pytest.mark.parametrize("data", [
    b'{"N": 123456789012345678901234567890}',  # orjson alone would give a float
    b'[-18446744073709551616]',
    b"99999999999999999999",
    b'{"a":\n 100000000000000000000}',
    b'{"Item": {"n": {"N": "12345678901234567890123456789012345678"}}, "c": 3}',  # digits in text: orjson's path
    b'\xef\xbb\xbf{"a": 1}',  # a byte-order mark, which json.loads of bytes skips
    b'{"a": NaN, "b": -Infinity, "c": 1e400}',
    b'"\\ud83d"',
    b'{"a": 1, "a": 2, "b": 3}',
    '{"s": "é漢\U0001f600"}'.encode("utf-16"),
])
def test_what_orjson_reads_otherwise_is_read_as_json_reads_it(data):
    assert outcome(wire_json.loads, data) == outcome(json.loads, data)
    assert outcome(json.loads, data)[0] == "value"


def test_only_a_digit_run_that_may_be_a_bare_number_is_sent_to_json():
    may = wire_json._may_hold_big_int
    assert not may(b'{"N": "12345678901234567890123456789012345678", "S": "x1234567890123456789"}')
    assert may(b'{"N": 12345678901234567890}') and may(b"[1,-12345678901234567890]") and may(b"12345678901234567890")
    assert may(b'{"S": "a 12345678901234567890"}')  # needlessly (text after a space), still exact
    assert may(b"[-9223372036854775809]")  # 19 digits, below -2**63
    assert not may(b'{"a": 123456789012345678}')  # 18 digits fit 64 bits: orjson keeps them an int


@pytest.mark.servers
def test_scan_pages_hold_what_botocore_parses_b_as_base64(dynalite, unique_name):
    """Real 1 MB pages from dynalite, kept raw and parsed by wire_json, equal botocore's own parse of them."""
    client = boto3.client("dynamodb", region_name=REGION, endpoint_url=dynalite.endpoint)
    items = make_items(1500, padding=1500)
    items[0]["text"] = {"S": "é漢\U0001f600 \u2028 \\ \" 12345678901234567890"}
    client.create_table(TableName=unique_name, BillingMode="PAY_PER_REQUEST",
                        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
                        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                              {"AttributeName": "sk", "AttributeType": "N"}])
    client.get_waiter("table_exists").wait(TableName=unique_name, WaiterConfig={"Delay": 0.2})
    assert put_items(client, unique_name, items) == len(items)
    reference = [item for page in client.get_paginator("scan").paginate(TableName=unique_name)
                 for item in page["Items"]]
    ours = [item for page in scan_pages(scan_client(ClientSettings(region=REGION, endpoint_url=dynalite.endpoint)),
                                        unique_name) for item in page.items]
    assert len(ours) == len(items)
    assert sorted(ours, key=item_key) == sorted(map(to_export_json, reference), key=item_key)


@settings(max_examples=300, deadline=None)
@given(st.lists(documents, min_size=1, max_size=6), st.sampled_from([(", ", ": "), (",", ":")]))
def test_each_line_of_a_block_parses_to_what_json_loads_gives(lines, separators):
    """loader_for asks about bare big integers once per block: each line still gets json.loads's value (or error)."""
    texts = [json.dumps(line, separators=separators) for line in lines]
    block = "\n".join(texts).encode("utf-8", "surrogatepass")
    loads = wire_json.loader_for(block)
    for line in block.split(b"\n"):
        assert outcome(loads, line) == outcome(json.loads, line)


def test_a_block_with_a_bare_big_integer_on_any_line_checks_every_line():
    assert wire_json.loader_for(b'{"a": "x"}\n12345678901234567890') is wire_json.loads
    assert wire_json.loader_for(b'{"a": "x"}\n{"b": -12345678901234567890}') is wire_json.loads
    assert wire_json.loader_for(b'{"N": "12345678901234567890"}\n{"a": 1}') is not wire_json.loads


# The look for a bare big integer, compiled (_wire_json.c), against the Python function it stands in for.

compiled_look = wire_json._compiled_may_hold_big_int
needs_module = pytest.mark.skipif(compiled_look is None, reason="pipelines/dynamodb/_wire_json.c not built")


def model_may_hold_big_int(data: bytes) -> bool:
    """Written apart from both: some maximal run of 19+ ASCII digits starts the data or follows, after at most one
    '-', the start or one of ``:,[`` and JSON's whitespace."""
    runs = [(start, end) for start, end in _digit_runs(data) if end - start >= 19]
    for start, _end in runs:
        before = data[:start]
        if before.endswith(b"-"):
            before = before[:-1]
        if not before or before[-1:] in (b":", b",", b"[", b" ", b"\t", b"\r", b"\n"):
            return True
    return False


def _digit_runs(data: bytes):
    start = None
    for at, byte in enumerate(data + b"x"):
        if 0x30 <= byte <= 0x39:
            start = at if start is None else start
        elif start is not None:
            yield start, at
            start = None


def test_the_compiled_look_is_built_wherever_a_c_compiler_is():
    from tests.compiled import require_built

    require_built(compiled_look, "pipelines/dynamodb/_wire_json.c")


digit_texts = st.lists(st.sampled_from([b"1", b"0", b"9", b"5" * 18, b"7" * 19, b"3" * 25, b"-", b"--", b":", b",",
                                        b"[", b" ", b"\t", b"\r", b"\n", b'"', b"a", b".", b"e", b"{", b"}", b"\x00",
                                        b"\xff", b"\xd9\xa3"]), max_size=40).map(b"".join)


@needs_module
@settings(max_examples=1500, deadline=None)
@given(digit_texts | st.binary(max_size=80) | st.from_regex(rb"\A[0-9\-:,\[ \t\r\n\"a]{0,120}\Z"))
def test_the_compiled_look_answers_as_the_python_look_for_any_bytes(data):
    expected = wire_json._python_may_hold_big_int(data)
    assert compiled_look(data) is expected
    assert model_may_hold_big_int(data) is expected  # and both as the model says


@needs_module
@pytest.mark.parametrize("data", [
    b"", b"1" * 18, b"1" * 19, b"-" + b"1" * 19, b"--" + b"1" * 19, b"a" + b"1" * 19, b"a-" + b"1" * 19,
    b"x" * 18 + b"1" * 19, b"x" * 17 + b"1" * 19, b"1" * 18 + b"x" + b"1" * 19, b"1" * 18 + b":" + b"1" * 19,
    b'"' + b"1" * 40 + b" " + b"2" * 19, b'"' + b"1" * 40 + b" " + b"2" * 18, b"\xd9\xa3" * 19, b"[" + b"1" * 19 + b"]",
])
def test_the_compiled_look_at_the_edges(data):
    assert compiled_look(data) is wire_json._python_may_hold_big_int(data) is model_may_hold_big_int(data)


@needs_module
def test_the_compiled_look_leaves_what_is_not_bytes_to_python():
    assert compiled_look(bytearray(b"12345678901234567890")) is None
    assert compiled_look("12345678901234567890") is None
    assert wire_json._may_hold_big_int(bytearray(b"12345678901234567890")) is True  # the Python function answered


# Parsed items taken off the collector's lists (wire_json.untracked): the same value, every object still alive.

needs_untrack = pytest.mark.skipif(wire_json._compiled_untrack is None, reason="pipelines/dynamodb/_wire_json.c not built")


def containers(value):
    """Every dict and list in ``value`` (itself included)."""
    found = [value] if isinstance(value, (dict, list)) else []
    for inner in (value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()):
        found += containers(inner)
    return found


@needs_untrack
@settings(max_examples=300, deadline=None)
@given(documents)
def test_an_untracked_value_is_the_same_value_with_no_container_tracked(document):
    data = json.dumps(document).encode("utf-8", "surrogatepass")
    try:
        value = wire_json.loads(data)
    except ValueError:
        return
    before = copy.deepcopy(value)
    assert wire_json.untracked(value) is value
    assert repr(value) == repr(before)  # the same value, types and key order
    assert not [c for c in containers(value) if gc.is_tracked(c)]
    gc.collect()
    assert repr(value) == repr(before)  # a collection frees nothing it holds


@needs_untrack
def test_what_an_untracked_item_holds_stays_alive_through_collections():
    class Held:  # a tracked object held only by the untracked tree, in a cycle of its own
        pass

    held = Held()
    held.me = held
    alive = weakref.ref(held)
    item = {"l": {"L": [{"M": {"x": {"S": "a"}}}, held]}}
    wire_json.untracked(item)
    del held
    gc.collect()
    assert alive() is not None and item["l"]["L"][1] is alive()
    del item  # reference counting frees the tree; the collector then finds the object's own cycle
    gc.collect()
    assert alive() is None


@needs_untrack
def test_a_dict_is_tracked_again_once_a_container_is_put_into_it():
    item = wire_json.untracked({"a": {"L": [{"S": "x"}]}})
    assert not gc.is_tracked(item)
    item["b"] = [1]
    assert gc.is_tracked(item)  # CPython's own rule: a cycle through it could still be collected


@needs_untrack
def test_deep_nesting_and_other_types_are_left_as_they_are():
    deep: list = []
    for _ in range(1000):
        deep = [deep]
    wire_json.untracked(deep)  # past UNTRACK_DEPTH the inner lists stay tracked; no recursion to the end
    inner = deep
    for _ in range(300):
        inner = inner[0]
    assert gc.is_tracked(inner) and not gc.is_tracked(deep)

    class Sub(dict):
        pass

    odd = {"a": Sub(b=[1]), "t": ([2],)}
    wire_json.untracked(odd)
    assert gc.is_tracked(odd["a"]) and gc.is_tracked(odd["t"][0])  # only exact dicts and lists are walked


def test_without_the_module_untracked_is_the_value_as_it_is(monkeypatch):
    monkeypatch.setattr(wire_json, "_compiled_untrack", None)
    item = {"a": {"L": [{"S": "x"}]}}
    assert wire_json.untracked(item) is item and gc.is_tracked(item)


@needs_untrack
def test_the_export_reader_gives_untracked_items(tmp_path):
    from ddb2bt.pipelines.dynamodb import export
    from ddb2bt.pipelines.dynamodb.export_writer import write_export

    items = make_items(30, padding=10)
    folder = write_export(tmp_path, items, files=1)
    read = [item for data_file in export.read_manifest(folder).files for item in export.iter_file_items(data_file.path)]
    assert sorted(read, key=item_key) == sorted(map(to_export_json, items), key=item_key)
    assert not [c for item in read for c in containers(item) if gc.is_tracked(c)]
