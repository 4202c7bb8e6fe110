"""Garbage-collection policies in one comparable form and in one wording.

The spec's :class:`~.spec.GcPolicy` and a table's existing Bigtable GC rule (read by the sink) both
become the same canonical form, so that comparing them ignores the order of sub-rules and one-rule
unions, and both are put in words by :func:`describe_gc`, so the plan, the target diff and an error
say a policy the same way.

The canonical form: ``None`` (keep every version), ``("versions", n)``, ``("age_ms", ms)``, or
``("union" | "intersection", frozenset of canonical parts)``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

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
