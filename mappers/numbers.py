"""Exact DynamoDB numbers: up to 38 significant digits, magnitudes 1e-130 .. <1e126. Never a float.

`sortable_text` is an order-preserving, human-readable text encoding: comparing two encodings
byte by byte gives the same answer as comparing the numbers. Layout:

* zero      -> ``1``
* positive  -> ``2`` + 3-digit biased exponent (e + 130) + significant digits
* negative  -> ``0`` + 3-digit complemented exponent (255 - (e + 130)) + nines' complement of the digits + ``~``

where the number is ``d.ddd x 10**e``. The ``~`` (above every digit) makes a shorter negative
mantissa sort after a longer one that extends it (-1.2 > -1.23).
"""

from __future__ import annotations

import re
from decimal import Context, Decimal

_CONTEXT = Context(prec=38)
_EXP_BIAS = 130
_EXP_MAX = 125
_COMPLEMENT = str.maketrans("0123456789", "9876543210")


_SYNTAX = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
"""A number's text as DynamoDB takes it: ASCII digits. ``Decimal`` alone also takes other scripts' digits
(``"٣"``), underscores (``"1_000"``) and surrounding spaces, which DynamoDB refuses and which would be read as
another number's text."""


class DecimalError(ValueError):
    """Text that is not a valid DynamoDB number."""


def parse_number(text: str) -> Decimal:
    """The exact Decimal of a DynamoDB number's text; rejects what DynamoDB would reject."""
    if text.__class__ is not str or not _SYNTAX.fullmatch(text):
        infinite = text.__class__ is str and text.strip().lstrip("+-").lower() in ("nan", "snan", "inf", "infinity")
        raise DecimalError(f"{text!r} is not a finite number" if infinite else f"{text!r} is not a number")
    number = Decimal(text)
    if number:
        # normalize() rounds to 38 digits: a number it changes had more.
        if number.normalize(_CONTEXT) != number:
            raise DecimalError(f"{text!r} has more than 38 significant digits")
        exponent = number.adjusted()
        if exponent > _EXP_MAX or exponent < -_EXP_BIAS:
            raise DecimalError(f"{text!r} is outside DynamoDB's number range")
    return number


def canonical_text(number: Decimal) -> str:
    """Plain decimal text without exponent or trailing zeros (`30.0` -> `30`, `1E+2` -> `100`)."""
    if not number:
        return "0"
    text = format(number.normalize(_CONTEXT), "f")
    return text


def sortable_text(text: str) -> str:
    """Order-preserving text of a DynamoDB number (see module docstring)."""
    number = parse_number(text)
    if not number:
        return "1"
    sign, digits, _ = number.normalize(_CONTEXT).as_tuple()
    mantissa = "".join(map(str, digits))
    biased = number.adjusted() + _EXP_BIAS
    if not sign:
        return f"2{biased:03d}{mantissa}"
    return f"0{255 - biased:03d}{mantissa.translate(_COMPLEMENT)}~"


def from_sortable_text(encoded: str) -> Decimal:
    """Inverse of :func:`sortable_text`."""
    if encoded == "1":
        return Decimal(0)
    head, exponent_text, body = encoded[0], encoded[1:4], encoded[4:]
    if head == "2":
        exponent, sign, mantissa = int(exponent_text) - _EXP_BIAS, 0, body
    elif head == "0" and body.endswith("~"):
        exponent, sign, mantissa = 255 - int(exponent_text) - _EXP_BIAS, 1, body[:-1].translate(_COMPLEMENT)
    else:
        raise DecimalError(f"{encoded!r} is not a sortable number")
    if not (mantissa.isascii() and mantissa.isdigit()):
        raise DecimalError(f"{encoded!r} is not a sortable number")
    digits = tuple(int(d) for d in mantissa)
    return Decimal((sign, digits, exponent - len(digits) + 1))
