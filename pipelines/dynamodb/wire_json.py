"""``json.loads`` for DynamoDB's JSON (Scan pages, export lines), through orjson where that gives the same value.

orjson parses in a fraction of the standard library's time (docs/PERFORMANCE.md), and for every
document both accept it gives the same value, with one exception: a bare JSON integer beyond 64
bits, which orjson turns into a float and ``json`` keeps exact. DynamoDB's JSON has no bare
numbers (``N`` is text), but a hand-made export line may, so such a document, and every document
orjson refuses (``NaN``, lone surrogates, a byte-order mark, other encodings, bad JSON), goes to
``json.loads``: the same value, or the same error, as before.
"""

from __future__ import annotations

import json
from typing import Any, Callable, TypeVar

import orjson

T = TypeVar("T")

_compiled_may_hold_big_int: Callable[[object], bool | None] | None
_compiled_untrack: Callable[[object], None] | None
try:  # compiled (pyproject.toml's optional ext-modules); without a C compiler the Python functions serve
    from ._wire_json import may_hold_big_int as _compiled_may_hold_big_int, untrack as _compiled_untrack
except ImportError:  # pragma: no cover - only where nothing could be compiled
    _compiled_may_hold_big_int = _compiled_untrack = None

_DIGIT_RUN = b"0" * 19
"""A run of this many digits may be a bare integer beyond 64 bits (-2**63 - 1 has 19 digits, 2**64 has 20)."""
_DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")
_BEFORE_BARE_NUMBER = frozenset(b":,[ \t\r\n")
"""What a bare number's first digit (or its minus sign) can follow; in a string a run of digits follows
a quote, a letter, a dot..., so only runs after a space in a string are sent to ``json`` needlessly."""
_MINUS = ord("-")


def loads(data: bytes) -> Any:
    """``json.loads(data)``: the same value (ints stay ints, key order kept) or the same error."""
    if not _may_hold_big_int(data):
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
    return json.loads(data)


def untracked(value: T) -> T:
    """``value`` itself, unchanged, its dicts and lists (a parsed item's) taken off the garbage collector's lists.

    An item waits for its batch to be written, and every young collection meanwhile walks each of its containers to
    find nothing (a parsed tree holds no cycle): from an export, untracking each line's item as it is parsed halves
    the collector's time (docs/PERFORMANCE.md, "Scan and export round 10"; not so a Scan page's: its one parse call
    makes ~60,000 objects, so the collection that walks them runs inside it, before they could be untracked).
    Untracked, they are still freed by reference counting, and what they hold stays alive while they do (the
    collector can only find less garbage). Only a cycle through an untracked list would never be collected; nothing
    puts an item into itself (a dict is tracked again once a container is put into it). Without the compiled module
    the value stays as it is: the same value, tracked.
    """
    if _compiled_untrack is not None:
        _compiled_untrack(value)
    return value


def loader_for(block: bytes) -> Callable[[bytes], Any]:
    """:func:`loads` for the lines of ``block`` (JSON lines, split at ``\\n``): the same value or error for each.

    Whether a line may hold a bare integer beyond 64 bits is asked once for the whole block: a digit run that
    could be one in a line could be one in the block too (a line's start follows a newline there), so a block
    without one has no line with one, and its lines skip the per-line check.
    """
    return loads if _may_hold_big_int(block) else _loads_no_big_int


def _loads_no_big_int(data: bytes) -> Any:
    """:func:`loads` of a document known to hold no digit run that may be a bare integer beyond 64 bits."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


def _may_hold_big_int(data: bytes) -> bool:
    """Whether ``data`` has a run of 19 or more digits that could be a bare JSON integer (not inside a string).

    Every Scan page and every block of export lines is looked at once, so this is on every item's path: the compiled
    look (``_wire_json.c``) reads the bytes once without the copy :func:`_python_may_hold_big_int` makes, and gives
    its answer for every bytes object (tests/pipelines/test_wire_json.py); None, for anything else, leaves it to it.
    """
    if _compiled_may_hold_big_int is not None:
        found = _compiled_may_hold_big_int(data)
        if found is not None:
            return found
    return _python_may_hold_big_int(data)


def _python_may_hold_big_int(data: bytes) -> bool:
    """:func:`_may_hold_big_int` in Python: the digits turned into zeros (a copy), runs of 19 zeros searched."""
    digits = data.translate(_DIGITS_AS_ZERO)
    at = digits.find(_DIGIT_RUN)
    while at >= 0:
        before = at - 1
        if before >= 0 and data[before] == _MINUS:
            before -= 1
        if before < 0 or data[before] in _BEFORE_BARE_NUMBER:
            return True
        at = digits.find(_DIGIT_RUN, at + len(_DIGIT_RUN))
    return False
