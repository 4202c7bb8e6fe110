"""The one namespace of ddb2bt's Beam counters (the reconciliation reads them back from it), and the counters
that say why items were skipped or dead-lettered.

A reason counter is named ``<kind>/<reason>`` (``skipped/entity action is skip (entity audit)``,
``dead_lettered/cannot map (entity order, attribute price)``): the reason in words, with the
entity and attribute, never a value from an item (counters end up in the runner's monitoring, and
an item's own reason, with its values, is in the dead-letter file). :func:`by_reason` splits them
off a run's totals.
"""

from __future__ import annotations

from typing import Any, Mapping

NAMESPACE = "ddb2bt"

REASON_KINDS = ("skipped", "dead_lettered")
MAX_REASONS = 100
"""Distinct reasons one step instance names; more are counted as ``other reasons`` (a bound on counter names)."""
MAX_REASON_CHARS = 200
"""A reason is cut to this length (an attribute name may be long; counter names should not be)."""


def skip_reason(reason: str, entity: str | None) -> str:
    """``mappers.results.Skipped``'s reason (a fixed text) and entity, as a counter's reason."""
    return f"{reason} (entity {entity})" if entity else reason


def letter_reason(stage: str, entity: str | None, attribute: str | None = None, what: str = "") -> str:
    """A dead letter's reason for its counter: what went wrong at which stage, for which entity and attribute."""
    if stage == "unmatched":
        return "no entity matches the item"
    where = ", ".join(f"{name} {value}" for name, value in (("entity", entity), ("attribute", attribute)) if value)
    what = what or ("cannot map" if stage == "map" else stage)
    return f"{what} ({where})" if where else what


class ReasonCounters:
    """A step's reason counters, made on first use; thread-safe enough (a lost race makes the same counter twice)."""

    def __init__(self) -> None:
        self._metrics: dict[str, Any] = {}

    def inc(self, kind: str, counts: Mapping[str, int]) -> dict[str, int]:
        """Add ``counts`` (reason -> items) to the counters ``kind/reason``; the same counts by counter name."""
        from apache_beam.metrics import Metrics

        named: dict[str, int] = {}
        for reason, count in counts.items():
            name = f"{kind}/{reason[:MAX_REASON_CHARS]}"
            metric = self._metrics.get(name)
            if metric is None:
                if len(self._metrics) >= MAX_REASONS:
                    name = f"{kind}/other reasons"
                metric = self._metrics.get(name) or self._metrics.setdefault(name, Metrics.counter(NAMESPACE, name))
            metric.inc(count)
            named[name] = named.get(name, 0) + count
        return named


def by_reason(totals: Mapping[str, int]) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
    """A run's totals split into the plain counters and ``{kind: {reason: items}}`` (every kind, maybe empty)."""
    counters: dict[str, int] = {}
    reasons: dict[str, dict[str, int]] = {kind: {} for kind in REASON_KINDS}
    for name, value in totals.items():
        kind, slash, reason = name.partition("/")
        if slash and kind in reasons:
            if value:
                reasons[kind][reason] = reasons[kind].get(reason, 0) + value
        else:
            counters[name] = value
    for kind in REASON_KINDS:
        reasons[kind] = dict(sorted(reasons[kind].items(), key=lambda pair: (-pair[1], pair[0])))
    return counters, reasons
