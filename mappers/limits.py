"""Bigtable's limits, checked where the mutations are built (not when the server refuses them).

Whatever Bigtable (or its client) would refuse about a row entry is refused here, so a bad item
becomes a dead letter with its reason instead of an exception in the writer: cell timestamps
(range and millisecond granularity), qualifier, cell and entry sizes, and the mutation count.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

from .results import Cell

ROW_KEY_MAX_BYTES = 4 * 1024
QUALIFIER_MAX_BYTES = 16 * 1024
CELL_MAX_BYTES = 100 * 1024 * 1024
CELL_WARN_BYTES = 10 * 1024 * 1024
ROW_WARN_BYTES = 100 * 1024 * 1024
ROW_MAX_BYTES = 256 * 1024 * 1024
MUTATIONS_PER_ENTRY_MAX = 100_000
FAMILIES_WARN = 100

SCAN_SEGMENTS_MAX = 1_000_000
"""DynamoDB's limit on Scan's TotalSegments: the one source limit the spec, the flags and the scan all check."""

TIMESTAMP_MAX_MICROS = 253_402_300_799_999_000
"""9999-12-31T23:59:59.999Z, the latest cell timestamp ddb2bt writes. Bigtable's own bound is int64
microseconds (year 294,247), but a time past 9999 is no date Python (plan previews, validation,
readers) can show, and no DynamoDB value means one: it is a unit mistake or a sentinel."""
TIMESTAMP_GRANULARITY_MICROS = 1000
"""Bigtable keeps milliseconds: a timestamp that is not a multiple of 1000 microseconds is refused."""


class LimitError(ValueError):
    """A mutation Bigtable would refuse."""


def timestamp_problem(micros: int) -> str | None:
    """Why Bigtable (or ddb2bt) cannot store a cell at `micros`, or None when it can."""
    if micros < 0:
        return f"timestamp {micros} is before 1970; Bigtable cell timestamps cannot be negative"
    if micros > TIMESTAMP_MAX_MICROS:
        return f"timestamp {micros} us is after 9999-12-31 (the limit is {TIMESTAMP_MAX_MICROS} us); is the unit right?"
    if micros % TIMESTAMP_GRANULARITY_MICROS:
        return f"timestamp {micros} us is not a whole millisecond; Bigtable keeps millisecond granularity"
    return None


def check_cells(cells: list[Cell]) -> tuple[str, ...]:
    """Raise LimitError for what Bigtable refuses; return warnings for what it merely advises against.

    Hot path (every item): one pass of integer comparisons per cell, the timestamp checked only when
    it differs from the previous cell's (most cells of an item share one); the detailed pass, which
    names the offending cell, runs only when something is refused or large.
    """
    if not 0 < len(cells) <= MUTATIONS_PER_ENTRY_MAX:
        if cells:
            raise LimitError(f"{len(cells)} cells in one row entry; Bigtable allows {MUTATIONS_PER_ENTRY_MAX} mutations")
        raise LimitError("the item writes no cell (none of its mapped attributes is present); Bigtable refuses an empty row entry")
    size = 0
    checked = None
    for _, qualifier, micros, value in cells:
        if micros != checked:
            if micros % 1000 or not 0 <= micros <= TIMESTAMP_MAX_MICROS:
                break
            checked = micros
        if len(qualifier) > QUALIFIER_MAX_BYTES:
            break
        size += len(qualifier) + len(value)
    else:
        if size <= CELL_WARN_BYTES:  # no cell can be over the advised size when all of them together are not
            return ()
    return _check_in_detail(cells)


def _check_in_detail(cells: list[Cell]) -> tuple[str, ...]:
    warnings = []
    size = 0
    for family, qualifier, micros, value in cells:
        problem = timestamp_problem(micros)
        if problem:
            raise LimitError(f"cell {family}:{qualifier[:40]!r}: {problem}")
        if len(qualifier) > QUALIFIER_MAX_BYTES:
            raise LimitError(f"qualifier {qualifier[:40]!r}... is {len(qualifier)} bytes; the limit is 16 KiB")
        if len(value) > CELL_WARN_BYTES:
            if len(value) > CELL_MAX_BYTES:
                raise LimitError(f"cell {family}:{qualifier[:40]!r} is {len(value)} bytes; the limit is 100 MiB")
            warnings.append(f"cell {family}:{qualifier[:40]!r} is {len(value)} bytes (over the advised 10 MiB)")
        size += len(qualifier) + len(value)
    if size > ROW_MAX_BYTES:
        raise LimitError(f"the row entry is {size} bytes; a Bigtable row is at most 256 MiB")
    if size > ROW_WARN_BYTES:
        warnings.append(f"the row entry is {size} bytes (over the advised 100 MiB per row)")
    return tuple(warnings)


# --------------------------------------------------------------------------- how many dead letters a run accepts

DEAD_LETTER_LIMIT_DEFAULT = "10%"
"""Stop a run once more than a tenth of the items read were dead-lettered: a spec that cannot map an entity."""
_PERCENT = re.compile(r"[0-9]+(\.[0-9]+)?%")
FRACTION_MIN_ITEMS = 1000
"""A percentage is judged once this many items were read (a share of fewer says little); a run that reads fewer
fails on a percentage only when it dead-letters every item it read."""


@dataclass(frozen=True)
class DeadLetterLimit:
    """`--max-dead-letters`: a count (`250`: more than 250 stop the run) or a percentage of the items read (`5%`)."""

    text: str
    count: int | None = None
    percent: Decimal | None = None

    @classmethod
    def parse(cls, text: str) -> DeadLetterLimit:
        """ValueError when `text` is neither a whole number nor a percentage between 0% and 100%."""
        stripped = text.strip()
        if _PERCENT.fullmatch(stripped) and Decimal(stripped[:-1]) <= 100:
            return cls(stripped, percent=Decimal(stripped[:-1]))
        if stripped.isascii() and stripped.isdigit():
            return cls(stripped, count=int(stripped))
        raise ValueError(f"{text!r} is neither a number of items nor a percentage between 0% and 100%")

    def exceeded(self, dead: int, items: int, *, final: bool = False) -> bool:
        """Whether `dead` of `items` read is more than the limit allows; a percentage waits for
        FRACTION_MIN_ITEMS items unless `final` (the run's totals)."""
        if self.count is not None:
            return dead > self.count
        assert self.percent is not None
        if self.percent >= 100 or not items:
            return False
        if items < FRACTION_MIN_ITEMS:  # a share of a few items says little: only "none of them" counts, at the end
            return final and dead == items
        return dead * 100 > self.percent * items

    def describe(self, dead: int, items: int) -> str:
        if self.count is not None:  # judged as the dead letters come, so `items` may not count the latest batch yet
            return f"{dead} items were dead-lettered, more than --max-dead-letters {self.text} allows"
        share = f"{dead * 100 / items:.2f}".rstrip("0").rstrip(".") if items else "0"
        return f"{dead} of {items} items read were dead-lettered ({share}%), more than --max-dead-letters {self.text} allows"
