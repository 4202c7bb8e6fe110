"""Cell encodings: DynamoDB value -> Bigtable bytes, and back.

Every encoder has a decoder; tests round-trip each one. Encoders refuse values they cannot
represent exactly (an int64 with a fraction, a float64 whose text would change) rather than
rounding: the item is dead-lettered with the reason.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from typing import Any
from decimal import Decimal

from .attrvalue import (
    _json_string, AttributeValueError, binary, from_json, from_typed_json, is_canonical_number, kind_of, number_text, to_json, to_typed_json,
)
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
        number = int(text) if text.isascii() and text.lstrip("-").isdigit() else parse_number(text)
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
    """Plain JSON; refuses B and sets, whose type plain JSON cannot bring back."""
    return to_json(value, strict=True).encode()


def encode_ddb_json(value: dict) -> bytes:
    """Lossless typed JSON (the AttributeValue itself): canonical numbers, sorted set members, base64 binaries."""
    return json.dumps(to_typed_json(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def encode_auto(value: dict) -> bytes:
    """A string as its UTF-8 text; anything else (and an empty string, or one starting with `{`) as typed JSON.

    Readable for the common case and lossless for all: a cell starting with `{` is typed JSON, any
    other cell is a string, so S "42", N 42, B "42", NULL and S "" all stay apart; and no value is
    b"", which layout list keeps for the empty list.
    """
    payload = value.get("S")
    if payload and payload.__class__ is str and len(value) == 1 and payload[0] != "{":
        return payload.encode()
    return encode_ddb_json(value)


SET_TYPES: dict[Encoding, str] = {Encoding.utf8: "SS", Encoding.decimal: "NS", Encoding.bytes: "BS"}
"""The encodings a `layout: set` column may use, with the set type it reads back as: a set's type is
the encoding of its members (infer reads this table the other way round)."""

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
        if payload.__class__ is str and len(value) == 1 and len(payload) < 19 and payload.isdigit() and payload.isascii():
            return int(payload).to_bytes(8, "big", signed=True)  # < 10**18: always fits
        return checked(value)

    return encode


def _fast_float64(checked: Callable[[dict], bytes]) -> Callable[[dict], bytes]:
    def encode(value: dict) -> bytes:
        payload = value.get("N")
        if payload.__class__ is str and len(value) == 1 and not payload.startswith("-0"):  # -0: the sign is dropped
            try:
                as_float = float(payload)
            except ValueError:
                return checked(value)
            shortest = repr(as_float)
            # The text is the float's shortest text (plain digits, no exponent, inf or nan): exact, and canonical.
            if (shortest == payload or shortest[-2:] == ".0" and shortest[:-2] == payload) and "e" not in shortest \
                    and "n" not in shortest:
                return _FLOAT.pack(as_float)
        return checked(value)

    return _compiled_first("float64_bytes", encode)  # None: a text that is not its float's shortest, or anything odd


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
                if payload and payload[0] != "{":
                    try:
                        return payload.encode()
                    except UnicodeEncodeError:
                        pass
            else:
                payload = value.get("N")
                if payload.__class__ is str and is_canonical_number(payload):
                    return b'{"N":"%s"}' % payload.encode()
        return checked(value)

    return _compiled_first("auto_bytes", encode)  # None: B, sets, a number to make canonical, anything odd


def _fast_ddb_json(checked: Callable[[dict], bytes]) -> Callable[[dict], bytes]:
    return _compiled_first("typed_json_bytes", checked)  # None: B, sets, a number to make canonical, anything odd


def _compiled_first(name: str, python: Callable[[dict], bytes]) -> Callable[[dict], bytes]:
    """`python` behind mappers/_json.c's function `name` where the module is built: it answers the values it takes
    (never with b""), None for the others, which `python` answers."""
    if _compiled is None:
        return python
    compiled = getattr(_compiled, name)

    def encode(value: dict) -> bytes:
        return compiled(value) or python(value)

    return encode


def _fast_json(checked: Callable[[dict], bytes]) -> Callable[[dict], bytes]:
    def encode(value: dict) -> bytes:
        try:
            return _json_text(value).encode()
        except Exception:  # noqa: BLE001 - B, sets or anything odd: the checked path says what
            return checked(value)

    if _compiled_json is None:
        return encode
    compiled = _compiled_json

    def encode_compiled(value: dict) -> bytes:
        return compiled(value) or encode(value)  # None: a value it leaves to Python (odd ones, refusals)

    return encode_compiled


# The compiled encoders (mappers/_json.c): each takes the usual values and gives None for anything else, which the
# Python functions answer; not built (no C compiler where the package was installed): the Python functions, same bytes.
# Read when an encoder is made (encoder_for), so a spec compiled with either set to None runs without it.
_compiled: Any
_compiled_json: Callable[[dict], bytes | None] | None
try:
    from . import _json as _compiled
except ImportError:
    _compiled = None
_compiled_json = None if _compiled is None else _compiled.json_bytes


def _json_text(value: dict) -> str:
    """to_json(value, strict=True) for S, N, BOOL, NULL, L and M, as one expression per value (no parts list)."""
    ((tag, payload),) = value.items()
    if tag == "S":
        return _json_string(payload)
    if tag == "N":
        return number_text(payload)
    if tag == "M":
        return "{" + ",".join([_json_string(name) + ":" + _json_text(payload[name]) for name in sorted(payload)]) + "}"
    if tag == "L":
        return "[" + ",".join([_json_text(element) for element in payload]) + "]"
    if tag == "BOOL":
        return "true" if payload else "false"
    if tag == "NULL":
        return "null"
    raise AttributeValueError(tag)  # B and sets: the checked path refuses them, in words


_FAST: dict[Encoding, Callable] = {
    Encoding.utf8: _fast_utf8,
    Encoding.decimal: _fast_decimal,
    Encoding.int64: _fast_int64,
    Encoding.float64: _fast_float64,
    Encoding.bool: _fast_bool,
    Encoding.auto: _fast_auto,
    Encoding.json: _fast_json,
    Encoding.ddb_json: _fast_ddb_json,
}


# --------------------------------------------------------------------------- decoders


def _json_value(data: bytes):
    return json.loads(data, parse_float=Decimal, parse_int=Decimal)


def _decode_float64(data: bytes) -> dict:
    return {"N": canonical_text(Decimal(repr(_FLOAT.unpack(data)[0])))}


def _decode_auto(data: bytes) -> dict:
    return _decode_ddb_json(data) if data[:1] == b"{" else {"S": data.decode()}


def _decode_ddb_json(data: bytes) -> dict:
    return from_typed_json(json.loads(data))


DECODERS: dict[Encoding, Callable[[bytes], dict]] = {
    Encoding.utf8: lambda data: {"S": data.decode()},
    Encoding.decimal: lambda data: {"N": data.decode()},
    Encoding.int64: lambda data: {"N": str(int.from_bytes(data, "big", signed=True))},
    Encoding.float64: _decode_float64,
    Encoding.bytes: lambda data: {"B": data},
    Encoding.bool: lambda data: {"BOOL": data == b"\x01"},
    Encoding.json: lambda data: from_json(_json_value(data)),
    Encoding.ddb_json: _decode_ddb_json,
    Encoding.auto: _decode_auto,
}


def decode(data: bytes, encoding: Encoding) -> dict:
    """Bytes written with `encoding` back to the DynamoDB value (AttributeValue, `B` as bytes), types included."""
    return DECODERS[encoding](data)
