"""Access patterns translated: the Bigtable read that serves a DynamoDB GetItem or Query, or why none can.

Pure. `translate(spec, pattern, types)` looks at the spec alone (row-key templates, transforms, encodings,
what the decoder can read back) and returns a `Translation`: served, with one `EntityRoute` per entity that can
hold the pattern's items, or not, with the reason and the change that would serve it. `Translation.read(pk, operands)`
then builds the concrete read for one set of key values: row keys and byte ranges, an optional cell filter, a rows
limit, and the steps the client does after decoding (`finish`): keep the partition's items that meet the condition,
order them by sort key as DynamoDB does (S as UTF-8 bytes, N numerically, B as unsigned bytes), reverse them for
`scan_index_forward: false`, cut at `limit`, project.

The row ranges are exact where the sort key is the last part of the row key through an order-preserving encoding
(no transform on S or B, `strip_prefix` on S, `sortable_number`, `pad` or `reverse_timestamp` on N): a key condition
is then a byte range of row keys. A partition folded into one row is read as that row. A pattern on an index the
spec carries as index rows (`indexes`) is one byte range of them; on a global index without index rows it says so
(`needs_index`); on a local one without them it reads the partition and orders it by the index's sort key after
decoding.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from typing import Any, Literal

from .attrvalue import binary, kind_of, key_text, number_text
from .decode import losses
from .numbers import parse_number
from .render import escape_delimiter
from .index_rows import escaped, key_part, value_bytes
from .spec import AccessPattern, EntitySpec, IndexRowsSpec, MappingSpec, TypedKey
from .templates import Placeholder, parse_template
from .transforms import TRANSFORMS, TransformError

Item = dict
Status = Literal["served", "unservable", "needs_index"]


# --------------------------------------------------------------------------- DynamoDB's key semantics


def key_order(value: dict) -> tuple:
    """What DynamoDB orders a key value by: S by its UTF-8 bytes, N numerically, B as unsigned bytes."""
    tag, payload = kind_of(value)
    if tag == "S":
        return (0, payload.encode("utf-8"))
    if tag == "N":
        return (1, parse_number(number_text(payload)))
    if tag == "B":
        return (2, binary(payload))
    raise ValueError(f"a {tag} value cannot be a key")


def holds(operator: str, operands: list[dict], value: dict | None) -> bool:
    """Whether a sort-key value meets `sk <operator> operands` exactly as DynamoDB decides it."""
    if value is None:
        return False
    tag = next(iter(value))
    if any(next(iter(operand)) != tag for operand in operands):
        return False  # DynamoDB refuses a mistyped operand; nothing of another type meets it
    this = key_order(value)
    first = key_order(operands[0])
    if operator == "=":
        return this == first
    if operator == "<":
        return this < first
    if operator == "<=":
        return this <= first
    if operator == ">":
        return this > first
    if operator == ">=":
        return this >= first
    if operator == "between":
        return first <= this <= key_order(operands[1])
    if operator == "begins_with":
        return tag in ("S", "B") and this[1].startswith(first[1])
    raise ValueError(f"unknown key operator {operator!r}")


def operand_value(operand: Any) -> dict:
    """A spec operand (str, Decimal, TypedKey) as a DynamoDB AttributeValue."""
    if isinstance(operand, TypedKey):
        if operand.B is not None:
            return {"B": base64.b64decode(operand.B)}
        return {"N": operand.N} if operand.N is not None else {"S": operand.S}
    if isinstance(operand, Decimal):
        return {"N": number_text(str(operand))}
    return {"S": operand}


# --------------------------------------------------------------------------- encodings of the sort key


@dataclass(frozen=True)
class Chain:
    """How a sort key becomes the tail of a row key (or qualifier): its transforms, and whether byte order follows."""

    transforms: tuple
    kind: str
    """S, N or B."""
    direction: int
    """1: byte order follows DynamoDB's; -1: reversed (reverse_timestamp); 0: order lost."""
    why: str = ""
    """Why the order is lost."""

    def encode(self, value: dict) -> str | None:
        """The encoded text of a key value, None when no item can have it (outside the transforms' domain)."""
        text = key_text(value)
        for call in self.transforms:
            try:
                text = TRANSFORMS[call.name].apply(text, *call.args)
            except TransformError:
                return None
        return text

    @staticmethod
    def _top(call: Any) -> int:
        if call.name == "pad":
            return int(10 ** call.args[0] - 1)
        return int(call.args[0]) if call.args else 9_999_999_999_999

    def bound(self, value: dict, lower: bool, inclusive: bool) -> tuple[str, str | None, bool]:
        """A condition's bound in encoded text: ("all", None, _) no limit on this side, ("none", ...) nothing meets
        it, ("at", text, inclusive) a bound on the encoded text (on the sort key's side: reversed by the caller)."""
        if self.kind == "N" and any(call.name in ("pad", "reverse_timestamp") for call in self.transforms):
            call = next(call for call in self.transforms if call.name in ("pad", "reverse_timestamp"))
            number = parse_number(key_text(value))
            whole = number.to_integral_value(ROUND_CEILING if lower else ROUND_FLOOR)
            if whole != number:
                inclusive = True  # sk > 2.5 is sk >= 3 among integers
            elif not inclusive:
                whole, inclusive = (whole + 1, True) if lower else (whole - 1, True)
            top = self._top(call)
            if lower and whole < 0 or not lower and whole > top:
                return ("all", None, True)
            if lower and whole > top or not lower and whole < 0:
                return ("none", None, True)
            return ("at", self.encode({"N": str(whole)}), inclusive)
        prefix = next((call.args[0] for call in self.transforms if call.name == "strip_prefix"), None)
        if prefix is not None:
            text = key_text(value)
            if not text.startswith(prefix):
                # every stored value starts with the prefix: a bound below them all, or above them all
                below = text < prefix
                if lower:
                    return ("all", None, True) if below else ("none", None, True)
                return ("none", None, True) if below else ("all", None, True)
        encoded = self.encode(value)
        if encoded is None:
            raise ValueError(f"{key_text(value)!r} cannot be encoded")
        return ("at", encoded, inclusive)


def chain_of(transforms: tuple, kind: str) -> Chain:
    """The sort key's encoding chain, and whether byte order follows the key's order."""
    names = [call.name for call in transforms]
    if kind == "N" and not names:
        return Chain(transforms, kind, 0, "a number's decimal text does not sort numerically (10 < 9 as text): "
                     "render it with |sortable_number")  # fmt: skip
    if len(names) == 1 and kind in TRANSFORMS[names[0]].order:
        return Chain(transforms, kind, TRANSFORMS[names[0]].order[kind])
    if kind == "S" and not names:
        return Chain(transforms, kind, 1)  # UTF-8 bytes sort as DynamoDB sorts S
    if kind == "B" and not names:
        return Chain(transforms, kind, 1)  # lower-case hex keeps unsigned byte order
    shown = "|".join(names) or "its text"
    return Chain(transforms, kind, 0, f"{shown} does not keep the order of {kind} sort keys")


def prefix_end(prefix: bytes) -> bytes:
    """The first key after every key starting with `prefix` (b'' when there is none: the end of the table)."""
    trimmed = prefix.rstrip(b"\xff")
    return trimmed[:-1] + bytes([trimmed[-1] + 1]) if trimmed else b""


# --------------------------------------------------------------------------- the read


@dataclass(frozen=True)
class RowRange:
    start: bytes
    end: bytes
    """b'': to the end of the table."""
    start_inclusive: bool = True
    end_inclusive: bool = False

    def holds(self, key: bytes) -> bool:
        after = key > self.start or (self.start_inclusive and key == self.start)
        before = not self.end or key < self.end or (self.end_inclusive and key == self.end)
        return after and before


@dataclass(frozen=True)
class CellFilter:
    """Cells of one column of a folded row: a family, a literal qualifier, at most `cells` of them (newest first)."""

    family: str
    qualifier: bytes
    cells: int | None = None


@dataclass(frozen=True)
class BigtableRead:
    """One concrete read: row keys and ranges, an optional cell filter, a rows limit, then the client's steps."""

    table: str
    row_keys: tuple[bytes, ...] = ()
    ranges: tuple[RowRange, ...] = ()
    cell_filter: CellFilter | None = None
    rows_limit: int | None = None
    reverse_rows: bool = False
    """Rows come back in ascending key order; reversed by the client for a descending query."""
    keep_rows: int | None = None
    """After reversing, the first this many rows (a descending query's limit, when each row is one item)."""
    steps: tuple[str, ...] = ()
    """What the client does after decoding, in words."""

    @property
    def empty(self) -> bool:
        return not self.row_keys and not self.ranges

    def touches(self, key: bytes) -> bool:
        return key in self.row_keys or any(r.holds(key) for r in self.ranges)


# --------------------------------------------------------------------------- translation


@dataclass(frozen=True)
class EntityRoute:
    """How one entity's items of a partition are found: rows per item (`sort key` in the row key) or one folded row."""

    entity: str
    prefix: list = field(hash=False)
    """Template pieces before the sort key (literals, partition-key placeholders)."""
    delimiter: str
    escape: bool
    chain: Chain | None
    """The sort key's encoding at the end of the row key; None: the partition is one row."""
    newest_first_column: CellFilter | None = None
    """A folded entity whose items are the cells of one column, newest first in ascending sort-key order."""
    sort_prefix: str | None = None
    """The entity drops the sort key (a declared loss) but its match gives its prefix, and a row holds one of its
    items: the item sorts by the prefix, and parity compares it without the sort key."""


@dataclass(frozen=True)
class Translation:
    pattern: str
    status: Status
    table: str
    reason: str = ""
    suggestion: str = ""
    routes: tuple[EntityRoute, ...] = ()
    partition_key: str = ""
    sort_key: str | None = None
    """The attribute items are ordered by: the table's sort key, or a local index's."""
    spec_pattern: AccessPattern | None = None
    summary: str = ""
    """The read in words, for the plan."""

    @property
    def served(self) -> bool:
        return self.status == "served"

    def read(self, partition: dict, operands: list[dict] | None = None) -> BigtableRead:
        """The Bigtable read for one partition-key value and the condition's operands (GetItem: [the sort key])."""
        pattern = self.spec_pattern
        if not self.served or pattern is None:
            raise ValueError(f"access pattern {self.pattern!r} is not served: {self.reason}")
        operator, operands = self.condition(operands)
        if self.index_rows is not None:
            return self._index_read(partition, operator, operands)
        table_order = self.sort_key == self.spec_sort_key
        keys: list[bytes] = []
        ranges: list[RowRange] = []
        folded = [route for route in self.routes if route.chain is None]
        cell_filter = None
        for route in self.routes:
            prefix = self._prefix(route, partition)
            if prefix is None:
                continue
            if route.chain is None:
                if prefix not in keys:
                    keys.append(prefix)
                continue
            if operator is None or not table_order:
                whole = RowRange(prefix, prefix_end(prefix))
                if whole not in ranges:
                    ranges.append(whole)
                continue
            found = _key_range(route.chain, prefix, operator, operands)
            if isinstance(found, bytes):
                if found not in keys:
                    keys.append(found)
            elif found is not None and found not in ranges:  # entities keyed alike share their rows
                ranges.append(found)
        if len(self.routes) == 1 and folded and table_order:
            column = folded[0].newest_first_column
            if column is not None and pattern.scan_index_forward:
                cell_filter = CellFilter(column.family, column.qualifier, pattern.limit)
        chain = self.routes[0].chain
        single = len(self.routes) == 1 and chain is not None and chain.direction != 0 and table_order
        natural = single and chain is not None and (chain.direction > 0) == pattern.scan_index_forward
        rows_limit = pattern.limit if natural and self.alone and pattern.limit else None
        steps = ["decode the rows into items", f"keep items of this partition whose {self.sort_key} meets the condition"
                 if operator else "keep items of this partition"]  # fmt: skip
        if not single:
            steps.append(f"order by {self.sort_key} (DynamoDB's order)")
        return BigtableRead(self.table, tuple(keys), tuple(ranges), cell_filter, rows_limit,
                            reverse_rows=single and not natural, steps=_last_steps(steps, pattern),
                            keep_rows=pattern.limit if single and not natural and self.alone else None)  # fmt: skip

    spec_sort_key: str | None = None
    index_rows: IndexRowsSpec | None = None
    """The pattern's index is carried as index rows: the read is one byte range of them (mappers/index_rows.py)."""
    alone: bool = False
    """The spec has one entity that maps: no other entity's rows can sit in a range and use up a rows limit."""
    lossy: tuple[str, ...] = ()
    """Declared losses of the entities the read returns: those items may read back otherwise than DynamoDB has them."""
    fixed_sort: tuple[tuple[str, dict], ...] = ()
    """(entity, sort key) for entities whose match fixes the sort key: dropped from the cells, known exactly."""

    @property
    def unreturned(self) -> frozenset[str]:
        """Attributes some items do not read back (a dropped sort key ordered by its prefix): compared without them."""
        return frozenset({self.sort_key or ""} if any(route.sort_prefix for route in self.routes) else ())

    def condition(self, operands: list[dict] | None) -> tuple[str | None, list[dict]]:
        pattern = self.spec_pattern
        assert pattern is not None
        if pattern.operation == "get_item":
            if self.sort_key is None and self.index_rows is None:  # a table without a sort key: the partition's item
                return None, []
            if not operands:
                raise ValueError(f"access pattern {self.pattern!r}: get_item needs the sort key's value")
            return "=", operands
        if pattern.sort_key is None:
            return None, []
        given = [operand_value(v) for v in pattern.sort_key.values] or list(operands or [])
        want = 2 if pattern.sort_key.operator == "between" else 1
        if len(given) != want:
            raise ValueError(f"access pattern {self.pattern!r}: {pattern.sort_key.operator} needs {want} value(s)")
        return pattern.sort_key.operator, given

    def finish(self, items: Iterable[tuple[str, Item]], partition: dict, operands: list[dict] | None = None) -> list[Item]:
        """The decoded (entity, item) pairs of a read, as DynamoDB returns them: the partition's items that meet the
        condition, in sort-key order (reversed for a descending query), cut at the limit, projected."""
        pattern = self.spec_pattern
        assert pattern is not None
        operator, values = self.condition(operands)
        sk, pk = self.sort_key, self.partition_key
        fixed = dict(self.fixed_sort)
        prefixes = {route.entity: route.sort_prefix for route in self.routes if route.sort_prefix is not None}
        kept: list[tuple[tuple, Item]] = []
        for entity, item in items:
            if item.get(pk) is None or key_order(item[pk]) != key_order(partition):
                continue
            if sk is None:
                kept.append(((), item))
                continue
            if sk not in item and entity in fixed and sk == self.spec_sort_key:
                item = {**item, sk: fixed[entity]}
            if sk in item:
                if operator is None or holds(operator, values, item[sk]):
                    kept.append((key_order(item[sk]), item))
            elif entity in prefixes:  # translate() made sure the condition keeps all of this entity's items
                kept.append(((0, str(prefixes[entity]).encode()), item))
            # else: not in this index (a local index is sparse)
        kept.sort(key=lambda pair: pair[0])
        out = [item for _, item in kept]
        if not pattern.scan_index_forward:
            out.reverse()
        if pattern.limit:
            out = out[: pattern.limit]
        if pattern.projection:
            out = [{name: item[name] for name in pattern.projection if name in item} for item in out]
        return out

    def _index_read(self, partition: dict, operator: str | None, operands: list[dict]) -> BigtableRead:
        """One range of index rows: each row one item, in (index sort key, table key) order."""
        pattern, index = self.spec_pattern, self.index_rows
        assert pattern is not None and index is not None
        part = key_part(partition)
        prefix = (index.target.prefix or "").encode() + (part or b"")
        found = None if part is None else _index_range(prefix, operator, operands)
        steps = ["decode the index rows into items (the index's projection)"]
        if operator is not None:
            steps.append(f"keep items whose {self.sort_key} meets the condition (a mistyped operand meets none)")
        return BigtableRead(self.table, (), (found,) if found else (),
                            rows_limit=pattern.limit if pattern.scan_index_forward else None,
                            steps=_last_steps(steps, pattern))

    def _prefix(self, route: EntityRoute, partition: dict) -> bytes | None:
        out = []
        last = max(i for i, piece in enumerate(route.prefix) if isinstance(piece, Placeholder))
        for i, piece in enumerate(route.prefix):
            if isinstance(piece, str):
                out.append(piece)
                continue
            text = key_text(partition)
            try:
                for call in piece.transforms:
                    text = TRANSFORMS[call.name].apply(text, *call.args)
            except TransformError:
                return None  # no item of this entity has such a partition key
            if route.escape and (route.chain is not None or i != last):  # as the compiler guards every value but the last
                text = escape_delimiter(text, route.delimiter)
            out.append(text)
        return "".join(out).encode("utf-8")


def _key_range(chain: Chain, prefix: bytes, operator: str, operands: list[dict]) -> bytes | RowRange | None:
    """The row keys (after `prefix`) whose encoded sort key meets the condition: one key, a range, or None (none)."""
    if operator == "=":
        encoded = chain.encode(operands[0])
        return None if encoded is None else prefix + encoded.encode()
    if operator == "begins_with":
        text = key_text(operands[0])
        strip = next((call.args[0] for call in chain.transforms if call.name == "strip_prefix"), None)
        if strip is not None:
            if text.startswith(strip):
                text = text[len(strip):]
            elif strip.startswith(text):
                text = ""
            else:
                return None
        start = prefix + text.encode()
        return RowRange(start, prefix_end(start))
    lows = {">": False, ">=": True}
    highs = {"<": False, "<=": True}
    low = high = None
    if operator in lows:
        low = chain.bound(operands[0], True, lows[operator])
    elif operator in highs:
        high = chain.bound(operands[0], False, highs[operator])
    else:  # between
        low, high = chain.bound(operands[0], True, True), chain.bound(operands[1], False, True)
    if chain.direction < 0:  # the key sorts backwards: the sort key's lower bound is the row key's upper bound
        low, high = high, low
    if (low and low[0] == "none") or (high and high[0] == "none"):
        return None
    start, start_inclusive = (prefix, True) if not low or low[0] == "all" else (prefix + str(low[1]).encode(), low[2])
    end, end_inclusive = (prefix_end(prefix), False) if not high or high[0] == "all" else (
        prefix + str(high[1]).encode(), high[2])
    if end and (start > end or (start == end and not (start_inclusive and end_inclusive))):
        return None
    return RowRange(start, end, start_inclusive, end_inclusive)


def _last_steps(steps: list[str], pattern: AccessPattern) -> tuple[str, ...]:
    """The client's last steps, in words: reverse, cut at the limit, project."""
    if not pattern.scan_index_forward:
        steps.append("reverse")
    if pattern.limit:
        steps.append(f"first {pattern.limit}")
    if pattern.projection:
        steps.append("keep " + ", ".join(pattern.projection))
    return tuple(steps)


def _index_range(prefix: bytes, operator: str | None, operands: list[dict]) -> RowRange | None:
    """The index rows (after the partition's `prefix`) whose sort key meets the condition; None: none do."""
    if operator is None:
        return RowRange(prefix, prefix_end(prefix))
    if operator == "begins_with":
        data = value_bytes(operands[0])
        return None if data is None else RowRange(prefix + escaped(data), prefix_end(prefix + escaped(data)))
    parts = [key_part(operand) for operand in operands]
    if any(part is None for part in parts):
        return None
    at = [prefix + part for part in parts if part is not None]
    if operator == "=":
        return RowRange(at[0], prefix_end(at[0]))
    if operator == "<":
        return RowRange(prefix, at[0])
    if operator == "<=":
        return RowRange(prefix, prefix_end(at[0]))
    if operator == ">":
        return RowRange(prefix_end(at[0]), prefix_end(prefix))
    if operator == ">=":
        return RowRange(at[0], prefix_end(prefix))
    if key_order(operands[0]) > key_order(operands[1]):  # between: DynamoDB refuses a low bound above the high one
        return None
    return RowRange(at[0], prefix_end(at[1]))


def _index_translation(spec: MappingSpec, pattern: AccessPattern, index: IndexRowsSpec) -> Translation:
    table = index.target.table or spec.target.table
    where = f"under {index.target.prefix!r}" if index.target.table is None else "in their own table"
    summary = (f"index rows of {table} {where}: the partition's {index.partition_key} then "
               f"{index.sort_key or 'the table key'} in order ({index.projection.type} projection)")
    return Translation(pattern.name, "served", table, partition_key=index.partition_key,
                       sort_key=index.sort_key, spec_pattern=pattern, summary=summary, spec_sort_key=spec.source.sort_key,
                       index_rows=index)  # fmt: skip


def _unserved(pattern: AccessPattern, table: str, reason: str, suggestion: str, status: Status = "unservable") -> Translation:
    return Translation(pattern.name, status, table, reason=reason, suggestion=suggestion, spec_pattern=pattern)


def translate(spec: MappingSpec, pattern: AccessPattern, types: Mapping[str, str] | None = None) -> Translation:
    """The Bigtable read serving `pattern`, or why the spec cannot serve it and what would."""
    types = dict(types or {})
    table = spec.target.table
    pk, sk = spec.source.partition_key, spec.source.sort_key
    if pk is None:
        return _unserved(pattern, table, "the table's key schema is unknown",
                         "set source.partition_key (and sort_key), or plan against the live table")
    index = pattern.index
    order_key = sk
    if index is not None:
        carried = next((found for found in spec.indexes if found.name == index.name), None)
        if carried is not None:
            return _index_translation(spec, pattern, carried)
        if index.type == "global":
            return _unserved(pattern, table, f"global index {index.name!r} has no index rows",
                             f"declare it under indexes (name: {index.name}, its keys, projection, "
                             "target: {prefix: ...}, family) so that migrate writes its rows "
                             "(docs/ACCESS_PATTERNS.md#index-rows)", "needs_index")  # fmt: skip
        order_key = index.sort_key
    if pattern.operation == "get_item" and sk is None:
        order_key = None
    kind = _sort_kind(pattern, types, order_key)
    lost = {(loss.entity, loss.attribute) for loss in losses(spec)}
    fixed_sorts = {entity.name: _fixed_sort(entity, sk, types) for entity in spec.entities}
    routes: list[EntityRoute] = []
    for entity in spec.entities:
        if not _may_hold(entity, pattern, sk if order_key == sk else None):
            continue
        where = f"entity {entity.name!r}"
        if entity.action == "skip":
            return _unserved(pattern, table, f"{where} skips items this pattern reads (action: skip)",
                             f"map them, or narrow {where}'s match so the pattern's items are migrated")
        sort_prefix = None
        for attribute in (pk, order_key):
            if not attribute or ((entity.name, attribute) not in lost and (entity.name, None) not in lost):
                continue
            if attribute == sk and sk in fixed_sorts.get(entity.name, {}):
                continue  # dropped from the cells, but the match says what it is
            sort_prefix = _prefix_ordered(entity, pattern, sk) if attribute == sk == order_key else None
            if sort_prefix is None:
                return _unserved(pattern, table, f"{where} does not read {attribute!r} back exactly",
                                 f"keep {attribute!r} in the row key, a qualifier or a column without a lossy transform")
        key = entity.key
        if key.salt_buckets:
            return _unserved(pattern, table, f"{where}'s row key is salted (salt_buckets: {key.salt_buckets}): a hash of "
                             "the whole key spreads one partition over every bucket, so no row range holds it",
                             f"remove salt_buckets from {where}'s row_key (the partition key already spreads the load)")
        pieces = list(parse_template(key.template).pieces)
        holders = [piece for piece in pieces if isinstance(piece, Placeholder)]
        foreign = sorted({h.attribute for h in holders} - {pk, sk})
        if foreign:
            return _unserved(pattern, table, f"{where}'s row key holds {', '.join(foreign)}, which the query does not know",
                             f"make {where}'s row key '{{{pk}}}{key.delimiter}{{{sk}}}'" if sk else f"make it '{{{pk}}}'")
        sk_at = [i for i, piece in enumerate(pieces) if isinstance(piece, Placeholder) and piece.attribute == sk]
        if not sk_at:
            column = _newest_first(entity, sk) if order_key == sk and _whole_entity(entity, pattern, sk) else None
            problem = "" if sort_prefix else _folded_problem(entity, sk)
            if problem:
                return _unserved(pattern, table, f"{where}: {problem}",
                                 f"make {where}'s row key '{{{pk}}}{key.delimiter}{{{sk}}}', or the sort key a qualifier")
            routes.append(EntityRoute(entity.name, pieces, key.delimiter, key.on_delimiter == "escape", None, column,
                                      sort_prefix))  # fmt: skip
            continue
        if len(sk_at) > 1 or sk_at[0] != len(pieces) - 1:
            return _unserved(pattern, table, f"{where}'s row key '{key.template}' does not end with the sort key, so a "
                             "partition's items are not one ordered run of rows",
                             f"make {where}'s row key '{{{pk}}}{key.delimiter}{{{sk}}}'")
        if not any(isinstance(p, Placeholder) and p.attribute == pk for p in pieces[:-1]):
            return _unserved(pattern, table, f"{where}'s row key does not hold the partition key before the sort key",
                             f"make {where}'s row key '{{{pk}}}{key.delimiter}{{{sk}}}'")
        chain = chain_of(pieces[-1].transforms, kind) if isinstance(pieces[-1], Placeholder) else None
        assert chain is not None
        ranged = pattern.operation == "query" and order_key == sk and (
            pattern.sort_key is not None and pattern.sort_key.operator != "=" or pattern.limit is not None)
        if chain.direction == 0 and ranged:
            return _unserved(pattern, table, f"{where}: the sort key's order is lost in the row key ({chain.why})",
                             "use an order-preserving encoding: no transform on S or B keys, |sortable_number on N")
        routes.append(EntityRoute(entity.name, pieces[:-1], key.delimiter, key.on_delimiter == "escape", chain))
    if not routes:
        return _unserved(pattern, table, "no entity maps items this pattern reads", "add an entity for them")
    folded_names = [route.entity for route in routes if route.chain is None]
    ranged_routes = [route for route in routes if route.chain is not None]
    parts = [f"the partition's row of {table} (entities {', '.join(folded_names)})"] if folded_names else []
    parts += [f"rows '{_shown(route.prefix)}' + {sk} of {table} (entity {route.entity}"
              + (", reversed key)" if route.chain and route.chain.direction < 0 else ")") for route in ranged_routes]
    summary = "; ".join(parts)
    if order_key != sk:
        summary += f"; ordered by {order_key} after decoding (local index: Bigtable keeps one order)"
    routed = {route.entity for route in routes}
    handled = {(route.entity, sk) for route in routes if route.sort_prefix} | {
        (name, sk) for name, found in fixed_sorts.items() if sk in found}
    declared = tuple(loss.describe() for loss in losses(spec) if loss.entity in routed and loss.attribute
                     and (loss.entity, loss.attribute) not in handled
                     and (not pattern.projection or loss.attribute in pattern.projection))  # fmt: skip
    return Translation(pattern.name, "served", table, routes=tuple(routes), partition_key=pk, sort_key=order_key, lossy=declared,
                       spec_pattern=pattern, summary=summary, spec_sort_key=sk,
                       alone=sum(entity.action == "map" for entity in spec.entities) == 1,
                       fixed_sort=tuple((name, found[sk]) for name, found in fixed_sorts.items() if sk and sk in found))  # fmt: skip


def _shown(pieces: list) -> str:
    return "".join(piece if isinstance(piece, str) else "{" + piece.attribute + "}" for piece in pieces)


def _sort_kind(pattern: AccessPattern, types: Mapping[str, str], sort_key: str | None) -> str:
    if pattern.sort_key is not None and pattern.sort_key.values:
        return next(iter(operand_value(pattern.sort_key.values[0])))
    return types.get(sort_key or "", "S")


def _may_hold(entity: EntitySpec, pattern: AccessPattern, sk: str | None) -> bool:
    """False when the entity's match on the sort key rules out every item the pattern's fixed condition reads."""
    condition = entity.match.get(sk) if sk else None
    wanted = pattern.sort_key
    if condition is None or wanted is None or not wanted.values or condition.exists is False:
        return True
    operands = [operand_value(v) for v in wanted.values]
    if isinstance(condition.equals, str):
        if not holds(wanted.operator, operands, {"S": condition.equals}):
            return False
    if condition.prefix is not None and wanted.operator == "begins_with" and "S" in operands[0]:
        p, m = operands[0]["S"], condition.prefix
        return p.startswith(m) or m.startswith(p)
    return True


def _fixed_sort(entity: EntitySpec, sk: str | None, types: Mapping[str, str]) -> dict[str, dict]:
    """{sk: its value} when the entity's match fixes the sort key (`match: {sk: Video}`)."""
    condition = entity.match.get(sk) if sk else None
    if sk is None or condition is None or condition.equals is None or isinstance(condition.equals, bool):
        return {}
    if isinstance(condition.equals, Decimal):
        return {sk: {"N": number_text(str(condition.equals))}}
    kind = types.get(sk, "S")
    return {sk: {"N": number_text(condition.equals)} if kind == "N" else {"S": condition.equals}} if kind != "B" else {}


def _prefix_ordered(entity: EntitySpec, pattern: AccessPattern, sk: str | None) -> str | None:
    """The match prefix an entity that drops the sort key sorts by, when that is exact: one item per row (the sort
    key in no qualifier, timestamp or version), and a condition that keeps every item with the prefix or none."""
    condition = entity.match.get(sk) if sk else None
    if sk is None or condition is None or condition.prefix is None or entity.versioning is not None:
        return None
    if pattern.operation == "get_item":
        return None
    if sk in parse_template(entity.key.template).attributes:
        return None
    stamps = [column.timestamp or entity.timestamp for column in entity.columns]
    if any(s is not None and s.template for s in stamps) or any(
            column.qualifier is not None and not parse_template(column.qualifier.template).is_literal
            for column in entity.columns):  # fmt: skip
        return None
    wanted = pattern.sort_key
    if wanted is not None and not (_whole_entity(entity, pattern, sk) or not _may_hold(entity, pattern, sk)):
        return None
    return condition.prefix


def _whole_entity(entity: EntitySpec, pattern: AccessPattern, sk: str | None) -> bool:
    """The pattern's condition keeps every item of the entity (none, or a begins_with its own match prefix implies)."""
    wanted = pattern.sort_key
    if pattern.operation != "query" or wanted is None:
        return pattern.operation == "query"
    condition = entity.match.get(sk) if sk else None
    if wanted.operator != "begins_with" or not wanted.values or condition is None or condition.prefix is None:
        return False
    operand = operand_value(wanted.values[0])
    return "S" in operand and condition.prefix.startswith(operand["S"])


def _newest_first(entity: EntitySpec, sk: str | None) -> CellFilter | None:
    """The entity's items are cells of one literal column whose timestamps reverse the sort key (newest = first)."""
    if sk is None or len(entity.columns) != 1 or entity.rest is not None:
        return None
    column = entity.columns[0]
    stamp = column.timestamp or entity.timestamp
    if stamp is None or stamp.template is None or column.qualifier is None:
        return None
    if not parse_template(column.qualifier.template).is_literal:
        return None
    holders = [p for p in parse_template(stamp.template).pieces if isinstance(p, Placeholder)]
    if len(holders) != 1 or holders[0].attribute != sk or holders[0].transforms[-1:] == ():
        return None
    if holders[0].transforms[-1].name != "reverse_timestamp":
        return None
    return CellFilter(column.family, column.qualifier.template.encode())


def _folded_problem(entity: EntitySpec, sk: str | None) -> str:
    """Why items of one partition folded into one row cannot be told apart (or '' when they can)."""
    if sk is None:
        return ""
    condition = entity.match.get(sk)
    if condition is not None and condition.equals is not None:
        return ""  # one item per partition: its sort key is the matched value
    in_qualifiers = [c for c in entity.columns if c.qualifier is not None and sk in parse_template(c.qualifier.template).attributes]
    if in_qualifiers and len(in_qualifiers) == len(entity.columns) and entity.rest is None:
        return ""
    stamps = [c.timestamp or entity.timestamp for c in entity.columns]
    if stamps and all(s is not None and s.template and sk in parse_template(s.template).attributes for s in stamps):
        return ""
    if any(c.attribute == sk for c in entity.columns) or entity.rest is not None:
        return ("the sort key is a cell value inside a row holding the whole partition: every item of the partition "
                "writes the same cells, so only one survives and the order is lost")
    return "the sort key is neither in the row key, a qualifier nor a timestamp: a partition's items overwrite each other"
