"""Key transforms: small pure functions `text -> text` used in templates as `{attr|name(args)}`.

Every transform raises :class:`TransformError` on input it cannot handle; the compiler turns that
into an item error, so a bad value dead-letters one item instead of writing an ambiguous key.
Every transform also declares, in :data:`TRANSFORMS`, either its inverse (how the decoder reads the
value back) or its loss (why it cannot): a transform that declares neither fails at import.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from .numbers import DecimalError, canonical_text, from_sortable_text, sortable_text
from .spelling import did_you_mean
from .units import parse_iso


class TransformError(ValueError):
    """A value that a transform cannot handle."""


def part(value: str, index: int, sep: str = "#") -> str:
    """Part `index` (0-based; negative counts from the end) of `value` split on `sep`."""
    pieces = value.split(sep)
    try:
        return pieces[index]
    except IndexError:
        raise TransformError(f"{value!r} has no part {index} when split on {sep!r}") from None


def strip_prefix(value: str, prefix: str) -> str:
    """`value` without `prefix`; a value that lacks it is an error, never passed through."""
    if not value.startswith(prefix):
        raise TransformError(f"{value!r} does not start with {prefix!r}")
    return value[len(prefix) :]


def strip_suffix(value: str, suffix: str) -> str:
    """`value` without `suffix`; a value that lacks it is an error."""
    if not value.endswith(suffix):
        raise TransformError(f"{value!r} does not end with {suffix!r}")
    return value[: len(value) - len(suffix)]


def pad(value: str, width: int, fill: str = "0") -> str:
    """Left-pad a non-negative integer so that it sorts numerically as text (`3` -> `003`)."""
    if not (value.isascii() and value.isdigit()):
        raise TransformError(f"pad needs a non-negative integer, got {value!r} (use sortable_number for others)")
    if len(value) > width:
        raise TransformError(f"{value!r} is wider than pad width {width}; it would sort out of order")
    return value.rjust(width, fill)


def sortable_number(value: str) -> str:
    """Order-preserving text for any DynamoDB number (negatives, decimals, 38 digits)."""
    try:
        return sortable_text(value)
    except DecimalError as err:
        raise TransformError(str(err)) from None


def reverse(value: str) -> str:
    """Reverse a string, so that sequential ids spread across the key space."""
    return value[::-1]


REVERSE_TIMESTAMP_MAX = 9_999_999_999_999  # epoch milliseconds until the year 2286, 13 digits


def reverse_timestamp(value: str, max: int = REVERSE_TIMESTAMP_MAX) -> str:  # noqa: A002 - the documented name
    """`max - value`, zero-padded to the width of `max`, so that the newest sorts first (and back again)."""
    if not (value.isascii() and value.isdigit()):
        raise TransformError(f"reverse_timestamp needs a non-negative integer, got {value!r}")
    number = int(value)
    if number > max:
        raise TransformError(f"{value} is larger than the reverse_timestamp maximum {max}")
    return str(max - number).rjust(len(str(max)), "0")


def reverse_domain(value: str) -> str:
    """`maps.google.com` -> `com.google.maps`, so that a domain's hosts sit together."""
    return ".".join(reversed(value.split(".")))


def lower(value: str) -> str:
    return value.lower()


def upper(value: str) -> str:
    return value.upper()


def unshard(value: str, sep: str = ".") -> str:
    """Drop a DynamoDB write-shard suffix: `2023-09-10.7` -> `2023-09-10`."""
    head, found, shard = value.rpartition(sep)
    if not found or not (shard.isascii() and shard.isdigit()) or not head:
        raise TransformError(f"{value!r} has no write-shard suffix '{sep}<n>'")
    return head


def _parse_time(value: str) -> datetime:
    try:
        return parse_iso(value)
    except ValueError:
        raise TransformError(f"{value!r} is not an ISO-8601 time") from None


def epoch_ms(value: str) -> str:
    """ISO-8601 time -> epoch milliseconds (UTC when no offset is given)."""
    moment = _parse_time(value)
    return str((int(moment.timestamp()) * 1000) + moment.microsecond // 1000)


def epoch_s(value: str) -> str:
    """ISO-8601 time -> epoch seconds (UTC when no offset is given)."""
    return str(int(_parse_time(value).timestamp()))


@dataclass(frozen=True)
class Transform:
    """A transform with what the decoder knows of it: exactly one of `inverse` and `loss` is set.

    `inverse(text_after, *args)` gives the text before (it may raise ValueError on text that no value
    renders to); `loss` says, as words after the transform's name, what cannot be brought back.
    """

    apply: Callable[..., str]
    inverse: Callable[..., str] | None = None
    loss: str | None = None
    order: Mapping[str, int] = field(default_factory=dict)
    """Per DynamoDB key type (S, N, B): 1 when the output's bytes sort as the input values do, -1 when they sort
    in reverse; absent when the order is lost. What access patterns rely on to turn a key range into a row range."""

    def __post_init__(self) -> None:
        if (self.inverse is None) == (self.loss is None):
            raise TypeError(f"transform {self.apply.__name__} must declare exactly one of an inverse or a loss")


def _unpad(value: str, width: int, fill: str = "0") -> str:
    # exact for integers without leading zeros, as N values always are (the round trip checks text values)
    return value.lstrip(fill) or fill


def _unreverse_timestamp(value: str, max: int = REVERSE_TIMESTAMP_MAX) -> str:  # noqa: A002
    return str(max - int(value))


TRANSFORMS: dict[str, Transform] = {
    transform.apply.__name__: transform
    for transform in (
        Transform(part, loss="keeps one part of the value"),
        Transform(strip_prefix, inverse=lambda value, prefix: prefix + value, order={"S": 1}),
        Transform(strip_suffix, inverse=lambda value, suffix: value + suffix),
        Transform(pad, inverse=_unpad, order={"N": 1}),
        Transform(sortable_number, inverse=lambda value: canonical_text(from_sortable_text(value)), order={"N": 1}),
        Transform(reverse, inverse=reverse),
        Transform(reverse_timestamp, inverse=_unreverse_timestamp, order={"N": -1}),
        Transform(reverse_domain, inverse=reverse_domain),
        Transform(lower, loss="lower-cases the value"),
        Transform(upper, loss="upper-cases the value"),
        Transform(unshard, loss="drops the write-shard suffix"),
        Transform(epoch_ms, loss="keeps the time, not its ISO spelling"),
        Transform(epoch_s, loss="keeps the time to the second, not its ISO spelling"),
    )
}


def check_arguments(name: str, args: tuple) -> str | None:
    """Why `name(*args)` is not a valid transform call, or None when it is."""
    fn = TRANSFORMS.get(name)
    if fn is None:
        guess = did_you_mean(name, TRANSFORMS)
        return f"unknown transform {name!r} ({guess + ' ' if guess else ''}known: {', '.join(sorted(TRANSFORMS))})"
    signature = inspect.signature(fn.apply)
    try:
        bound = signature.bind("", *args)
    except TypeError as err:
        return f"transform {name}: {err}"
    for param_name, given in list(bound.arguments.items())[1:]:
        expected = signature.parameters[param_name].annotation
        expected_type = {"int": int, "str": str}.get(expected, object)
        if not isinstance(given, expected_type) or isinstance(given, bool):
            return f"transform {name}: argument {param_name!r} must be {expected}, got {given!r}"
    return None
