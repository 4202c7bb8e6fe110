"""Lints fire on crafted bad designs (table-driven) and stay quiet on the seed specs."""

from __future__ import annotations

import hashlib
import uuid

import pytest

from ddb2bt.mappers.compiler import compile_spec
from ddb2bt.mappers.analysis.estimates import hotspot_reports
from ddb2bt.mappers.analysis.lints import lint, looks_like_timestamp
from ddb2bt.mappers.loader import load_spec
from ddb2bt.mappers.analysis.sample import analyse_sample
from ddb2bt.mappers.spec import MappingSpec
from tests.golden import SEEDS, seed_items, template_path

NOW_MS = 1_700_000_000_000


def S(text):
    return {"S": str(text)}


def N(number):
    return {"N": str(number)}


def make_spec(row_key="{pk}", *, families=None, entities=None, **top):
    document = {
        "source": {"table": "T", "partition_key": "pk"},
        "target": {"table": "t", "families": families or {"f": {"max_versions": 1}}},
        "migration_time": "2024-01-01T00:00:00Z",
        "entities": entities or [{"name": "e", "row_key": row_key, "rest": {"family": "f"}}],
    }
    document.update(top)
    return MappingSpec.model_validate(document)


def run_lints(spec, items, ttl_attribute=None):
    if all(entity.rest for entity in spec.entities):  # one attribute besides the key: an item must write a cell
        items = [{"x": S("x"), **item} for item in items]
    results = [compile_spec(spec, NOW_MS).map_item(item) for item in items]
    sample = analyse_sample(items, results)
    return lint(spec, sample, ttl_attribute=ttl_attribute, hotspots=hotspot_reports(sample))


def codes(lints):
    return {(found.code, found.severity) for found in lints}


def keyed(values, attribute="pk", **other):
    """Items with these key values and one more attribute (an item must write a cell)."""
    other = other or {"x": "1"}
    return [{attribute: S(value), **{k: S(v) for k, v in other.items()}} for value in values]


def md5(i):
    return hashlib.md5(str(i).encode()).hexdigest()


CASES = {
    "iso timestamp first": (make_spec("{pk}"), keyed(f"2023-09-{d:02d}T10:00:00" for d in range(1, 4)), ("key-starts-with-timestamp", "error")),
    "epoch seconds first": (make_spec("{pk}#{d}"), [{"pk": N(1694359308 + i), "d": S("x"), "x": S("x")} for i in range(3)], ("key-starts-with-timestamp", "error")),
    "epoch transform in template": (make_spec("{pk|epoch_ms}#{d}"), [{"pk": S("2023-09-10T10:00:00"), "d": S("a")}], ("key-starts-with-timestamp", "error")),
    "reverse timestamp still first": (make_spec("{pk|reverse_timestamp(9999999999)}"), keyed(["1694359308"]), ("key-starts-with-timestamp", "error")),
    "sequential ids": (make_spec("{pk}"), [{"pk": N(1000 + i), "x": S("x")} for i in range(20)], ("key-starts-with-sequential-id", "warning")),
    "sequential with a letter prefix": (make_spec("{pk}"), keyed(f"INV{9000 + i}" for i in range(12)), ("key-starts-with-sequential-id", "warning")),
    "md5 keys": (make_spec("{pk}"), keyed(md5(i) for i in range(10)), ("key-hashed", "warning")),
    "sha256 segment": (make_spec("{t}#{pk}"), [{"t": S("acme"), "pk": S(hashlib.sha256(b"%d" % i).hexdigest())} for i in range(5)], ("key-hashed", "warning")),
    "uuid4 keys": (make_spec("{pk}"), keyed(str(uuid.uuid4()) for _ in range(10)), ("key-uuid", "info")),
    "unpadded numbers": (make_spec("{user}#{pk}"), [{"user": S("ann"), "pk": N(n)} for n in (3, 20, 100)], ("key-unpadded-number", "warning")),
    "pii attribute name": (make_spec("{email}", entities=[{"name": "u", "row_key": "{email}", "rest": {"family": "f"}}]), [{"pk": S("1"), "email": S("a1")}], ("key-pii", "warning")),
    "pii values": (make_spec("{contact}#{pk}"), [{"pk": S(i), "contact": S(f"user{i}@example.com")} for i in range(3)], ("key-pii", "warning")),
    "phone values": (make_spec("{c}#{pk}"), [{"pk": S(i), "c": S(f"+4478912345{i:02d}")} for i in range(3)], ("key-pii", "warning")),
    "too many families": (make_spec(families={f"f{i}": {"max_versions": 1} for i in range(101)}), keyed(["a"]), ("too-many-families", "error")),
    "near the family limit": (make_spec(families={f"f{i}": {"max_versions": 1} for i in range(85)}), keyed(["a"]), ("many-families", "warning")),
    "long family name": (make_spec(families={"customer_profile_attributes": {"max_versions": 1}}, entities=[{"name": "e", "row_key": "{pk}", "rest": {"family": "customer_profile_attributes"}}]), keyed(["a"]), ("long-family-name", "warning")),
    "items fold into a keep-all family": (make_spec("{pk}", families={"f": {}}, entities=[{"name": "e", "row_key": "{pk}", "columns": [{"attribute": "v", "family": "f"}], "timestamp": {"attribute": "ts"}, "drop": ["sk"]}]), [{"pk": S("dev1"), "sk": S(i), "v": S(i), "ts": N(1694359308 + i)} for i in range(5)], ("unbounded-row-growth", "warning")),
    "list layout in a keep-all family": (make_spec("{pk}", families={"f": {}}, entities=[{"name": "e", "row_key": "{pk}", "columns": [{"attribute": "l", "family": "f", "layout": "list"}]}]), [{"pk": S("a"), "l": {"L": [S(1), S(2)]}}], ("unbounded-row-growth", "warning")),
    "migration_time unset": (make_spec(migration_time=None), keyed(["a"]), ("migration-time-unset", "warning")),
    "unmatched with fail": (make_spec(unmatched="fail", entities=[{"name": "e", "match": {"kind": "x"}, "row_key": "{pk}", "rest": {"family": "f"}}]), keyed(["a"], kind="y"), ("unmatched-items", "error")),
    "unmatched dead-lettered": (make_spec(entities=[{"name": "e", "match": {"kind": "x"}, "row_key": "{pk}", "rest": {"family": "f"}}]), keyed(["a"], kind="y"), ("unmatched-items", "warning")),
    "dead-lettered items": (make_spec(entities=[{"name": "e", "row_key": "{pk}", "columns": [{"attribute": "v", "family": "f"}]}]), keyed(["a"], v="1", extra="2") + keyed(["b"], v="1"), ("items-dead-lettered", "warning")),
    "oversized cell": (make_spec(), [{"pk": S("a"), "blob": S("x" * (11 * 1024 * 1024))}], ("cell-too-large", "warning")),
    "prefix skew": (make_spec("{t}#{pk}"), [{"t": S("big" if i < 24 else f"t{i}"), "pk": S(f"{i:03d}")} for i in range(30)], ("key-prefix-skew", "warning")),
}  # fmt: skip


@pytest.mark.parametrize("name", CASES)
def test_lint_fires(name):
    spec, items, expected = CASES[name]
    found = run_lints(spec, items)
    assert expected in codes(found), [f"{f.code}: {f.message}" for f in found]
    for item in found:
        assert item.message and item.where


QUIET = {
    "reversed sequential ids": (make_spec("{pk|reverse}"), [{"pk": N(1000 + i), "x": S("x")} for i in range(20)]),
    "too few keys to call a sequence": (make_spec("{pk}"), [{"pk": N(1000 + i)} for i in range(3)]),
    "padded numbers": (make_spec("{user}#{pk|pad(4)}"), [{"user": S("ann"), "pk": N(n)} for n in (3, 20, 100)]),
    "tenant first, timestamp later": (make_spec("{t}#{pk}"), [{"t": S(f"tenant{i % 7}"), "pk": S(f"2023-09-10T10:00:{i:02d}")} for i in range(10)]),
    "salted sequential ids": (make_spec(row_key={"template": "{pk|pad(6)}", "salt_buckets": 16}), [{"pk": N(1000 + i * 37)} for i in range(5)]),
    "even spread": (make_spec("{t}#{pk}"), [{"t": S(f"t{i % 10}"), "pk": S(f"{i:03d}")} for i in range(40)]),
    "entity timestamps make re-runs stable": (make_spec(migration_time=None, entities=[{"name": "e", "row_key": "{pk}", "timestamp": {"attribute": "ts"}, "columns": [{"attribute": "v", "family": "f"}]}]), [{"pk": S("a"), "v": S("1"), "ts": N(1694359308)}]),
}  # fmt: skip


@pytest.mark.parametrize("name", QUIET)
def test_lint_stays_quiet(name):
    spec, items = QUIET[name]
    found = run_lints(spec, items)
    assert [f for f in found if f.severity != "info"] == [], [f"{f.code}: {f.message}" for f in found]


def test_ttl_lints():
    spec = make_spec(
        families={"f": {"max_age": "30d"}},
        entities=[{"name": "e", "row_key": "{pk}", "ttl": {"attribute": "expires"}, "rest": {"family": "f"}}],
    )
    items = [{"pk": S("a"), "expires": N(NOW_MS // 1000 + 3600)}]
    assert ("ttl-as-gc", "info") in codes(run_lints(spec, items, ttl_attribute="expires"))
    assert ("ttl-not-carried", "warning") not in codes(run_lints(spec, items, ttl_attribute="expires"))
    plain = make_spec()
    found = run_lints(plain, items, ttl_attribute="expires")
    assert ("ttl-not-carried", "warning") in codes(found)
    assert "copied as a plain column" in next(f.message for f in found if f.code == "ttl-not-carried")


def test_errors_sort_first():
    spec, items, _ = CASES["too many families"]
    found = run_lints(make_spec("{pk}", families=spec.target.model_dump()["families"], migration_time=None), items)
    assert found[0].severity == "error" and found[-1].severity != "error"


@pytest.mark.parametrize("name", SEEDS)
def test_seed_specs_are_lint_free(name):
    assert run_lints(load_spec(template_path(name)), seed_items(name)) == ()


@pytest.mark.parametrize(
    ("text", "expected"),
    [("2023-09-10T15:21:48", True), ("20230910", True), ("1694359308", True), ("1694359308123", True),
     ("0123", False), ("8305627524", False), ("hats", False), ("12345678", False)],
)  # fmt: skip
def test_looks_like_timestamp(text, expected):
    assert looks_like_timestamp(text) is expected


def test_unmatched_lint_names_items_by_key_and_migration_lint_is_deterministic():
    spec, items, _ = CASES["unmatched dead-lettered"]
    found = {f.code: f.message for f in run_lints(spec, items)}
    assert "(e.g. pk 'a');" in found["unmatched-items"]  # the key as words, not a Python dict
    spec, items, _ = CASES["migration_time unset"]
    assert run_lints(spec, items) == run_lints(spec, items)


def test_entities_that_can_write_the_same_cells_of_one_row_are_a_warning():
    def entities(second_key: str, second_family: str) -> list[dict]:
        return [{"name": "user", "match": {"kind": "user"}, "row_key": "user#{pk}", "rest": {"family": "f"}},
                {"name": "order", "match": {"kind": "order"}, "row_key": second_key, "rest": {"family": second_family}}]

    families = {"f": {"max_versions": 1}, "g": {"max_versions": 1}}
    shared = run_lints(make_spec(families=families, entities=entities("{pk}", "f")), keyed(["a"], kind="user"))
    (warning,) = [found for found in shared if found.code == "shared-cells"]
    assert warning.severity == "warning" and warning.where == "entities[1]"
    assert "'user' and 'order'" in warning.message and "rest (f:<attribute name>)" in warning.message
    # and what reading such a row back makes of it (the first entity's rest claims first: mappers.decode)
    assert "every attribute 'order' keeps in rest becomes an attribute of 'user''s item there" in warning.message
    for key, family in (("order#{pk}", "f"), ("{pk}", "g")):  # rows that cannot meet; a family of its own
        quiet = run_lints(make_spec(families=families, entities=entities(key, family)), keyed(["a"], kind="user"))
        assert "shared-cells" not in {found.code for found in quiet}
