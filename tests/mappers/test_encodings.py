"""Every encoding has a decoder: round trips, and refusals instead of silent rounding."""

import base64
import json
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ddb2bt.mappers.attrvalue import to_json, to_plain
from ddb2bt.mappers.encodings import EncodingError, decode, encoder_for
from ddb2bt.mappers.spec import Encoding

ROUND_TRIPS = [
    (Encoding.utf8, {"S": "héllo # wörld"}),
    (Encoding.decimal, {"N": "12345678901234567890123456789012345678"}),
    (Encoding.decimal, {"N": "-0.000000000000000000000000000000000001"}),
    (Encoding.int64, {"N": "-9223372036854775808"}),
    (Encoding.int64, {"N": "9223372036854775807"}),
    (Encoding.int64, {"N": "3"}),
    (Encoding.float64, {"N": "0.1"}),
    (Encoding.float64, {"N": "-2.5"}),
    (Encoding.bytes, {"B": b"\x00\xffraw"}),
    (Encoding.bool, {"BOOL": True}),
    (Encoding.bool, {"BOOL": False}),
]


@pytest.mark.parametrize("encoding, value", ROUND_TRIPS)
def test_scalar_round_trip(encoding, value):
    assert decode(encoder_for(encoding)(value), encoding) == value


TYPE_CLASHES = [{"S": "42"}, {"N": "42"}, {"B": b"42"}, {"NULL": True}, {"S": ""}, {"B": b""}, {"BOOL": True},
                {"S": "true"}, {"SS": ["a"]}, {"L": [{"S": "a"}]}, {"S": '{"N":"42"}'}, {"L": []}, {"M": {}}]  # fmt: skip


@pytest.mark.parametrize("value", [value for _, value in ROUND_TRIPS] + TYPE_CLASHES)
def test_auto_round_trips_every_type_without_being_told(value):
    assert decode(encoder_for(Encoding.auto)(value), Encoding.auto) == value


def test_auto_keeps_types_apart_and_strings_readable():
    encoded = [encoder_for(Encoding.auto)(value) for value in TYPE_CLASHES]
    assert len(set(encoded)) == len(encoded)  # issue 10: S "42", N 42 and B "42" were the same bytes
    assert encoder_for(Encoding.auto)({"S": "héllo"}) == "héllo".encode()
    assert encoder_for(Encoding.auto)({"N": "30.0"}) == b'{"N":"30"}'  # canonical decimal text


def test_int64_is_increment_compatible_big_endian():
    assert encoder_for(Encoding.int64)({"N": "156"}) == (156).to_bytes(8, "big", signed=True)
    assert encoder_for(Encoding.int64)({"N": "-1"}) == b"\xff" * 8


@pytest.mark.parametrize(
    "encoding, value, message",
    [
        (Encoding.int64, {"N": "1.5"}, "not an integer"),
        (Encoding.int64, {"N": "9223372036854775808"}, "does not fit"),
        (Encoding.float64, {"N": "12345678901234567890123456789012345678"}, "not exactly representable"),
        (Encoding.utf8, {"N": "3"}, "needs a S value, got N"),
        (Encoding.bool, {"S": "true"}, "needs a BOOL value"),
    ],
)
def test_refuses_instead_of_rounding(encoding, value, message):
    with pytest.raises(EncodingError, match=message):
        encoder_for(encoding)(value)


NESTED = {
    "M": {
        "discount": {"N": "0.10"},
        "big": {"N": "12345678901234567890123456789012345678"},
        "tags": {"SS": ["b", "a"]},
        "nums": {"NS": ["10", "9", "-1.5"]},
        "blob": {"B": b"\x01\x02"},
        "list": {"L": [{"S": "x"}, {"NULL": True}, {"BOOL": False}]},
    }
}


PLAIN = {"M": {k: v for k, v in NESTED["M"].items() if k not in ("tags", "nums", "blob")}}


def test_json_keeps_every_digit_sorts_deterministically_and_reads_back():
    text = encoder_for(Encoding.json)(PLAIN).decode()
    assert '"big":12345678901234567890123456789012345678' in text
    assert '"discount":0.1' in text
    assert text == to_json(PLAIN)
    decoded = decode(text.encode(), Encoding.json)
    assert decoded["M"]["big"] == {"N": "12345678901234567890123456789012345678"}
    assert decoded == {"M": {**PLAIN["M"], "discount": {"N": "0.1"}}}  # the canonical decimal text


@pytest.mark.parametrize("value", [{"B": b"x"}, {"SS": ["a"]}, {"M": {"n": {"NS": ["1"]}}}, {"L": [{"BS": [b"x"]}]}])
def test_json_refuses_types_it_cannot_bring_back(value):
    with pytest.raises(EncodingError, match="use ddb_json"):
        encoder_for(Encoding.json)(value)


def test_ddb_json_round_trips_losslessly_with_types():
    decoded = decode(encoder_for(Encoding.ddb_json)(NESTED), Encoding.ddb_json)
    assert decoded["M"]["tags"] == {"SS": ["a", "b"]}  # members sorted: the same set always gives the same bytes
    assert decoded["M"]["blob"] == {"B": b"\x01\x02"}
    assert to_plain(decoded) == to_plain(NESTED)
    assert json.loads(to_json(NESTED))["nums"] == ["-1.5", "9", "10"]  # previews: numeric order, exact text


def test_export_style_base64_binary_is_accepted():
    assert encoder_for(Encoding.bytes)({"B": base64.b64encode(b"raw").decode()}) == b"raw"


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_int64_property(number):
    assert decode(encoder_for(Encoding.int64)({"N": str(number)}), Encoding.int64) == {"N": str(number)}


@given(st.text())
def test_utf8_property(text):
    assert decode(encoder_for(Encoding.utf8)({"S": text}), Encoding.utf8) == {"S": text}


@given(st.floats(min_value=-1e125, max_value=1e125).filter(lambda x: x == 0 or abs(x) >= 1e-130))
def test_float64_property_exact_at_decimal_level(number):
    text = repr(number)
    if "e" in text or "inf" in text:
        text = format(Decimal(text), "f")
    decoded = decode(encoder_for(Encoding.float64)({"N": text}), Encoding.float64)
    assert Decimal(decoded["N"]) == Decimal(text)


def test_json_of_plain_value_parses_as_standard_json():
    assert json.loads(to_json(NESTED))["tags"] == ["a", "b"]


def test_every_encoding_has_its_encoder_and_decoder():
    from ddb2bt.mappers.encodings import DECODERS, ENCODERS
    from ddb2bt.mappers.spec import Encoding

    assert set(ENCODERS) == set(DECODERS) == set(Encoding)


@pytest.mark.parametrize("member", [{"S": "a"}, {"N": "-1.5"}, {"B": b"\x00\xff"}], ids=["S", "N", "B"])
def test_a_set_encoding_reads_its_members_back_as_the_set_type(member):
    """The set type of SET_TYPES is the type of the members the encoding decodes (infer reads the table back)."""
    from ddb2bt.mappers.encodings import SET_TYPES, decode, encoder_for

    (tag,) = member
    (encoding,) = [encoding for encoding, set_type in SET_TYPES.items() if set_type == tag + "S"]
    assert decode(encoder_for(encoding)(member), encoding) == member
