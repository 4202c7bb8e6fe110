"""The rollback writer's raw BatchWriteItem bodies (`pipelines/dynamodb/sink.py` `send_requests_raw`, `request_body`)
against what botocore's own serialiser sends for the same call: the same JSON value for every DynamoDB type,
written by orjson (compact, non-ASCII as UTF-8), and where orjson refuses the text, botocore's bytes exactly."""

from __future__ import annotations

import json
from typing import Any

import botocore.session
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddb2bt.pipelines.dynamodb.sink import request_body, send_requests_raw

from .roundtrip_cases import ANY, KEY_TEXT


def _client(raw: bool) -> Any:
    client = botocore.session.get_session().create_client(
        "dynamodb", region_name="us-east-1", endpoint_url="http://127.0.0.1:9",
        aws_access_key_id="testing", aws_secret_access_key="testing")
    if raw:
        send_requests_raw(client)
    return client


CLIENTS = {raw: _client(raw) for raw in (False, True)}


def sent_body(raw: bool, items: list[dict], **more: Any) -> bytes:
    """The body ``batch_write_item`` would send (captured before it leaves: the endpoint is closed)."""
    client, captured = CLIENTS[raw], []

    def grab(request: Any, **_: Any) -> None:
        captured.append(request.body)
        raise RuntimeError("captured")

    client.meta.events.register("before-send.dynamodb.BatchWriteItem", grab, unique_id="test-grab")
    try:
        with pytest.raises(RuntimeError, match="captured"):
            client.batch_write_item(RequestItems={"T": [{"PutRequest": {"Item": item}} for item in items]}, **more)
    finally:
        client.meta.events.unregister("before-send.dynamodb.BatchWriteItem", unique_id="test-grab")
    return captured[0]


def compact(body: bytes) -> bytes:
    """botocore's body (``json.dumps``: spaces after separators, non-ASCII escaped) in orjson's form."""
    return json.dumps(json.loads(body), separators=(",", ":"), ensure_ascii=False).encode("utf-8")


ITEMS = st.lists(st.dictionaries(KEY_TEXT, ANY, min_size=1, max_size=4), min_size=1, max_size=3)


@settings(max_examples=300, deadline=None)
@given(ITEMS)
def test_raw_bodies_are_botocores_json_for_every_type(items):
    """Generated items of every type (B and BS as bytes, 38-digit and exponent numbers as text, nested maps and lists,
    empty strings and maps, non-ASCII): the raw body is botocore's own, only written compactly with UTF-8 text."""
    ours, botocores = sent_body(True, items), sent_body(False, items)
    assert json.loads(ours) == json.loads(botocores)
    assert ours == compact(botocores)


def test_raw_bodies_keep_the_calls_other_parameters_and_every_special_character():
    item = {"pk": {"S": 'é\u2028"\\\U0001f600\x00\x1f\x7f'}, "Big": {"N": "9" * 38}, "Tiny": {"N": "-1E-130"},
            "Img": {"B": b"\x01\x00\xff"}, "Raw": {"BS": [b"", b"\xfe"]}, "Doc": {"M": {"e": {"M": {}}, "l": {"L": []}}}}
    ours = sent_body(True, [item], ReturnConsumedCapacity="TOTAL", ReturnItemCollectionMetrics="SIZE")
    botocores = sent_body(False, [item], ReturnConsumedCapacity="TOTAL", ReturnItemCollectionMetrics="SIZE")
    assert ours == compact(botocores)
    sent = json.loads(ours)
    assert sent["ReturnConsumedCapacity"] == "TOTAL" and sent["ReturnItemCollectionMetrics"] == "SIZE"
    assert sent["RequestItems"]["T"][0]["PutRequest"]["Item"]["Img"] == {"B": "AQD/"}
    assert sent["RequestItems"]["T"][0]["PutRequest"]["Item"]["Big"] == {"N": "9" * 38}  # text, never a number


def test_what_orjson_refuses_is_sent_as_botocore_sends_it():
    """A lone surrogate is not UTF-8, so orjson refuses it; botocore's json.dumps escapes it (DynamoDB then answers
    for it): the raw body falls back to exactly botocore's bytes."""
    item = {"pk": {"S": "a\ud800b"}, "Img": {"B": b"\x01"}, "Tags": {"SS": ["é"]}}
    assert sent_body(True, [item]) == sent_body(False, [item])


def test_sets_tuples_and_byte_likes_become_wire_json():
    body = json.loads(request_body({"RequestItems": {"T": [{"PutRequest": {"Item": {
        "a": {"BS": (bytearray(b"\x01"), memoryview(b"\x02"))}, "b": {"SS": frozenset({"x"})}}}}]}}))
    assert body["RequestItems"]["T"][0]["PutRequest"]["Item"] == {"a": {"BS": ["AQ==", "Ag=="]}, "b": {"SS": ["x"]}}
    with pytest.raises(TypeError):
        request_body({"x": object()})
