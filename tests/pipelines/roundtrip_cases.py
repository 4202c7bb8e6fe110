"""Generated specs and items for the round-trip property tests (through Bigtable and back, and back into DynamoDB)."""

import itertools
import time
from ddb2bt.mappers.loader import validate_data
from ddb2bt.mappers.numbers import DecimalError, parse_number
from ddb2bt.mappers.spec import MappingSpec
from decimal import Decimal
from hypothesis import HealthCheck
from hypothesis import strategies as st


FAMILIES = {name: {} for name in ("c0", "c1", "c2", "c3", "rest", "r1")} | {"t0": {"max_age": "3650d"},
                                                                            "trest": {"max_age": "3650d"}}


NOW_MS = 1_700_000_000_000

# --------------------------------------------------------------------------- values


TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)


TRICKY = st.lists(st.sampled_from(["#", "%", "%23", "%25", "é", "{", "a", " ", "0", "→"]), max_size=4).map("".join)


STRING = TEXT | TRICKY


KEY_TEXT = (TEXT | TRICKY).filter(bool)


EDGE_NUMBERS = st.sampled_from(["1E+125", "-1E-130", "9" * 38, "-" + "9" * 38, "0.1", "-0", "30.0", "1.5E+3",
                                "0.00000000000000000000000000000000000001", "99999999999999999999999999999999999999E+87"])  # fmt: skip


def _dynamodb_number(text: str) -> bool:
    try:
        parse_number(text)
    except DecimalError:
        return False
    return True


DECIMALS = st.decimals(allow_nan=False, allow_infinity=False, places=None).map(str).filter(_dynamodb_number)


NUMBER = EDGE_NUMBERS | st.integers(-(10**38) + 1, 10**38 - 1).map(str) | DECIMALS


INT64 = st.integers(-(2**63), 2**63 - 1).map(str)


FLOAT = st.floats(allow_nan=False, allow_infinity=False).filter(lambda x: x == 0 or 1e-129 < abs(x) < 1e125).map(
    lambda x: format(Decimal(repr(x)), "f")
)


def scalar() -> st.SearchStrategy:
    return st.one_of(
        STRING.map(lambda s: {"S": s}), NUMBER.map(lambda n: {"N": n}), st.binary(max_size=8).map(lambda b: {"B": b}),
        st.booleans().map(lambda b: {"BOOL": b}), st.just({"NULL": True}),
        st.lists(KEY_TEXT, min_size=1, max_size=3, unique=True).map(lambda m: {"SS": m}),
        st.lists(NUMBER, min_size=1, max_size=3, unique_by=lambda n: Decimal(n)).map(lambda m: {"NS": m}),
        st.lists(st.binary(max_size=4), min_size=1, max_size=3, unique=True).map(lambda m: {"BS": m}),
    )  # fmt: skip


def any_value(leaf: st.SearchStrategy) -> st.SearchStrategy:
    return st.recursive(leaf, lambda inner: st.one_of(
        st.lists(inner, max_size=3).map(lambda l: {"L": l}),
        st.dictionaries(KEY_TEXT, inner, max_size=3).map(lambda m: {"M": m}),
    ), max_leaves=6)  # fmt: skip


JSON_LEAF = st.one_of(STRING.map(lambda s: {"S": s}), NUMBER.map(lambda n: {"N": n}), st.booleans().map(lambda b: {"BOOL": b}),
                      st.just({"NULL": True}))  # fmt: skip


ANY = any_value(scalar())


# (encoding, layout) -> values it holds exactly
SHAPES = {
    ("auto", "cell"): ANY,
    ("ddb_json", "cell"): ANY,
    ("utf8", "cell"): STRING.map(lambda s: {"S": s}),
    ("decimal", "cell"): NUMBER.map(lambda n: {"N": n}),
    ("int64", "cell"): INT64.map(lambda n: {"N": n}),
    ("float64", "cell"): FLOAT.map(lambda n: {"N": n}),
    ("bytes", "cell"): st.binary(max_size=8).map(lambda b: {"B": b}),
    ("bool", "cell"): st.booleans().map(lambda b: {"BOOL": b}),
    ("json", "cell"): any_value(JSON_LEAF),
    ("auto", "json"): any_value(JSON_LEAF),
    ("utf8", "set"): st.lists(TEXT, min_size=1, max_size=4, unique=True).map(lambda m: {"SS": m}),
    ("decimal", "set"): st.lists(NUMBER, min_size=1, max_size=4, unique_by=lambda n: Decimal(n)).map(lambda m: {"NS": m}),
    ("bytes", "set"): st.lists(st.binary(max_size=4), min_size=1, max_size=4, unique=True).map(lambda m: {"BS": m}),
    ("auto", "map"): st.dictionaries(KEY_TEXT, ANY, max_size=4).map(lambda m: {"M": m}),
    ("ddb_json", "list"): st.lists(ANY, max_size=4).map(lambda l: {"L": l}),
    ("auto", "list"): st.lists(ANY, max_size=4).map(lambda l: {"L": l}),
}

# --------------------------------------------------------------------------- specs and items


ROW_KEYS = [
    ("{pk}#{sk}", {}), ("{pk|reverse}#{sk}", {}), ("{pk}#{sk|reverse_domain}", {}), ("{sk}/{pk}", {"delimiter": "/"}),
    ("{pk}::{sk}", {"delimiter": "::"}), ("{pk|unshard}#{sk}", {}),
]  # fmt: skip


KINDS = ("plain", "fold", "versioned", "ttl", "multi")


SALTS = st.sampled_from([0, 0, 2, 16])


REST_NAMES = st.sampled_from(["r0", "r1", "r{", "r#"])


def key_pairs(draw, fold: bool) -> list[tuple[str, str]]:
    keys = draw(st.lists(st.tuples(KEY_TEXT, KEY_TEXT), min_size=1, max_size=6, unique=True))
    return [("p", sk) for sk in dict.fromkeys(sk for _, sk in keys)] if fold else keys


def fill(draw, item: dict, columns: list[dict], shapes: list[tuple[str, str]], rest: bool) -> dict:
    for column, shape in zip(columns, shapes):
        if draw(st.integers(0, 4)):  # mostly present, sometimes absent
            item[column["attribute"]] = draw(SHAPES[shape])
    if rest:
        item.update(draw(st.dictionaries(REST_NAMES, ANY, max_size=3)))
    return item


def own_families(shapes: list[tuple[str, str]], families: tuple[str, ...]) -> list[dict]:
    return [{"attribute": f"v{i}", "family": family, "encoding": enc, "layout": lay}
            for i, ((enc, lay), family) in enumerate(zip(shapes, families))]  # fmt: skip


def row_key(draw, example: int, template: str = "{pk}#{sk}", **options) -> dict:
    salt = draw(SALTS)
    delimiter = options.get("delimiter", "#")
    return {"template": f"x{example}{delimiter}{template}", "on_delimiter": "escape", **options,
            **({"salt_buckets": salt} if salt else {})}


@st.composite
def cases(draw, counter=itertools.count()):
    """(spec, items): a spec of one of KINDS and up to 6 items (12 versions) with unique keys.

    plain: 1-4 columns in their own families plus rest, any row-key shape (reversed, `unshard`ed,
    other delimiters), salted or not. fold: the items of one pk folded into one row, told apart by a
    qualifier template. versioned: `vN_` sort keys folded into cell versions of one row (v0_ skipped).
    ttl: the expiry as cell timestamps in max_age families. multi: two entities told apart by a type
    attribute, in one row per pk (qualifier templates) or one row per item (families of their own).
    """
    example = next(counter)
    kind = draw(st.sampled_from(KINDS))
    shapes = draw(st.lists(st.sampled_from(sorted(SHAPES)), min_size=1, max_size=4))
    entity: dict = {"name": "e"}
    items: list[dict] = []
    if kind == "plain":
        template, options = draw(st.sampled_from(ROW_KEYS))
        columns = own_families(shapes, ("c0", "c1", "c2", "c3"))
        entity.update(row_key=row_key(draw, example, template, **options), columns=columns,
                      rest={"family": "rest", "encoding": draw(st.sampled_from(["auto", "ddb_json"]))})
        sharded = "unshard" in template
        if sharded:
            entity["lossy"] = ["pk"]
        for pk, sk in key_pairs(draw, False):
            pk = f"{pk}.{draw(st.integers(0, 9))}" if sharded else pk
            items.append(fill(draw, {"pk": {"S": pk}, "sk": {"S": sk}}, columns, shapes, True))
    elif kind == "fold":
        shape = ([s for s in shapes if s[1] in ("cell", "json")] or [("auto", "cell")])[0]
        columns = [{"attribute": "v0", "family": "c0", "encoding": shape[0], "layout": shape[1],
                    "qualifier": {"template": "q#{sk}", "on_delimiter": "escape"}}]  # fmt: skip
        entity.update(row_key={"template": f"x{example}#{{pk}}", "on_delimiter": "escape"}, columns=columns)
        items = [fill(draw, {"pk": {"S": pk}, "sk": {"S": sk}}, columns, [shape], False) for pk, sk in key_pairs(draw, True)]
    elif kind == "versioned":
        shapes = [s for s in shapes if s[1] != "list"] or [("auto", "cell")]  # list + versioning is a declared loss
        columns = own_families(shapes, ("c0", "c1", "c2", "c3"))
        entity.update(row_key=row_key(draw, example), columns=columns, rest={"family": "rest"}, versioning={})
        for pk, base in key_pairs(draw, False)[:3]:
            for version in draw(st.lists(st.integers(0, 5), min_size=1, max_size=4, unique=True)):
                items.append(fill(draw, {"pk": {"S": pk}, "sk": {"S": f"v{version}_{base}"}}, columns, shapes, True))
    elif kind == "ttl":
        columns = own_families(shapes[:1], ("t0",))
        entity.update(row_key=row_key(draw, example), columns=columns, rest={"family": "trest"}, ttl={"attribute": "exp"})
        for pk, sk in key_pairs(draw, False):
            # Past the real clock too: a TTL cell's timestamp is its expiry minus the family's max_age, and the
            # emulator's own garbage collection (which runs now and then) drops cells already past it.
            expiry = max(NOW_MS // 1000, int(time.time())) + draw(st.integers(86_400, 10**8))
            exp = draw(st.sampled_from([str(expiry), f"{expiry}.5"]))
            items.append(fill(draw, {"pk": {"S": pk}, "sk": {"S": sk}, "exp": {"N": exp}}, columns, shapes[:1], True))
    else:  # multi
        fold = draw(st.booleans())
        entities = []
        for name, families in (("a", ("c0", "c1")), ("b", ("c2", "c3"))):
            mine = [s for s in shapes if not fold or s[1] in ("cell", "json")][:2] or [("auto", "cell")]
            columns = own_families(mine, families)
            if fold:
                columns = columns[:1]
                columns[0]["qualifier"] = {"template": f"{name}#{{sk}}", "on_delimiter": "escape"}
                key = {"template": f"x{example}#{{pk}}", "on_delimiter": "escape"}
            else:
                key = row_key(draw, example)
            entities.append({"name": name, "match": {"kind": name}, "row_key": key, "columns": columns, "drop": ["kind"],
                             **({} if fold else {"rest": {"family": "rest" if name == "a" else "r1"}})})
            for pk, sk in key_pairs(draw, fold)[:3]:
                item = {"pk": {"S": pk}, "sk": {"S": f"{name}{sk}"}, "kind": {"S": name}}
                items.append(fill(draw, item, columns, mine, not fold))
    spec = validate_data({  # the loader's checks too: a generated spec is a legal one, with every loss declared
        "source": {"table": "T", "partition_key": "pk", "sort_key": "sk"},
        "target": {"table": "roundtrip", "families": FAMILIES},
        "migration_time": "2024-01-01T00:00:00Z", "entities": entities if kind == "multi" else [entity],
    })  # fmt: skip
    return spec, items


def declared_attributes(spec: MappingSpec) -> set[str]:
    """Attributes some entity does not promise to read back (drop, lossy, versioning's, ttl's)."""
    names: set[str] = set()
    for entity in spec.entities:
        names |= set(entity.drop) | set(entity.lossy) | ({entity.ttl.attribute} if entity.ttl else set())
        if entity.versioning:
            names.add(entity.versioning.attribute or spec.source.sort_key or "")
    return names


SETTINGS = {"deadline": None, "suppress_health_check": list(HealthCheck), "derandomize": False}
