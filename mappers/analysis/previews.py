"""Previews: items and cells shown as text, decoded as their column wrote them (never raw bytes).

The plan, the folded rows and the report show values through these; a renderer that shortens one
for the screen does so with :func:`shorten`, which says how much it left out.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from ..attrvalue import binary, kind_of, to_json
from ..compiler import CellSource
from ..encodings import decode
from ..results import Cell
from .sample import readable_bytes
from ..spec import Encoding, Layout
from ..units import micros_to_iso

PREVIEW_CHARS = 80
"""What text renderers show of a long value (:func:`shorten`); the plan object itself keeps values whole."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class AttributePreview(_Frozen):
    name: str
    type: str
    value: str


class CellPreview(_Frozen):
    column: str
    """family:qualifier, qualifier as readable text."""
    value: str
    encoding: str
    timestamp: str
    """ISO-8601 UTC, millisecond precision."""


def shorten(text: str, limit: int = PREVIEW_CHARS) -> tuple[str, bool]:
    """(``text`` fitted to ``limit`` characters, whether it was shortened); a shortened one ends in `… (+N chars)`."""
    if len(text) <= limit:
        return text, False
    kept = max(1, limit - 16)
    return f"{text[:kept]}… (+{len(text) - kept:,} chars)", True


def attribute_preview(name: str, value: dict) -> AttributePreview:
    try:
        tag, payload = kind_of(value)
        text = payload if tag == "S" else binary(payload).hex() if tag == "B" else to_json(value)
    except (ValueError, TypeError):
        tag, text = "?", repr(value)
    return AttributePreview(name=name, type=tag, value=_printable(text))


def item_preview(item: dict) -> tuple[AttributePreview, ...]:
    return tuple(attribute_preview(name, value) for name, value in item.items())


_TEXT_ENCODINGS = frozenset({Encoding.utf8, Encoding.decimal, Encoding.json, Encoding.ddb_json, Encoding.auto})
"""Encodings whose stored bytes are text: shown as stored (typed DynamoDB JSON stays typed)."""


def value_preview(data: bytes, source: CellSource | None) -> tuple[str, str]:
    """(preview, encoding label): the stored bytes as text where they are text, else the value they decode to."""
    if source is None:
        return readable_bytes(data), "bytes"
    if source.layout is Layout.set:
        return "(set member)", "marker 0x00"
    if data == b"" and source.layout in (Layout.map, Layout.list) and source.part:
        return "(empty)", f"{source.layout.value} marker"
    if source.encoding in _TEXT_ENCODINGS:
        try:
            return _printable(data.decode()), source.encoding.value
        except UnicodeDecodeError:
            return readable_bytes(data), "bytes"
    try:
        value = decode(data, source.encoding)
    except (ValueError, KeyError, TypeError):
        return readable_bytes(data), "bytes"
    return attribute_preview("", value).value, source.encoding.value


def _printable(text: str) -> str:
    return text if text.isprintable() else text.encode("unicode_escape").decode("ascii")


def cell_preview(cell: Cell, source: CellSource | None) -> CellPreview:
    shown = value_preview(cell.value, source)
    return CellPreview(
        column=f"{cell.family}:{readable_bytes(cell.qualifier)}", value=shown[0], encoding=shown[1],
        timestamp=micros_to_iso(cell.timestamp_micros),
    )  # fmt: skip
