"""Cell encodings: DynamoDB value -> Bigtable bytes, and back.

Every encoder has a decoder; tests round-trip each one. Encoders refuse values they cannot
represent exactly (an int64 with a fraction, a float64 whose text would change) rather than
rounding: the item is dead-lettered with the reason.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from decimal import Decimal

from .attrvalue import AttributeValueError, binary, is_canonical_number, kind_of, number_text, to_export_json, to_json
from .numbers import DecimalError, canonical_text, parse_number
from .spec import Encoding

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_FLOAT = struct.Struct(">d")


class EncodingError(ValueError):
    """A value that the column's encoding cannot represent exactly."""


def _expect(value: dict, tag: str, encoding: str):
    found, payload = kind_of(value)
    if found != tag:
        raise EncodingError(f"encoding {encoding} needs a {tag} value, got {found}")
    return payload


def encode_utf8(value: dict) -> bytes:
    return _expect(value, "S", "utf8").encode()


def encode_decimal(value: dict) -> bytes:
    return number_text(_expect(value, "N", "decimal")).encode()


def encode_int64(value: dict) -> bytes:
    text = _expect(value, "N", "int64")
    try:
        number = int(text) if text.lstrip("-").isdigit() else parse_number(text)
    except DecimalError as err:
        raise EncodingError(str(err)) from None
    if isinstance(number, Decimal):
        if number != number.to_integral_value():
            raise EncodingError(f"{text} is not an integer; int64 cannot hold it (use decimal)")
        number = int(number)
    if not _INT64_MIN <= number <= _INT64_MAX:
        raise EncodingError(f"{text} does not fit in a 64-bit signed integer (use decimal)")
    return number.to_bytes(8, "big", signed=True)


def encode_float64(value: dict) -> bytes:
    text = number_text(_expect(value, "N", "float64"))
    as_float = float(text)
    # Exact at the decimal level: the float's shortest text must give the same number back.
    if Decimal(repr(as_float)) != Decimal(text):
        raise EncodingError(f"{text} is not exactly representable as float64 (use decimal)")
    return _FLOAT.pack(as_float)


def encode_bytes(value: dict) -> bytes:
    return binary(_expect(value, "B", "bytes"))


def encode_bool(value: dict) -> bytes:
    return b"\x01" if _expect(value, "BOOL", "bool") else b"\x00"


def encode_json(value: dict) -> bytes:
    return to_json(value).encode()


def encode_ddb_json(value: dict) -> bytes:
    """Lossless typed JSON (the AttributeValue itself), binaries as base64."""
    return json.dumps(to_export_json(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


_BY_TYPE: dict[str, Callable[[dict], bytes]] = {
    "S": encode_utf8,
    "N": encode_decimal,
    "B": encode_bytes,
    "BOOL": encode_bool,
    "NULL": lambda value: b"",
}


def encode_auto(value: dict) -> bytes:
    """S utf8, N decimal text, B raw, BOOL one byte, NULL empty, collections compact JSON."""
    tag = next(iter(value))
    return _BY_TYPE.get(tag, encode_json)(value)


ENCODERS: dict[Encoding, Callable[[dict], bytes]] = {
    Encoding.auto: encode_auto,
    Encoding.utf8: encode_utf8,
    Encoding.decimal: encode_decimal,
    Encoding.int64: encode_int64,
    Encoding.float64: encode_float64,
    Encoding.bytes: encode_bytes,
    Encoding.bool: encode_bool,
    Encoding.json: encode_json,
    Encoding.ddb_json: encode_ddb_json,
}


def encoder_for(encoding: Encoding) -> Callable[[dict], bytes]:
    """The encoder, wrapped so that every failure is an EncodingError naming the encoding."""
    encode = ENCODERS[encoding]

    def checked(value: dict) -> bytes:
        try:
            return encode(value)
        except EncodingError:
            raise
        except (AttributeValueError, DecimalError, ValueError, TypeError) as err:
            raise EncodingError(f"{encoding.value}: {err}") from None

    fast = _FAST.get(encoding)
    return fast(checked) if fast else checked


# Fast paths for the common, well-formed values (profiled: the generic path's tag checks and call
# layers were a third of the mapper's time). Anything unusual falls through to `checked`, which
# gives the exact same result or error.


def _fast_utf8(checked: Callable[[dict], bytes]) -> Callable[[dict], bytes]:
    def encode(value: dict) -> bytes:
        payload = value.get("S")
        if payload.__class__ is str and len(value) == 1:
            try:
                return payload.encode()
            except UnicodeEncodeError:  # a lone surrogate: let the checked path word the error
                pass
        return checked(value)

    return encode


def _fast_decimal(checked: Callable[[dict], bytes]) -> Callable[[dict], bytes]:
    def encode(value: dict) -> bytes:
        payload = value.get("N")
        if payload.__class__ is str and len(value) == 1 and is_canonical_number(payload):
            return payload.encode()
        return checked(value)

    return encode


def _fast_int64(checked: Callable[[dict], bytes]) -> Callable[[dict], bytes]:
    def encode(value: dict) -> bytes:
        payload = value.get("N")
        if payload.__class__ is str and len(value) == 1 and len(payload) < 19 and payload.isdigit():
            return int(payload).to_bytes(8, "big", signed=True)  # < 10**18: always fits
        return checked(value)

    return encode


def _fast_bool(checked: Callable[[dict], bytes]) -> Callable[[dict], bytes]:
    def encode(value: dict) -> bytes:
        payload = value.get("BOOL")
        if payload.__class__ is bool and len(value) == 1:
            return b"\x01" if payload else b"\x00"
        return checked(value)

    return encode


def _fast_auto(checked: Callable[[dict], bytes]) -> Callable[[dict], bytes]:
    def encode(value: dict) -> bytes:
        if len(value) == 1:
            payload = value.get("S")
            if payload.__class__ is str:
                try:
                    return payload.encode()
                except UnicodeEncodeError:
                    pass
            else:
                payload = value.get("N")
                if payload.__class__ is str and is_canonical_number(payload):
                    return payload.encode()
        return checked(value)

    return encode


_FAST: dict[Encoding, Callable] = {
    Encoding.utf8: _fast_utf8,
    Encoding.decimal: _fast_decimal,
    Encoding.int64: _fast_int64,
    Encoding.bool: _fast_bool,
    Encoding.auto: _fast_auto,
}


# --------------------------------------------------------------------------- decoders


def _json_value(data: bytes):
    return json.loads(data, parse_float=Decimal, parse_int=Decimal)


def _decode_float64(data: bytes) -> dict:
    return {"N": canonical_text(Decimal(repr(_FLOAT.unpack(data)[0])))}


DECODERS: dict[Encoding, Callable[[bytes], object]] = {
    Encoding.utf8: lambda data: {"S": data.decode()},
    Encoding.decimal: lambda data: {"N": data.decode()},
    Encoding.int64: lambda data: {"N": str(int.from_bytes(data, "big", signed=True))},
    Encoding.float64: _decode_float64,
    Encoding.bytes: lambda data: {"B": data},
    Encoding.bool: lambda data: {"BOOL": data == b"\x01"},
    # Plain JSON loses DynamoDB's type tags (a set reads back as a list): it decodes to plain values.
    Encoding.json: _json_value,
    Encoding.ddb_json: lambda data: json.loads(data, parse_float=Decimal),
}


def decode(data: bytes, encoding: Encoding, dynamodb_type: str | None = None):
    """Bytes written with `encoding` back to a DynamoDB value (plain values for `json`).

    `auto` needs the DynamoDB type it was chosen for (`dynamodb_type`).
    """
    if encoding is Encoding.auto:
        if dynamodb_type is None:
            raise EncodingError("decoding auto needs the DynamoDB type")
        if dynamodb_type == "NULL":
            return {"NULL": True}
        chosen = {"S": Encoding.utf8, "N": Encoding.decimal, "B": Encoding.bytes, "BOOL": Encoding.bool}
        return decode(data, chosen.get(dynamodb_type, Encoding.json))
    return DECODERS[encoding](data)
