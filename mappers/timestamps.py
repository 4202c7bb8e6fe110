"""Cell timestamps: from an attribute, a template (e.g. a reverse timestamp in the sort key) or a fixed time.

Always deterministic for the same item (a re-run rewrites the same cells) and truncated to
milliseconds, the only granularity Bigtable keeps. Values are microseconds since the epoch, from
1970 to 9999 (:data:`.limits.TIMESTAMP_MAX_MICROS`): a value outside is a TimestampError (a dead
letter naming the attribute), never a cell that Bigtable refuses later.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta

from .attrvalue import AttributeValueError, key_text
from .limits import TIMESTAMP_MAX_MICROS
from .spec import TimestampSpec
from .units import EPOCH, iso_to_micros

_EPOCH_SCALE = {"epoch_s": 1_000_000, "epoch_ms": 1000, "epoch_us": 1}


class TimestampError(ValueError):
    """A value that is not a usable cell timestamp; ``attribute`` names the attribute it was read from, if one."""

    def __init__(self, message: str, attribute: str | None = None):
        super().__init__(message)
        self.attribute = attribute


def parse_timestamp(text: str, fmt: str = "auto") -> int:
    """Microseconds (a multiple of 1000) for ISO-8601 text or an epoch number in `fmt`."""
    if fmt == "auto":
        if text.isascii() and text.lstrip("-").replace(".", "", 1).isdigit():
            # An epoch number: its size tells the unit (seconds until year 5138, then ms, then us).
            magnitude = abs(float(text))
            fmt = "epoch_s" if magnitude < 1e11 else "epoch_ms" if magnitude < 1e14 else "epoch_us"
        else:
            fmt = "iso8601"
    if fmt == "iso8601":
        try:
            micros = iso_to_micros(text)
        except ValueError:
            raise TimestampError(f"{text!r} is not an ISO-8601 time") from None
    else:
        whole, _, fraction = text.partition(".")
        try:
            scale = _EPOCH_SCALE[fmt]
            micros = int(whole) * scale + (int(fraction.ljust(6, "0")[:6]) * scale // 1_000_000 if fraction else 0)
        except (KeyError, ValueError):
            raise TimestampError(f"{text!r} is not a {fmt} number") from None
    micros -= micros % 1000
    if micros < 0:
        raise TimestampError(f"{text!r} is before 1970; Bigtable timestamps cannot be negative")
    if micros > TIMESTAMP_MAX_MICROS:
        raise TimestampError(f"{text!r} ({fmt}) is after 9999-12-31; is the unit right?")
    return micros


def timestamp_text(micros: int, fmt: str, dynamodb_type: str) -> str:
    """The text a cell timestamp reads back as: the inverse of :func:`parse_timestamp` where one exists.

    Epoch digits in `fmt` (under ``auto``, a number: seconds when whole, else milliseconds, which
    ``auto`` reads back in the same unit), or ISO-8601 in UTC without an offset, to the millisecond.
    Texts that do not come back as themselves (an offset or ``Z``, digits past the millisecond, an
    epoch number in another unit) are what :func:`reads_back` finds.
    """
    if fmt in _EPOCH_SCALE:
        return str(micros // _EPOCH_SCALE[fmt])
    if fmt == "auto" and dynamodb_type == "N":
        return str(micros // 1_000_000) if micros % 1_000_000 == 0 else str(micros // 1000)
    moment = (EPOCH + timedelta(microseconds=micros)).replace(tzinfo=None)
    return moment.isoformat(timespec="milliseconds" if micros % 1_000_000 else "seconds")


# Texts that read back as themselves, told by their shape (the common case, per item): UTC ISO-8601 to the second or
# to a millisecond other than .000, and epoch digits without a leading zero in an explicit unit (whole ms in us).
_CANONICAL_ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.(?!000)\d{3})?")
_CANONICAL_EPOCH = re.compile(r"[1-9]\d*")


def reads_back(value: dict, fmt: str) -> bool:
    """Whether a timestamp attribute's value (S or N, already known to parse) is exactly what its cell timestamp
    reads back as; where it is not, the compiler keeps the value itself too (a rest cell) or the item fails."""
    dynamodb_type = "N" if "N" in value else "S"
    text = key_text(value)
    if fmt in _EPOCH_SCALE:
        if _CANONICAL_EPOCH.fullmatch(text) and (fmt != "epoch_us" or text.endswith("000")):  # Bigtable keeps ms
            return True
    elif dynamodb_type == "S" and _CANONICAL_ISO.fullmatch(text):
        return True
    return timestamp_text(parse_timestamp(text, fmt), fmt, dynamodb_type) == text


def compile_timestamp(spec: TimestampSpec, compile_template: Callable) -> Callable[[dict], int]:
    """A function item -> microseconds, raising TimestampError (or the template's failure)."""
    fmt = spec.format
    if spec.fixed is not None:
        fixed = parse_timestamp(spec.fixed.isoformat(), "iso8601")
        return lambda item: fixed
    if spec.template is not None:
        render = compile_template(spec.template)
        return lambda item: parse_timestamp(render(item), fmt)
    attribute = spec.attribute

    def from_attribute(item: dict) -> int:
        value = item.get(attribute)
        if value is None:
            raise TimestampError(f"timestamp attribute {attribute!r} is missing", attribute)
        try:
            return parse_timestamp(key_text(value), fmt)
        except (AttributeValueError, TimestampError) as err:
            raise TimestampError(f"timestamp attribute {attribute!r}: {err}", attribute) from None

    return from_attribute
