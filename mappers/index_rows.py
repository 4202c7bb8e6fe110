"""Secondary indexes as index rows: one row per item that has the index's key attributes.

Pure. An index row's key is the index's prefix, then the index's partition key, its sort key (if any), the table's
partition key and the table's sort key (if any), each through `key_part`: S as its UTF-8 bytes, N as
`sortable_text` (numbers order by value), B as its bytes; every 0x00 byte written 0x00 0xFF and the part ended
by 0x00 0x01. That ending sorts below every byte a value can continue with, and no part is a prefix of another's,
so comparing two keys byte by byte compares the tuples (index pk, index sk, table pk, table sk) as DynamoDB
compares the values (S as UTF-8 bytes, N numerically, B as unsigned bytes): an index query is one byte range of
rows, and several items with one index key stay distinct rows in the table key's order. A plain delimiter could not
do that (`a#` sorts after `a!x`).

The row's cells are the index's projection, one cell per attribute in the index's family, qualifier the attribute
name, value its DynamoDB JSON (lossless for every type), at the migration time.
"""

from __future__ import annotations

import json
from json.encoder import encode_basestring  # json.dumps(..., ensure_ascii=False)'s own quoting of a str (C)

from .attrvalue import binary, is_canonical_number, kind_of, number_text, to_typed_json
from .encodings import EncodingError, decode, encoder_for
from .numbers import sortable_text
from .results import Cell, IndexRow, MappedRow
from .spec import Encoding, GcPolicy, IndexRowsSpec, MappingSpec, TargetSpec

Item = dict
END = b"\x00\x01"
"""Ends every key part: below any byte a longer value continues with (0x00 itself is written 0x00 0xFF)."""
_encode = encoder_for(Encoding.ddb_json)
_new_cell = tuple.__new__  # as the compiler builds cells: a NamedTuple's Python __new__ costs more than the cell


def value_bytes(value: dict) -> bytes | None:
    """A key value's bytes in DynamoDB's order for its type (S, N, B); None for a value that cannot be a key."""
    if value.__class__ is not dict or len(value) != 1:
        return None
    tag, payload = kind_of(value)
    if tag == "S":
        return payload.encode("utf-8")
    if tag == "N":
        return sortable_text(number_text(payload)).encode()
    if tag == "B":
        return binary(payload)
    return None


def escaped(data: bytes) -> bytes:
    """0x00 written as 0x00 0xFF, so that END marks where a part ends."""
    return data.replace(b"\x00", b"\x00\xff") if b"\x00" in data else data


def key_part(value: dict) -> bytes | None:
    """One part of an index row key: the value's bytes, escaped, then END (None: not a key value)."""
    payload = value.get("S") if value.__class__ is dict else None
    if payload.__class__ is str and len(value) == 1:  # the common key: a string (value_bytes' first case, inline)
        text = payload.encode()
        return (text if b"\x00" not in text else text.replace(b"\x00", b"\x00\xff")) + END
    data = value_bytes(value)
    return None if data is None else escaped(data) + END


_typed_json = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode
"""encode_ddb_json's json.dumps, its encoder made once (json.dumps builds one per call for these options)."""


def ddb_json(value: dict) -> bytes:
    """The `ddb_json` encoding of `value`, byte for byte (tests/mappers/test_index_rows.py): written directly (see
    :func:`_typed_text`); a value the encoding refuses through the encoding itself, which words the error."""
    try:
        return _typed_text(value).encode()
    except Exception:  # noqa: BLE001 - not a value the encoding takes: the encoding itself says why
        return _encode(value)


def _typed_text(value: dict) -> str:
    """`encode_ddb_json`'s text: S, canonical N, BOOL, M, L and SS written here, M's names sorted and S quoted as
    json.dumps does (its own C function); the others (NS, BS, numbers to canonicalise, NULL) through `to_typed_json`
    and one encoder made once."""
    if len(value) == 1:
        payload = value.get("S")
        if payload.__class__ is str:
            return '{"S":' + encode_basestring(payload) + "}"
        payload = value.get("N")
        if payload.__class__ is str and is_canonical_number(payload):
            return '{"N":"' + payload + '"}'
        payload = value.get("BOOL")
        if payload is True or payload is False:
            return '{"BOOL":true}' if payload else '{"BOOL":false}'
        payload = value.get("M")
        if payload.__class__ is dict:
            return '{"M":{' + ",".join([encode_basestring(name) + ":" + _typed_text(payload[name])
                                        for name in sorted(payload)]) + "}}"
        payload = value.get("L")
        if payload.__class__ is list:
            return '{"L":[' + ",".join([_typed_text(element) for element in payload]) + "]}"
        payload = value.get("SS")
        if payload.__class__ is list:
            return '{"SS":[' + ",".join([encode_basestring(member) for member in sorted(payload)]) + "]}"
    return _typed_json(to_typed_json(value))


INDEX_KEY_BYTES = (2048, 1024)
"""The longest partition and sort key value DynamoDB indexes (S in UTF-8, B), by position in an index's key."""


def indexable(value: dict, part: bytes, limit: int) -> bool:
    """Whether DynamoDB puts an item with this index key value (its `key_part`) in the index. An item whose value is
    an empty S or B, or longer than `limit` bytes, is an index key violation: a GSI created on a table that holds it
    leaves it out (developer guide, "Detecting and correcting index key violations"), and DynamoDB refuses such
    writes to an indexed attribute afterwards. So it is not in the index, and has no index row."""
    if len(part) == 2:  # END alone: an empty value
        return False
    if len(part) - 2 <= limit:  # escaping only lengthens: the value is no longer than this
        return True
    tag, payload = kind_of(value)
    return tag == "N" or len(payload.encode() if tag == "S" else binary(payload)) <= limit


QUALIFIERS_KEPT = 4096
"""Attribute names whose qualifier bytes an ALL index keeps (items with ever new names would grow it without end)."""


class CompiledIndex:
    """One index, compiled: `row(item)` is its index row, or None when the item is not in the index."""

    __slots__ = ("spec", "name", "prefix", "table", "family", "keys", "index_keys", "types", "attributes", "all", "timestamp_us", "_qualifiers")

    def __init__(self, spec: IndexRowsSpec, partition_key: str | None, sort_key: str | None, timestamp_us: int):
        self.spec = spec
        self.name = spec.name
        self.prefix = (spec.target.prefix or "").encode()
        self.table = spec.target.table
        self.family = spec.family
        table_keys = tuple(name for name in (partition_key, sort_key) if name)
        self.keys = tuple(name for name in (spec.partition_key, spec.sort_key) if name) + table_keys
        self.index_keys = 2 if spec.sort_key else 1
        """The first `index_keys` of `keys` are the index's own (the rest, the table's, DynamoDB checked on write)."""
        self.types = (spec.partition_key_type, spec.sort_key_type)
        """The index's key types where the spec declares them: a value of another type is not in the index."""
        projected = list(dict.fromkeys(self.keys + tuple(spec.projection.non_key_attributes)))
        self.attributes = tuple(projected)
        self.all = spec.projection.type == "ALL"
        self.timestamp_us = timestamp_us
        self._qualifiers = {name: name.encode() for name in self.attributes}
        """Attribute name -> its qualifier, encoded once (ALL adds the names it meets)."""
        if partition_key is None:
            raise ValueError(f"index {spec.name!r}: the table's key schema is unknown (set source.partition_key)")

    def key(self, item: Item) -> bytes | None:
        """The index row key of `item`, None when it lacks an index key attribute (sparse), holds a non-key type, or
        an index key value DynamoDB cannot index (`indexable`)."""
        out = [self.prefix]
        for position, name in enumerate(self.keys):
            value = item.get(name)
            if value is None:
                return None
            part = key_part(value)
            if part is None:
                return None
            if position < self.index_keys and (not indexable(value, part, INDEX_KEY_BYTES[position]) or (
                    self.types[position] is not None and self.types[position] not in value)):  # fmt: skip
                return None
            out.append(part)
        return b"".join(out)

    def row(self, item: Item) -> tuple[bytes, tuple[Cell, ...]] | None:
        """(row key, cells) of `item`'s index row, or None (not in the index)."""
        key = self.key(item)
        if key is None:
            return None
        family, timestamp, qualifiers, new = self.family, self.timestamp_us, self._qualifiers, _new_cell
        name = ""
        cells = []
        try:
            if self.all:
                for name, value in item.items():
                    qualifier = qualifiers.get(name)
                    if qualifier is None:
                        qualifier = name.encode()
                        if len(qualifiers) < QUALIFIERS_KEPT:
                            qualifiers[name] = qualifier
                    cells.append(new(Cell, (family, qualifier, timestamp, ddb_json(value))))
            else:
                get = item.get
                for name in self.attributes:
                    value = get(name)
                    if value is not None:
                        cells.append(new(Cell, (family, qualifiers[name], timestamp, ddb_json(value))))
            return key, tuple(cells)
        except EncodingError as err:
            raise EncodingError(f"index {self.name!r}, attribute {name!r}: {err}") from None

def decode_index_row(family: str, cells: list[Cell]) -> Item:
    """The item an index row holds, as a query on the index returns it (the projected attributes; the newest cell of
    each, should an older version be kept)."""
    item: Item = {}
    newest: dict[bytes, int] = {}
    for cell in cells:
        if cell.family != family or newest.get(cell.qualifier, -1) >= cell.timestamp_micros:
            continue
        newest[cell.qualifier] = cell.timestamp_micros
        item[cell.qualifier.decode()] = decode(cell.value, Encoding.ddb_json)
    return item


INDEX_ENTITY = "index:"
"""How an index row is named where a row names its entity (validate's row groups): `index:<name>`."""


def as_index_row(row_key: bytes, cells: tuple[Cell, ...], entity: str, table: str) -> IndexRow:
    """Cells of the row named `entity` (`index:<name>`) in an index's own table, to write there (validate's repairs)."""
    return IndexRow(row_key, cells, entity.removeprefix(INDEX_ENTITY), table)


def with_index_rows(pairs: list, elsewhere: dict[str, list] | None = None) -> list:
    """(row, item) pairs with each item's index rows after its row, as rows of their own named `index:<name>`:
    validate compares them like any other rows. With ``elsewhere``, the rows of an index in a table of its own go
    there instead, by table (its keys are not the main table's)."""
    out = []
    for pair in pairs:
        out.append(pair)
        row, item = pair
        for index_row in row.index_rows:
            named = (MappedRow(index_row.row_key, index_row.cells, INDEX_ENTITY + index_row.index_name), item)
            if elsewhere is None or index_row.table is None:
                out.append(named)
            else:
                elsewhere.setdefault(index_row.table, []).append(named)
    return out


def projected(spec: IndexRowsSpec, item: Item, partition_key: str | None, sort_key: str | None) -> Item:
    """What an index row of `item` holds: the projection the index declares."""
    if spec.projection.type == "ALL":
        return dict(item)
    names = [spec.partition_key, spec.sort_key, partition_key, sort_key, *spec.projection.non_key_attributes]
    return {name: item[name] for name in names if name and name in item}


def compile_indexes(indexes: list[IndexRowsSpec], partition_key: str | None, sort_key: str | None,
                    timestamp_us: int) -> tuple[CompiledIndex, ...]:  # fmt: skip
    return tuple(CompiledIndex(index, partition_key, sort_key, timestamp_us) for index in indexes)


def index_targets(spec: MappingSpec) -> list[tuple[str, TargetSpec]]:
    """(index name, its table as a target) for each index in a table of its own: the main target's project, instance
    and app profile, the index's family alone (target.families' GC policy for it, else one version: an index row's
    cells are all at the migration time)."""
    found = []
    for index in spec.indexes:
        if index.target.table is not None:
            policy = spec.target.families.get(index.family) or GcPolicy(max_versions=1)
            found.append((index.name, spec.target.model_copy(update={"table": index.target.table,
                                                                      "families": {index.family: policy}})))
    return found
