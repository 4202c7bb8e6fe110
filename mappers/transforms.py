"""Key transforms: small pure functions `text -> text` used in templates as `{attr|name(args)}`.

Every transform raises :class:`TransformError` on input it cannot handle; the compiler turns that
into an item error, so a bad value dead-letters one item instead of writing an ambiguous key.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from datetime import datetime, timezone

from .numbers import DecimalError, sortable_text
from .spelling import did_you_mean


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
    if not value.isdigit():
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


def reverse_timestamp(value: str, max: int = 9_999_999_999_999) -> str:  # noqa: A002 - the documented name
    """`max - value`, zero-padded to the width of `max`, so that the newest sorts first (and back again)."""
    if not value.isdigit():
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
    if not found or not shard.isdigit() or not head:
        raise TransformError(f"{value!r} has no write-shard suffix '{sep}<n>'")
    return head


def _parse_time(value: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise TransformError(f"{value!r} is not an ISO-8601 time") from None
    return parsed.replace(tzinfo=timezone.utc) if parsed.tzinfo is None else parsed


def epoch_ms(value: str) -> str:
    """ISO-8601 time -> epoch milliseconds (UTC when no offset is given)."""
    moment = _parse_time(value)
    return str((int(moment.timestamp()) * 1000) + moment.microsecond // 1000)


def epoch_s(value: str) -> str:
    """ISO-8601 time -> epoch seconds (UTC when no offset is given)."""
    return str(int(_parse_time(value).timestamp()))


TRANSFORMS: dict[str, Callable[..., str]] = {
    fn.__name__: fn
    for fn in (
        part,
        strip_prefix,
        strip_suffix,
        pad,
        sortable_number,
        reverse,
        reverse_timestamp,
        reverse_domain,
        lower,
        upper,
        unshard,
        epoch_ms,
        epoch_s,
    )
}


def check_arguments(name: str, args: tuple) -> str | None:
    """Why `name(*args)` is not a valid transform call, or None when it is."""
    fn = TRANSFORMS.get(name)
    if fn is None:
        guess = did_you_mean(name, TRANSFORMS)
        return f"unknown transform {name!r} ({guess + ' ' if guess else ''}known: {', '.join(sorted(TRANSFORMS))})"
    signature = inspect.signature(fn)
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
