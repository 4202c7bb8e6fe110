"""Compile a validated spec into plain callables, once, then map items with no parsing per item.

`compile_spec(spec).map_item(item)` returns a MappedRow, an ItemError or a Skipped and never
raises: one bad item is dead-lettered, the batch goes on.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from decimal import Decimal, InvalidOperation
from typing import NamedTuple
from datetime import timedelta

from . import limits
from .limits import LimitError
from .attrvalue import AttributeValueError, item_problem, key_text, kind_of, member_bytes
from .encodings import SET_TYPES, EncodingError, encoder_for
from .index_rows import compile_indexes
from .results import Cell, IndexRow, ItemError, MappedRow, MapResult, Skipped
from .spec import ColumnSpec, Encoding, EntitySpec, Layout, MappingSpec
from .render import ItemFailure, compile_template, salt_prefix
from .spaces import entity_spaces, overlap
from .specialise import specialise
from .templates import parse_template
from .timestamps import TimestampError, compile_timestamp, reads_back

Item = dict


# --------------------------------------------------------------------------- match conditions


def _compile_condition(attribute: str, condition) -> Callable[[Item], bool]:
    checks: list[Callable[[dict], bool]] = []
    if condition.equals is not None:
        expected = condition.equals
        if isinstance(expected, bool):
            checks.append(lambda value: value == {"BOOL": expected})
        elif isinstance(expected, Decimal):  # a number: N values only, compared as exact decimals (30 == 30.0)
            number = expected

            def equals_number(value: dict) -> bool:
                text = value.get("N")
                if text is None or len(value) != 1:
                    return False
                try:
                    return Decimal(text) == number
                except (InvalidOperation, TypeError):
                    return False

            checks.append(equals_number)
        else:
            wanted = str(expected)

            def equals(value: dict) -> bool:
                payload = value.get("S")  # fast path: a plain string value
                if payload is not None and len(value) == 1:
                    return payload == wanted
                return _text_or_none(value) == wanted

            checks.append(equals)
    if condition.prefix is not None:
        prefix = condition.prefix
        checks.append(lambda value: (text := _text_or_none(value)) is not None and text.startswith(prefix))
    if condition.regex is not None:
        pattern = re.compile(condition.regex)
        checks.append(lambda value: (text := _text_or_none(value)) is not None and pattern.search(text) is not None)
    if condition.exists is False:
        return lambda item: attribute not in item

    if len(checks) == 1:  # the usual case, without the loop
        check = checks[0]

        def holds_one(item: Item) -> bool:
            value = item.get(attribute)
            return value is not None and check(value)

        return holds_one

    def holds(item: Item) -> bool:
        value = item.get(attribute)
        return value is not None and all(check(value) for check in checks)

    return holds


def _text_or_none(value: dict) -> str | None:
    try:
        return key_text(value)
    except (AttributeValueError, ValueError):
        return None


# --------------------------------------------------------------------------- columns


class _Column:
    """One compiled column: everything decided, nothing left to parse."""

    __slots__ = ("spec", "attribute", "family", "qualifier", "encode", "layout", "timestamp", "required", "set_type", "emit",
                 "one_cell")

    def __init__(self, spec: ColumnSpec):
        self.spec = spec
        self.attribute = spec.attribute
        self.family = spec.family
        qualifier = spec.qualifier
        if spec.layout in (Layout.set, Layout.map):
            default = ""
        else:
            default = spec.attribute
        if qualifier is None:
            self.qualifier: bytes | Callable[[Item], str] = default.encode()
        elif parse_template(qualifier.template).is_literal:
            self.qualifier = qualifier.template.encode()
        else:
            self.qualifier = compile_template(qualifier)
        self.encode = encoder_for(spec.encoding)
        self.layout = spec.layout
        # None: the entity's timestamp, computed once per item rather than once per column
        self.timestamp = compile_timestamp(spec.timestamp, compile_template) if spec.timestamp is not None else None
        self.required = spec.required
        self.set_type = SET_TYPES.get(spec.encoding) if spec.layout is Layout.set else None
        self.emit = self.cells
        # One cell at a literal qualifier: where it is does not depend on the value (see _Entity.stale).
        self.one_cell = self.qualifier.__class__ is bytes and self.layout in (Layout.cell, Layout.json)
        if self.one_cell:
            # the common case as one closure: no layout or qualifier decisions per item
            family, fixed = self.family, self.qualifier
            encode = self.encode if self.layout is Layout.cell else _encode_json

            def emit(item: Item, value: dict, timestamp_us: int, out: list[Cell]) -> None:
                out.append(_new_cell(Cell, (family, fixed, timestamp_us, encode(value))))

            self.emit = emit

    def cells(self, item: Item, value: dict, timestamp_us: int, out: list[Cell]) -> None:
        qualifier = self.qualifier if self.qualifier.__class__ is bytes else self.qualifier(item).encode()  # type: ignore[operator]
        layout = self.layout
        family = self.family
        if layout is Layout.cell or layout is Layout.json:
            encoded = self.encode(value) if layout is Layout.cell else _encode_json(value)
            out.append(_new_cell(Cell, (family, qualifier, timestamp_us, encoded)))
            return
        tag, payload = kind_of(value)
        if layout is Layout.set:
            if not payload or self.set_type not in (None, tag):
                raise EncodingError(f"layout set with encoding {self.spec.encoding.value} needs a non-empty {self.set_type or 'SS, NS or BS'}, got {tag}")
            start = len(out)
            if tag == "SS":
                for member in payload:
                    out.append(_new_cell(Cell, (family, qualifier + member.encode(), timestamp_us, b"\x00")))
            elif tag in ("NS", "BS"):
                for member in payload:
                    out.append(_new_cell(Cell, (family, qualifier + member_bytes(tag, member), timestamp_us, b"\x00")))
            else:
                raise EncodingError(f"layout set needs SS, NS or BS, got {tag}")
            if len({cell[1] for cell in out[start:]}) != len(payload):  # DynamoDB refuses them too: one cell, not two
                raise EncodingError(f"the {tag} has duplicate members (as stored: equal numbers or repeated values)")
        elif layout is Layout.map:
            if tag != "M":
                raise EncodingError(f"layout map needs M, got {tag}")
            if not payload:  # an empty map is one cell at the bare prefix, with no value
                out.append(_new_cell(Cell, (family, qualifier, timestamp_us, b"")))
            encode = self.encode
            for name, element in payload.items():
                encoded = encode(element)
                if not name and not encoded:  # the key "" is the bare prefix too: it needs a value to be told apart
                    raise EncodingError(f"map key '' with a value that encodes to no bytes cannot be told from an "
                                        f"empty map in layout map with encoding {self.spec.encoding.value}; use layout json")
                out.append(_new_cell(Cell, (family, qualifier + name.encode(), timestamp_us, encoded)))
        else:  # list: one cell per element, one millisecond apart, so the order survives
            if tag != "L":
                raise EncodingError(f"layout list needs L, got {tag}")
            if not payload:  # one empty cell: an element never encodes to b"" (but for utf8 and bytes)
                if self.spec.encoding in (Encoding.utf8, Encoding.bytes):
                    raise EncodingError(
                        f"an empty list cannot be told from [\"\"] in layout list with encoding {self.spec.encoding.value}; use auto"
                    )
                out.append(_new_cell(Cell, (family, qualifier, timestamp_us, b"")))
                return
            encode = self.encode
            for index, element in enumerate(payload):
                out.append(_new_cell(Cell, (family, qualifier, timestamp_us + index * 1000, encode(element))))

_new_cell = tuple.__new__  # Cell(...) through the NamedTuple's Python __new__ costs 2.5x more


_encode_json = encoder_for(Encoding.json)


# --------------------------------------------------------------------------- entities


class _Entity:
    __slots__ = (
        "name", "conditions", "skip", "row_key", "salt", "delimiter", "columns", "rest", "consumed",
        "timestamp", "ttl_attribute", "ttl_missing_skip", "family_age_us", "versioning", "now_us", "default_us",
        "spans", "rest_taken", "rest_prefixes", "rest_encoding", "context", "key_attributes", "timestamp_texts",
        "specialised", "same_row",
    )  # fmt: skip

    def __init__(self, spec: EntitySpec, mapping: MappingSpec, now_ms: int, migration_ms: int):
        self.name = spec.name
        self.conditions = tuple(_compile_condition(attr, cond) for attr, cond in spec.match.items())
        self.skip = spec.action == "skip"
        self.specialised: Callable[[Item], MappedRow | None] | None = None
        self.now_us = now_ms * 1000
        self.default_us = migration_ms * 1000
        if self.skip:
            return
        self.row_key = compile_template(spec.key)
        self.salt = spec.key.salt_buckets
        self.delimiter = spec.key.delimiter
        self.timestamp = compile_timestamp(spec.timestamp, compile_template) if spec.timestamp else None
        self.columns = tuple(_Column(column) for column in spec.columns)
        self.rest = (spec.rest.family, encoder_for(spec.rest.encoding)) if spec.rest else None
        self.rest_encoding = spec.rest.encoding if spec.rest else None
        # Literal qualifiers of the rest family: a leftover attribute of that name would overwrite the column.
        self.rest_taken = {
            column.qualifier: column.attribute
            for column in self.columns
            if spec.rest and column.family == spec.rest.family and column.qualifier.__class__ is bytes
            and column.layout not in (Layout.set, Layout.map)
        }
        # Set members and map keys of the rest family follow their prefix: a leftover attribute whose name starts
        # with it would read back as a member or key, so it is refused (an empty prefix is a declared loss instead).
        self.rest_prefixes = {
            column.qualifier.decode(): column.attribute
            for column in self.columns
            if spec.rest and column.family == spec.rest.family and column.layout in (Layout.set, Layout.map)
            and column.qualifier.__class__ is bytes and column.qualifier
        }
        self.consumed = frozenset(consumed_attributes(spec))
        # Columns whose qualifiers vary per item (templates, set members, map keys) may meet another source's
        # qualifier: such entities record which column wrote which cells and check them (see _duplicates), unless
        # no two of their qualifier spaces can meet, which is known from the spec alone (see _may_collide).
        self.spans = _may_collide(spec, self.consumed) and any(
            column.qualifier.__class__ is not bytes or column.layout in (Layout.set, Layout.map) for column in self.columns
        )
        self.ttl_attribute = spec.ttl.attribute if spec.ttl else None
        self.ttl_missing_skip = bool(spec.ttl and spec.ttl.on_missing == "skip")
        self.family_age_us = {
            name: int(policy.max_age / timedelta(microseconds=1))
            for name, policy in mapping.target.families.items()
            if policy is not None and policy.max_age is not None
        }
        self.versioning: tuple[str, re.Pattern[str]] | None = None
        if spec.versioning:
            attribute = spec.versioning.attribute or mapping.source.sort_key or ""  # checks require one
            self.versioning = (attribute, re.compile(spec.versioning.pattern))
        # What a column's cells depend on besides its own value (see stale_coordinates); None: no shortcut
        # (versioning rewrites the item, TTL rewrites every timestamp once all cells are known).
        self.context = None if self.versioning or self.ttl_attribute else frozenset(context_attributes(spec))
        self.key_attributes = frozenset(parse_template(spec.key.template).attributes)
        # What two images must agree on for stale_coordinates' shortcut: the row key's attributes and the context.
        self.same_row = tuple(self.key_attributes | self.context) if self.context is not None else ()
        self.timestamp_texts = _timestamp_texts(spec)
        self.specialised = specialise(self, spec)

    def matches(self, item: Item) -> bool:
        for condition in self.conditions:
            if not condition(item):
                return False
        return True

    def map(self, item: Item, trace: list | None = None, general: bool = False) -> MapResult:
        """The item's row; `trace`, when given, receives (source, first cell, end) spans: which column wrote what.
        ``general``: the specialised function was tried already (it gave None)."""
        if trace is None and self.specialised is not None and not general:
            row = self.specialised(item)
            if row is not None:
                return row
        version_us = 0
        if self.versioning:
            item, version = self._unversion(item)
            if version == 0:
                return Skipped("v0_ latest copy (the newest vN_ version carries the same data)", self.name)
            version_us = version * 1000
        expiry_us = None
        if self.ttl_attribute:
            expiry_us = self._expiry_us(item)
            if expiry_us is None:
                return Skipped("no TTL value (ttl.on_missing: skip)", self.name)
            if expiry_us <= self.now_us:
                return Skipped("TTL expired (DynamoDB would delete it)", self.name)
        key = self.row_key(item).encode()
        if self.salt:
            key = salt_prefix(key, self.salt, self.delimiter) + key
        if not key:
            raise ItemFailure("the row key is empty")
        if len(key) > limits.ROW_KEY_MAX_BYTES:
            raise ItemFailure(f"row key is {len(key)} bytes; Bigtable allows {limits.ROW_KEY_MAX_BYTES}")

        cells: list[Cell] = []
        entity_timestamp = self.timestamp
        entity_us = None if entity_timestamp else self.default_us
        spans = trace if trace is not None else [] if self.spans else None
        for column in self.columns:
            value = item.get(column.attribute)
            if value is None:
                if column.required:
                    raise ItemFailure("required attribute is missing", column.attribute)
                continue
            try:
                if column.timestamp is not None:
                    timestamp_us = column.timestamp(item)
                else:
                    if entity_us is None:  # only None when the entity has a timestamp of its own
                        entity_us = entity_timestamp(item)  # type: ignore[misc]
                    timestamp_us = entity_us
                start = len(cells)
                column.emit(item, value, timestamp_us + version_us, cells)
            except TimestampError as err:  # the attribute the time was read from, where there is one
                raise ItemFailure(str(err), err.attribute or column.attribute) from None
            except (EncodingError, AttributeValueError) as err:
                raise ItemFailure(str(err), column.attribute) from None
            if spans is not None:
                spans.append((column, start, len(cells)))
        start = len(cells)
        leftovers = self._rest(item, cells, version_us, entity_us)
        if spans is not None:
            spans.extend((name, index, index + 1) for index, name in enumerate(leftovers, start))
            if self.spans:
                _duplicates(cells, spans)
        if expiry_us is not None:
            cells = self._expire(cells, expiry_us)
        return _new_cell(MappedRow, (key, tuple(cells), self.name, limits.check_cells(cells), ()))

    def stale(self, earlier: Item, later: Item) -> list[tuple[str, bytes, int]]:
        """What :meth:`CompiledSpec.stale_coordinates` says, once it has found that the shortcut holds.

        A one-cell column (a literal qualifier, layout cell or json) is one coordinate whatever its
        value: none where `later` has the attribute too (the same cell), its coordinate where it does
        not, without encoding anything. Other columns (sets, maps, lists, qualifier templates) are
        mapped where the value differs.
        """
        coordinates: list[tuple[str, bytes, int]] = []
        cells: list[Cell] = []
        entity_us = None if self.timestamp else self.default_us
        for column in self.columns:
            value = earlier.get(column.attribute)
            if value is None:
                continue
            later_value = later.get(column.attribute)
            if later_value is not None and (column.one_cell or value == later_value):
                continue  # the same cells as later's
            start = len(cells)
            try:
                if column.timestamp is not None:
                    timestamp_us = column.timestamp(earlier)
                else:
                    if entity_us is None:
                        entity_us = self.timestamp(earlier)  # type: ignore[misc]
                    timestamp_us = entity_us
                if column.one_cell:
                    coordinates.append((column.family, column.qualifier, timestamp_us))  # type: ignore[arg-type]
                else:
                    column.emit(earlier, value, timestamp_us, cells)
            except (EncodingError, AttributeValueError, TimestampError, ItemFailure):
                del cells[start:]  # a value that does not map: earlier was dead-lettered, it wrote none of these
        coordinates += [(cell[0], cell[1], cell[2]) for cell in cells]
        if self.rest is not None:
            gone = [name for name in earlier if name not in self.consumed and name not in later]
            if self.timestamp_texts:  # a timestamp text earlier kept as a rest cell and later does not
                kept_later = self._kept_times(later)
                gone += [name for name in self._kept_times(earlier) if name not in kept_later]
            if gone:
                try:
                    timestamp_us = self.timestamp(earlier) if self.timestamp else self.default_us
                except (TimestampError, ItemFailure):
                    return coordinates
                family = self.rest[0]
                coordinates += [(family, name.encode(), timestamp_us) for name in gone]
        return coordinates

    def _unversion(self, item: Item) -> tuple[Item, int]:
        assert self.versioning is not None
        attribute, pattern = self.versioning
        value = item.get(attribute)
        text = _text_or_none(value) if value is not None else None
        found = pattern.match(text) if text is not None else None
        if text is None or not found:
            raise ItemFailure(f"value does not carry a version prefix matching {pattern.pattern!r}", attribute)
        unversioned = dict(item)
        unversioned[attribute] = {"S": text[found.end() :]}
        return unversioned, int(found.group(1))

    def _expiry_us(self, item: Item) -> int | None:
        value = item.get(self.ttl_attribute)
        if value is None or "N" not in value:
            # DynamoDB never expires an item without a numeric TTL; a max_age family cannot keep it forever.
            if self.ttl_missing_skip:
                return None
            raise ItemFailure("no numeric TTL value; DynamoDB never expires such items", self.ttl_attribute)
        try:
            seconds = int(value["N"].split(".")[0])
        except ValueError:
            raise ItemFailure(f"TTL value {value['N']!r} is not epoch seconds", self.ttl_attribute) from None
        return seconds * 1_000_000

    def _expire(self, cells: list[Cell], expiry_us: int) -> list[Cell]:
        # timestamp = expiry - max_age, so max_age GC drops the cell exactly when DynamoDB's TTL would.
        expired = []
        base_us = min(cell.timestamp_micros for cell in cells) if cells else 0
        for cell in cells:
            offset = cell.timestamp_micros - base_us  # keeps list elements and versions in order
            expired.append(cell._replace(timestamp_micros=expiry_us - self.family_age_us[cell.family] + offset))
        return expired

    def _leftovers(self, item: Item) -> list[str]:
        """Attributes for the rest family: those nothing consumes, and timestamp texts no cell timestamp gives back."""
        consumed = self.consumed
        names = [name for name in item if name not in consumed]
        if self.timestamp_texts:
            names += self._kept_times(item)
        return names

    def _kept_times(self, item: Item) -> list[str]:
        """Timestamp attributes whose value would not read back from a cell timestamp (an offset or ``Z``, digits
        past the millisecond, an epoch unit ``auto`` cannot tell, a column absent so no cell carries the time)."""
        kept: list[str] = []
        for attribute, fmt, column in self.timestamp_texts:
            value = item.get(attribute)
            if value is None or attribute in kept:
                continue
            try:
                exact = (column is None or column in item) and reads_back(value, fmt)
            except (AttributeValueError, TimestampError):
                exact = False  # not a time (unused, or the item has failed already): its value is kept as it is
            if not exact:
                kept.append(attribute)
        return kept

    def _rest(self, item: Item, cells: list[Cell], version_us: int, entity_us: int | None = None) -> list[str]:
        """Append the rest cells; returns the attributes they hold, in order."""
        leftovers = self._leftovers(item)
        if not leftovers:
            return leftovers
        if self.rest is None:
            if leftovers[0] in self.consumed:  # a timestamp attribute (see _kept_times)
                raise ItemFailure(
                    f"timestamp value {key_text(item[leftovers[0]])!r} would not read back from its cell timestamp "
                    "(Bigtable keeps UTC milliseconds, no offset or format): set rest to keep the value as a cell "
                    "too, or declare the attribute in lossy", leftovers[0])
            raise ItemFailure(
                "attribute is not mapped: add it to columns or drop, or set rest to keep unmapped attributes",
                leftovers[0],
            )
        family, encode = self.rest
        if entity_us is None:
            entity_us = self.timestamp(item) if self.timestamp else self.default_us
        timestamp = entity_us + version_us
        prefixes = tuple(self.rest_prefixes)
        for name in leftovers:
            if self.rest_taken and name.encode() in self.rest_taken:
                raise ItemFailure(
                    f"{family}:{name} is written by both column {self.rest_taken[name.encode()]!r} and rest attribute {name!r}", name
                )
            if prefixes and name.startswith(prefixes):
                prefix = next(p for p in prefixes if name.startswith(p))
                raise ItemFailure(
                    f"rest attribute {name!r} would read back as part of {self.rest_prefixes[prefix]!r}, whose "
                    f"qualifiers start with {family}:{prefix}; map or drop it", name
                )
            try:
                cells.append(Cell(family, name.encode(), timestamp, encode(item[name])))
            except EncodingError as err:
                raise ItemFailure(str(err), name) from None
        return leftovers


def _source_name(source: object) -> str:
    if isinstance(source, _Column):
        return f"attribute {source.attribute!r} ({source.layout.value} layout)"
    return f"rest attribute {source!r}"


def _duplicates(cells: list[Cell], spans: list) -> None:
    """Raise ItemFailure when two sources of one item write the same family:qualifier (one would overwrite the other)."""
    owner: dict[tuple[str, bytes], object] = {}
    for source, start, end in spans:
        for index in range(start, end):
            family, qualifier = cells[index][0], cells[index][1]
            first = owner.setdefault((family, qualifier), source)
            if first is not source:
                attribute = source.attribute if isinstance(source, _Column) else source
                raise ItemFailure(
                    f"{family}:{qualifier.decode(errors='replace')} is written by both {_source_name(first)} and "
                    f"{_source_name(source)}; one cell would overwrite the other",
                    attribute,
                )


def _may_collide(entity: EntitySpec, consumed: frozenset[str]) -> bool:
    """Whether two sources of one item (columns, rest) can ever write the same family:qualifier.

    Conservative, from the qualifier spaces (:mod:`.spaces`). Pairs that :meth:`_Entity._rest` refuses before
    :func:`_duplicates` looks (a rest attribute named like a literal qualifier of its family, or starting with a
    non-empty set or map prefix there) do not count: those items fail whatever the duplicate check says.
    """
    spaces = list(entity_spaces(entity, consumed))
    for index, first in enumerate(spaces):
        for second in spaces[index + 1 :]:
            if "rest" in (first.kind, second.kind):
                other = second if first.kind == "rest" else first
                if other.kind == "literal" or (other.kind == "prefix" and other.head):
                    continue
            if overlap(first, second):
                return True
    return False


def _timestamp_texts(entity: EntitySpec) -> tuple[tuple[str, str, str | None], ...]:
    """(attribute, format, column attribute or None) for timestamps read from an attribute whose value lives only in
    cell timestamps: not also a column, not in the row key or a qualifier, not dropped, lossy or the TTL."""
    elsewhere = {column.attribute for column in entity.columns} | set(entity.drop) | set(entity.lossy)
    elsewhere.update(parse_template(entity.key.template).attributes)
    for column in entity.columns:
        if column.qualifier:
            elsewhere.update(parse_template(column.qualifier.template).attributes)
    if entity.ttl:
        elsewhere.add(entity.ttl.attribute)
    found = [(entity.timestamp, None)] + [(column.timestamp, column.attribute) for column in entity.columns]
    return tuple((timestamp.attribute, timestamp.format, column) for timestamp, column in found
                 if timestamp is not None and timestamp.attribute and timestamp.attribute not in elsewhere)


def context_attributes(entity: EntitySpec) -> set[str]:
    """Attributes a column's cells may depend on besides its own value: qualifier and timestamp templates, timestamps."""
    used: set[str] = set()
    templates = [column.qualifier.template for column in entity.columns if column.qualifier]
    for timestamp in [entity.timestamp] + [column.timestamp for column in entity.columns]:
        if timestamp is not None:
            if timestamp.attribute:
                used.add(timestamp.attribute)
            if timestamp.template:
                templates.append(timestamp.template)
    for text in templates:
        used.update(parse_template(text).attributes)
    return used


def consumed_attributes(entity: EntitySpec) -> set[str]:
    """Attributes an entity uses up: mapped, dropped, or read by its key, qualifier and timestamp templates."""
    used = {column.attribute for column in entity.columns} | set(entity.drop) | context_attributes(entity)
    if entity.row_key:
        used.update(parse_template(entity.row_key.template).attributes)
    if entity.ttl:
        used.add(entity.ttl.attribute)
    return used


# --------------------------------------------------------------------------- the compiled spec


def _dispatch_table(spec: MappingSpec, entities: tuple[_Entity, ...]) -> tuple[str, dict[str, _Entity]] | None:
    """(attribute, text -> entity) when every entity matches on `attribute: <text>` alone, else None.

    The usual single-table design (`type: order`, `type: customer`, ...) then finds its entity
    with one lookup instead of trying the entities in turn (profiled: a tenth of the mapper's
    time with five entities); the first entity listed for a text wins, as in the ordered scan.
    """
    attributes = set()
    table: dict[str, _Entity] = {}
    for entity_spec, entity in zip(spec.entities, entities):
        if len(entity_spec.match) != 1:
            return None
        ((attribute, condition),) = entity_spec.match.items()
        if (not isinstance(condition.equals, str) or condition.prefix is not None
                or condition.regex is not None or condition.exists is not None):
            return None
        attributes.add(attribute)
        table.setdefault(str(condition.equals), entity)
    if len(attributes) != 1:
        return None
    return attributes.pop(), table


class CellSource(NamedTuple):
    """Which attribute wrote a cell and how: `part` True when the cell holds a member, key or element of it."""

    attribute: str
    encoding: Encoding
    layout: Layout
    part: bool


class CompiledSpec:
    """A spec turned into callables; `map_item` is the per-item hot path."""

    def __init__(self, spec: MappingSpec, now_ms: int | None = None):
        self.spec = spec
        self.now_ms = now_ms if now_ms is not None else int(time.time() * 1000)
        migration_ms = (
            int(spec.migration_time.timestamp() * 1000) if spec.migration_time is not None else self.now_ms
        )
        self.migration_ms = migration_ms
        self.entities = tuple(_Entity(entity, spec, self.now_ms, migration_ms) for entity in spec.entities)
        self.unmatched = spec.unmatched
        self._dispatch = _dispatch_table(spec, self.entities)
        self.indexes = compile_indexes(spec.indexes, spec.source.partition_key, spec.source.sort_key,
                                       migration_ms * 1000) if spec.source.partition_key else ()  # fmt: skip
        self._index_problem = (f"index {spec.indexes[0].name!r} needs the table's key schema (source.partition_key)"
                               if spec.indexes and not self.indexes else None)  # fmt: skip
        self._index_prefixes = tuple(index.prefix for index in self.indexes if index.table is None)
        names = [entity.name for entity in self.entities]
        self._named = dict(zip(names, self.entities)) if len(set(names)) == len(names) else {}
        """Entity by name, where names are unique: a MappedRow's entity is the one entity_for found for its item."""

    def entity_for(self, item: Item) -> _Entity | None:
        if self._dispatch is not None:
            attribute, by_text = self._dispatch
            value = item.get(attribute)
            if value is None:
                return None
            text = value.get("S")  # key_text's own first answer, without the two calls around it
            if text is None or len(value) != 1:
                text = _text_or_none(value)
            return by_text.get(text or "")
        for entity in self.entities:
            if entity.matches(item):
                return entity
        return None

    def map_item(self, item: Item) -> MapResult:
        entity = None
        try:
            entity = self.entity_for(item)
            if entity is None:
                if self.unmatched == "skip":
                    return Skipped("no entity matches (unmatched: skip)")
                return ItemError("no entity matches this item", stage="unmatched")
            if entity.skip:
                return Skipped("entity action is skip", entity.name)
            if self._index_problem is not None:
                raise ItemFailure(self._index_problem)
            specialised = entity.specialised  # what entity.map tries first, called here without its frame
            row = specialised(item) if specialised is not None else None
            result: MapResult = row if row is not None else entity.map(item, general=True)
            if self.indexes and result.__class__ is MappedRow:
                return self._with_index_rows(result, item)
            return result
        except ItemFailure as failure:
            return ItemError(failure.reason, entity.name if entity else None, failure.attribute)
        except TimestampError as err:
            return ItemError(str(err), entity.name if entity else None, err.attribute)
        except (EncodingError, LimitError, AttributeValueError) as err:
            return ItemError(str(err), entity.name if entity else None)
        except Exception as err:  # noqa: BLE001 - one odd item must never kill a batch; it is dead-lettered
            found = item_problem(item)  # an item no DynamoDB item (a damaged export line): say what is wrong with it
            if found is not None:
                return ItemError(found[1], entity.name if entity else None, found[0])
            return ItemError(f"unexpected {type(err).__name__}: {err}", entity.name if entity else None)

    def index_rows(self, item: Item) -> tuple[IndexRow, ...]:
        """The item's index rows (one per index whose key attributes it has); raises ItemFailure for a key too long."""
        rows = []
        for index in self.indexes:
            found = index.row(item)
            if found is not None:
                if len(found[0]) > limits.ROW_KEY_MAX_BYTES:
                    raise ItemFailure(f"index {index.name!r}: its row key is {len(found[0])} bytes; Bigtable allows "
                                      f"{limits.ROW_KEY_MAX_BYTES}")  # fmt: skip
                rows.append(_new_cell(IndexRow, (found[0], found[1], index.name, index.table)))
        return tuple(rows)

    def _with_index_rows(self, row: MappedRow, item: Item) -> MappedRow:
        if row.row_key.startswith(self._index_prefixes):
            prefix = next(p for p in self._index_prefixes if row.row_key.startswith(p))
            raise ItemFailure(f"the row key starts with {prefix.decode(errors='replace')!r}, an index's prefix: "
                              "it would read as an index row; change the index's target prefix")  # fmt: skip
        rows = self.index_rows(item)
        return _new_cell(MappedRow, (row[0], row[1], row[2], row[3], rows)) if rows else row

    def stale_coordinates(self, earlier: Item, later: Item,
                          later_entity: str | None = None) -> list[tuple[str, bytes, int]] | None:
        """The coordinates (family, qualifier, timestamp) of the cells `earlier` maps to that may not be `later`'s.

        For a change (earlier: the old image, later: the new one, which maps): the cells to delete are
        those map_item(earlier) gives less those map_item(later) gives, and this finds them without
        mapping `earlier` whole. Where both match the same entity with equal key attributes (the same
        row) and equal *context* (the attributes qualifier and timestamp templates and timestamps read),
        a column's cells depend on its value alone: a column whose value is equal gives later's cells,
        so only the columns whose value differs are mapped, and a rest attribute gives one coordinate
        whatever its value, so only those `later` lacks count. Less later's cells, that is exactly
        map_item's answer (tests/mappers/test_stale_coordinates.py).

        Where `earlier` would not map as a whole (dead-lettered: it wrote nothing) the coordinates may
        name cells that were never written; deleting one is a no-op. None: no shortcut (another entity,
        row or context; versioning and TTL entities, which rewrite the item or every timestamp): map
        `earlier` with map_item.

        ``later_entity``: the name of the entity `later` mapped with (its MappedRow's), which spares finding it again.
        """
        try:
            entity = self._named.get(later_entity) if later_entity is not None else None
            if entity is None:
                entity = self.entity_for(later)
            if entity is None or entity.skip or entity.context is None or self.entity_for(earlier) is not entity:
                return None
        except Exception:  # noqa: BLE001 - an odd value: map_item words it
            return None
        for name in entity.same_row:
            if earlier.get(name) != later.get(name):
                return None
        return entity.stale(earlier, later)

    def trace_item(self, item: Item) -> tuple[MapResult, tuple[CellSource | None, ...]]:
        """map_item, plus which column (or rest attribute) wrote each cell: for previews, never the hot path."""
        entity = self.entity_for(item)
        if entity is None or entity.skip:
            return self.map_item(item), ()
        spans: list = []
        try:
            result = entity.map(item, spans)
        except Exception:  # noqa: BLE001 - map_item words every failure the same way
            return self.map_item(item), ()
        sources: list[CellSource | None] = [None] * len(result.cells) if isinstance(result, MappedRow) else []
        rest_encoding = entity.rest_encoding or Encoding.auto
        for source, start, end in spans:
            if source.__class__ is str:
                described = CellSource(source, rest_encoding, Layout.cell, False)
            else:
                encoding = Encoding.json if source.layout is Layout.json else source.spec.encoding
                described = CellSource(source.attribute, encoding, source.layout, source.layout is not Layout.cell)
            for index in range(start, min(end, len(sources))):
                sources[index] = described
        return result, tuple(sources)

    def map_items(self, items: Iterable[Item]) -> Iterable[MapResult]:
        map_item = self.map_item
        return (map_item(item) for item in items)


def compile_spec(spec: MappingSpec, now_ms: int | None = None) -> CompiledSpec:
    """Compile once per process; `now_ms` pins "now" (TTL expiry, default timestamps) for tests."""
    return CompiledSpec(spec, now_ms)
