"""Sampled item errors grouped by cause, and the errors an item's first error hides.

A first spec often dead-letters many items for one reason whose text carries the item's value
(`value 'CUST#02335' contains the key delimiter '#'`): listed per distinct text, one cause becomes a
hundred lines. :func:`group_causes` folds the texts that differ only in their quoted values into one
cause with its count and a few example values.

An item stops at its first error, so a spec with three kinds of problem would show them one plan
round at a time. :func:`hidden_errors` maps each failed item again with the part that failed set
aside (the row key made a literal, the column dropped, the timestamp or TTL removed) until it maps
or nothing more can be set aside: what it finds is what a full run would still dead-letter once the
first error is fixed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from pydantic import BaseModel, ConfigDict

from ..compiler import compile_spec
from ..results import ItemError
from ..spec import EntitySpec, MappingSpec
from ..templates import parse_template

EXAMPLES = 3
_LITERAL = re.compile(r"""'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*"|(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w.])""")
"""A value in a reason: a quoted text (repr) or a bare number (`1.5 is not an integer`)."""
_PROBES = 8
"""How many parts of one item's entity may be set aside while looking for the errors its first one hides."""


class Cause(BaseModel):
    """Sampled items dead-lettered for one reason, whatever their values."""

    model_config = ConfigDict(frozen=True)
    text: str
    """The reason as `entity …, attribute …: reason`, a value that differs between items shown as `…`."""
    count: int
    """Sampled items with this cause."""
    examples: tuple[str, ...] = ()
    """Up to three of the differing values, quoted as in the reasons."""
    distinct: int = 0
    """How many different values the items had (0: the reason holds no differing value)."""
    hidden: int = 0
    """Of `count`, the items where this cause sits behind another error (found by :func:`hidden_errors`)."""

    def line(self) -> str:
        """`N × text (e.g. 'a', 'b', 'c', …)`, with how many of them another error hides."""
        shown = ""
        if self.examples:
            more = ", …" if self.distinct > len(self.examples) else ""
            shown = f" (e.g. {', '.join(self.examples)}{more}; {self.distinct} different value{'s' * (self.distinct != 1)})"
        behind = f" [{self.hidden} behind another error: fix that one and these still fail]" if self.hidden else ""
        return f"{self.count} × {self.text}{shown}{behind}"


def _where(error: ItemError) -> str:
    parts = [f"entity {error.entity!r}"] if error.entity else []
    parts += [f"attribute {error.attribute!r}"] if error.attribute else []
    return ", ".join(parts)


def group_causes(errors: Iterable[ItemError], hidden: Iterable[ItemError] = ()) -> tuple[Cause, ...]:
    """The errors (and the `hidden` ones behind them) by cause, the most frequent first.

    Two reasons are one cause when they are the same text but for their literals (quoted texts, numbers); a literal
    every item of the cause shares (the delimiter `'#'`) stays, one that differs becomes `…` and
    its values the examples (the first differing literal's, which is the item's value in every
    reason this package words).
    """
    groups: dict[tuple, list] = {}  # key -> [count, hidden, [literals per error]]
    for found, behind in ((errors, False), (hidden, True)):
        for error in found:
            literals = tuple(_LITERAL.findall(error.reason))
            key = (error.entity, error.attribute, error.stage, _LITERAL.sub("\0", error.reason))
            entry = groups.setdefault(key, [0, 0, []])
            entry[0] += 1
            entry[1] += behind
            entry[2].append(literals)
    causes = []
    for (entity, attribute, stage, shape), (count, behind, literals) in groups.items():
        columns = list(zip(*literals))
        varying = [i for i, column in enumerate(columns) if len(set(column)) > 1]
        pieces = shape.split("\0")
        text = pieces[0]
        for i, piece in enumerate(pieces[1:]):
            text += ("…" if i in varying else columns[i][0]) + piece
        values = list(dict.fromkeys(columns[varying[0]])) if varying else []
        where = _where(ItemError("", entity, attribute, stage))
        causes.append(Cause(text=f"{where}: {text}" if where else text, count=count, examples=tuple(values[:EXAMPLES]),
                            distinct=len(values), hidden=behind))
    return tuple(sorted(causes, key=lambda cause: -cause.count))


# --------------------------------------------------------------------------- what a first error hides


def _aside(entity: EntitySpec, error: ItemError) -> EntitySpec | None:
    """`entity` without the parts `error` may come from; None when nothing is left to set aside. What a part set aside
    read joins `drop`: it stays consumed, else it would fail as unmapped (a problem of the probe, not of the spec)."""
    attribute = error.attribute
    update: dict = {}
    consumed: list[str] = []
    key = entity.row_key
    if key is not None and key.template != "probe" and (
        (attribute and attribute in parse_template(key.template).attributes) or "row key" in error.reason
    ):
        update["row_key"] = key.model_copy(update={"template": "probe", "salt_buckets": None})
        consumed += parse_template(key.template).attributes
    kept = [c for c in entity.columns
            if attribute is None or (c.attribute != attribute and (c.timestamp is None or c.timestamp.attribute != attribute))]
    if attribute is not None and len(kept) < len(entity.columns):
        update["columns"] = kept
        consumed += [name for c in entity.columns if c not in kept
                     for name in (c.attribute, c.timestamp.attribute if c.timestamp else None) if name]
    if entity.timestamp is not None and (attribute is None or entity.timestamp.attribute == attribute
                                         or "timestamp" in error.reason or "time" in error.reason):
        update["timestamp"] = None
        consumed += [entity.timestamp.attribute] if entity.timestamp.attribute else []
    if entity.ttl is not None and (attribute is None or entity.ttl.attribute == attribute):
        update["ttl"] = None
        consumed.append(entity.ttl.attribute)
    if entity.versioning is not None and "version" in error.reason:
        update["versioning"] = None
    if not update:
        return None
    return entity.model_copy(update={**update, "drop": list(dict.fromkeys([*entity.drop, *consumed]))})


def hidden_errors(spec: MappingSpec, items: Sequence[dict], errors: Sequence[ItemError], now_ms: int) -> list[ItemError]:
    """The errors each failed item's first error (in `errors`, one per item) hides, in the items' order."""
    by_name = {entity.name: entity for entity in spec.entities}
    compiled_for: dict[str, object] = {}
    found: list[ItemError] = []
    for item, first in zip(items, errors):
        entity = by_name.get(first.entity or "")
        if entity is None or first.stage != "map":
            continue
        error = first
        for _ in range(_PROBES):
            relaxed = _aside(entity, error)
            if relaxed is None:
                break
            entity = relaxed
            probe = entity.model_dump_json()
            compiled = compiled_for.get(probe)
            if compiled is None:
                compiled = compiled_for[probe] = compile_spec(spec.model_copy(update={"entities": [entity]}), now_ms)
            result = compiled.map_item(item)  # type: ignore[attr-defined]
            if not isinstance(result, ItemError) or result.stage != "map":
                break
            if result != error:
                found.append(result)
            error = result
    return found
