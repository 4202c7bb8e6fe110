"""Templates: literal text with `{attribute|transform|transform(arg, ...)}` placeholders.

Parsed once (at spec validation) into literals and placeholders; the compiler turns them into
plain callables. Arguments are Python literals (numbers, quoted strings), read with
`ast.literal_eval`, so `{sk|part(1, ':')}` and `{sk|strip_prefix("Payment-")}` both work.
"""

from __future__ import annotations

import ast
import re
from typing import NamedTuple

from .transforms import check_arguments

_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
_CALL = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:\((.*)\))?\s*$", re.S)


class TemplateError(ValueError):
    """A template that cannot be parsed; the message says what to change."""


class TransformCall(NamedTuple):
    name: str
    args: tuple


class Placeholder(NamedTuple):
    attribute: str
    transforms: tuple[TransformCall, ...]


class ParsedTemplate(NamedTuple):
    """Alternating pieces: `str` literals and `Placeholder`s, in order."""

    pieces: tuple[str | Placeholder, ...]

    @property
    def attributes(self) -> tuple[str, ...]:
        return tuple(piece.attribute for piece in self.pieces if isinstance(piece, Placeholder))

    @property
    def is_literal(self) -> bool:
        return not self.attributes


def _parse_call(text: str, template: str) -> TransformCall:
    found = _CALL.match(text)
    if not found:
        raise TemplateError(f"cannot read transform {text.strip()!r} in {template!r}")
    name, arg_text = found.group(1), found.group(2)
    args: tuple = ()
    if arg_text is not None and arg_text.strip():
        try:
            value = ast.literal_eval(f"({arg_text},)")
        except (ValueError, SyntaxError):
            raise TemplateError(
                f"arguments of {name} in {template!r} must be numbers or quoted strings, got ({arg_text})"
            ) from None
        args = tuple(value)
    problem = check_arguments(name, args)
    if problem:
        raise TemplateError(problem)
    return TransformCall(name, args)


def parse_template(template: str) -> ParsedTemplate:
    """Parse a template or raise :class:`TemplateError` naming what is wrong."""
    pieces: list[str | Placeholder] = []
    position = 0
    for found in _PLACEHOLDER.finditer(template):
        literal = template[position : found.start()]
        if "{" in literal or "}" in literal:
            raise TemplateError(f"unbalanced brace in {template!r}")
        if literal:
            pieces.append(literal)
        attribute, *calls = found.group(1).split("|")
        attribute = attribute.strip()
        if not attribute:
            raise TemplateError(f"empty placeholder in {template!r}: write {{attribute}}")
        pieces.append(Placeholder(attribute, tuple(_parse_call(call, template) for call in calls)))
        position = found.end()
    tail = template[position:]
    if "{" in tail or "}" in tail:
        raise TemplateError(f"unbalanced brace in {template!r}")
    if tail:
        pieces.append(tail)
    if not pieces:
        raise TemplateError("empty template")
    return ParsedTemplate(tuple(pieces))
