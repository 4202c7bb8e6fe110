"""The records of a validation: differences (the differences file's lines) and row-group candidates.

Records are JSON lines (`Difference.to_json`): bytes (row keys, qualifiers, cell values) are a
string when they are printable UTF-8, else `{"base64": ...}`; attribute values are DynamoDB JSON
(export form, `B` as base64). Pure: no I/O.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from ..attrvalue import AttributeValueError, kind_of
from ..results import Cell
from ..analysis.sample import readable_bytes

CellKey = tuple[str, bytes, int]
"""(family, qualifier, timestamp_micros): what identifies a cell within a row."""

CELL_KINDS = ("missing_row", "missing_cell", "different_value", "extra_cell", "extra_version", "collision")
"""What the cell-by-cell comparison finds."""
KINDS = (*CELL_KINDS, "different_attribute", "extra_row")
"""Every kind of difference: the decoder's (`different_attribute`) and the target scan's (`extra_row`) besides."""


# --------------------------------------------------------------------------- JSON forms of bytes


def bytes_json(value: bytes | None) -> Any:
    """Bytes in a JSON line: the text when they are UTF-8 without control characters (tabs and newlines aside),
    else `{"base64": ...}` (None stays None)."""
    if value is None:
        return None
    try:
        text = value.decode()
    except UnicodeDecodeError:
        text = None
    if text is None or not text.replace("\n", "").replace("\t", "").replace("\r", "").isprintable():
        return {"base64": base64.b64encode(value).decode("ascii")}
    return text


def bytes_from_json(value: Any) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, dict):
        return base64.b64decode(value["base64"])
    return str(value).encode()


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _short(value: Any, limit: int = 60) -> str:
    if value is None:
        return "(absent)"
    if isinstance(value, bytes):
        return _clip(readable_bytes(value), limit)
    if isinstance(value, list):
        return "[" + ", ".join(_short(v, limit // 2) for v in value) + "]"
    return _clip(str(value), limit)


# --------------------------------------------------------------------------- differences


class Difference(NamedTuple):
    """One difference between the source (as the spec maps it) and Bigtable.

    `expected`/`found` are cell values (bytes) for cell kinds, DynamoDB JSON for
    `different_attribute`, and for a `collision` `expected` lists every producer's value
    (`items` names the producers). None is "absent".
    """

    kind: str
    row_key: bytes
    item_key: Any = None
    """The source item's key attributes (DynamoDB JSON), None where no item is concerned or key names are unknown."""
    family: str | None = None
    qualifier: bytes | None = None
    timestamp_micros: int | None = None
    expected: Any = None
    found: Any = None
    attribute: str | None = None
    items: tuple = ()
    """For a collision: the key of every item producing the cell."""
    after_snapshot: bool = False
    """Set when the cells concerned changed after the validated snapshot (``--as-of``): reported apart, no difference."""
    index_name: str | None = None
    """For an ``extra_row`` that is an index row (in an index's own table, or under an index's prefix): the index
    (``index`` in JSON; ``index`` itself is the tuple's method)."""

    def column(self) -> str | None:
        if self.family is None:
            return None
        return f"{self.family}:{readable_bytes(self.qualifier or b'')}@{self.timestamp_micros}"

    def to_json(self) -> dict[str, Any]:
        """The differences file's line (see the module doc for bytes)."""
        cell_values = self.kind != "different_attribute"
        encode = (lambda v: [bytes_json(x) for x in v] if isinstance(v, list) else bytes_json(v)) if cell_values else (
            lambda v: v)
        line: dict[str, Any] = {"kind": self.kind, "item_key": self.item_key, "row_key": bytes_json(self.row_key)}
        if self.family is not None:
            line["column"] = {"family": self.family, "qualifier": bytes_json(self.qualifier),
                              "timestamp_micros": self.timestamp_micros}
        if self.attribute is not None:
            line["attribute"] = self.attribute
        line["expected"], line["found"] = encode(self.expected), encode(self.found)
        if self.items:
            line["items"] = list(self.items)
        if self.after_snapshot:
            line["after_snapshot"] = True
        if self.index_name is not None:
            line["index"] = self.index_name
        return line

    @classmethod
    def from_json(cls, line: Mapping[str, Any]) -> Difference:
        column = line.get("column") or {}
        cell_values = line["kind"] != "different_attribute"

        def decode(value: Any) -> Any:
            if not cell_values:
                return value
            return [bytes_from_json(v) for v in value] if isinstance(value, list) else bytes_from_json(value)

        return cls(line["kind"], bytes_from_json(line["row_key"]) or b"", line.get("item_key"), column.get("family"),
                   bytes_from_json(column.get("qualifier")), column.get("timestamp_micros"), decode(line.get("expected")),
                   decode(line.get("found")), line.get("attribute"), tuple(line.get("items") or ()),
                   bool(line.get("after_snapshot")), line.get("index"))

    def describe(self, limit: int = 60) -> str:
        """One line: kind, row (and column or attribute), values, the item."""
        text = f"{self.kind.replace('_', ' ')}: {readable_bytes(self.row_key)}"
        if self.index_name is not None:
            text += f" (index {self.index_name})"
        if self.after_snapshot:
            text = f"changed after the snapshot, {text}"
        if self.family is not None:
            text += f" {self.column()}"
        if self.attribute is not None:
            text += f" attribute {self.attribute!r}"
        if self.kind in ("different_value", "different_attribute"):
            text += f" expected {_short(self.expected, limit)} got {_short(self.found, limit)}"
        elif self.kind in ("extra_cell", "extra_version"):
            text += f" holds {_short(self.found, limit)}"
        if self.items:
            text += f" from {len(self.items)} items: {_clip(', '.join(_key_text(k) for k in self.items), limit * 2)}"
        elif self.item_key:
            text += f" (item {_key_text(self.item_key)})"
        return text


def _key_text(key: Any) -> str:
    if not isinstance(key, dict):
        return str(key)
    parts = []
    for name, value in key.items():
        try:
            parts.append(f"{name}={kind_of(value)[1]}")
        except AttributeValueError:
            parts.append(f"{name}={value}")
    return ", ".join(parts)


class Candidate(NamedTuple):
    """A row group's view of its row, for `resolve_row`: the cells it claims, and the cells it does not.

    ``owns_all``: the group produces every cell the row held when it was read (``cells`` of them),
    so it leaves its claims out (``owner`` names its first item): a row made by one group says so
    in a few bytes.
    """

    row_key: bytes
    claims: tuple[tuple[CellKey, bytes, Any, bool], ...] = ()
    """(cell key, value, item key, whether the row held the cell) for every cell an item of the group produces."""
    unclaimed: tuple[Cell, ...] = ()
    """Cells the row holds that no item of the group produces (and GC would not drop)."""
    owns_all: bool = False
    owner: Any = None
    cells: int = 0

    def to_json(self) -> dict[str, Any]:
        b64 = _b64
        if self.owns_all:
            return {"row_key": b64(self.row_key), "owns_all": True, "owner": self.owner, "cells": self.cells}
        return {"row_key": b64(self.row_key),
                "claims": [[f, b64(q), ts, b64(v), key, held] for (f, q, ts), v, key, held in self.claims],
                "unclaimed": [[c.family, b64(c.qualifier), c.timestamp_micros, b64(c.value)] for c in self.unclaimed]}

    @classmethod
    def from_json(cls, line: Mapping[str, Any]) -> Candidate:
        raw = base64.b64decode
        if line.get("owns_all"):
            return cls(raw(line["row_key"]), owns_all=True, owner=line.get("owner"), cells=line.get("cells", 0))
        return cls(raw(line["row_key"]),
                   tuple(((f, raw(q), ts), raw(v), key, held) for f, q, ts, v, key, held in line["claims"]),
                   tuple(Cell(f, raw(q), ts, raw(v)) for f, q, ts, v in line["unclaimed"]))


def _b64(value: bytes) -> str:
    return base64.b64encode(value).decode("ascii")


# --------------------------------------------------------------------------- counting


def count_kinds(differences: Iterable[Difference]) -> dict[str, int]:
    counts = dict.fromkeys(KINDS, 0)
    for difference in differences:
        counts[difference.kind] += 1
    return {kind: n for kind, n in counts.items() if n}


def describe_counts(counts: Mapping[str, int]) -> str:
    """`1 different value, 1 missing row`: cell kinds first (alphabetically), then the decoder's and the scan's."""
    cell = sorted(kind for kind in counts if kind in CELL_KINDS)
    other = [kind for kind in KINDS if kind in counts and kind not in CELL_KINDS]
    return ", ".join(f"{counts[kind]} {kind.replace('_', ' ')}" for kind in cell + other)
