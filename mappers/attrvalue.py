"""DynamoDB wire-format values (AttributeValue JSON): text for keys, exact JSON, plain Python values.

Items arrive as the low-level boto3 client returns them (`B` as bytes) or as exports store them
(`B` as a base64 string); both are accepted everywhere. Numbers stay text until an encoder decides.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from decimal import Decimal
from typing import Any

from .numbers import canonical_text, parse_number



class AttributeValueError(ValueError):
    """A value that cannot be used where the spec puts it."""


CANONICAL_NUMBER = _CANONICAL = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]*[1-9])?")
"""Canonical decimal text (with at most 38 characters and not ``-0``: see :func:`is_canonical_number`)."""


def kind_of(value: dict) -> tuple[str, Any]:
    """The type tag and payload of one AttributeValue (`{"S": "x"}` -> `("S", "x")`)."""
    try:
        (item,) = value.items()
    except ValueError:
        raise AttributeValueError(f"not a DynamoDB AttributeValue: {sorted(value)!r}") from None
    return item


def number_text(text: str) -> str:
    """Canonical decimal text of a DynamoDB number (fast for text already canonical, as DynamoDB returns it)."""
    if is_canonical_number(text):
        return text
    return canonical_text(parse_number(text))


def is_canonical_number(text: str) -> bool:
    """No exponent, no leading or trailing zeros, at most 38 characters: exactly what canonical_text gives."""
    if text.isdigit() and text.isascii():  # most numbers are plain non-negative integers: skip the regex
        return len(text) <= 38 and (text[0] != "0" or len(text) == 1)
    return len(text) <= 38 and _CANONICAL.fullmatch(text) is not None and text != "-0"


def binary(payload: bytes | str) -> bytes:
    """Raw bytes of a `B` payload, whether bytes (boto3) or base64 text (exports)."""
    if isinstance(payload, bytes):
        return payload
    try:
        return base64.b64decode(payload, validate=True)
    except (binascii.Error, TypeError) as err:  # binascii's own words alone ('Incorrect padding') named no value
        shown = json.dumps(payload, default=repr)
        raise AttributeValueError(f"B value {shown[:40]}{'…' if len(shown) > 40 else ''} is not base64 text "
                                  f"({err})") from None


def with_bytes(value: dict) -> dict:
    """The AttributeValue with every `B` payload as bytes (boto3's form), at any depth: base64 text (the export
    form) handed to botocore's serialiser would be encoded a second time."""
    (tag, payload), = value.items()
    if tag == "B":
        return {tag: binary(payload)}
    if tag == "BS":
        return {tag: [binary(member) for member in payload]}
    if tag == "M":
        return {tag: {name: with_bytes(member) for name, member in payload.items()}}
    if tag == "L":
        return {tag: [with_bytes(member) for member in payload]}
    return value


def key_text(value: dict) -> str:
    """Text of a scalar for templates and match conditions: S as is, N canonical, B hex, BOOL true/false."""
    payload = value.get("S")
    if payload is not None and len(value) == 1:
        return payload
    tag, payload = kind_of(value)
    if tag == "S":
        return payload
    if tag == "N":
        return number_text(payload)
    if tag == "B":
        return binary(payload).hex()
    if tag == "BOOL":
        return "true" if payload else "false"
    raise AttributeValueError(f"a {tag} value cannot be used as text in a key, qualifier or condition")


# json.dumps(text, ensure_ascii=False) without building a JSONEncoder per call (same C function)
_json_string = json.encoder.encode_basestring


def _json_parts(value: dict, out: list[str], strict: bool) -> None:
    tag, payload = kind_of(value)
    if tag == "S":
        out.append(_json_string(payload))
    elif tag == "N":
        out.append(number_text(payload))
    elif tag == "BOOL":
        out.append("true" if payload else "false")
    elif tag == "NULL":
        out.append("null")
    elif strict and tag in ("B", "SS", "NS", "BS"):
        raise AttributeValueError(f"plain JSON cannot keep the type of a {tag} value (it would read back as a string or list); use ddb_json")
    elif tag == "B":
        out.append(json.dumps(base64.b64encode(binary(payload)).decode()))
    elif tag in ("SS", "NS", "BS"):
        out.append(json.dumps(sorted_members(tag, payload), ensure_ascii=False).replace(", ", ","))
    elif tag == "L":
        out.append("[")
        for index, element in enumerate(payload):
            if index:
                out.append(",")
            _json_parts(element, out, strict)
        out.append("]")
    elif tag == "M":
        out.append("{")
        for index, name in enumerate(sorted(payload)):
            if index:
                out.append(",")
            out.append(_json_string(name))
            out.append(":")
            _json_parts(payload[name], out, strict)
        out.append("}")
    else:
        raise AttributeValueError(f"unknown DynamoDB type {tag!r}")


def to_json(value: dict, strict: bool = False) -> str:
    """Compact JSON of a value with exact numbers, sorted map keys, sorted set members, base64 binary.

    `strict` refuses what plain JSON cannot bring back typed (B and sets): the `json` encoding's rule.
    """
    out: list[str] = []
    _json_parts(value, out, strict)
    return "".join(out)


def from_json(data: Any) -> dict:
    """The AttributeValue a strict `to_json` text was made from (parsed with Decimal numbers)."""
    if isinstance(data, str):
        return {"S": data}
    if isinstance(data, bool):
        return {"BOOL": data}
    if data is None:
        return {"NULL": True}
    if isinstance(data, Decimal):
        return {"N": canonical_text(data)}
    if isinstance(data, list):
        return {"L": [from_json(element) for element in data]}
    return {"M": {name: from_json(element) for name, element in data.items()}}


def to_typed_json(value: dict) -> Any:
    """The AttributeValue as JSON-ready data with one spelling per value: canonical numbers, sorted set
    members, base64 binaries (what the `ddb_json` and `auto` encodings store)."""
    tag, payload = kind_of(value)
    if tag == "N":
        return {"N": number_text(payload)}
    if tag == "B":
        return {"B": base64.b64encode(binary(payload)).decode()}
    if tag in ("SS", "NS", "BS"):
        return {tag: sorted_members(tag, payload)}
    if tag == "L":
        return {"L": [to_typed_json(element) for element in payload]}
    if tag == "M":
        return {"M": {name: to_typed_json(element) for name, element in payload.items()}}
    if tag in ("S", "BOOL", "NULL"):
        return {tag: payload}
    raise AttributeValueError(f"unknown DynamoDB type {tag!r}")


def from_typed_json(data: dict) -> dict:
    """Inverse of :func:`to_typed_json`: binaries back to bytes."""
    tag, payload = kind_of(data)
    if tag == "B":
        return {"B": base64.b64decode(payload)}
    if tag == "BS":
        return {"BS": [base64.b64decode(member) for member in payload]}
    if tag == "L":
        return {"L": [from_typed_json(element) for element in payload]}
    if tag == "M":
        return {"M": {name: from_typed_json(element) for name, element in payload.items()}}
    return {tag: payload}


def sorted_members(tag: str, members: list) -> list:
    """Set members in a deterministic order: strings and binaries by bytes, numbers by value."""
    if tag == "NS":
        return sorted((number_text(member) for member in members), key=Decimal)
    if tag == "BS":
        return [base64.b64encode(m).decode() for m in sorted(binary(member) for member in members)]
    return sorted(members)


def member_bytes(tag: str, member: Any) -> bytes:
    """Bytes of one set member, used as a qualifier: S utf-8, N canonical text, B raw."""
    if tag == "SS":
        return member.encode()
    if tag == "NS":
        return number_text(member).encode()
    return binary(member)


def to_plain(value: dict) -> Any:
    """Plain Python value (Decimal for numbers, bytes for binary, set for sets) without going through float."""
    tag, payload = kind_of(value)
    if tag == "S" or tag == "BOOL":
        return payload
    if tag == "N":
        return Decimal(number_text(payload))
    if tag == "B":
        return binary(payload)
    if tag == "NULL":
        return None
    if tag == "SS":
        return set(payload)
    if tag == "NS":
        return {Decimal(number_text(member)) for member in payload}
    if tag == "BS":
        return {binary(member) for member in payload}
    if tag == "L":
        return [to_plain(element) for element in payload]
    if tag == "M":
        return {name: to_plain(element) for name, element in payload.items()}
    raise AttributeValueError(f"unknown DynamoDB type {tag!r}")


def to_export_json(value: Any) -> Any:
    """DynamoDB wire format made JSON-safe: bytes become base64 text, as in DynamoDB exports."""
    if isinstance(value, dict):
        return {name: to_export_json(element) for name, element in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_export_json(element) for element in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    return value


def _binary_ok(payload: Any) -> bool:
    if isinstance(payload, bytes):
        return True
    try:
        binascii.a2b_base64(payload, strict_mode=True)
    except (binascii.Error, TypeError, ValueError):
        return False
    return True


_PLAIN_DECIMAL = re.compile(r"-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)")


def _number_ok(payload: Any) -> bool:
    if type(payload) is not str:
        return False
    if len(payload) <= 38 and _PLAIN_DECIMAL.fullmatch(payload):  # at most 38 digits, no exponent: in range
        return True
    try:
        number_text(payload)
    except (ValueError, ArithmeticError):
        return False
    return True


def is_value(value: Any) -> bool:
    """value_problem's question without the message (no path strings built for values that are fine)."""
    if type(value) is not dict or len(value) != 1:
        return False
    for tag, payload in value.items():
        if tag == "S":
            return type(payload) is str
        if tag == "N":
            return _number_ok(payload)
        if tag == "M":
            return type(payload) is dict and all(map(is_value, payload.values()))
        if tag == "L":
            return type(payload) is list and all(map(is_value, payload))
        if tag == "BOOL":
            return type(payload) is bool
        if tag == "NULL":
            return payload is True
        if tag == "B":
            return _binary_ok(payload)
        if tag == "SS":
            return type(payload) is list and bool(payload) and all(type(member) is str for member in payload)
        if tag == "NS":
            return type(payload) is list and bool(payload) and all(map(_number_ok, payload))
        if tag == "BS":
            return type(payload) is list and bool(payload) and all(map(_binary_ok, payload))
    return False


def item_problem(item: Any) -> tuple[str | None, str] | None:
    """What makes ``item`` no DynamoDB item, as ``(the attribute, or None for the whole item; the problem)``, or None.

    For an item that failed to map in a way the mapper has no words for (an export line whose ``Item`` is not an
    object, or holds a value of no DynamoDB type): its dead letter says what is wrong instead of Python's own text.
    """
    if type(item) is not dict:
        return None, f"the item is {json.dumps(item, default=repr)[:60]}, not a DynamoDB item (an object of attributes)"
    for name, value in item.items():
        problem = value_problem(value, str(name))
        if problem:
            return str(name), problem
    return None


def value_problem(value: Any, where: str) -> str | None:
    """What makes ``value`` no DynamoDB AttributeValue (``where`` names it, e.g. ``NewImage.Title``), or None.

    Checks every nested value: one known type tag, a payload of the type's shape, numbers that parse,
    base64 binaries, sets with members. For data read from files (an export), before anything is applied.
    """
    if is_value(value):
        return None
    if type(value) is not dict or len(value) != 1:
        return f"{where} is not a DynamoDB value (one type tag such as {{\"S\": ...}})"
    for tag, payload in value.items():
        if tag == "S":
            ok = type(payload) is str
        elif tag == "N":
            ok = _number_ok(payload)
        elif tag == "M":
            if type(payload) is not dict:
                return f"{where}: an M value holds an object"
            for name, element in payload.items():
                problem = value_problem(element, f"{where}.{name}")
                if problem:
                    return problem
            return None
        elif tag == "L":
            if type(payload) is not list:
                return f"{where}: an L value holds a list"
            for index, element in enumerate(payload):
                problem = value_problem(element, f"{where}[{index}]")
                if problem:
                    return problem
            return None
        elif tag == "BOOL":
            ok = type(payload) is bool
        elif tag == "NULL":
            ok = payload is True
        elif tag == "B":
            ok = _binary_ok(payload)
        elif tag == "SS":
            ok = type(payload) is list and bool(payload) and all(type(member) is str for member in payload)
        elif tag == "NS":
            ok = type(payload) is list and bool(payload) and all(map(_number_ok, payload))
        elif tag == "BS":
            ok = type(payload) is list and bool(payload) and all(map(_binary_ok, payload))
        else:
            return f"{where}: unknown DynamoDB type {tag!r}"
        if ok:
            return None
    return f"{where}: {json.dumps(payload, default=repr)[:60]} is not a valid {tag} value"
