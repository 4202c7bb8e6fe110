"""Per-entity specialised map functions: an entity's key, timestamp, columns and rest unrolled into one function.

The compiler's general path (``_Entity.map``) decides per column and per item what the spec already
decided: which attribute, which family and qualifier, whether the column has a timestamp of its own,
which encoder, which transforms the row key applies, whether a timestamp text reads back. For an
entity whose items need no rewriting (no versioning, no TTL) and whose sources cannot write the same
cell (no duplicate check, see ``compiler._may_collide``), :func:`specialise` writes those decisions
into the source of one function, with the spec's values as constants, and compiles it once
(docs/PERFORMANCE.md says what it bought).

The function takes only the common road: an item it does not map in full (an attribute missing, a
value an encoder or a transform refuses, a timestamp that does not parse, a name rest refuses, a
limit) gives ``None``, and the general path maps that item again and words the error, as it always
has. Every per-item check of the general path is here too, inline, or the general function itself is
called; a check is left out only where the spec shows it cannot fail (a timestamp text that is
canonical epoch digits reads back, which the general path would also find). The function has no side
effect, so for every item the result is the general path's (tests/mappers/test_check_specialisation.py
compares both over the round-trip tests' generated specs and items).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import encodings, limits
from .attrvalue import CANONICAL_NUMBER, binary, key_text
from .encodings import encoder_for
from .render import escape_delimiter, salt_prefix
from .results import Cell, MappedRow
from .spec import Encoding, EntitySpec, Layout
from .templates import Placeholder, parse_template
from .timestamps import reads_back
from .transforms import REVERSE_TIMESTAMP_MAX, TRANSFORMS

_new = tuple.__new__

# Inline forms of the encoders' fast paths (encodings.py): the same test, the same bytes; anything else goes
# through the column's encoder, which gives the same result or raises (and the general path words the error).
_INLINE = {
    Encoding.utf8: ("p = value.get('S')",
                    "if p.__class__ is str and len(value) == 1:",
                    "    data = p.encode()"),
    Encoding.decimal: ("p = value.get('N')",  # is_canonical_number's regex, called without the function around it
                       "if p.__class__ is str and len(value) == 1 and len(p) <= 38 and canonical(p) and p != '-0':",
                       "    data = p.encode()"),
    Encoding.int64: ("p = value.get('N')",
                     "if p.__class__ is str and len(value) == 1 and len(p) < 19 and p.isdigit() and p.isascii():",
                     "    data = int(p).to_bytes(8, 'big', signed=True)"),
    Encoding.bool: ("p = value.get('BOOL')",
                    "if p.__class__ is bool and len(value) == 1:",
                    "    data = b'\\x01' if p else b'\\x00'"),
}

_EPOCH_SCALE = {"epoch_s": 1_000_000, "epoch_ms": 1000, "epoch_us": 1}


def _strip_prefix(text: str, prefix: str) -> tuple[str, ...]:
    return (f"if not {text}.startswith({prefix!r}):", "    return None", f"{text} = {text}[{len(prefix)}:]")


def _part(text: str, index: int, sep: str = "#") -> tuple[str, ...]:
    return (f"{text} = {text}.split({sep!r})[{index!r}]",)


def _reverse_timestamp(text: str, top: int = REVERSE_TIMESTAMP_MAX) -> tuple[str, ...]:
    return (f"if not ({text}.isascii() and {text}.isdigit()) or int({text}) > {top!r}:", "    return None",
            f"{text} = str({top!r} - int({text})).rjust({len(str(top))}, '0')")


# transforms.strip_prefix, part and reverse_timestamp written out (a value they refuse: None, and the general path
# words it)
_INLINE_TRANSFORMS: dict[str, Callable[..., tuple[str, ...]]] = {
    "strip_prefix": _strip_prefix, "part": _part, "reverse_timestamp": _reverse_timestamp}


class _Source:
    """The function's lines and the names they use."""

    def __init__(self, entity: Any) -> None:
        self.names: dict[str, Any] = {
            "Cell": Cell, "MappedRow": MappedRow, "new": _new, "check_cells": limits.check_cells,
            "canonical": CANONICAL_NUMBER.fullmatch, "key_text": key_text, "salt_prefix": salt_prefix,
            "escape_delimiter": escape_delimiter, "reads_back": reads_back, "entity": entity, "binary": binary,
            "cells_run": None if encodings._compiled is None else encodings._compiled.cells,
            "row": None if encodings._compiled is None else encodings._compiled.row,
        }
        self.lines: list[str] = []

    def name(self, prefix: str, value: Any) -> str:
        """A name in the function's globals bound to `value`."""
        name = f"{prefix}_{len(self.names)}"
        self.names[name] = value
        return name

    def add(self, *lines: str, indent: int = 0) -> None:
        self.lines += ["    " * indent + line for line in lines]


def specialise(entity: Any, spec: EntitySpec) -> Callable[[dict], MappedRow | None] | None:
    """The entity's specialised map function, or None where the general path must map every item."""
    if entity.skip or entity.versioning or entity.ttl_attribute or entity.spans:
        return None
    source = _Source(entity)
    _row_key(source, spec)
    if entity.salt:
        source.add(f"key = salt_prefix(key, {entity.salt!r}, {entity.delimiter!r}) + key")
    source.add(f"if not key or len(key) > {limits.ROW_KEY_MAX_BYTES}:", "    return None")
    if spec.timestamp is not None:
        _timestamp(source, entity.timestamp, spec.timestamp, "ts")
    else:
        source.add(f"ts = {entity.default_us!r}")
    source.add("cells = []", "append = cells.append", "size = 0")
    run: list[Any] = []
    for column in entity.columns:  # one-cell columns in runs, each collection a run of its own (see _run)
        kind = _cell_kind(column)
        if kind is not None and kind[1] == 0:
            run.append(column)
            continue
        _run(source, run)
        run = []
        if kind is not None:
            _run(source, [column])
        else:
            _column(source, column)
    _run(source, run)
    _rest(source, entity)
    # limits.check_cells, specialised: every timestamp here is known to be a whole millisecond from 1970 to 9999
    # (parsed, checked inline, or the migration time), qualifiers and sizes were counted as the cells were made.
    if limits.timestamp_problem(entity.default_us) is None:
        source.add(f"if not cells or len(cells) > {limits.MUTATIONS_PER_ENTRY_MAX} or size > {limits.CELL_WARN_BYTES}:",
                   "    return None")
        made = f"new(MappedRow, (key, tuple(cells), {entity.name!r}, (), ()))"
        # the same row made in C with its cells untracked by the collector (mappers/_json.c `row`), else in Python
        source.add(f"return row(MappedRow, key, cells, {entity.name!r}) or {made}" if source.names["row"] else
                   f"return {made}")
    else:
        source.add(f"return new(MappedRow, (key, tuple(cells), {entity.name!r}, check_cells(cells), ()))")
    text = "\n".join(["def map_entity(item):", "    try:", "        get = item.get"]
                     + ["        " + line for line in source.lines]
                     # Any failure: the general path maps the item again and says what is wrong, as it always has.
                     + ["    except Exception:", "        return None"]) + "\n"
    exec(compile(text, f"<specialised map of entity {entity.name!r}>", "exec"), source.names)  # noqa: S102
    function = source.names["map_entity"]
    function.source = text  # for a reader (and a test) who wants to see what runs
    return function


def _text(source: _Source, attribute: str, target: str) -> None:
    """`target` = the attribute's key text (S as is, else key_text); a missing attribute gives None."""
    source.add(f"value = get({attribute!r})",
               "if value is None:",
               "    return None",
               f"{target} = value.get('S')",
               f"if {target}.__class__ is not str or len(value) != 1:",
               f"    {target} = key_text(value)")


def _row_key(source: _Source, spec: EntitySpec) -> None:
    template = spec.key
    source.add(f"key = ({_rendered(source, template.template, template.delimiter, template.on_delimiter, 't')}).encode()")


def _rendered(source: _Source, template: str, delimiter: str, on_delimiter: str, name: str) -> str:
    """render.compile_template written out: each placeholder's text (``<name><index>``), its transforms and its
    delimiter test as lines; the expression of the rendered text returned."""
    pieces = parse_template(template).pieces
    last = max((i for i, piece in enumerate(pieces) if isinstance(piece, Placeholder)), default=-1)
    parts = []
    for index, piece in enumerate(pieces):
        if isinstance(piece, str):
            parts.append(repr(piece))
            continue
        text = f"{name}{index}"
        _text(source, piece.attribute, text)
        for call in piece.transforms:
            if call.name in _INLINE_TRANSFORMS and all(arg.__class__ in (str, int) for arg in call.args):
                source.add(*_INLINE_TRANSFORMS[call.name](text, *call.args))
                continue
            apply = source.name("transform", TRANSFORMS[call.name].apply)
            literal = all(arg.__class__ in (str, int) for arg in call.args)
            arguments = "".join(f", {arg!r}" for arg in call.args) if literal else \
                f", *{source.name('arguments', call.args)}"
            source.add(f"{text} = {apply}({text}{arguments})")
        if index != last and on_delimiter != "allow":
            if on_delimiter == "escape":
                source.add(f"{text} = escape_delimiter({text}, {delimiter!r})")
            else:
                source.add(f"if not {source.name('delimiter', frozenset(delimiter))}.isdisjoint({text}):",
                           "    return None")
        parts.append(text)
    return " + ".join(parts) or "''"


def _timestamp(source: _Source, compiled: Callable, spec: Any, target: str) -> None:
    """`target` = the timestamp; epoch digits in an explicit unit inline (from an attribute, or from a template
    rendered inline), anything else through `compiled`."""
    general = source.name("timestamp", compiled)
    scale = _EPOCH_SCALE.get(spec.format)
    if scale and (spec.attribute or spec.template is not None):
        if spec.attribute:
            source.add(f"value = get({spec.attribute!r})",
                       "p = value.get('N') or value.get('S') if value is not None and len(value) == 1 else None")
        else:  # compile_timestamp renders its template with compile_template's defaults
            source.add(f"p = {_rendered(source, spec.template, '#', 'error', 's')}")
        source.add("if p.__class__ is str and p.isdigit() and p.isascii():",
                   f"    {target} = int(p) * {scale}" + (" // 1000 * 1000" if scale == 1 else ""),
                   f"    if {target} > {limits.TIMESTAMP_MAX_MICROS}:",
                   "        return None",
                   "else:",
                   f"    {target} = {general}(item)")
    else:
        source.add(f"{target} = {general}(item)")


def _column(source: _Source, column: Any) -> None:
    source.add(f"value = get({column.attribute!r})", "if value is not None:")
    at = "ts"
    if column.timestamp is not None:
        source.add(f"at = {source.name('timestamp', column.timestamp)}(item)", indent=1)
        at = "at"
    qualifier, family = column.qualifier, column.family
    literal = qualifier.__class__ is bytes and len(qualifier) <= limits.QUALIFIER_MAX_BYTES
    if column.one_cell and literal:
        if column.layout is Layout.cell:
            encode = source.name("encode", column.encode)
            inline = _INLINE.get(column.spec.encoding)
        else:
            encode, inline = source.name("encode", encoder_for(Encoding.json)), None
        if inline:
            source.add(*inline, "else:", f"    data = {encode}(value)", indent=1)
        else:
            source.add(f"data = {encode}(value)", indent=1)
        source.add(f"append(new(Cell, ({family!r}, {qualifier!r}, {at}, data)))",
                   f"size += len(data) + {len(qualifier)}", indent=1)
    elif literal and column.layout in (Layout.set, Layout.map, Layout.list):
        _collection(source, column, at)
    else:
        _emitted(source, column, at, indent=1)
    if column.required:
        source.add("else:", "    return None")


# The compiled module's kind of each encoding whose bytes it writes (mappers/_json.c `cells`): utf8, decimal, int64 and
# bool as _INLINE's lines, float64, json, auto and ddb_json as their encoders (encodings.py) for the values it takes;
# a set's kind is the set types it takes (a binary set's members are base64 text to decode: left to the lines).
_CELL_KINDS = {Encoding.utf8: 0, Encoding.decimal: 1, Encoding.int64: 2, Encoding.bool: 3, Encoding.float64: 4,
               Encoding.json: 5, Encoding.auto: 6, Encoding.ddb_json: 7}
_SET_KINDS = {None: 0, "SS": 1, "NS": 2}
_LAYOUTS = {Layout.set: 1, Layout.map: 2, Layout.list: 3}


def _cell_kind(column: Any) -> tuple[int, int] | None:
    """(kind, layout) of a column at a literal qualifier with the entity's timestamp that the compiled module makes,
    or None: one cell (layout 0), a set (1), a map (2) or a list (3)."""
    if encodings._compiled is None or column.timestamp is not None or column.qualifier.__class__ is not bytes \
            or len(column.qualifier) > limits.QUALIFIER_MAX_BYTES:
        return None
    if column.one_cell:
        kind = _CELL_KINDS[Encoding.json] if column.layout is Layout.json else _CELL_KINDS.get(column.spec.encoding)
        return None if kind is None else (kind, 0)
    layout = _LAYOUTS.get(column.layout)
    kind = _SET_KINDS.get(column.set_type) if column.layout is Layout.set else _CELL_KINDS.get(column.spec.encoding)
    return None if layout is None or kind is None else (kind, layout)


def _run(source: _Source, columns: list[Any]) -> None:
    """A run of columns: their cells made by the compiled module in one call (no frame, no bytecode per column or
    element); where it answers None (a required attribute missing, a value it does not take: cells as they were), the
    columns' own lines, which give the same cells or return None. A collection is a run of its own, so that a value
    it leaves to the lines (a binary set, say) costs only its own lines."""
    if not columns:
        return
    specs = []
    for column in columns:
        kind, layout = _cell_kind(column)  # type: ignore[misc]  # a run's columns have one
        specs.append((column.attribute, kind, column.family, column.qualifier, bool(column.required), layout))
    program = source.name("run", (Cell, limits.QUALIFIER_MAX_BYTES, limits.TIMESTAMP_MAX_MICROS, *specs))
    source.add(f"made = cells_run(item, {program}, ts, cells)",
               "if made is None:")
    start = len(source.lines)
    for column in columns:
        _column(source, column)
    source.lines[start:] = ["    " + line for line in source.lines[start:]]
    source.add("else:", "    size += made")


def _emitted(source: _Source, column: Any, at: str, indent: int) -> None:
    """The column's general emit, its cells counted after (a list's timestamps checked: they grow by element)."""
    limit = f"len(cell[1]) > {limits.QUALIFIER_MAX_BYTES}"
    if column.layout is Layout.list:
        limit += f" or cell[2] > {limits.TIMESTAMP_MAX_MICROS}"
    source.add("start = len(cells)", f"{source.name('emit', column.emit)}(item, value, {at}, cells)",
               "for cell in cells[start:]:",
               f"    if {limit}:",
               "        return None",
               "    size += len(cell[1]) + len(cell[3])", indent=indent)


def _collection(source: _Source, column: Any, at: str) -> None:
    """Column.cells for a set, map or list at a literal qualifier, inline for the usual value; the general emit for
    anything else (another set type, an empty list, a value that is not one): the same cells or the same error."""
    family, qualifier = column.family, column.qualifier
    fits = f"len(q) > {limits.QUALIFIER_MAX_BYTES}"
    if column.layout is Layout.set:
        _sets(source, column, at, fits)
        return
    elif column.layout is Layout.map:
        encode = source.name("encode", column.encode)
        source.add("p = value.get('M')",
                   "if p.__class__ is dict and p and len(value) == 1:",
                   "    for name, element in p.items():",
                   f"        data = {encode}(element)",
                   "        if not name and not data:",
                   "            return None",
                   f"        q = {qualifier!r} + name.encode()",
                   f"        if {fits}:",
                   "            return None",
                   f"        append(new(Cell, ({family!r}, q, {at}, data)))",
                   "        size += len(q) + len(data)",
                   "else:", indent=1)
    else:
        encode = source.name("encode", column.encode)
        source.add("p = value.get('L')",
                   "if p.__class__ is list and p and len(value) == 1:",
                   f"    if {at} + (len(p) - 1) * 1000 > {limits.TIMESTAMP_MAX_MICROS}:",
                   "        return None",
                   "    for index, element in enumerate(p):",
                   f"        data = {encode}(element)",
                   f"        append(new(Cell, ({family!r}, {qualifier!r}, {at} + index * 1000, data)))",
                   f"        size += len(data) + {len(qualifier)}",
                   "else:", indent=1)
    _emitted(source, column, at, indent=2)


# Each set type's members as qualifiers (member_bytes), inline where the member is the usual one: a string's UTF-8,
# a canonical number's text, a binary's bytes. Distinct strings and distinct canonical numbers are distinct
# qualifiers (UTF-8 and the canonical text are one-to-one), so their duplicate test is on the members; two base64
# texts may decode to the same bytes, so a binary set's is on the qualifiers.
_SET_MEMBERS = {
    "SS": (("q = {prefix} + member.encode()",), "len(set(p)) != len(p)"),
    "NS": (("if not (member.__class__ is str and len(member) <= 38 and canonical(member) and member != '-0'):",
            "    return None",
            "q = {prefix} + member.encode()"), "len(set(p)) != len(p)"),
    "BS": (("q = {prefix} + binary(member)",), "len({{cell[1] for cell in cells[-len(p):]}}) != len(p)"),
}


def _sets(source: _Source, column: Any, at: str, fits: str) -> None:
    """A set column: a branch per set type its encoding takes (all three for ``auto``), the general emit for
    anything else."""
    indent = 1
    for tag, (member, duplicates) in _SET_MEMBERS.items():
        if column.set_type not in (None, tag):
            continue
        source.add(f"p = value.get({tag!r})",
                   "if p.__class__ is list and p and len(value) == 1:",
                   "    for member in p:",
                   *("        " + line.format(prefix=repr(column.qualifier)) for line in member),
                   f"        if {fits}:",
                   "            return None",
                   f"        append(new(Cell, ({column.family!r}, q, {at}, b'\\x00')))",
                   "        size += len(q) + 1",
                   f"    if {duplicates.format()}:",
                   "        return None",
                   "else:", indent=indent)
        indent += 1
    _emitted(source, column, at, indent=indent)


def _rest(source: _Source, entity: Any) -> None:
    """What ``_Entity._rest`` does: leftovers, timestamp texts that would not read back, their cells."""
    consumed = source.name("consumed", entity.consumed)
    # most items have no leftover: a frozenset's issuperset walks the item's names in C, without the list
    # comprehension's frame; the list, in the item's order, only where there are some
    source.add(f"leftovers = [] if {consumed}.issuperset(item) else [name for name in item if name not in {consumed}]")
    attributes = [attribute for attribute, _, _ in entity.timestamp_texts]
    if len(set(attributes)) != len(attributes):  # one attribute read twice: the general function
        source.add("leftovers += entity._kept_times(item)")
    for attribute, fmt, column in entity.timestamp_texts if len(set(attributes)) == len(attributes) else ():
        source.add(f"value = get({attribute!r})", "if value is not None:")
        condition = "True" if column is None else f"{column!r} in item"
        fast = ""
        if fmt in _EPOCH_SCALE:  # canonical epoch digits read back (what reads_back finds first, too)
            fast = "p.__class__ is str and p.isdigit() and p.isascii() and p[0] != '0'"
            if fmt == "epoch_us":
                fast += " and p.endswith('000')"
            source.add("p = value.get('N') or value.get('S') if len(value) == 1 else None", indent=1)
        source.add(f"if not ({condition} and ({fast + ' or ' if fast else ''}"
                   f"{source.name('exact', _reads_back_or_false)}(value, {fmt!r}))):", indent=1)
        source.add(f"    leftovers.append({attribute!r})", indent=1)
    if entity.rest is None:
        source.add("if leftovers:", "    return None")
        return
    family, encode = entity.rest
    source.add("for name in leftovers:")
    if entity.rest_taken:
        source.add(f"if name.encode() in {source.name('taken', frozenset(entity.rest_taken))}:", "    return None",
                   indent=1)
    if entity.rest_prefixes:
        source.add(f"if name.startswith({tuple(entity.rest_prefixes)!r}):", "    return None", indent=1)
    source.add("q = name.encode()",
               f"if len(q) > {limits.QUALIFIER_MAX_BYTES}:",
               "    return None",
               f"data = {source.name('encode', encode)}(item[name])",
               f"append(new(Cell, ({family!r}, q, ts, data)))",
               "size += len(q) + len(data)", indent=1)


def _reads_back_or_false(value: dict, fmt: str) -> bool:
    """``_Entity._kept_times``'s test: a value that is no time (unused, or the item failed already) is kept as is."""
    from .attrvalue import AttributeValueError
    from .timestamps import TimestampError

    try:
        return reads_back(value, fmt)
    except (AttributeValueError, TimestampError):
        return False
