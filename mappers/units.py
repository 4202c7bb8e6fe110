"""Durations, sizes and points in time as people read and write them: one home for parsing and printing.

``30d``/``12h``/``1w`` is the spec's duration syntax (`parse_duration`), and `duration_text`
prints a duration back in it, so a plan, an error and the spec say the same thing (``1w``, not
``7d`` in one place and ``1w`` in another). `human_duration` and `human_size` print estimates and
measurements (seconds, bytes) for the CLI and the report. `parse_iso` is the one reader of ISO-8601
times (a time without an offset is UTC), `iso_to_micros` and `micros_to_iso` the exact conversions to
and from microseconds since the epoch.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def parse_iso(text: str) -> datetime:
    """An ISO-8601 time with ``Z``, an offset or none (then UTC); ValueError for other text."""
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment


def iso_to_micros(text: str) -> int:
    """Microseconds since the epoch of an ISO-8601 time, exactly (no float on the way); ValueError."""
    delta = parse_iso(text) - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def micros_to_iso(micros: int) -> str:
    """UTC to the millisecond with ``Z`` (what Bigtable keeps); past year 9999, the number itself."""
    try:
        return (EPOCH + timedelta(microseconds=micros)).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    except OverflowError:
        return f"{micros} us since 1970"

_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|h|d|w)\s*$")
_UNIT_MS = {"w": 604_800_000, "d": 86_400_000, "h": 3_600_000, "m": 60_000, "s": 1000, "ms": 1}


def parse_duration(text: str) -> timedelta:
    """``'30d'`` → 30 days; ValueError with an example of the syntax otherwise."""
    found = _DURATION.match(text)
    if not found:
        raise ValueError(f"{text!r} is not a duration; write e.g. '30d', '12h', '90m', '45s'")
    return timedelta(milliseconds=int(found.group(1)) * _UNIT_MS[found.group(2)])


def duration_text(delta: timedelta) -> str:
    """The largest whole unit of the spec's syntax: ``1w``, ``36h``, ``1500ms``."""
    milliseconds = int(delta / timedelta(milliseconds=1))
    for unit, size in _UNIT_MS.items():
        if milliseconds % size == 0:
            return f"{milliseconds // size}{unit}"
    return f"{milliseconds}ms"  # pragma: no cover - every integer is a multiple of 1 ms


def human_duration(seconds: float | None) -> str:
    """An estimate or a measurement: ``42 s``, ``17 min``, ``3.5 h``; ``n/a`` when unknown."""
    if seconds is None:
        return "n/a"
    if seconds < 120:
        return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def human_size(n: float) -> str:
    """Bytes in binary units: ``512 B``, ``1.5 KiB``, ``2.0 GiB``."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def human_units(x: float) -> str:
    """A capacity figure as exactly as the plan's JSON has it: 0.5 stays 0.5 (scan read units come in halves)."""
    return f"{x:,.0f}" if x == int(x) else f"{x:,.1f}" if x * 10 == int(x * 10) else f"{x:,.2f}"


def plural(count: int, one: str, many: str | None = None) -> str:
    """`1 page`, `2 pages`, `1,024 entries` (``many`` for the irregular ones): a count with its noun, never `page(s)`."""
    return f"{count:,} {one if count == 1 else many or one + 's'}"
