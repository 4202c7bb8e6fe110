"""What the tests of mappers/_json.c share: an encoder's outcome, a model of the values json_bytes takes, odd values."""

from __future__ import annotations

from ddb2bt.mappers.attrvalue import is_canonical_number


def outcome(encode, value):
    try:
        return encode(value)
    except Exception as err:  # noqa: BLE001 - the error, type and words, is the outcome compared
        return f"{type(err).__name__}: {err}"


def takes(value) -> bool:
    """What the compiled function must take itself: S, canonical N, bool BOOL, NULL, lists and maps of str keys."""
    if not isinstance(value, dict) or len(value) != 1:
        return False
    ((tag, payload),) = value.items()
    if tag == "S":
        return isinstance(payload, str) and not any(0xD800 <= ord(c) <= 0xDFFF for c in payload)
    if tag == "N":
        return isinstance(payload, str) and payload.isascii() and is_canonical_number(payload)
    if tag in ("BOOL", "NULL"):
        return tag == "NULL" or isinstance(payload, bool)
    if tag == "L":
        return isinstance(payload, list) and all(takes(element) for element in payload)
    if tag == "M":
        return isinstance(payload, dict) and all(isinstance(name, str) and takes({"S": name}) and takes(inner)
                                                 for name, inner in payload.items())
    return False


ODD_STRINGS = ["", "\x00\x01\x1f\x7f", '"\\/', "\b\f\n\r\t", "é€😀", "\ud800", "a\udfffb", "\u2028\u2029"]
ODD_NUMBERS = ["0", "-0", "00", "-0.5", "0.50", "1.", ".5", "1e5", "1E+5", "+1", " 1", "٣", "1" * 38, "1" * 39,
               "-" + "1" * 37, "-" + "1" * 38, "12.3400", "-12.34"]
ODD_VALUES = [
    None, [], {}, {"S": "a", "N": "1"}, {1: "a"}, {"S": 1}, {"S": b"a"}, {"N": 1}, {"BOOL": 1}, {"BOOL": None},
    {"NULL": False}, {"L": ({"S": "a"},)}, {"L": [{"S": "a"}, {"B": b"x"}]}, {"M": {1: {"S": "a"}}},
    {"M": {"a": {"SS": ["x"]}}}, {"M": {"\ud800": {"S": "a"}}}, {"B": "eA=="}, {"SS": ["a"]}, {"NS": ["1"]},
    {"M": {"b": {"N": "2"}, "a": {"N": "1"}, "É": {"NULL": True}, "Z": {"BOOL": False}}},
]
