"""docs/EXAMPLES.md §3 patterns and the item-level rules: versioning, time series, write sharding,
multi-tenancy, TTL, collections, salting, delimiter handling, and errors that dead-letter one item."""

import json
import zlib

import pytest
import yaml

from ddb2bt.mappers.compiler import compile_spec
from ddb2bt.mappers.render import unescape_delimiter
from ddb2bt.mappers.loader import parse_document, validate_data
from ddb2bt.mappers.results import ItemError, MappedRow, Skipped
from ddb2bt.mappers.spec import MappingSpec
from tests.golden import group_cells, micros

NOW_MS = micros("2024-06-01T00:00:00") // 1000


def compiled(text: str, now_ms: int = NOW_MS):
    data = yaml.safe_load(text)
    data.setdefault("source", {"table": "T", "partition_key": "pk", "sort_key": "sk"})
    return compile_spec(validate_data(data), now_ms=now_ms)


def S(text):
    return {"S": text}


def N(text):
    return {"N": str(text)}


# --------------------------------------------------------------------------- versioning

VERSIONED = """
target: {table: docs, families: {d: {max_versions: 10}}}
migration_time: "2024-01-01T00:00:00Z"
entities:
  - name: document
    versioning: {}
    row_key: "{pk}#{sk}"
    columns: [{attribute: body, family: d}]
"""


def test_versions_become_cells_of_one_column_and_v0_is_skipped():
    spec = compiled(VERSIONED)
    items = [
        {"pk": S("doc1"), "sk": S("v0_spec"), "body": S("third")},
        {"pk": S("doc1"), "sk": S("v1_spec"), "body": S("first")},
        {"pk": S("doc1"), "sk": S("v2_spec"), "body": S("second")},
        {"pk": S("doc1"), "sk": S("v3_spec"), "body": S("third")},
    ]
    results = [spec.map_item(item) for item in items]
    assert isinstance(results[0], Skipped) and "v0_" in results[0].reason
    rows = group_cells(result for result in results if isinstance(result, MappedRow))
    base = micros("2024-01-01T00:00:00")
    assert rows == {b"doc1#spec": {"d:body": [(base + 3000, b"third"), (base + 2000, b"second"), (base + 1000, b"first")]}}


def test_unversioned_item_in_a_versioned_entity_is_an_item_error():
    result = compiled(VERSIONED).map_item({"pk": S("doc1"), "sk": S("spec"), "body": S("x")})
    assert isinstance(result, ItemError) and result.attribute == "sk" and "version prefix" in result.reason


# --------------------------------------------------------------------------- time series

TIME_SERIES = """
target: {table: metrics, families: {m: {max_age: 30d}}}
entities:
  - name: reading
    # pk is already "device#metric": its own '#' is part of the key's structure.
    row_key: {template: "{pk}#{sk|epoch_ms|reverse_timestamp}", on_delimiter: allow}
    timestamp: {attribute: sk}
    columns: [{attribute: value, family: m, encoding: float64}]
    lossy: [pk, sk]  # pk holds the delimiter (allow), sk becomes epoch ms
"""


def test_time_series_rows_are_device_first_and_newest_first():
    spec = compiled(TIME_SERIES)
    older = spec.map_item({"pk": S("dev7#temp"), "sk": S("2024-05-01T10:00:00Z"), "value": N("21.5")})
    newer = spec.map_item({"pk": S("dev7#temp"), "sk": S("2024-05-01T10:05:00Z"), "value": N("21.75")})
    assert older.row_key.startswith(b"dev7#temp#") and newer.row_key < older.row_key
    assert older.cells[0].timestamp_micros == micros("2024-05-01T10:00:00")
    reversed_ms = int(older.row_key.rsplit(b"#", 1)[1])
    assert 9_999_999_999_999 - reversed_ms == micros("2024-05-01T10:00:00") // 1000


# --------------------------------------------------------------------------- write sharding and salting

SHARDED = """
target: {table: events, families: {e: {}}}
migration_time: "2024-01-01T00:00:00Z"
entities:
  - name: event
    row_key: "{pk|unshard}#{sk}"
    rest: {family: e}
    lossy: [pk]  # the shard suffix is not migrated
"""


def test_write_shard_suffix_is_removed_not_copied():
    spec = compiled(SHARDED)
    rows = [spec.map_item({"pk": S(f"2023-09-10.{shard}"), "sk": S(f"evt{shard}"), "n": N(shard)}) for shard in range(3)]
    assert [row.row_key for row in rows] == [b"2023-09-10#evt0", b"2023-09-10#evt1", b"2023-09-10#evt2"]


def test_unsharded_value_without_suffix_is_an_item_error():
    result = compiled(SHARDED).map_item({"pk": S("2023-09-10"), "sk": S("e")})
    assert isinstance(result, ItemError) and "write-shard suffix" in result.reason


def test_salt_prefix_is_deterministic_and_bounded():
    spec = compiled(SHARDED.replace('row_key: "{pk|unshard}#{sk}"', 'row_key: {template: "{pk|unshard}#{sk}", salt_buckets: 16}'))
    row = spec.map_item({"pk": S("2023-09-10.3"), "sk": S("evt"), "n": N(1)})
    bucket, _, key = row.row_key.partition(b"#")
    assert key == b"2023-09-10#evt" and int(bucket) == zlib.crc32(b"2023-09-10#evt") % 16 and len(bucket) == 2


# --------------------------------------------------------------------------- multi-tenancy

MULTI_TENANT = """
target: {table: saas, families: {o: {max_versions: 1}}}
migration_time: "2024-01-01T00:00:00Z"
entities:
  - name: order
    match: {tenant: {exists: true}}
    row_key: "{tenant|lower}#{pk}#{sk}"
    rest: {family: o}
    drop: [tenant]
"""


def test_every_key_starts_with_the_tenant():
    spec = compiled(MULTI_TENANT)
    row = spec.map_item({"tenant": S("AcmeCo"), "pk": S("order-1"), "sk": S("line-2"), "qty": N(2)})
    assert row.row_key == b"acmeco#order-1#line-2"
    assert [(cell.qualifier, cell.value) for cell in row.cells] == [(b"qty", b'{"N":"2"}')]  # auto: typed


def test_item_without_tenant_is_unmatched_and_dead_lettered():
    result = compiled(MULTI_TENANT).map_item({"pk": S("order-1"), "sk": S("x")})
    assert isinstance(result, ItemError) and result.stage == "unmatched"


def test_delimiter_in_a_leading_value_is_an_item_error_or_escaped():
    item = {"tenant": S("a#b"), "pk": S("o"), "sk": S("x#y"), "qty": N(1)}
    error = compiled(MULTI_TENANT).map_item(item)
    assert isinstance(error, ItemError) and error.attribute == "tenant" and "delimiter" in error.reason
    escaping = MULTI_TENANT.replace('row_key: "{tenant|lower}#{pk}#{sk}"', 'row_key: {template: "{tenant|lower}#{pk}#{sk}", on_delimiter: escape}')
    row = compiled(escaping).map_item(item)
    assert row.row_key == b"a%23b#o#x#y"  # the last part may keep '#': it is everything after the second one
    assert compiled(escaping).map_item({**item, "tenant": S("a%23b")}).row_key == b"a%2523b#o#x#y"  # issue 10
    tenant, pk, rest = row.row_key.decode().split("#", 2)
    assert unescape_delimiter(tenant, "#") == "a#b" and rest == "x#y"


# --------------------------------------------------------------------------- TTL

TTL = """
target: {table: sessions, families: {s: {max_age: 7d}}}
entities:
  - name: session
    ttl: {attribute: expires}
    row_key: "{pk}"
    columns: [{attribute: user, family: s}]
    drop: [sk]
"""


def test_ttl_becomes_timestamps_that_max_age_gc_drops_on_expiry():
    expires_s = NOW_MS // 1000 + 3600
    row = compiled(TTL).map_item({"pk": S("s1"), "sk": S("x"), "user": S("u1"), "expires": N(expires_s)})
    (cell,) = row.cells
    seven_days_us = 7 * 86400 * 1_000_000
    # GC drops a cell once now - timestamp > max_age, i.e. exactly when now > expires.
    assert cell.timestamp_micros + seven_days_us == expires_s * 1_000_000


def test_expired_and_ttl_less_items():
    spec = compiled(TTL)
    expired = spec.map_item({"pk": S("s1"), "user": S("u"), "expires": N(NOW_MS // 1000 - 1)})
    assert isinstance(expired, Skipped) and "expired" in expired.reason
    no_ttl = spec.map_item({"pk": S("s1"), "user": S("u")})
    assert isinstance(no_ttl, ItemError) and no_ttl.attribute == "expires"
    skipping = compiled(TTL.replace("ttl: {attribute: expires}", "ttl: {attribute: expires, on_missing: skip}"))
    assert isinstance(skipping.map_item({"pk": S("s1"), "user": S("u")}), Skipped)


# --------------------------------------------------------------------------- collections

COLLECTIONS = """
target: {table: c, families: {tags: {}, prefs: {}, h: {}, p: {}}}
migration_time: "2024-01-01T00:00:00Z"
entities:
  - name: profile
    row_key: "{pk}"
    columns:
      - {attribute: tags, family: tags, layout: set, encoding: utf8}
      - {attribute: prefs, family: prefs, layout: map}
      - {attribute: history, family: h, layout: list}
      - {attribute: packed, family: p, layout: json}
"""


def test_collection_layouts():
    row = compiled(COLLECTIONS).map_item(
        {
            "pk": S("u1"),
            "tags": {"SS": ["red", "blue"]},
            "prefs": {"M": {"lang": S("fr"), "size": N(42)}},
            "history": {"L": [S("a"), S("b"), S("c")]},
            "packed": {"M": {"z": N("1.50"), "a": {"L": [N(10), S("2")]}}},
        }
    )
    cells = {(cell.family, cell.qualifier): (cell.timestamp_micros, cell.value) for cell in row.cells if cell.family != "h"}
    base = micros("2024-01-01T00:00:00")
    assert cells[("tags", b"red")] == (base, b"\x00") and cells[("tags", b"blue")] == (base, b"\x00")
    assert cells[("prefs", b"lang")] == (base, b"fr") and cells[("prefs", b"size")] == (base, b'{"N":"42"}')
    assert cells[("p", b"packed")] == (base, b'{"a":[10,"2"],"z":1.5}')
    history = [(cell.timestamp_micros, cell.value) for cell in row.cells if cell.family == "h"]
    assert history == [(base, b"a"), (base + 1000, b"b"), (base + 2000, b"c")]  # insertion order by timestamp


def test_empty_collections_are_not_absent():
    spec = compiled(COLLECTIONS)
    row = spec.map_item({"pk": S("u1"), "prefs": {"M": {}}})  # issue 10: was 0 cells, dead-lettered at write
    assert [(cell.family, cell.qualifier, cell.value) for cell in row.cells] == [("prefs", b"", b"")]
    row = spec.map_item({"pk": S("u1"), "history": {"L": []}})
    assert [(cell.family, cell.qualifier, cell.value) for cell in row.cells] == [("h", b"history", b"")]
    assert b"" not in [cell.value for cell in spec.map_item({"pk": S("u1"), "history": {"L": [S("")]}}).cells]
    as_text = compiled(COLLECTIONS.replace("layout: list}", "layout: list, encoding: utf8}"))
    error = as_text.map_item({"pk": S("u1"), "history": {"L": []}, "prefs": {"M": {"a": S("b")}}})
    assert isinstance(error, ItemError) and error.attribute == "history" and "empty list" in error.reason
    packed = spec.map_item({"pk": S("u1"), "packed": {"M": {"a": {"NS": ["1"]}}}})
    assert isinstance(packed, ItemError) and "use ddb_json" in packed.reason  # plain JSON would lose the set type


def test_two_sources_of_one_item_on_one_cell_is_an_item_error_naming_both():
    clash = COLLECTIONS.replace("{attribute: prefs, family: prefs, layout: map}", "{attribute: prefs, family: h, layout: map}")
    clash = clash.replace("{attribute: history, family: h, layout: list}", "{attribute: history, family: h}")
    clash = clash.replace("    columns:", "    lossy: [prefs]\n    columns:")  # keys may meet the history column: declared
    error = compiled(clash).map_item({"pk": S("u1"), "history": S("x"), "prefs": {"M": {"history": S("y")}}})
    assert isinstance(error, ItemError) and "h:history" in error.reason
    assert "attribute 'history'" in error.reason and "attribute 'prefs'" in error.reason
    rest = """
target: {table: t, families: {f: {}}}
migration_time: "2024-01-01T00:00:00Z"
entities:
  - {name: e, row_key: "{pk}", columns: [{attribute: a, family: f, qualifier: b}], rest: {family: f}}
"""
    error = compiled(rest).map_item({"pk": S("k"), "a": S("1"), "b": S("2")})
    assert isinstance(error, ItemError) and "column 'a'" in error.reason and "rest attribute 'b'" in error.reason


def test_wrong_type_for_layout_is_an_item_error():
    result = compiled(COLLECTIONS).map_item({"pk": S("u1"), "tags": S("red")})
    assert isinstance(result, ItemError) and result.attribute == "tags" and "layout set" in result.reason


# --------------------------------------------------------------------------- item errors never raise

STRICT = """
target: {table: t, families: {f: {}}}
migration_time: "2024-01-01T00:00:00Z"
entities:
  - name: thing
    row_key: "{pk}"
    columns: [{attribute: a, family: f, required: true}, {attribute: n, family: f, encoding: int64}]
"""


@pytest.mark.parametrize(
    "item, attribute, reason",
    [
        ({"pk": S("k")}, "a", "required attribute is missing"),
        ({"pk": S("k"), "a": S("x"), "extra": S("y")}, "extra", "not mapped"),
        ({"pk": S("k"), "a": S("x"), "n": N("1.5")}, "n", "not an integer"),
        ({"pk": S("k" * 5000), "a": S("x")}, None, "row key is 5000 bytes"),
        ({"sk": S("k"), "a": S("x")}, "pk", "attribute is missing"),
        ({"pk": {"M": {}}, "a": S("x")}, "pk", "cannot be used as text"),
    ],
)
def test_item_errors_name_the_attribute_and_reason(item, attribute, reason):
    result = compiled(STRICT).map_item(item)
    assert isinstance(result, ItemError), result
    assert result.attribute == attribute and reason in result.reason and result.entity == "thing"


def test_unmatched_policies():
    spec = """
target: {table: t, families: {f: {}}}
migration_time: "2024-01-01T00:00:00Z"
unmatched: %s
entities:
  - {name: only, match: {type: order}, row_key: "{pk}", rest: {family: f}}
"""
    item = {"pk": S("k"), "type": S("other")}
    assert isinstance(compiled(spec % "skip").map_item(item), Skipped)
    assert compiled(spec % "dead_letter").map_item(item).stage == "unmatched"
    assert isinstance(compiled(spec % "dead_letter").map_item({"pk": S("k"), "type": S("order")}), MappedRow)


def test_numbers_in_conditions_and_keys_are_exact_text():
    spec = """
target: {table: t, families: {f: {}}}
migration_time: "2024-01-01T00:00:00Z"
entities:
  - {name: n, match: {pk: 12345678901234567890123456789012345678}, row_key: "{pk|sortable_number}", rest: {family: f}}
"""
    row = compiled(spec).map_item({"pk": N("12345678901234567890123456789012345678"), "v": S("x")})
    assert isinstance(row, MappedRow) and row.row_key == b"2167" + b"12345678901234567890123456789012345678"


def test_numbers_in_conditions_are_the_exact_decimals_written():
    """The spec loader reads 30.0000000000000000000000000001 as written (YAML's float made it 30) and a number matches
    N values as an exact decimal, so 30.0 matches N 30 and an S '30' matches no number."""
    text = """
source: {table: T, partition_key: pk, sort_key: sk}
target: {table: t, families: {f: {}}}
migration_time: "2024-01-01T00:00:00Z"
entities:
  - {name: exact, match: {price: 30.0000000000000000000000000001}, row_key: "{pk}", rest: {family: f}}
  - {name: thirty, match: {price: 30.0}, row_key: "{pk}", rest: {family: f}}
"""
    data, lines = parse_document(text)
    spec = validate_data(data, None, lines)
    mapper = compile_spec(spec, now_ms=NOW_MS)

    def entity(price):
        found = mapper.entity_for({"pk": S("k"), "price": price})
        return found.name if found else None

    assert entity(N("30.0000000000000000000000000001")) == "exact"
    assert [entity(N("30")), entity(N("30.00")), entity(N("3E+1"))] == ["thirty"] * 3
    assert [entity(N("30.0000000000000000000000000002")), entity(S("30")), entity(S("30.0"))] == [None] * 3
    # Beam workers and checkpoints carry the spec as JSON: a number no float holds is written as DynamoDB JSON
    dumped = spec.model_dump(mode="json", by_alias=True)
    assert [e["match"]["price"]["equals"] for e in dumped["entities"]] == [{"N": "30.0000000000000000000000000001"}, 30.0]
    assert MappingSpec.model_validate(json.loads(json.dumps(dumped))) == spec
