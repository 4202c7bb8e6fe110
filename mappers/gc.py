"""Garbage-collection policies in one comparable form and in one wording.

The spec's :class:`~.spec.GcPolicy` and a table's existing Bigtable GC rule (read by the sink) both
become the same canonical form, so that comparing them ignores the order of sub-rules and one-rule
unions, and both are put in words by :func:`describe_gc`, so the plan, the target diff and an error
say a policy the same way. :class:`GcView` applies a policy to a row's cells, as reads must (GC runs late).

The canonical form: ``None`` (keep every version), ``("versions", n)``, ``("age_ms", ms)``, or
``("union" | "intersection", frozenset of canonical parts)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from .results import Cell
from .spec import GcPolicy
from .units import duration_text


def canonical_policy(policy: GcPolicy | None) -> Any:
    if policy is None:
        return None
    parts = []
    if policy.max_versions is not None:
        parts.append(("versions", policy.max_versions))
    if policy.max_age is not None:
        parts.append(("age_ms", round(policy.max_age.total_seconds() * 1000)))
    return combine(policy.combine, parts)


def combine(kind: str, parts: list[Any]) -> Any:
    """A union or intersection of canonical parts; none is no rule, one (or equal ones) is that rule."""
    distinct = frozenset(part for part in parts if part is not None)
    if not distinct:
        return None
    return next(iter(distinct)) if len(distinct) == 1 else (kind, distinct)


def describe_gc(canonical: Any) -> str:
    if canonical is None:
        return "keep every version (no GC rule)"
    kind, value = canonical
    if kind == "versions":
        return f"keep at most {value} version{'s' if value != 1 else ''}"
    if kind == "age_ms":
        return f"drop cells older than {duration_text(timedelta(milliseconds=value))}"
    joiner = " or " if kind == "union" else " and "
    prefix = "drop a cell when it is past either rule: " if kind == "union" else "drop a cell only when both hold: "
    return prefix + joiner.join(sorted(describe_gc(part) for part in value))


def gc_text(policy: GcPolicy | None) -> str:
    """A spec policy in words."""
    return describe_gc(canonical_policy(policy))


AGGREGATE_TEXT = {"sum": "Int64 sum aggregate"}
"""A family's value type in words, by the spec's `aggregate` (the target diff and the plan say it so)."""


def family_text(policy: GcPolicy | None) -> str:
    """A spec family in words: its value type when it is an aggregate (which keeps no GC rule), else its GC."""
    if policy is not None and policy.aggregate:
        return AGGREGATE_TEXT[policy.aggregate]
    return gc_text(policy)


def condemned(canonical: Any, rank: int, timestamp_us: int, now_us: int) -> bool:
    """Whether a policy (canonical form) collects a cell: the ``rank``-th newest of its column (0: the newest),
    written at ``timestamp_us``, at ``now_us``."""
    kind, value = canonical
    if kind == "versions":
        return rank >= value
    if kind == "age_ms":
        return timestamp_us < now_us - value * 1000
    parts = (condemned(part, rank, timestamp_us, now_us) for part in value)
    return any(parts) if kind == "union" else all(parts)


def _ages(canonical: Any) -> bool:
    """Whether a policy (canonical form) has an age part anywhere in it."""
    kind, value = canonical
    return kind == "age_ms" or (kind in ("union", "intersection") and any(_ages(part) for part in value))


class GcView:
    """A row's cells as a read sees them once garbage collection has run: without the cells a family's policy
    condemns (beyond its max_versions, older than its max_age).

    Bigtable collects in the background: Cloud Bigtable up to a week after a cell is condemned, the emulator every
    second or so once started, or never. Until then a read returns those cells too, and Google's advice is to filter
    reads rather than rely on GC. A rollback or parity that read them would rebuild items from versions the table
    no longer keeps (a column's older value next to its newer one: "cannot be told apart"), or put back items
    whose TTL (max_age) had expired. Families without a policy, and cells of families the spec does not name,
    are kept as read."""

    def __init__(self, families: Mapping[str, GcPolicy | None], now_us: int) -> None:
        self.rules = {name: rule for name, policy in families.items()
                      if (rule := canonical_policy(policy)) is not None}  # fmt: skip
        self.now_us = now_us
        # a column's only cell outlives a policy without an age part (max_versions is at least 1)
        self._aged = {name: _ages(rule) for name, rule in self.rules.items()}

    def __bool__(self) -> bool:
        return bool(self.rules)

    def __call__(self, cells: list[Cell]) -> list[Cell]:
        rules = self.rules
        columns: dict[tuple[str, bytes], list[int]] = {}
        for index, cell in enumerate(cells):
            if cell.family in rules:
                columns.setdefault((cell.family, cell.qualifier), []).append(index)
        if not columns:
            return cells
        gone: set[int] = set()
        for (family, _qualifier), indexes in columns.items():
            if len(indexes) == 1 and not self._aged[family]:
                continue
            rule = rules[family]
            indexes.sort(key=lambda index: -cells[index].timestamp_micros)  # newest first, as Bigtable ranks them
            gone.update(index for rank, index in enumerate(indexes)
                        if condemned(rule, rank, cells[index].timestamp_micros, self.now_us))  # fmt: skip
        return [cell for index, cell in enumerate(cells) if index not in gone] if gone else cells
