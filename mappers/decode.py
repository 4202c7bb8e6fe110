"""Bigtable cells back to the DynamoDB items (wire format, types included) that a spec mapped them from.

`compile_decoder(spec, types)` reads a spec the way `compile_spec` writes it: row-key and qualifier
templates are split and their transforms inverted, cell values decoded per encoding and layout,
timestamps turned back into the attributes and templates they came from. What cannot be read back
is a `Loss`, found from the spec alone (`losses(spec)`): a loss is *declared* when the spec says it
(`drop`, `lossy`, `action: skip`, `versioning`, `ttl`, `unmatched: skip`); an undeclared one is a
spec error. Data-dependent normalisation (a text attribute with leading zeros under `pad`, an ISO
time spelt otherwise than `2023-09-10T15:21:48`) is found by decoding a sample (`round_trip`).

`types` names the DynamoDB type of attributes that only live in a key, qualifier or timestamp
(their text does not say it): `{"pk": "S", "n": "N"}`; S when not given.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal
from operator import itemgetter
from typing import Any, NamedTuple

from .attrvalue import AttributeValueError, binary, from_typed_json, key_text, kind_of, number_text
from .compiler import consumed_attributes
from .render import unescape_delimiter
from .encodings import SET_TYPES, decode
from .numbers import DecimalError, canonical_text
from .results import Cell
from .spaces import Space, entity_spaces, overlap
from .spec import ColumnSpec, Condition, Encoding, EntitySpec, Layout, MappingSpec, Template, TimestampSpec
from .templates import Placeholder, parse_template
from .timestamps import timestamp_text
from .transforms import TRANSFORMS

Item = dict


class Loss(NamedTuple):
    """Something of an entity's items the target cannot give back; `attribute` None: whole items."""

    entity: str
    attribute: str | None
    reason: str
    declared: bool

    def describe(self) -> str:
        what = f"attribute {self.attribute!r}" if self.attribute else "items"
        return f"entity {self.entity!r}, {what}: {self.reason}" + ("" if self.declared else " (not declared: add it to lossy)")


class DecodeError(ValueError):
    """Cells that no reading of the spec explains."""


# --------------------------------------------------------------------------- transforms, inverted

class TemplateReader:
    """Splits rendered template text back into attribute texts; `problem` says why it cannot (then a loss)."""

    def __init__(self, spec: Template | str, delimiter: str = "#", on_delimiter: str = "error"):
        if isinstance(spec, Template):
            text, delimiter, on_delimiter = spec.template, spec.delimiter, spec.on_delimiter
        else:
            text = spec
        self.pieces = parse_template(text).pieces
        self.delimiter, self.escape = delimiter, on_delimiter == "escape"
        self.unescape = _unescaper(delimiter)
        self.lossy: dict[str, str] = {}
        holders = {i: piece for i, piece in enumerate(self.pieces) if isinstance(piece, Placeholder)}
        placeholders = list(holders)
        self.problem: str | None = None
        for index, holder in holders.items():
            for call in holder.transforms:
                loss = TRANSFORMS[call.name].loss
                if loss:
                    self.lossy.setdefault(holder.attribute, f"{call.name} {loss}")
            if index != placeholders[-1]:
                following = self.pieces[index + 1]
                if on_delimiter == "allow":
                    self.problem = "on_delimiter: allow: values holding the delimiter make the text ambiguous"
                elif not isinstance(following, str) or delimiter not in following:
                    self.problem = f"{{{holder.attribute}}} is not followed by the delimiter {delimiter!r}"
        self.attributes = tuple(holder.attribute for holder in holders.values())
        self.last = placeholders[-1] if placeholders else -1
        self._steps = [self._step(index, piece) for index, piece in enumerate(self.pieces)]

    def _step(self, index: int, piece: str | Placeholder) -> tuple:
        """What `read` does at one piece, decided once: (literal, None, None, 0, ()) for literal text, else (None,
        placeholder, the literals after it when it is the last one, where the delimiter is in the literal after
        it (-1: not there), its transforms' inverses in the order they undo them)."""
        if isinstance(piece, str):
            return piece, None, None, 0, ()
        inverses = tuple((call.name, TRANSFORMS[call.name].inverse, call.args) for call in reversed(piece.transforms))
        if index == self.last:
            return None, piece, "".join(str(rest) for rest in self.pieces[index + 1:]), 0, inverses
        following = str(self.pieces[index + 1])  # a literal holding the delimiter (else a problem)
        return None, piece, None, following.find(self.delimiter), inverses

    def read(self, text: str) -> dict[str, str]:
        """attribute -> its text before the transforms; DecodeError when `text` is not of this template."""
        values: dict[str, str] = {}
        position = 0
        delimiter = self.delimiter
        for literal, piece, tail, offset, inverses in self._steps:
            if literal is not None:
                if not text.startswith(literal, position):
                    raise DecodeError(f"{text!r} does not have {literal!r} at {position}")
                position += len(literal)
                continue
            if tail is not None:  # the last placeholder: literals only after it
                end = len(text) - len(tail)
                if end < position or not text.endswith(tail):
                    raise DecodeError(f"{text!r} does not end with {tail!r}")
                value = text[position:end]
            else:
                if offset < 0:  # a template with a problem (a loss): no delimiter after the placeholder
                    raise ValueError(f"{{{piece.attribute}}} is not followed by the delimiter {delimiter!r}")
                found = text.find(delimiter, position)  # values hold no delimiter character
                end = found - offset
                if found < 0 or end < position:
                    raise DecodeError(f"{text!r} lacks the delimiter after {{{piece.attribute}}}")
                value = text[position:end]
                if self.escape and "%" in value:  # escaped text without a `%` is its own unescaping
                    value = self.unescape(value)
            position = end
            for name, inverse, args in inverses:
                try:
                    # a lossy transform has no inverse: its text stands for the value (the attribute is a declared loss)
                    value = inverse(value, *args) if inverse else value
                except (ValueError, DecimalError) as err:
                    raise DecodeError(f"{name} cannot be undone on {value!r}: {err}") from None
            # An attribute read through a lossy transform twice (`{sk|part(0)}#{sk|part(1)}`) reads differently by
            # construction: the first reading stands (the attribute is a declared loss).
            if values.setdefault(piece.attribute, value) != value and piece.attribute not in self.lossy:
                raise DecodeError(f"{{{piece.attribute}}} reads {values[piece.attribute]!r} and {value!r}")
        return values


def _unescaper(delimiter: str) -> Callable[[str], str]:
    """:func:`~.render.unescape_delimiter` for ``delimiter``, faster where the text holds only the escapes
    `escape_delimiter` writes for a one-character ASCII delimiter (`%25` and, for `#`, `%23`): those two
    replaced, the escaped delimiter first (so that a `%` given back cannot start another escape), is what
    unquoting gives; any other `%` in the text goes through `unescape_delimiter` itself."""
    if len(delimiter) != 1 or not delimiter.isascii() or delimiter == "%":
        return lambda text: unescape_delimiter(text, delimiter)
    escaped = f"%{ord(delimiter):02X}"

    def unescape(text: str) -> str:
        if text.count("%") != text.count("%25") + text.count(escaped):
            return unescape_delimiter(text, delimiter)
        return text.replace(escaped, delimiter).replace("%25", "%")

    return unescape


def _int64(value: bytes) -> bytes:
    if len(value) != 8:
        raise DecodeError(f"a counter cell holds {len(value)} bytes, not an 8-byte Int64")
    return value


def typed(text: str, dynamodb_type: str) -> dict:
    """A value rendered as key text (`key_text`) back in its type."""
    if dynamodb_type == "N":
        # the type is the table's (DescribeTable), the text the row key's: text that is no number is this row's
        # error (a dead letter), never an N value that fails later where the item is keyed or written
        number_text(text)
        return {"N": text}
    if dynamodb_type == "B":
        return {"B": bytes.fromhex(text)}
    if dynamodb_type == "BOOL":
        return {"BOOL": text == "true"}
    return {"S": text}


# --------------------------------------------------------------------------- one entity


Values = Callable[[bytes, Encoding], dict]
"""Cell bytes and their encoding -> the DynamoDB value (`encodings.decode`, or a faster parser of the same JSON)."""
RowValues = Callable[[list[bytes], Encoding], list[dict]]
"""`Values` of several cells of one row at once."""


class _ColumnReader:
    def __init__(self, spec: ColumnSpec, counter: bool = False, values: Values = decode):
        self.spec, self.counter, self.values = spec, counter, values
        self.family, self.layout = spec.family, spec.layout
        self.encoding = Encoding.json if spec.layout is Layout.json else spec.encoding
        prefixed = spec.layout in (Layout.set, Layout.map)
        template = spec.qualifier.template if spec.qualifier else ("" if prefixed else spec.attribute)
        self.reader = TemplateReader(spec.qualifier) if spec.qualifier and not parse_template(template).is_literal else None
        self.qualifier = b"" if self.reader else template.encode()  # a literal qualifier or prefix
        self.set_type = SET_TYPES.get(spec.encoding) if spec.layout is Layout.set else None

    def claims(self, qualifier: bytes) -> dict[str, str] | None:
        """The attribute texts the qualifier reveals ({} for a literal one) when this column wrote it, else None."""
        if self.reader is None:
            prefixed = self.layout in (Layout.set, Layout.map)
            return {} if (qualifier.startswith(self.qualifier) if prefixed else qualifier == self.qualifier) else None
        try:
            return self.reader.read(qualifier.decode())
        except (DecodeError, UnicodeDecodeError):
            return None

    def value(self, cells: list[Cell]) -> dict:
        layout, encoding = self.layout, self.encoding
        if layout is Layout.set:
            size = len(self.qualifier)
            members = [cell.qualifier[size:] for cell in cells]
            if self.set_type == "BS":
                return {"BS": members}
            return {self.set_type or "SS": [member.decode() for member in members]}
        if layout is Layout.map:
            size = len(self.qualifier)
            # the bare prefix with no value marks an empty map; with a value it is the key "" (see the compiler)
            return {"M": {c.qualifier[size:].decode(): self.values(c.value, encoding) for c in cells
                          if len(c.qualifier) > size or c.value}}
        if layout is Layout.list:
            ordered = sorted(cells, key=lambda cell: cell.timestamp_micros)
            # one empty cell is an empty list, but where elements may encode to b"" (utf8, bytes: the writer refuses
            # empty lists there) it is [""] or [b""]
            if len(ordered) == 1 and ordered[0].value == b"" and encoding not in (Encoding.utf8, Encoding.bytes):
                return {"L": []}
            return {"L": [self.values(cell.value, encoding) for cell in ordered]}
        if self.counter:  # Bigtable keeps one Int64 per timestamp: the counter is their sum (the migrated value and
            # the increments an application added at other times)
            return {"N": str(sum(int.from_bytes(_int64(cell.value), "big", signed=True) for cell in cells))}
        if len(cells) != 1:
            raise DecodeError(f"{len(cells)} cells for one {self.spec.attribute!r} value: items of one row cannot be told apart")
        return self.values(cells[0].value, encoding)


_UNSEEN: Any = object()
CLAIMS_KEPT = 4096
"""Qualifiers whose claim an entity remembers (a rest family's attribute names, a column's few qualifiers); templated
qualifiers can be one per item, so the memory stops growing there."""


class EntityDecoder:
    def __init__(self, spec: EntitySpec, mapping: MappingSpec, types: Mapping[str, str], values: Values = decode,
                 row_values: RowValues | None = None):
        self.spec, self.name, self.types, self.values, self.row_values = spec, spec.name, types, values, row_values
        self.key = TemplateReader(spec.key)
        counters = {name for name, policy in mapping.target.families.items() if policy.aggregate}
        self.columns = [_ColumnReader(column, column.family in counters, values) for column in spec.columns]
        self.rest = spec.rest
        self.claims: dict[tuple[str, bytes], tuple[_ColumnReader | str, dict[str, str], tuple, bool] | None] = {}
        """What :meth:`claimed` found, by family and qualifier."""
        self.ignore = set(spec.drop) | set(spec.lossy)
        self.fixed = {
            name: {"N": canonical_text(condition.equals)} if isinstance(condition.equals, Decimal)
            else typed(str(condition.equals), types.get(name, "S"))
            for name, condition in spec.match.items()
            if condition.equals is not None and not isinstance(condition.equals, bool)
        }
        self.timestamp = spec.timestamp
        self._salted = spec.key.delimiter.encode() if spec.key.salt_buckets else None
        # No source reveals attribute texts (a templated qualifier) and none folds (versioning, a timestamp
        # template): every cell this entity claims in a row belongs to its one item there.
        self.one_item = not spec.versioning and all(column.reader is None and not self.folds(column)
                                                    for column in self.columns)
        # Only rest cells, and no timestamp read from them: an item is its texts and its rest attributes.
        self.rest_only = not self.columns and not self.timestamp

    def folds(self, source: _ColumnReader | str) -> bool:
        """Whether items of this entity are told apart by the cell timestamps of this source (a timestamp template,
        or versioning: each version's cells share the version's timestamp)."""
        if self.spec.versioning:
            return True
        if isinstance(source, str):
            return False
        timestamp = source.spec.timestamp or self.timestamp
        return timestamp is not None and timestamp.template is not None and source.layout is not Layout.list

    def key_values(self, row_key: bytes) -> dict[str, str]:
        if self._salted is not None:
            row_key = row_key.split(self._salted, 1)[-1]
        return self.key.read(row_key.decode())

    def claim(self, cell: Cell) -> tuple[_ColumnReader | str, dict[str, str]] | None:
        """(column reader or the rest attribute name, revealed texts) for a cell of this entity, else None."""
        for column in self.columns:
            if column.family == cell.family:
                revealed = column.claims(cell.qualifier)
                if revealed is not None:
                    return column, revealed
        if self.rest and cell.family == self.rest.family:
            return cell.qualifier.decode(), {}
        return None

    def claimed(self, cell: Cell) -> tuple[_ColumnReader | str, dict[str, str], tuple, bool] | None:
        """:meth:`claim` with what grouping needs (the revealed texts as a sorted tuple, whether the source folds),
        remembered per family and qualifier: a claim depends on nothing else. The revealed dict is shared: read only."""
        where = (cell.family, cell.qualifier)
        try:
            return self.claims[where]
        except KeyError:
            pass
        found = self.claim(cell)
        answer = None if found is None else (found[0], found[1], tuple(sorted(found[1].items())), self.folds(found[0]))
        if len(self.claims) < CLAIMS_KEPT:
            self.claims[where] = answer
        return answer

    def item(self, texts: dict[str, str], claimed: list[tuple[_ColumnReader | str, Cell]]) -> Item:
        """One item from its revealed attribute texts and its claimed cells."""
        item = dict(self.fixed)
        types = self.types
        for name, text in texts.items():
            item[name] = typed(text, types.get(name, "S"))
        if self.rest_only:  # each attribute from its first (newest) cell, as below
            assert self.rest is not None
            encoding = self.rest.encoding
            read: dict[Any, bytes] = {}
            for source, cell in claimed:
                if source not in read:  # every source a rest attribute's name here
                    read[source] = cell.value
            if self.row_values is not None:
                item.update(zip(read, self.row_values(list(read.values()), encoding)))
            else:
                values = self.values
                for source, data in read.items():
                    item[source] = values(data, encoding)
            for name in self.ignore:
                item.pop(name, None)
            return item
        by_column: dict[_ColumnReader | str, list[Cell]] = {}
        for source, cell in claimed:
            cells = by_column.get(source)
            if cells is None:
                by_column[source] = [cell]
            else:
                cells.append(cell)
        rest_encoding = self.rest.encoding if self.rest else Encoding.auto
        timed = bool(self.timestamp)  # the entity's timestamp is read from its cells' earliest time
        entity_times = []
        for source, cells in by_column.items():
            if isinstance(source, str):
                item[source] = self.values(cells[0].value, rest_encoding)
            else:
                if source.spec.attribute not in self.ignore:  # a declared loss may not read back (versioning)
                    item[source.spec.attribute] = source.value(cells)
                if source.spec.timestamp:
                    self._timestamp(source.spec.timestamp, min(c.timestamp_micros for c in cells), item)
                    continue
            if timed:
                entity_times.append(min(cell.timestamp_micros for cell in cells))
        if timed and entity_times:
            assert self.timestamp is not None
            self._timestamp(self.timestamp, min(entity_times), item)
        for name in self.ignore:
            item.pop(name, None)
        return item

    def _timestamp(self, spec: TimestampSpec, micros: int, item: Item) -> None:
        if spec.attribute:
            kind = self.types.get(spec.attribute, "S")
            item.setdefault(spec.attribute, typed(timestamp_text(micros, spec.format, kind), kind))
        elif spec.template:
            for name, text in TemplateReader(spec.template).read(timestamp_text(micros, spec.format, "N")).items():
                item.setdefault(name, typed(text, self.types.get(name, "S")))


_first = itemgetter(0)


# --------------------------------------------------------------------------- the spec


class Decoder:
    """Rows -> items for a whole spec; entities are tried in order, a row's cells go to the first that claims them."""

    def __init__(self, spec: MappingSpec, types: Mapping[str, str] | None = None,
                 json_loads: Callable[[bytes], Any] | None = None,
                 json_loader_for: Callable[[bytes], Callable[[bytes], Any]] | None = None):
        """``json_loads``: parses DynamoDB JSON cells (``ddb_json``, and ``auto`` cells that start with ``{``) where
        given; it must give ``json.loads``'s value or error for every document (the I/O layer's faster parser).
        ``json_loader_for``: given a row's cells joined by newlines, such a ``json_loads`` for each of them (one
        look at the whole row where ``json_loads`` would look at each cell)."""
        self.spec = spec
        values = decode if json_loads is None else _values_with(json_loads)
        row_values = None if json_loader_for is None else _row_values_with(json_loader_for)
        self.entities = [EntityDecoder(e, spec, types or {}, values, row_values)
                         for e in spec.entities if e.action == "map"]
        self.by_name = {entity.name: entity for entity in self.entities}
        self.losses = losses(spec)
        self.index_prefixes = tuple(index.target.prefix.encode() for index in spec.indexes if index.target.prefix)
        """Index rows (spec.indexes) hold no entity's item: decode_entities reads none from them."""

    def decode_item(self, entity: str, row_key: bytes, cells: Iterable[Cell]) -> Item:
        """The item that wrote exactly these cells (one MappedRow) through `entity`."""
        decoder = self.by_name[entity]
        texts = decoder.key_values(row_key)
        claimed = []
        for cell in cells:
            found = decoder.claim(cell)
            if found is None:
                raise DecodeError(f"no column of entity {entity!r} writes {cell.family}:{cell.qualifier!r}")
            source, revealed = found
            texts.update(revealed)
            claimed.append((source, cell))
        return decoder.item(texts, claimed)

    def decode_row(self, row_key: bytes, cells: Iterable[Cell]) -> list[Item]:
        """Every item folded into one row: cells grouped per entity by what their qualifiers (or timestamps) reveal."""
        return [item for _, item in self.decode_entities(row_key, cells)]

    def decode_entities(self, row_key: bytes, cells: Iterable[Cell]) -> list[tuple[str, Item]]:
        """:meth:`decode_row` with the entity each item was read as (none from an index row: it repeats an item)."""
        if self.index_prefixes and row_key.startswith(self.index_prefixes):
            return []
        left = list(cells)
        keyed: list[tuple[EntityDecoder, dict[str, str]]] = []
        for decoder in self.entities:
            try:
                keyed.append((decoder, decoder.key_values(row_key)))
            except (DecodeError, UnicodeDecodeError):
                continue
        # A column's claim comes before any rest's: in a row that several entities share, a rest takes only what
        # no column of any entity writes (else the first entity's rest would take a later entity's columns).
        # Each entity's cells stay in row order (their index), as items are built from them.
        mine: list[list[tuple[int, Any, Cell]]] = [[] for _ in keyed]
        numbered = list(enumerate(left))
        for rests in ((False, True) if len(keyed) > 1 else (None,)):
            for position, (decoder, _texts) in enumerate(keyed):
                if rests and decoder.rest is None:
                    continue
                claims, kept, taken = decoder.claims, [], mine[position]
                for number, cell in numbered:
                    found = claims.get(cell[:2], _UNSEEN)  # (family, qualifier)
                    if found is _UNSEEN:
                        found = decoder.claimed(cell)
                    if found is None or (rests is not None and isinstance(found[0], str) is not rests):
                        kept.append((number, cell))
                    else:
                        taken.append((number, found, cell))
                numbered = kept
        left = [cell for _, cell in numbered]
        items: list[tuple[str, Item]] = []
        for (decoder, texts), taken in zip(keyed, mine):
            if not taken:
                continue
            try:
                items.extend(self._items(decoder, texts, taken))
            except DecodeError:
                raise
            except ValueError as err:  # a cell's bytes that its encoding cannot read (not UTF-8, not JSON, ...)
                raise DecodeError(f"row {row_key!r}: entity {decoder.name!r} cannot read its cells: {err}") from err
        if left:
            raise DecodeError(f"row {row_key!r}: no entity writes {sorted({(c.family, c.qualifier) for c in left})[:3]}")
        return items

    @staticmethod
    def _items(decoder: EntityDecoder, texts: dict[str, str], taken: list[tuple[int, Any, Cell]]) -> list[tuple[str, Item]]:
        """An entity's items in a row from the cells it took there (in row order: their index first)."""
        taken.sort(key=_first)
        if decoder.one_item:  # every claimed cell is in one group
            return [(decoder.name, decoder.item(texts, [(found[0], cell) for _, found, cell in taken]))]
        groups: dict[tuple, list] = {}
        for _, (source, revealed, key, folds), cell in taken:
            if folds:
                key += (cell.timestamp_micros,)
            members = groups.get(key)
            if members is None:
                members = groups[key] = []
            members.append((source, cell, revealed))
        items = []
        for members in groups.values():
            group_texts = dict(texts)
            for _, _, revealed in members:
                group_texts.update(revealed)
            items.append((decoder.name, decoder.item(group_texts, [(source, cell) for source, cell, _ in members])))
        return items


_HOLDS_BINARY = frozenset(("B", "BS", "L", "M"))
"""Tags whose payload from_typed_json rebuilds (base64 into bytes, at any depth)."""


def _values_with(json_loads: Callable[[bytes], Any]) -> Values:
    """`encodings.decode`, with DynamoDB JSON parsed by ``json_loads``."""

    def values(data: bytes, encoding: Encoding) -> dict:
        if encoding is Encoding.ddb_json or (encoding is Encoding.auto and data[:1] == b"{"):
            value = json_loads(data)
            if type(value) is dict and len(value) == 1 and next(iter(value)) not in _HOLDS_BINARY:
                return value  # a new dict, as from_typed_json would give it back
            return from_typed_json(value)
        return decode(data, encoding)

    return values


def _row_values_with(json_loader_for: Callable[[bytes], Callable[[bytes], Any]]) -> RowValues:
    """The values of one row's cells (`_values_with`), their DynamoDB JSON parsed by what ``json_loader_for`` gives
    for all of them."""

    def row_values(cells: list[bytes], encoding: Encoding) -> list[dict]:
        values = _values_with(json_loader_for(b"\n".join(cells)))
        return [values(data, encoding) for data in cells]

    return row_values


def compile_decoder(spec: MappingSpec, types: Mapping[str, str] | None = None) -> Decoder:
    return Decoder(spec, types)


# --------------------------------------------------------------------------- losses


def losses(spec: MappingSpec) -> tuple[Loss, ...]:
    """Every loss the spec causes, declared or not, entity by entity (undeclared ones are spec errors)."""
    found: list[Loss] = []
    if spec.unmatched == "skip":
        found.append(Loss("(unmatched)", None, "items no entity matches are skipped (unmatched: skip)", True))
    for entity in spec.entities:
        found += _entity_losses(entity, spec)
    return tuple(found + _shared_cells(spec) + _shared_rests(spec))


def _entity_losses(entity: EntitySpec, spec: MappingSpec) -> list[Loss]:
    name = entity.name
    if entity.action == "skip":
        return [Loss(name, None, "action: skip leaves these items out", True)]
    declared = set(entity.drop) | set(entity.lossy)
    found = [Loss(name, attribute, "in drop: not migrated", True) for attribute in entity.drop]

    def lose(attribute: str, reason: str) -> None:
        found.append(Loss(name, attribute, reason, attribute in declared))

    if entity.versioning:  # the versioning block says it: declared
        found.append(Loss(name, None, "versioning skips the v0_ copy of the newest version", True))
        found.append(Loss(name, entity.versioning.attribute or spec.source.sort_key or "?",
                          "versioning folds the version number into timestamps", True))
        if entity.timestamp:
            for attribute in [entity.timestamp.attribute] if entity.timestamp.attribute else parse_template(entity.timestamp.template or "").attributes:
                lose(attribute, "versioning adds the version number, in milliseconds, to the timestamps read from it")
        for column in entity.columns:
            if column.layout is Layout.list:
                lose(column.attribute, "with versioning, element i of version N and element i-1 of version N+1 get "
                                       "one timestamp: one overwrites the other (use layout json)")
            elif column.timestamp:
                lose(column.attribute, "with versioning, cells with a timestamp of their own cannot be told to their version")
    if entity.ttl:  # the ttl block says it: declared
        found.append(Loss(name, None, "ttl skips items already expired", True))
        found.append(Loss(name, entity.ttl.attribute, "ttl keeps the expiry as cell timestamps, to the second", True))
    readers = [(TemplateReader(entity.key), "row key")]
    readers += [(TemplateReader(c.qualifier), f"qualifier of {c.attribute!r}") for c in entity.columns if c.qualifier]
    timestamps = [entity.timestamp] + [column.timestamp for column in entity.columns]
    readers += [(TemplateReader(t.template), "timestamp template") for t in timestamps if t and t.template]
    for reader, where in readers:
        for attribute, reason in reader.lossy.items():
            lose(attribute, f"the {where} {reason}")
        if reader.problem:
            for attribute in reader.attributes:
                lose(attribute, f"the {where} cannot be split back: {reader.problem}")
    for timestamp in timestamps:
        if timestamp and (timestamp.template or timestamp.attribute) and entity.ttl:
            for attribute in [timestamp.attribute] if timestamp.attribute else parse_template(timestamp.template or "").attributes:
                lose(attribute, "ttl replaces the cell timestamps it was read from")
    for column in entity.columns:
        if column.layout in (Layout.set, Layout.map) and column.qualifier is not None and \
                not parse_template(column.qualifier.template).is_literal:  # fmt: skip
            lose(column.attribute, f"layout {column.layout.value} under the qualifier template "
                                   f"{column.qualifier.template!r}: each member's name follows the template's text, "
                                   "and no decoder can tell where one ends (use a literal prefix and one row per item, "
                                   "or layout json)")
        if column.layout is Layout.set and column.encoding not in SET_TYPES:
            lose(column.attribute, "layout set with encoding auto does not keep the set type (use utf8, decimal or bytes)")
        policy = spec.target.families.get(column.family)
        if column.layout is Layout.list and policy is not None and policy.max_versions is not None:
            lose(column.attribute, f"layout list writes one cell version per element and family {column.family!r} "
                                   f"keeps {policy.max_versions}: GC drops the first elements of longer lists "
                                   "(use layout json, or raise max_versions and declare the loss)")
    found += _shared_families(entity, declared)
    return found


def _shared_families(entity: EntitySpec, declared: set[str]) -> list[Loss]:
    """Columns whose qualifiers another source of the same entity and family could also write.

    Literal qualifiers written twice are spec errors (checks), and a rest attribute named like a
    literal column, or starting with a set or map column's prefix, is an item error (compiler):
    neither is a loss.
    """
    spaces = list(entity_spaces(entity, frozenset(consumed_attributes(entity))))
    found = []
    for space in spaces:
        if space.kind in ("literal", "rest"):
            continue
        for other in spaces:
            guarded = other.kind == "rest" and space.kind == "prefix" and space.head
            if other is space or guarded or not overlap(space, other):
                continue
            reason = (f"its qualifiers in family {space.family!r} can also be written by {other.describe()} "
                      "(give it a family of its own, or a qualifier prefix no other qualifier there starts with)")
            found.append(Loss(entity.name, space.attribute, reason, space.attribute in declared))
            break
    return found


def shares_rows(a: EntitySpec, b: EntitySpec, keys: frozenset[str] = frozenset()) -> bool:
    """Whether items of two entities can land in the same row (conservative: True unless the keys provably differ).

    Keys differ when their templates start with incompatible literal text (`user#` and `order#`),
    or are the same template with an attribute the two entities' match conditions tell apart and
    the template keeps intact (no lossy transform on it), or are the same template that reads back the whole
    primary key (``keys``, both key attributes): two items have two keys, so two rows.
    """
    if a.row_key is None or b.row_key is None:
        return False
    if (a.row_key.salt_buckets, a.row_key.delimiter) != (b.row_key.salt_buckets, b.row_key.delimiter):
        return True
    pieces_a, pieces_b = parse_template(a.row_key.template).pieces, parse_template(b.row_key.template).pieces
    head_a = pieces_a[0] if isinstance(pieces_a[0], str) else ""
    head_b = pieces_b[0] if isinstance(pieces_b[0], str) else ""
    if not (head_a.startswith(head_b) or head_b.startswith(head_a)):
        return False
    if a.row_key != b.row_key:
        return True
    reader = TemplateReader(a.row_key)
    if reader.problem:
        return True
    if keys and keys <= set(reader.attributes) - set(reader.lossy):
        return False
    return not any(
        isinstance(piece, Placeholder)
        and not any(TRANSFORMS[call.name].loss for call in piece.transforms)
        and piece.attribute in a.match and piece.attribute in b.match
        and _disjoint(a.match[piece.attribute], b.match[piece.attribute])
        for piece in pieces_a
    )


def key_names(spec: MappingSpec) -> frozenset[str]:
    """The source's key attributes the spec names (none when the partition key is not known yet)."""
    pk, sk = spec.source.partition_key, spec.source.sort_key
    return frozenset(name for name in (pk, sk) if name) if pk else frozenset()


def one_item_per_row(spec: MappingSpec) -> bool:
    """Whether no two items can write into one row, so that no item can overwrite another's cell.

    True when every entity's row key reads back the whole primary key (both key attributes, no lossy
    transform, a template the decoder can split), no entity keeps versions in one row, and no two
    entities share rows (:func:`shares_rows`). Conservative: False when unsure (a key unknown,
    a fold). `migrate` then says its cell count is an upper bound: cells a later item overwrote in
    a shared row are counted only when the writer saw both (docs/PIPELINE.md).
    """
    keys = key_names(spec)
    if not keys:
        return False
    writing = [entity for entity in spec.entities if entity.action == "map" and entity.row_key is not None]
    for entity in writing:
        assert entity.row_key is not None
        reader = TemplateReader(entity.row_key)
        if entity.versioning or reader.problem or not keys <= set(reader.attributes) - set(reader.lossy):
            return False
    return not any(shares_rows(a, b) for i, a in enumerate(writing) for b in writing[i + 1:])


def _disjoint(a: Condition, b: Condition) -> bool:
    """Whether no value satisfies both conditions (conservative: False when unsure)."""
    known_a = a.equals if isinstance(a.equals, str) else None
    known_b = b.equals if isinstance(b.equals, str) else None
    if known_a is not None and known_b is not None:
        return known_a != known_b
    for known, other in ((known_a, b), (known_b, a)):
        if known is not None and other.prefix is not None and not known.startswith(other.prefix):
            return True
    if a.prefix is not None and b.prefix is not None:
        return not (a.prefix.startswith(b.prefix) or b.prefix.startswith(a.prefix))
    return False


def _default_time(entity: EntitySpec, path: tuple) -> bool:
    """Whether a column's (or rest's) cells all get the one default timestamp (migration_time or the run's now)."""
    column = entity.columns[path[1]] if path[:1] == ("columns",) else None
    return not (entity.timestamp or entity.ttl or entity.versioning or (column is not None and column.timestamp))


class SharedCells(NamedTuple):
    """Two entities that can land in one row and write qualifiers there that can meet."""

    earlier: EntitySpec
    later: EntitySpec
    first: Space
    second: Space
    certain: bool
    """The same row-key template, literal qualifier and default timestamp: one cell overwrites the other."""


def shared_cells(spec: MappingSpec) -> list[SharedCells]:
    """Every pair of entities that can share rows, with the first pair of their qualifier spaces that meet there."""
    mapped = [entity for entity in spec.entities if entity.action == "map"]
    spaces = [list(entity_spaces(entity, frozenset(consumed_attributes(entity)))) for entity in mapped]
    keys = key_names(spec)
    found = []
    for j, later in enumerate(mapped):
        for i, earlier in enumerate(mapped[:j]):
            if not shares_rows(earlier, later, keys):
                continue
            same_rows = earlier.row_key == later.row_key  # not merely rows that could meet: the same ones
            meeting = [
                SharedCells(earlier, later, a, b, same_rows and a.kind == b.kind == "literal"
                            and _default_time(earlier, a.path) and _default_time(later, b.path))
                for a in spaces[i] for b in spaces[j] if overlap(a, b)
            ]  # fmt: skip
            found += [shared for shared in meeting if shared.certain] or meeting[:1]
    return found


def _shared_cells(spec: MappingSpec) -> list[Loss]:
    """Cells two entities certainly both write: the same row, family and literal qualifier at the default timestamp.

    Where an item of each exists, one cell overwrites the other, and the row reads back as the
    first entity's item only: a loss of the later entity, declared by listing its attribute in
    its `lossy`. Other overlaps (rest, templates, own timestamps) depend on the data: a plan warning.
    """
    return [
        Loss(shared.later.name, shared.second.attribute,
             f"entity {shared.earlier.name!r} writes {shared.second.family}:{shared.second.head} in the same rows at the "
             "same time: where an item of each exists, one cell overwrites the other (give one another qualifier, or "
             "declare the loss)", shared.second.attribute in shared.later.lossy)
        for shared in shared_cells(spec)
        if shared.certain
    ]  # fmt: skip


def _shared_rests(spec: MappingSpec) -> list[Loss]:
    """Two entities that can share rows, each with a rest in the same family: read back, the first one's rest
    claims every rest cell there (:meth:`Decoder.decode_entities`), so the later entity's rest attributes become
    the first one's (and an item of it with nothing else in the row is not read at all). Shown as a loss of the
    later entity's items (a rollback then refuses to overwrite the source table without --accept-loss); the spec
    still loads, its shared-cells lint says why and how to keep them apart."""
    mapped = [entity for entity in spec.entities if entity.action == "map" and entity.rest is not None]
    keys = key_names(spec)
    found = []
    for j, later in enumerate(mapped):
        assert later.rest is not None
        family = later.rest.family
        earlier = next((e for e in mapped[:j] if e.rest is not None and e.rest.family == family
                        and shares_rows(e, later, keys)), None)  # fmt: skip
        if earlier is not None:
            found.append(Loss(later.name, None, f"what its rest writes in family {family} reads back as "
                              f"entity {earlier.name!r}'s attributes, whose rest shares those rows and family (give one "
                              "a family of its own, or no rest)", True))  # fmt: skip
    return found


def undeclared(spec: MappingSpec) -> list[tuple[tuple, str]]:
    """Undeclared losses as spec problems (field path, message), the shape of `checks.check_spec`."""
    index = {entity.name: i for i, entity in enumerate(spec.entities)}
    return [
        (("entities", index[loss.entity], "lossy"), f"{loss.describe()}")
        for loss in losses(spec)
        if not loss.declared
    ]


def round_trip(decoder: Decoder, item: Item, entity: str, row_key: bytes, cells: Iterable[Cell]) -> list[str]:
    """What differs between an item and what its own cells read back as (declared losses aside)."""
    try:
        back = decoder.decode_item(entity, row_key, cells)
    except (DecodeError, ValueError, AttributeValueError) as err:
        return [f"cannot be read back: {err}"]
    ignore = decoder.by_name[entity].ignore | ignored_by_construct(decoder.by_name[entity].spec, decoder.spec)
    want = {name: comparable(value) for name, value in item.items() if name not in ignore}
    got = {name: comparable(value) for name, value in back.items() if name not in ignore}
    return [
        f"attribute {name!r}: {_show(item.get(name))} reads back as {_show(back.get(name))}"
        for name in sorted(set(want) | set(got))
        if want.get(name) != got.get(name)
    ]


def ignored_by_construct(entity: EntitySpec, spec: MappingSpec) -> set[str]:
    names = {entity.ttl.attribute} if entity.ttl else set()
    if entity.versioning:
        names.add(entity.versioning.attribute or spec.source.sort_key or "")
    return names


def comparable(value: dict):
    """A value in one spelling: canonical numbers, sets as sorted tuples, binaries as bytes (sets are unordered)."""
    tag, payload = kind_of(value)
    if tag == "N":
        return tag, number_text(payload)
    if tag == "B":
        return tag, binary(payload)
    if tag in ("SS", "NS", "BS"):
        convert: Callable[[Any], Any] = str if tag == "SS" else number_text if tag == "NS" else binary
        return tag, tuple(sorted(convert(member) for member in payload))
    if tag == "L":
        return tag, tuple(comparable(element) for element in payload)
    if tag == "M":
        return tag, tuple(sorted((name, comparable(element)) for name, element in payload.items()))
    return tag, payload


def _show(value: dict | None) -> str:
    if value is None:
        return "(absent)"
    try:
        return key_text(value)[:40] if next(iter(value)) in ("S", "N") else str(comparable(value))[:60]
    except (AttributeValueError, ValueError):
        return str(value)[:60]


