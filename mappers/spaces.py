"""Which qualifiers a column (or an entity's rest) can write, and whether two of them can meet.

A column writes into a *qualifier space* of its family: one literal qualifier, every qualifier
starting with a prefix (the set and map layouts), the texts of a qualifier template, or, for
`rest`, any attribute name the entity does not use itself. Two spaces *overlap* when some
qualifier could be in both; the tests are conservative (they may say two spaces overlap when the
data never makes them meet, never the reverse). :mod:`.decode` uses them to find losses inside
one entity and between entities that share rows; :mod:`.lints` warns where they merely might.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal, NamedTuple

from .spec import ColumnSpec, EntitySpec, Layout
from .templates import Placeholder, parse_template

Kind = Literal["literal", "prefix", "template", "rest"]


class Space(NamedTuple):
    """One source's qualifiers in one family."""

    kind: Kind
    family: str
    head: str
    """literal: the qualifier; prefix: the prefix; template: its leading literal text; rest: ''."""
    tail: str = ""
    """template: its trailing literal text."""
    attribute: str | None = None
    """The column's attribute; None for rest."""
    path: tuple = ()
    """Field path in the entity (`("columns", 2)`, `("rest",)`)."""
    consumed: frozenset[str] = frozenset()
    """rest: attribute names the entity uses itself, which rest therefore never writes."""

    def describe(self) -> str:
        if self.kind == "rest":
            return f"rest ({self.family}:<attribute name>)"
        shown = {"literal": self.head, "prefix": f"{self.head}<member>", "template": f"{self.head}…{self.tail}"}[self.kind]
        return f"{self.attribute!r} ({self.family}:{shown})"


def column_space(column: ColumnSpec, path: tuple = ()) -> Space:
    prefixed = column.layout in (Layout.set, Layout.map)
    text = column.qualifier.template if column.qualifier else ("" if prefixed else column.attribute)
    pieces = parse_template(text).pieces if text else ()
    if any(isinstance(piece, Placeholder) for piece in pieces):
        head = pieces[0] if isinstance(pieces[0], str) else ""
        # A set member or map key follows the template's text: its trailing literal is no suffix of the qualifier.
        tail = pieces[-1] if isinstance(pieces[-1], str) and not prefixed else ""
        return Space("template", column.family, head, tail, column.attribute, path)
    return Space("prefix" if prefixed else "literal", column.family, text, "", column.attribute, path)


def entity_spaces(entity: EntitySpec, consumed: frozenset[str] = frozenset()) -> Iterator[Space]:
    """Every column's space, then rest's (``consumed``: the attributes the entity uses, see compiler)."""
    for index, column in enumerate(entity.columns):
        yield column_space(column, ("columns", index))
    if entity.rest is not None:
        yield Space("rest", entity.rest.family, "", "", None, ("rest",), consumed)


def _compatible(a: str, b: str) -> bool:
    """Whether some text starts with both (one is a prefix of the other)."""
    return a.startswith(b) or b.startswith(a)


def _suffix_compatible(a: str, b: str) -> bool:
    return a.endswith(b) or b.endswith(a)


def overlap(a: Space, b: Space) -> bool:
    """Whether a qualifier could be written by both (conservative: True when unsure)."""
    if a.family != b.family:
        return False
    if a.kind == "rest" or b.kind == "rest":
        rest, other = (a, b) if a.kind == "rest" else (b, a)
        return not (other.kind == "literal" and other.head in rest.consumed)
    if a.kind == "literal" and b.kind == "literal":
        return a.head == b.head
    if a.kind == "literal" or b.kind == "literal":
        literal, other = (a, b) if a.kind == "literal" else (b, a)
        if other.kind == "prefix":
            return literal.head.startswith(other.head)
        return (literal.head.startswith(other.head) and literal.head.endswith(other.tail)
                and len(literal.head) >= len(other.head) + len(other.tail))
    if a.kind == "template" and b.kind == "template":
        return _compatible(a.head, b.head) and _suffix_compatible(a.tail, b.tail)
    return _compatible(a.head, b.head)  # a prefix and a prefix or a template
