"""Draft a mapping spec from DescribeTable and a sample of items: pure, no network.

`infer_spec(describe, items)` returns the spec as plain data plus a comment for each choice,
so that a person can read why a key, a family or an encoding was picked and change it.
What it recognises:

- entity types: a `type`-like attribute, or sort-key prefixes (text before the first '#', '-',
  '_' or digit) when the groups they make hold different attributes or form an adjacency list;
- adjacency lists: the partition key names one type (`Invoice-0123`), sort keys name others
  (`Payment-0680`): one row per partition key id, one family per related type, qualifier = its id;
- single-table partitions: one row per partition; per-item ids that are (reverse) timestamps
  become cell timestamps of one column, so Bigtable keeps them newest first;
- attribute types and frequency, counters (int64), maps/sets/lists, ISO-8601 times (cell timestamps).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from ..attrvalue import key_text
from ..encodings import SET_TYPES
from ..table import key_schema
from ..transforms import REVERSE_TIMESTAMP_MAX
from ..units import human_size
from .lints import LONG_FAMILY_NAME

Path = tuple[str | int, ...]

TYPE_ATTRIBUTES = ("type", "entity", "kind", "_type", "__typename", "entitytype", "entity_type")
_PREFIX = re.compile(r"^([^#\-_0-9{}|]+)([#\-_]?)")  # no `{`, `}`, `|`: a prefix is a template argument (strip_prefix)
_COUNTER = re.compile(r"(count|views|likes|clicks|hits|visits|plays|shares|votes)$", re.I)
_TIME_NAME = re.compile(r"(date|time|timestamp|_at|At|created|updated|modified)$|^(created|updated|modified)", re.I)
_ISO = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?$")
# Epochs between 2000-01-01 and 2100-01-01, for telling timestamps from other numbers.
_EPOCH_S = (946_684_800, 4_102_444_800)
_FUTURE_SLACK_S = 86_400  # clocks of the writers and of the sample's reader may disagree by this much
_REVERSE_MAX = {10: 9_999_999_999, 13: REVERSE_TIMESTAMP_MAX}
MAX_COMMENT_VERSIONS = 1000


@dataclass
class InferredSpec:
    """The draft: `spec` is spec data (load it with mappers.loader.validate_data); comments by field path."""

    spec: dict[str, Any]
    comments: dict[Path, str] = field(default_factory=dict)
    header: list[str] = field(default_factory=list)

    def note(self, path: Path, text: str) -> None:
        self.comments[path] = f"{self.comments[path]}\n{text}" if path in self.comments else text


# --------------------------------------------------------------------------- small readers


def _keys(table: dict) -> tuple[str, str | None]:
    return key_schema(table["KeySchema"])


def _text(value: dict | None) -> str | None:
    if not value:
        return None
    if "S" in value:
        return value["S"]
    if "N" in value:
        return value["N"]
    return None


def _prefix(text: str | None) -> tuple[str, str] | None:
    """('VideoComment', '#') for 'VideoComment#123'; None when the text starts with a digit or separator."""
    found = _PREFIX.match(text or "")
    return (found.group(1), found.group(2)) if found else None


def _time_suffix(ids: list[str], now_s: int) -> tuple[str, int | None] | None:
    """('reverse', max) or ('forward', None) with a unit when every id is an epoch (or its reverse).

    Times after the sample was taken are ids that merely look like epochs (`ORDER#2024000001` reads as
    a time in 2034): an item's key does not hold a time that has not happened yet.
    """
    if not ids or not all(i.isascii() and i.isdigit() and len(i) in _REVERSE_MAX for i in ids) or len({len(i) for i in ids}) != 1:
        return None
    width = len(ids[0])
    scale = 1 if width == 10 else 1000
    low, high = _EPOCH_S[0] * scale, min(_EPOCH_S[1], now_s + _FUTURE_SLACK_S) * scale
    if all(low <= _REVERSE_MAX[width] - int(i) <= high for i in ids):
        return "reverse", _REVERSE_MAX[width]
    if all(low <= int(i) <= high for i in ids):
        return "forward", None
    return None


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower().strip("_") or "item"


def _is_iso(value: dict) -> bool:
    return "S" in value and bool(_ISO.match(value["S"]))


# --------------------------------------------------------------------------- grouping


@dataclass
class _Group:
    """Items of one entity type, and how they are recognised."""

    name: str
    items: list[dict]
    match: dict[str, Any]
    sk_prefix: str | None = None
    """'Payment-' when the sort key carries `<prefix><id>`; None for constant sort keys or no split."""
    constant_sk: str | None = None
    keyed: bool = False
    """Recognised by a type attribute: keeps the table's own key, one row per item."""


def _type_attribute(items: list[dict]) -> str | None:
    """An attribute like `type` that every item has, with a handful of distinct text values."""
    names = {name.lower(): name for item in items for name in item}
    for candidate in TYPE_ATTRIBUTES:
        name = names.get(candidate)
        values = [_text(item.get(name)) for item in items] if name else []
        if values and all(values) and len(set(values)) <= min(20, max(1, len(items) // 2)):
            return name
    return None


def _group_items(items: list[dict], pk: str, sk: str | None, out: InferredSpec) -> tuple[list[_Group], str | None]:
    """The entity groups, and the partition-key prefix to strip ('Invoice-') for adjacency lists."""
    type_attr = _type_attribute(items)
    if type_attr:
        by_value: dict[str, list[dict]] = defaultdict(list)
        for item in items:
            by_value[_text(item[type_attr]) or ""].append(item)
        out.header.append(f"Entity types from attribute {type_attr!r}: {', '.join(sorted(by_value))}.")
        return [_Group(_snake(v), group, {type_attr: v}, keyed=True) for v, group in sorted(by_value.items())], None
    if sk is None:
        return [_Group("item", items, {})], None

    by_prefix: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for item in items:
        by_prefix[_prefix(_text(item.get(sk))) or ("", "")].append(item)
    pk_prefixes = {_prefix(_text(item.get(pk))) for item in items}
    pk_prefix = next(iter(pk_prefixes)) if len(pk_prefixes) == 1 else None
    adjacency = pk_prefix is not None and pk_prefix[1] != "" and pk_prefix in by_prefix and len(by_prefix) > 1
    shapes = {frozenset(name for item in group for name in item) for group in by_prefix.values()}
    if ("", "") in by_prefix or len(by_prefix) < 2 or not (adjacency or len(shapes) > 1):
        out.header.append("One entity: the sort keys do not split the items into types with different attributes.")
        return [_Group("item", items, {})], None

    groups = []
    for (prefix, sep), group in sorted(by_prefix.items()):
        values = {_text(item.get(sk)) for item in group}
        if values == {prefix}:
            groups.append(_Group(_snake(prefix), group, {sk: prefix}, constant_sk=prefix))
        else:
            groups.append(_Group(_snake(prefix), group, {sk: {"prefix": prefix + sep}}, sk_prefix=prefix + sep))
    kinds = ", ".join(f"{prefix}{sep}…" if group.sk_prefix else prefix for (prefix, sep), group in zip(sorted(by_prefix), groups))
    out.header.append(f"Entity types from sort-key prefixes: {kinds}.")
    strip = pk_prefix[0] + pk_prefix[1] if adjacency and pk_prefix else None
    if adjacency and pk_prefix:
        out.header.append(
            f"Adjacency list: partition keys are {pk_prefix[0]} ids, so each row is one {pk_prefix[0]} with its related items."
        )
    return groups, strip


# --------------------------------------------------------------------------- columns


def _attribute_profile(items: list[dict], name: str) -> tuple[Counter, int]:
    types = Counter(next(iter(item[name])) for item in items if name in item)
    return types, sum(types.values())


def _encoding(name: str, types: Counter, items: list[dict]) -> tuple[dict[str, Any], str | None]:
    """Column settings for one attribute, and why, when the choice is not obvious."""
    if len(types) > 1:
        return {"encoding": "ddb_json"}, f"{name}: mixed types ({', '.join(f'{t}×{n}' for t, n in types.items())}); kept as DynamoDB JSON"
    tag = next(iter(types))
    if tag == "N":
        values = [item[name]["N"] for item in items if name in item]
        if _COUNTER.search(name) and all(re.fullmatch(r"-?\d{1,18}", v) for v in values):
            return {"encoding": "int64"}, f"{name}: a counter, so a 64-bit big-endian integer (Increment-compatible)"
        return {"encoding": "decimal"}, None
    if tag == "S":
        return {"encoding": "utf8"}, None
    if tag == "B":
        return {"encoding": "bytes"}, None
    if tag == "BOOL":
        return {"encoding": "bool"}, None
    if tag in ("SS", "NS", "BS"):
        return {"layout": "set", "qualifier": f"{name}:", "encoding": _SET_ENCODINGS[tag]}, (
            f"{name}: a set of {_SET_ENCODINGS[tag]}, one qualifier per member ({name}:<member>), value 0x00")
    if tag in ("M", "L"):
        what = "a map" if tag == "M" else "a list"
        if not all(_plain_json(item[name]) for item in items if name in item):
            return {"encoding": "ddb_json"}, f"{name}: {what} holding binary values or sets, kept as DynamoDB JSON"
        if tag == "M":
            return {"encoding": "json"}, f"{name}: a map, packed as JSON in one cell (layout: map gives one column per key)"
        return {"encoding": "json"}, f"{name}: a list, packed as JSON (layout: list gives one cell per element; raise max_versions)"
    return {"encoding": "auto"}, None


_SET_ENCODINGS = {set_type: encoding.value for encoding, set_type in SET_TYPES.items()}


def _plain_json(value: dict) -> bool:
    """Whether plain JSON keeps the value's types: no B and no sets, at any depth."""
    tag, payload = next(iter(value.items()))
    if tag in ("B", "SS", "NS", "BS"):
        return False
    if tag == "M":
        return all(_plain_json(element) for element in payload.values())
    if tag == "L":
        return all(_plain_json(element) for element in payload)
    return True


def _time_attribute(items: list[dict], candidates: list[str]) -> str | None:
    for name in candidates:
        if _TIME_NAME.search(name) and all(name in item and _is_iso(item[name]) for item in items):
            return name
    return None


# --------------------------------------------------------------------------- the spec


def infer_spec(describe: dict, items: list[dict], ttl_attribute: str | None = None, now: datetime | None = None) -> InferredSpec:
    """A draft spec for the table DescribeTable describes, from a sample of its items."""
    table = describe.get("Table", describe)
    pk, sk = _keys(table)
    name = table["TableName"]
    out = InferredSpec(spec={})
    _describe_header(table, len(items), ttl_attribute, out)
    groups, pk_strip = _group_items(items, pk, sk, out)
    single = len(groups) == 1 and not groups[0].match

    moment = (now or datetime.now(timezone.utc)).replace(microsecond=0)
    families: dict[str, dict[str, Any]] = {}
    entities: list[dict[str, Any]] = []
    main_family = _main_family(groups, pk_strip, name, single)
    row_key = _row_key(pk, sk, pk_strip, single)
    for index, group in enumerate(groups):
        entity, family_policy = _entity(group, index, pk, sk, row_key, main_family, single, out, ttl_attribute,
                                        int(moment.timestamp()))
        entities.append(entity)
        for family, versions in family_policy.items():
            current = families.get(family, {}).get("max_versions", 1)
            families[family] = {"max_versions": max(current, versions)}
    _disambiguate(entities, out)
    _rests_apart(entities, out)
    _escape_delimiters(entities, groups, out)
    _declare_losses(name, pk, sk, families, entities, out)

    out.spec = {
        "source": {"table": name, "partition_key": pk, **({"sort_key": sk} if sk else {})},
        "target": {"table": _snake(name), "families": families},
        "migration_time": moment.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "entities": entities,
    }
    indexes = _draft_indexes(table, items, pk, families)
    if indexes:
        out.spec["indexes"] = indexes
        out.note(("indexes",), "Each secondary index carried as index rows (one row per item that has the index's keys, "
                 "under the prefix, in DynamoDB's order): `migrate` writes them, `catch-up` and `tail` keep them exact. "
                 "Drop an index the application does not query on Bigtable.")
    patterns = _draft_patterns(table, pk, sk, groups, keyed_by_sort_key="{" + str(sk) + "}" in row_key or
                               any(group.keyed for group in groups))  # fmt: skip
    if patterns:
        out.spec["access_patterns"] = patterns
        out.note(("access_patterns",), "Drafted from the key schema, the indexes and the sort-key prefixes: keep the reads "
                 "your application makes (migrate-plan shows the Bigtable read serving each; `ddb2bt parity` proves it).")
    out.note(("migration_time",), "Cells with no time of their own get this one; pinned so that re-runs write identical cells.")
    out.note(("target", "families"), "max_versions 1 keeps one cell per column; families holding one column of many timed cells keep more.")
    if not single:
        out.note(("entities",), "Ordered rules: the first whose match holds takes the item. Unmatched items are dead-lettered.")
    return out


def _by(index_name: str) -> str:
    """A pattern's name for a query on an index: `by_status` for byStatus (not `by_by_status`), `by_gsi1` for GSI1."""
    name = _snake(index_name)
    return name if name.startswith("by_") else f"by_{name}"


def _draft_patterns(table: dict, pk: str, sk: str | None, groups: list[_Group], keyed_by_sort_key: bool) -> list[dict[str, Any]]:
    """The reads a table's keys and indexes are made for: GetItem, the partition, each sort-key prefix, each index.

    GetItem only where rows are keyed by the sort key: a partition folded into one row reads as a whole."""
    if sk is None:
        return [{"name": "item", "description": f"one item by its {pk}", "operation": "get_item"}]
    patterns: list[dict[str, Any]] = [{"name": "partition", "description": f"every item of a {pk} in {sk} order"}]
    if keyed_by_sort_key:
        patterns.insert(0, {"name": "item", "description": f"one item by {pk} and {sk}", "operation": "get_item"})
    for group in groups:
        if group.sk_prefix:
            patterns.append({"name": f"{group.name}_items", "description": f"the {group.name} items of a {pk}",
                             "sort_key": {"operator": "begins_with", "values": [group.sk_prefix]}})  # fmt: skip
    for kind, scope in (("GlobalSecondaryIndexes", "global"), ("LocalSecondaryIndexes", "local")):
        for index in table.get(kind) or ():
            index_pk, index_sk = key_schema(index["KeySchema"])
            patterns.append({
                "name": _by(index["IndexName"]),
                "description": f"query the {scope} index {index['IndexName']}",
                "index": {"name": index["IndexName"], "type": scope, "partition_key": index_pk,
                          **({"sort_key": index_sk} if index_sk else {})},
            })  # fmt: skip
    return patterns


INDEX_FAMILY = "index"


def _draft_indexes(table: dict, items: list[dict], pk: str, families: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The table's GSIs and LSIs as index rows with the projection DescribeTable gives, each under a key prefix that
    no sampled item's row key can start with (row keys start with the partition key's text)."""
    declared = [(index, "global") for index in table.get("GlobalSecondaryIndexes") or ()] + [
        (index, "local") for index in table.get("LocalSecondaryIndexes") or ()]
    if not declared:
        return []
    starts = {key_text(item[pk])[:1] for item in items if pk in item}
    lead = next(c for c in "~}|{_^@" if c not in starts)  # after letters and digits; no sampled key starts with it
    drafted = []
    types = {entry["AttributeName"]: entry["AttributeType"] for entry in table.get("AttributeDefinitions") or ()}
    for index, scope in declared:
        index_pk, index_sk = key_schema(index["KeySchema"])
        projection = index.get("Projection") or {"ProjectionType": "ALL"}
        drafted.append({
            "name": index["IndexName"], "type": scope, "partition_key": index_pk,
            **({"sort_key": index_sk} if index_sk else {}),
            # an item whose index key has another type is in no index (an index key violation)
            **({"partition_key_type": types[index_pk]} if index_pk in types else {}),
            **({"sort_key_type": types[index_sk]} if index_sk in types else {}),
            "projection": {"type": projection.get("ProjectionType", "ALL"),
                           **({"non_key_attributes": list(projection["NonKeyAttributes"])}
                              if projection.get("NonKeyAttributes") else {})},
            "target": {"prefix": f"{lead}{_snake(index['IndexName'])}#"},
            "family": INDEX_FAMILY,
        })  # fmt: skip
    families.setdefault(INDEX_FAMILY, {"max_versions": 1})
    return drafted


def _describe_header(table: dict, sampled: int, ttl_attribute: str | None, out: InferredSpec) -> None:
    count, size = table.get("ItemCount", 0), table.get("TableSizeBytes", 0)
    known = (f"~{count:,} items, ~{human_size(size)}" if count or not sampled else
             "size not known yet: DescribeTable reports 0 items, a count it refreshes about every 6 hours")
    out.header.append(
        f"Drafted by `ddb2bt infer` from DescribeTable and {sampled:,} sampled items of {table['TableName']} "
        f"({known}). Review every choice."
    )
    for kind in ("GlobalSecondaryIndexes", "LocalSecondaryIndexes"):
        for index in table.get(kind) or ():
            keys = " + ".join(entry["AttributeName"] for entry in index["KeySchema"])
            out.header.append(
                f"{'GSI' if kind.startswith('Global') else 'LSI'} {index['IndexName']} ({keys}): Bigtable has no secondary "
                "indexes; drafted below as index rows that ddb2bt writes and keeps exact, with its access pattern "
                "(migrate-plan shows the Bigtable read serving it; `ddb2bt parity` proves it)."
            )
    stream = table.get("StreamSpecification") or {}
    if stream.get("StreamEnabled"):
        out.header.append(
            f"Streams are on ({stream.get('StreamViewType')}): writes made during the migration are not in the scan; "
            "replay them from the stream afterwards."
        )
    if ttl_attribute:
        out.header.append(
            f"TTL is enabled on {ttl_attribute!r}; it is migrated as a column. To expire cells in Bigtable instead, add "
            f"`ttl: {{attribute: {ttl_attribute}}}` to the entities and a max_age to their families."
        )


def _main_family(groups: list[_Group], pk_strip: str | None, table: str, single: bool) -> str:
    if single:  # stored with every cell: a long name is the plan's long-family-name warning
        return _snake(table) if len(_snake(table)) <= LONG_FAMILY_NAME else "data"
    if pk_strip:
        return next(g for g in groups if g.sk_prefix == pk_strip or g.constant_sk == pk_strip.rstrip("#-_")).name.title().replace("_", "")
    constants = sorted((g.constant_sk for g in groups if g.constant_sk), key=len)
    return _snake(constants[0]) if constants else "data"


def _row_key(pk: str, sk: str | None, pk_strip: str | None, single: bool) -> str:
    if single:
        return f"{{{pk}}}#{{{sk}}}" if sk else f"{{{pk}}}"
    return f"{{{pk}|strip_prefix({pk_strip!r})}}" if pk_strip else f"{{{pk}}}"


def _entity(group: _Group, index: int, pk: str, sk: str | None, row_key: str, main_family: str, single: bool,
            out: InferredSpec, ttl_attribute: str | None, now_s: int) -> tuple[dict[str, Any], dict[str, int]]:
    at: Path = ("entities", index)
    entity: dict[str, Any] = {"name": group.name}
    if group.match:
        entity["match"] = group.match
    entity["row_key"] = row_key
    attributes = sorted({name for item in group.items for name in item} - {pk, sk})
    drop: list[str] = []
    family, versions = main_family, 1
    qualifier_template = None
    ids = [(_text(item.get(sk)) or "")[len(group.sk_prefix):] for item in group.items] if group.sk_prefix and sk else []
    self_item = group.sk_prefix is not None and all(_text(item.get(sk)) == _text(item.get(pk)) for item in group.items)

    if single or group.keyed:
        if group.keyed:
            entity["row_key"] = _row_key(pk, sk, None, True)
            family = group.name
        out.note(at + ("row_key",), "Key-value: the DynamoDB key becomes the row key, general before specific.")
    elif self_item and sk:
        drop.append(sk)
        out.note(at, f"The {group.name} item itself: its sort key repeats the partition key, so it is dropped.")
    elif group.sk_prefix:
        timing = _time_suffix(ids, now_s)
        if timing:
            kind, maximum = timing
            fmt = "epoch_s" if len(ids[0]) == 10 else "epoch_ms"
            inner = f"{sk}|strip_prefix({group.sk_prefix!r})" + (f"|reverse_timestamp({maximum})" if kind == "reverse" else "")
            entity["timestamp"] = {"template": f"{{{inner}}}", "format": fmt}
            # a family of their own: its GC keeps many versions, the entity's other columns keep one
            family, versions = group.name.title().replace("_", ""), MAX_COMMENT_VERSIONS
            out.note(at, f"Many {group.name} items per partition, keyed by a {'reverse ' if kind == 'reverse' else ''}timestamp: "
                         f"they become cells of one column at their own time, newest first, in family {family}, whose GC "
                         f"keeps the {versions} newest.")
        else:
            family = group.name.title().replace("_", "")
            qualifier_template = f"{{{sk}|strip_prefix({group.sk_prefix!r})}}"
            out.note(at, f"Related {group.name} items: family {family}, one column per id ({group.sk_prefix}<id> -> {family}:<id>).")
    elif sk:
        drop.append(sk)
        out.note(at, f"One {group.name} item per partition: its columns join the partition's row.")
    type_attr = next((name for name in group.match if name != sk), None)
    if type_attr:
        drop.append(type_attr)
        attributes.remove(type_attr)

    if "timestamp" not in entity:
        when = _time_attribute(group.items, [a for a in attributes if a != ttl_attribute])
        if when:
            entity["timestamp"] = {"attribute": when}
            attributes.remove(when)
            out.note(at + ("timestamp",), f"{when} holds ISO-8601 times: it becomes the cells' timestamp instead of a column.")

    columns: list[dict[str, Any]] = []
    for name in attributes:
        types, seen = _attribute_profile(group.items, name)
        settings, why = _encoding(name, types, group.items)
        if qualifier_template and settings.get("layout") == "set":
            # A set's member qualifiers (tags:<member>) cannot carry the item's part of the row: every item of the
            # partition would write into the same members. One cell per item keeps each item's set apart.
            settings, why = {"encoding": "ddb_json"}, (f"{name}: a set in a row several items share, kept as DynamoDB "
                                                       "JSON in the item's own cell (one qualifier per member would "
                                                       "mix the items' sets)")
        column: dict[str, Any] = {"attribute": name, "family": family}
        if qualifier_template and "qualifier" not in settings:
            column["qualifier"] = qualifier_template if len(attributes) == 1 else f"{qualifier_template}.{name}"
        column.update(settings)
        notes = [why] if why else []
        if seen < len(group.items):
            kind = "items" if group.name == "item" else f"{group.name} items"  # not "sampled item items"
            notes.append(f"{name}: present in {seen} of {len(group.items)} sampled {kind}")
        if notes:
            out.note(at + ("columns", len(columns)), "; ".join(notes))
        columns.append(column)
    entity["columns"] = columns
    if drop:
        entity["drop"] = drop
    if single or group.keyed or not group.sk_prefix or self_item:
        entity["rest"] = {"family": family}
        out.note(at + ("rest",), "Attributes the sample did not show land here, qualifier = attribute name.")
    return entity, {family: versions}


def _disambiguate(entities: list[dict[str, Any]], out: InferredSpec) -> None:
    """Two entities of one row writing the same family:qualifier would overwrite each other: prefix with the sort key."""
    writers: dict[tuple[str, str], list[tuple[int, int]]] = defaultdict(list)
    for e, entity in enumerate(entities):
        for c, column in enumerate(entity["columns"]):
            writers[(column["family"], column.get("qualifier", column["attribute"]))].append((e, c))
    for (family, qualifier), places in writers.items():
        if len({e for e, _ in places}) < 2:
            continue
        for e, c in places:
            entity = entities[e]
            constant = next((v for v in entity.get("match", {}).values() if isinstance(v, str)), entity["name"])
            entity["columns"][c]["qualifier"] = f"{constant}.{qualifier}"
            out.note(("entities", e, "columns", c), f"{family}:{qualifier} is written by several entities; prefixed with {constant!r}.")


def _rests_apart(entities: list[dict[str, Any]], out: InferredSpec) -> None:
    """A rest in a family that another entity of the same rows writes too would take that entity's cells when read
    back (and meet them when written): such an entity gets no rest, so an attribute the sample did not show
    dead-letters its item with the attribute's name instead of landing where it cannot be told apart."""
    written: dict[tuple[Any, str], set[int]] = defaultdict(set)  # (row key, family): entities writing there
    for e, entity in enumerate(entities):
        rest_family = [entity["rest"]["family"]] if "rest" in entity else []
        for family in {column["family"] for column in entity["columns"]}.union(rest_family):
            written[(repr(entity["row_key"]), family)].add(e)
    for e, entity in enumerate(entities):
        rest = entity.get("rest")
        if rest is None or written[(repr(entity["row_key"]), rest["family"])] == {e}:
            continue
        del entity["rest"]
        out.comments.pop(("entities", e, "rest"), None)
        out.note(("entities", e), f"No rest: other entities write family {rest['family']} in the same rows, so an "
                                  "attribute the sample did not show would read back as theirs; its item is a dead "
                                  "letter naming it (add a column for it).")


def _escape_delimiters(entities: list[dict[str, Any]], groups: list[_Group], out: InferredSpec) -> None:
    """A key or qualifier template whose sampled values hold its delimiter (`Amazon DynamoDB#DynamoDB Thread 1`
    before `#{ReplyDateTime}`) would dead-letter those items: such a template %-escapes them, so it reads back."""
    from ..render import ItemFailure, compile_template

    def holds_delimiter(template: str, items: list[dict]) -> bool:
        render = compile_template(template)
        for item in items:
            try:
                render(item)
            except ItemFailure as failure:
                if "contains the key delimiter" in failure.reason:
                    return True
        return False

    for e, (entity, group) in enumerate(zip(entities, groups)):
        places: list[tuple[dict[str, Any], str, Path]] = [(entity, "row_key", ("entities", e, "row_key"))]
        places += [(column, "qualifier", ("entities", e, "columns", c, "qualifier"))
                   for c, column in enumerate(entity["columns"]) if isinstance(column.get("qualifier"), str)]
        for holder, key, path in places:
            template = holder[key]
            if isinstance(template, str) and holds_delimiter(template, group.items):
                holder[key] = {"template": template, "on_delimiter": "escape"}
                out.note(path, "Sampled values hold the delimiter '#': they are %-escaped so that the key splits back "
                               "into its attributes (on_delimiter: escape).")


def _declare_losses(table: str, pk: str, sk: str | None, families: dict, entities: list[dict[str, Any]],
                    out: InferredSpec) -> None:
    """List in `lossy` whatever the draft cannot read back, with why, so that the draft loads and says so."""
    from ..decode import losses
    from ..spec import MappingSpec

    draft = MappingSpec.model_validate({
        "source": {"table": table, "partition_key": pk, **({"sort_key": sk} if sk else {})},
        "target": {"table": "draft", "families": families}, "entities": entities,
    })  # fmt: skip
    index = {entity["name"]: i for i, entity in enumerate(entities)}
    for loss in losses(draft):
        if loss.declared or loss.attribute is None:
            continue
        entity = entities[index[loss.entity]]
        if loss.attribute not in entity.setdefault("lossy", []):
            entity["lossy"].append(loss.attribute)
            out.note(("entities", index[loss.entity], "lossy"), f"{loss.attribute}: {loss.reason}")
