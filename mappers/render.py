"""Templates rendered per item (row keys, qualifiers), and the key delimiter's escaping and its inverse.

`compile_template` parses once and returns a plain function item -> text; a value it cannot render
raises :class:`ItemFailure`, which the compiler turns into a dead letter naming the attribute.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

from .attrvalue import AttributeValueError, key_text
from .spec import Template
from .templates import Placeholder, parse_template
from .transforms import TRANSFORMS, TransformError

Item = dict


class ItemFailure(Exception):
    """Raised inside compiled callables; map_item turns it into an ItemError."""

    def __init__(self, reason: str, attribute: str | None = None):
        super().__init__(reason)
        self.reason, self.attribute = reason, attribute


def compile_template(spec: Template | str, delimiter: str = "#", on_delimiter: str = "error") -> Callable[[Item], str]:
    """A function item -> text for a template; failures raise ItemFailure naming the attribute."""
    if isinstance(spec, Template):
        text, delimiter, on_delimiter = spec.template, spec.delimiter, spec.on_delimiter
    else:
        text = spec
    pieces = parse_template(text).pieces
    last_placeholder = max((i for i, piece in enumerate(pieces) if isinstance(piece, Placeholder)), default=-1)
    steps: list[Any] = []  # literal text, or (attribute, transforms, guarded); told apart by __class__ per item
    for index, piece in enumerate(pieces):
        if isinstance(piece, str):
            steps.append(piece)
            continue
        calls = tuple(_bind(call.name, call.args) for call in piece.transforms)
        # The last value may hold the delimiter: everything after the last separator is unambiguous.
        steps.append((piece.attribute, calls, index != last_placeholder and on_delimiter != "allow"))
    escape = on_delimiter == "escape"
    unsafe = _unsafe_characters(delimiter)

    def render(item: Item) -> str:
        out = []
        for step in steps:
            if step.__class__ is str:
                out.append(step)
                continue
            attribute, calls, guarded = step
            value = item.get(attribute)
            if value is None:
                raise ItemFailure("attribute is missing", attribute)
            try:
                text = key_text(value)
                for call in calls:
                    text = call(text)
            except (TransformError, AttributeValueError, ValueError) as err:
                raise ItemFailure(str(err), attribute) from None
            if guarded:
                if escape:  # every guarded value, so that `%` is always an escape and the key reads back
                    text = escape_delimiter(text, delimiter)
                elif unsafe(text):
                    raise ItemFailure(
                        f"value {text!r} contains the key delimiter {delimiter!r} (set on_delimiter: escape to %-escape it)",
                        attribute,
                    )
            out.append(text)
        return "".join(out)

    return render


def _bind(name: str, args: tuple) -> Callable[[str], str]:
    fn = TRANSFORMS[name].apply
    return (lambda value: fn(value, *args)) if args else fn


def _unsafe_characters(delimiter: str) -> Callable[[str], bool]:
    """Whether a value holds a character of the delimiter (`a:` + `::` + `b` reads back as `a` + `::` + `:b`)."""
    if len(delimiter) == 1:
        return lambda text: delimiter in text
    characters = frozenset(delimiter)
    return lambda text: not characters.isdisjoint(text)


def escape_delimiter(text: str, delimiter: str) -> str:
    """%-escape `%` and every character of the delimiter: the first delimiter in a key then ends the value."""
    text = text.replace("%", "%25")
    for character in dict.fromkeys(delimiter):
        if character in text:
            text = text.replace(character, "".join(f"%{byte:02X}" for byte in character.encode()))
    return text


def unescape_delimiter(text: str, delimiter: str) -> str:
    """Inverse of :func:`escape_delimiter` (every `%` in escaped text starts an escape)."""
    return unquote(text, errors="strict")


def salt_prefix(key: bytes, buckets: int, delimiter: str) -> bytes:
    """Deterministic bucket prefix (crc32, stable across machines and Python versions)."""
    width = len(str(buckets - 1))
    return f"{zlib.crc32(key) % buckets:0{width}d}{delimiter}".encode()
