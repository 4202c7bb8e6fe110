"""Items read back through the spec's decoder (`mappers.decode`), for validate: which attributes differ.

Pure: no I/O.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from ..attrvalue import AttributeValueError, binary, number_text, to_export_json
from ..decode import Decoder, DecodeError, ignored_by_construct, comparable
from ..index_rows import INDEX_ENTITY, decode_index_row, projected
from ..results import Cell
from ..spec import Layout, MappingSpec

Item = dict


class DecoderCache:
    """Decoders by the DynamoDB types of the attributes only a key, qualifier, timestamp or match reveals.

    Those attributes' types are not in the cells, so they come from the source item; items of
    one table almost always agree on them, so this holds one or two decoders.
    """

    LIMIT = 64

    def __init__(self, spec: MappingSpec):
        self.spec = spec
        self.probe = probe = Decoder(spec)
        names: set[str] = set()
        for entity in probe.entities:
            names.update(entity.key.attributes, entity.fixed)
            for column in entity.columns:
                if column.reader is not None:
                    names.update(column.reader.attributes)
            for timestamp in [entity.timestamp] + [c.spec.timestamp for c in entity.columns]:
                if timestamp is not None and timestamp.attribute:
                    names.add(timestamp.attribute)
                if timestamp is not None and timestamp.template:
                    from ..templates import parse_template

                    names.update(parse_template(timestamp.template).attributes)
        self.names = tuple(sorted(names))
        self._decoders: dict[tuple, Decoder] = {}
        self._ignored = {entity.name: entity.ignore | ignored_by_construct(entity.spec, spec) for entity in probe.entities}
        self._skipped = {entity.name: _ignored_cells(entity, self._ignored[entity.name]) for entity in probe.entities}
        self.unreadable = {entity.name for entity in probe.entities if _unreadable_key(entity.key)}
        """Entities whose row keys cannot be read back by construction (a declared-lossy attribute read twice)."""

    def decoder(self, item: Item) -> Decoder:
        types = tuple((name, next(iter(item[name]))) for name in self.names if name in item)
        found = self._decoders.get(types)
        if found is None:
            if len(self._decoders) >= self.LIMIT:
                self._decoders.clear()
            found = self._decoders[types] = Decoder(self.spec, dict(types))
        return found

    def _index_differences(self, name: str, item: Item, cells: list[Cell]) -> list[tuple[Any, Any, Any]]:
        """An index row read back against the projection of its item."""
        index = next(found for found in self.spec.indexes if found.name == name)
        want = projected(index, item, self.spec.source.partition_key, self.spec.source.sort_key)
        back = decode_index_row(index.family, cells)
        return [(attribute, _json_or_none(want.get(attribute)), _json_or_none(back.get(attribute)))
                for attribute in sorted(set(want) | set(back))
                if attribute not in want or attribute not in back or not _same_value(want[attribute], back[attribute])]

    def differences(self, item: Item, entity: str, row_key: bytes, cells: list[Cell]) -> list[tuple[Any, Any, Any]] | None:
        """(attribute, source value, value read back) per attribute that differs, DynamoDB JSON; declared losses aside.

        Cells of attributes the entity declares lossy (or drops) are left out when they keep the
        decoder from reading the item; if it still cannot, the item is not read back: None when
        the entity declares losses (then only its cells are compared), else one entry with
        attribute None and the reason.
        """
        if entity in self.unreadable:
            return None
        if entity.startswith(INDEX_ENTITY):
            return self._index_differences(entity[len(INDEX_ENTITY):], item, cells)
        decoder = self.decoder(item)
        ignore = self._ignored.get(entity, set())
        skip = self._skipped.get(entity)
        if skip:  # cells of ignored attributes that reveal nothing: never read back, and often what cannot be
            cells = [cell for cell in cells if not skip(cell)]
        try:
            back = decoder.decode_item(entity, row_key, cells)
        except (DecodeError, ValueError, AttributeValueError) as err:
            kept = [cell for cell in cells if self._attribute(decoder, entity, cell) not in ignore]
            try:
                if len(kept) == len(cells):
                    raise
                back = decoder.decode_item(entity, row_key, kept)
            except (DecodeError, ValueError, AttributeValueError):
                if decoder.by_name[entity].spec.lossy:
                    return None
                return [(None, None, f"cannot be read back: {err}")]
        found = []
        for name in sorted((set(item) | set(back)) - ignore):
            want, got = item.get(name), back.get(name)
            if want is None or got is None or not _same_value(want, got):
                found.append((name, _json_or_none(want), _json_or_none(got)))
        return found

    @staticmethod
    def _attribute(decoder: Decoder, entity: str, cell: Cell) -> str | None:
        """The attribute whose column (or the rest) wrote this cell, as the entity reads it."""
        try:
            claimed = decoder.by_name[entity].claim(cell)
        except (DecodeError, UnicodeDecodeError, ValueError):
            return None
        if claimed is None:
            return None
        source = claimed[0]
        return source if isinstance(source, str) else source.spec.attribute


def _ignored_cells(entity: Any, ignore: set[str]) -> Any:
    """A test for the cells of the entity's ignored attributes whose qualifiers reveal nothing (None: there are none)."""
    exact, prefixes = set(), []
    for column in entity.columns:
        if column.spec.attribute in ignore and column.reader is None:
            if column.layout in (Layout.set, Layout.map):
                prefixes.append((column.family, column.qualifier))
            else:
                exact.add((column.family, column.qualifier))
    if entity.rest is not None:
        exact.update((entity.rest.family, name.encode()) for name in ignore)
    if not exact and not prefixes:
        return None

    def ignored(cell: Cell) -> bool:
        return (cell.family, cell.qualifier) in exact or any(
            cell.family == family and cell.qualifier.startswith(prefix) for family, prefix in prefixes)

    return ignored


def _unreadable_key(reader: Any) -> bool:
    """A row key template that reads one attribute in two places through lossy transforms (`{sk|part(1)}#{sk|part(2)}`):
    the two texts never agree, so no row key of it reads back."""
    names = reader.attributes
    return any(names.count(name) > 1 for name in reader.lossy)


def _same_value(want: dict, got: dict) -> bool:
    try:
        return bool(comparable(want) == comparable(got))
    except (ValueError, AttributeValueError):  # read back from a damaged cell: no valid DynamoDB value, so not the same
        return False


def _json_or_none(value: dict | None) -> Any:
    return None if value is None else to_export_json(_sets_sorted(value))


def _sets_sorted(value: Any) -> Any:
    """``value`` with every set's members in order (numbers by value, binaries by bytes), at any depth: a set has
    no order, and the line shows the source's beside what was read back, which comes out sorted."""
    try:
        (tag, payload), = value.items()
        if tag == "SS":
            return {tag: sorted(payload, key=lambda member: member.encode("utf-8"))}
        if tag == "NS":
            return {tag: sorted(payload, key=lambda member: Decimal(number_text(member)))}  # exact, never a float
        if tag == "BS":
            return {tag: sorted(payload, key=binary)}
        if tag == "L":
            return {tag: [_sets_sorted(element) for element in payload]}
        if tag == "M":
            return {tag: {name: _sets_sorted(element) for name, element in payload.items()}}
    except (AttributeError, TypeError, ValueError, ArithmeticError, AttributeValueError):
        pass  # not a valid value (read back from a damaged cell): shown as it is
    return value
