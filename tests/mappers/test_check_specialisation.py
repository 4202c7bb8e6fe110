"""The per-item lossless checks are specialised when the spec is compiled (issue 24): a check that cannot fail for an
entity's columns is not run per item, and one that can still is, with the same item error as before.

Each "not run" test also maps items, so that a wrong specialisation shows as a wrong row, not only as a flag; each
"still run" test is an item the check must refuse, which would be written (one cell overwriting another, or a
timestamp text lost) if the specialisation dropped the check.
"""

import pytest
import yaml

from ddb2bt.mappers import compiler
from ddb2bt.mappers.compiler import compile_spec
from ddb2bt.mappers.loader import validate_data
from ddb2bt.mappers.results import ItemError, MappedRow

NOW_MS = 1_717_200_000_000


def compiled(text: str):
    data = yaml.safe_load(text)
    data.setdefault("source", {"table": "T", "partition_key": "pk"})
    return compile_spec(validate_data(data), now_ms=NOW_MS)


def entity(families: str, name: str, body: str) -> str:
    """A spec with one entity keyed by pk: its families (each with the default policy) and the rest of its YAML."""
    policies = ", ".join(f"{family}: {{}}" for family in families.split(", "))
    return (f"target: {{table: t, families: {{{policies}}}}}\nmigration_time: \"2024-01-01T00:00:00Z\"\n"
            f"entities:\n  - name: {name}\n    row_key: \"{{pk}}\"\n" + body)


def S(text):
    return {"S": text}


@pytest.fixture
def no_duplicate_check(monkeypatch):
    """Fail the test if map_item runs the duplicate check."""

    def refuse(cells, spans):
        raise AssertionError("the duplicate check ran")

    monkeypatch.setattr(compiler, "_duplicates", refuse)


APART = entity("c, l, x", "customer", """
    columns:
      - {attribute: name, family: c, qualifier: n, encoding: utf8}
      - {attribute: tags, family: c, qualifier: "tag:", layout: set, encoding: utf8}
      - {attribute: address, family: c, qualifier: "addr:", layout: map}
      - {attribute: phones, family: l, layout: list}
    rest: {family: x}
""")


def test_set_and_map_prefixes_no_other_qualifier_can_meet_get_no_duplicate_check(no_duplicate_check):
    entity = compiled(APART).entities[0]
    assert entity.spans is False
    row = compiled(APART).map_item({"pk": S("k"), "name": S("Ann"), "tags": {"SS": ["n", "addr:x"]},
                                    "address": {"M": {"tag:": S("y"), "n": S("z")}}, "phones": {"L": [S("1")]},
                                    "n": S("rest")})
    assert isinstance(row, MappedRow)
    assert sorted((cell.family, cell.qualifier) for cell in row.cells) == [
        ("c", b"addr:n"), ("c", b"addr:tag:"), ("c", b"n"), ("c", b"tag:addr:x"), ("c", b"tag:n"), ("l", b"phones"),
        ("x", b"n")]


def test_a_literal_qualifier_under_a_set_prefix_keeps_the_check_and_the_item_error():
    spec = APART.replace("{attribute: name, family: c, qualifier: n, encoding: utf8}",
                         "{attribute: name, family: c, qualifier: 'tag:red', encoding: utf8}")
    spec = spec.replace("    columns:", "    lossy: [tags]\n    columns:")  # the plan's lint: a member may meet it
    mapper = compiled(spec)
    assert mapper.entities[0].spans is True
    error = mapper.map_item({"pk": S("k"), "name": S("Ann"), "tags": {"SS": ["red"]}})
    assert isinstance(error, ItemError) and "c:tag:red is written by both" in error.reason
    assert "attribute 'name'" in error.reason and "attribute 'tags'" in error.reason
    assert isinstance(mapper.map_item({"pk": S("k"), "name": S("Ann"), "tags": {"SS": ["blue"]}}), MappedRow)


def test_two_prefixes_one_starting_the_other_keep_the_check():
    spec = APART.replace('qualifier: "addr:"', 'qualifier: "tag:a"').replace(
        "    columns:", "    lossy: [tags, address]\n    columns:")
    mapper = compiled(spec)
    assert mapper.entities[0].spans is True
    error = mapper.map_item({"pk": S("k"), "tags": {"SS": ["ab"]}, "address": {"M": {"b": S("v")}}})
    assert isinstance(error, ItemError) and "c:tag:ab is written by both" in error.reason


TEMPLATED_SET = entity("f", "e", """
    lossy: [tags]
    columns:
      - {attribute: tags, family: f, qualifier: "{kind}:", layout: set, encoding: utf8}
      - {attribute: other, family: f, qualifier: "a:b", encoding: utf8}
""")


def test_a_set_under_a_qualifier_template_is_a_prefix_whatever_the_template_ends_with():
    # The member follows the template's text, so "{kind}:" + "b" can be "a:b" although "a:b" does not end with ":".
    mapper = compiled(TEMPLATED_SET)
    assert mapper.entities[0].spans is True
    error = mapper.map_item({"pk": S("k"), "kind": S("a"), "tags": {"SS": ["b"]}, "other": S("v")})
    assert isinstance(error, ItemError) and "f:a:b is written by both" in error.reason


REST_AND_TEMPLATE = entity("f", "e", """
    lossy: [value]
    columns:
      - {attribute: value, family: f, qualifier: "{name}", encoding: utf8}
    rest: {family: f}
""")


def test_rest_in_the_family_of_a_qualifier_template_keeps_the_check():
    mapper = compiled(REST_AND_TEMPLATE)
    assert mapper.entities[0].spans is True
    error = mapper.map_item({"pk": S("k"), "name": S("colour"), "value": S("red"), "colour": S("blue")})
    assert isinstance(error, ItemError) and "f:colour is written by both" in error.reason
    assert "rest attribute 'colour'" in error.reason


def test_rest_beside_literal_qualifiers_is_refused_by_rest_itself_without_the_duplicate_check(no_duplicate_check):
    spec = entity("f", "e", """
    columns:
      - {attribute: a, family: f, qualifier: b}
      - {attribute: tags, family: f, qualifier: "t:", layout: set, encoding: utf8}
    rest: {family: f}
""")
    mapper = compiled(spec)
    assert mapper.entities[0].spans is False
    error = mapper.map_item({"pk": S("k"), "a": S("1"), "b": S("2")})
    assert isinstance(error, ItemError) and "column 'a'" in error.reason and "rest attribute 'b'" in error.reason
    error = mapper.map_item({"pk": S("k"), "tags": {"SS": ["x"]}, "t:x": S("2")})
    assert isinstance(error, ItemError) and "would read back as part of 'tags'" in error.reason


PLACED = entity("o, x", "order", """
    timestamp: {attribute: placed_at, format: epoch_ms}
    columns:
      - {attribute: total, family: o, encoding: decimal}
    rest: {family: x}
""")


def test_a_timestamp_text_that_reads_back_gets_no_cell_of_its_own_in_the_specialised_function():
    entity = compiled(PLACED).entities[0]
    item = {"pk": S("k"), "total": {"N": "12.5"}, "placed_at": {"N": "1600000000123"}}
    row = entity.specialised(item)
    assert row == compiled(PLACED).map_item(item)
    assert [(cell.family, cell.qualifier, cell.timestamp_micros) for cell in row.cells] == [
        ("o", b"total", 1_600_000_000_123_000)]


@pytest.mark.parametrize("value", [S("01600000000123"), S("1600000000123.0"), {"N": "1600000000123.5"}])
def test_a_timestamp_text_that_would_not_read_back_is_still_kept_as_a_cell_or_refused(value):
    # (A number's spelling is no loss: N 01600000000123 is the number 1600000000123, which reads back.)
    item = {"pk": S("k"), "total": {"N": "12.5"}, "placed_at": value}
    row = compiled(PLACED).map_item(item)
    assert isinstance(row, MappedRow)
    assert [(cell.family, cell.qualifier) for cell in row.cells] == [("o", b"total"), ("x", b"placed_at")]
    error = compiled(PLACED.replace("    rest: {family: x}\n", "")).map_item(item)
    assert isinstance(error, ItemError) and error.attribute == "placed_at" and "would not read back" in error.reason


# --------------------------------------------------------------------------- the specialised map function = the general path

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tests.pipelines.roundtrip_cases import cases  # noqa: E402


def general(spec):
    """The spec compiled without specialised functions: every item through the general path."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(compiler, "specialise", lambda entity, spec: None)
        return compile_spec(spec, now_ms=NOW_MS)


def assert_same(spec, items):
    fast, slow = compile_spec(spec, now_ms=NOW_MS), general(spec)
    for item in items:
        assert fast.map_item(item) == slow.map_item(item), item


ENCODINGS = ["auto", "utf8", "decimal", "int64", "float64", "bytes", "bool", "json", "ddb_json"]
FORMATS = ["auto", "iso8601", "epoch_s", "epoch_ms", "epoch_us"]
VALUES = st.one_of(
    st.sampled_from([{"S": "a"}, {"S": ""}, {"S": "x#y"}, {"S": "{"}, {"S": "\ud800"}, {"S": "P-7"}, {"N": "0"},
                     {"N": "-0"}, {"N": "0012"}, {"N": "1.50"}, {"N": "1e3"}, {"N": "1600000000123"},
                     {"N": "1600000000"}, {"N": "1600000000123456"}, {"N": "99999999999999999999"}, {"N": "٣"},
                     {"N": "9223372036854775808"}, {"N": "0.1"}, {"N": "2.5"}, {"BOOL": True}, {"NULL": True},
                     {"B": b"\x00\xff"}, {"B": "AP8="}, {"SS": ["a", "b"]}, {"NS": ["1", "1.0"]}, {"L": []},
                     {"L": [{"S": "a"}, {"N": "1"}]}, {"M": {}}, {"M": {"k": {"S": "v"}, "": {"S": ""}}},
                     {"S": "2024-05-01T10:00:00Z"}, {"S": "2024-05-01T10:00:00.123"}, {"S": "20240501"},
                     {"S": "a", "N": "1"}, {}, {"S": 5}]),
    st.text(max_size=6).map(lambda text: {"S": text}),
    st.integers(-10, 10**19).map(lambda number: {"N": str(number)}),
)
SCALARS = {"auto": VALUES, "utf8": st.text(max_size=6).map(lambda text: {"S": text}),
           "decimal": st.sampled_from(["1", "2.5", "-0.25", "12345678901234567890"]).map(lambda text: {"N": text}),
           "int64": st.integers(-(2**63), 2**63 - 1).map(lambda number: {"N": str(number)}),
           "float64": st.sampled_from(["2.5", "0.1", "-3", "1234.75"]).map(lambda text: {"N": text}),
           "bytes": st.binary(max_size=4).map(lambda data: {"B": data}), "bool": st.booleans().map(lambda b: {"BOOL": b}),
           "json": st.sampled_from([{"S": "x"}, {"N": "1.5"}, {"M": {"k": {"L": [{"N": "1"}]}}}, {"NULL": True}])}
SCALARS["ddb_json"] = SCALARS["auto"]
GOOD = {("cell", encoding): values for encoding, values in SCALARS.items()} | {
    ("json", "json"): SCALARS["json"],
    ("set", "utf8"): st.lists(st.text(min_size=1, max_size=3), min_size=1, unique=True).map(lambda m: {"SS": m}),
    ("set", "decimal"): st.lists(st.integers(0, 99).map(str), min_size=1, unique=True).map(lambda m: {"NS": m}),
    ("set", "bytes"): st.lists(st.binary(min_size=1, max_size=3), min_size=1, unique=True).map(lambda m: {"BS": m}),
    # any set type; numbers that are not canonical, or equal once they are; base64 texts that decode alike
    ("set", "auto"): st.one_of(
        st.lists(st.text(min_size=1, max_size=3), min_size=1, unique=True).map(lambda m: {"SS": m}),
        st.lists(st.sampled_from(["1", "1.0", "01", "-0", "0", "2.5", "1e3", "-7", "1" * 39, 5]), min_size=1,
                 max_size=3, unique=True).map(lambda m: {"NS": m}),
        st.lists(st.one_of(st.binary(min_size=1, max_size=3), st.sampled_from(["QQ==", "QR==", "AP8=", "!", b"A"])),
                 min_size=1, max_size=3, unique=True).map(lambda m: {"BS": m}),
        st.sampled_from([{"SS": []}, {"NS": []}, {"SS": ["a"], "NS": ["1"]}, {"L": []}, {"S": "a"}])),
} | {("map", encoding): st.dictionaries(st.text(min_size=1, max_size=3), values, max_size=3).map(lambda m: {"M": m})
     for encoding, values in SCALARS.items()} | {
    ("list", encoding): st.lists(values, max_size=3).map(lambda m: {"L": m}) for encoding, values in SCALARS.items()}


@st.composite
def specialised_cases(draw):
    """A spec whose entity is specialised (timestamps, transforms, delimiters, salt, required, rest) and items for it
    that are mostly right and often wrong in one place."""
    columns = []
    for attribute in draw(st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=3, unique=True)):
        layout = draw(st.sampled_from(["cell", "cell", "cell", "json", "set", "map", "list"]))
        encoding = draw(st.sampled_from({"set": ["utf8", "decimal", "bytes", "auto"]}.get(layout, ENCODINGS)))
        column = {"attribute": attribute, "family": draw(st.sampled_from(["f", "g"])), "layout": layout,
                  "required": draw(st.integers(0, 3)) == 0}
        if layout != "json":
            column["encoding"] = encoding
        if layout in ("set", "map"):
            column["qualifier"] = f"{attribute}:"
        if draw(st.integers(0, 4)) == 0:
            column["timestamp"] = {"attribute": "ts", "format": draw(st.sampled_from(FORMATS))}
        columns.append(column)
    key = draw(st.sampled_from(["{pk}", "k#{pk|strip_prefix('P-')}#{sk}", "{pk}#{sk|part(1, ':')}", "{sk|lower}:{pk}"]))
    entity = {"name": "e", "row_key": {"template": key, "on_delimiter": draw(st.sampled_from(["error", "escape", "allow"])),
                                       **({"salt_buckets": 4} if draw(st.booleans()) else {})},
              "columns": columns, "lossy": ["a", "b", "c", "pk", "sk"]}
    timestamp = draw(st.sampled_from([None, "attribute", "template"]))
    if timestamp == "attribute":
        entity["timestamp"] = {"attribute": "ts", "format": draw(st.sampled_from(FORMATS))}
    elif timestamp == "template":
        entity["timestamp"] = {"template": draw(st.sampled_from(["{sk}", "{sk|part(1, ':')}", "{sk|reverse_timestamp}",
                                                                  "{pk}#{sk}", "{sk|part(1, ':')}{sk|part(2, ':')}"])),
                               "format": draw(st.sampled_from(FORMATS))}
    rest = draw(st.sampled_from([None, "f", "r"]))
    if rest:
        entity["rest"] = {"family": rest, "encoding": draw(st.sampled_from(["auto", "ddb_json", "utf8"]))}
    try:
        spec = validate_data({"source": {"table": "T", "partition_key": "pk", "sort_key": "sk"},
                              "target": {"table": "t", "families": {"f": {}, "g": {}, "r": {}}},
                              "migration_time": "2024-01-01T00:00:00Z", "entities": [entity]})
    except Exception:  # noqa: BLE001 - a combination the loader refuses says nothing here
        spec = None
    items = []
    for _ in range(draw(st.integers(1, 6))):
        item = {"pk": {"S": draw(st.sampled_from(["P-1", "P-2", "P-x.y"]))},
                "sk": {"S": draw(st.sampled_from(["x:1", "1600000000123", "y:2:3"]))},
                "ts": draw(st.sampled_from([{"N": "1600000000123"}, {"S": "2024-05-01T10:00:00.5Z"}, {"N": "1600000000"},
                                            {"N": "1600000000123000"}, {"S": "2024-05-01T10:00:00"},
                                            {"N": "01600000000123"}, {"S": "01600000000123"}, {"N": "1600000000123456"},
                                            {"S": "1600000000"}]))}
        for column in columns:
            if column["required"] or draw(st.integers(0, 4)):
                item[column["attribute"]] = draw(GOOD[column["layout"], column.get("encoding", "json")])
        for name in draw(st.lists(st.sampled_from(["d", "e", "q:x", "b:y", "f"]), unique=True, max_size=2)):
            item[name] = draw(VALUES)
        if draw(st.booleans()):  # wrong in one place
            name = draw(st.sampled_from(sorted(item)))
            if draw(st.booleans()):
                del item[name]
            else:
                item[name] = draw(VALUES)
        items.append(item)
    return spec, items


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(specialised_cases())
def test_the_specialised_function_gives_the_general_paths_row_or_error_for_every_item(case):
    spec, items = case
    if spec is not None:
        assert_same(spec, items)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(cases())
def test_the_specialised_function_agrees_on_the_round_trip_cases(case):
    assert_same(*case)


def test_every_entity_of_the_benchmark_spec_is_specialised_and_maps_its_items_as_the_general_path():
    from benchmarks import dataset
    from ddb2bt.mappers.loader import load_spec

    spec = load_spec("benchmarks/spec.yaml")
    assert all(entity.specialised is not None for entity in compile_spec(spec).entities)
    items = list(dataset.generate(2000))
    broken = [dict(item, total={"N": "1.5.5"}) for item in items[:40]] + [
        {name: value for name, value in item.items() if name != "name"} for item in items[:40]]
    assert_same(spec, items + broken)


COLLECTIONS = entity("c, l, x", "e", """
    timestamp: {attribute: at, format: iso8601}
    lossy: [at]
    columns:
      - {attribute: tags, family: c, qualifier: "tag:", layout: set, encoding: utf8}
      - {attribute: prefs, family: c, qualifier: "pref:", layout: map, encoding: utf8}
      - {attribute: history, family: l, layout: list}
      - {attribute: blob, family: c, encoding: bytes}
    rest: {family: x}
""")


@pytest.mark.parametrize("values, problem", [
    ({"tags": {"SS": ["a", "a"]}}, "duplicate members"),
    ({"prefs": {"M": {"": S("")}}}, "map key ''"),
    ({"tags": {"SS": ["x" * 20_000]}}, "16 KiB"),
    ({"prefs": {"M": {"x" * 20_000: S("v")}}}, "16 KiB"),
    ({"x" * 20_000: S("v")}, "16 KiB"),
    ({"history": {"L": [S("a"), S("b")]}, "at": S("9999-12-31T23:59:59.999")}, "after 9999-12-31"),
    ({"history": {"L": []}, "tags": {"SS": []}}, "non-empty"),
])
def test_what_the_general_path_refuses_the_specialised_function_leaves_to_it(values, problem):
    mapper = compiled(COLLECTIONS)
    item = {"pk": S("k"), "at": S("2024-05-01T10:00:00"), "tags": {"SS": ["a"]}} | values
    assert mapper.entities[0].specialised(item) is None
    error = mapper.map_item(item)
    assert isinstance(error, ItemError) and problem in error.reason
    assert_same(mapper.spec, [item])


def test_a_row_over_the_advised_size_keeps_its_warning():
    mapper = compiled(COLLECTIONS)
    item = {"pk": S("k"), "at": S("2024-05-01T10:00:00"), "blob": {"B": b"\0" * (11 << 20)}}
    row = mapper.map_item(item)
    assert isinstance(row, MappedRow) and row.warnings and "over the advised 10 MiB" in row.warnings[0]
    assert_same(mapper.spec, [item])


def test_the_last_element_of_a_list_may_sit_at_the_last_millisecond():
    mapper = compiled(COLLECTIONS)
    item = {"pk": S("k"), "at": S("9999-12-31T23:59:59.998"), "history": {"L": [S("a"), S("b")]}}
    row = mapper.entities[0].specialised(item)
    assert row is not None and row == mapper.map_item(item)
    assert max(cell.timestamp_micros for cell in row.cells) == 253_402_300_799_999_000


@pytest.mark.parametrize("encoding", ["auto", "utf8", "decimal", "bytes"])
def test_every_set_type_inline_gives_the_general_paths_cells_or_error(encoding):
    """Sets of each type at a literal prefix are mapped inline (the benchmark's serials are numbers, its thumbs
    binaries): the same cells, and for members that are equal once stored (numbers in two spellings, two base64
    texts of the same bytes) or that the general path words an error for, the same error."""
    spec = validate_data({"source": {"table": "T", "partition_key": "pk"},
                          "target": {"table": "t", "families": {"f": {}}}, "migration_time": "2024-01-01T00:00:00Z",
                          "entities": [{"name": "e", "row_key": "{pk}", "lossy": ["s"], "columns": [
                              {"attribute": "s", "family": "f", "qualifier": "s:", "layout": "set",
                               "encoding": encoding}]}]})
    assert compile_spec(spec, now_ms=NOW_MS).entities[0].specialised is not None
    sets = [{"SS": ["a", "b"]}, {"SS": ["a", "a"]}, {"NS": ["1", "25", "-7", "0.5"]}, {"NS": ["1", "1.0"]},
            {"NS": ["1", "01"]}, {"NS": ["-0"]}, {"NS": ["1e3"]}, {"NS": ["1" * 39]}, {"NS": [5]}, {"NS": ["x"]},
            {"BS": ["QQ==", "AP8="]}, {"BS": ["QQ==", "QR=="]}, {"BS": [b"A", "QQ=="]}, {"BS": [b"A", b"B"]},
            {"BS": ["!"]}, {"BS": [bytearray(b"A")]}, {"BS": [5]}, {"SS": []}, {"NS": ["1"], "SS": ["a"]}, {"S": "a"}]
    items = [{"pk": S("k"), "s": value} for value in sets]
    assert_same(spec, items)
    fast = compile_spec(spec, now_ms=NOW_MS).entities[0].specialised
    mapped = {repr(value): fast(item) for value, item in zip(sets, items)}
    if encoding in ("auto", "decimal"):
        assert mapped[repr({"NS": ["1", "25", "-7", "0.5"]})].cells[0].qualifier == b"s:1"  # inline, not left over
    if encoding in ("auto", "bytes"):
        assert mapped[repr({"BS": ["QQ==", "AP8="]})].cells[1].qualifier == b"s:\x00\xff"
        assert mapped[repr({"BS": ["QQ==", "QR=="]})] is None  # the general path's duplicate error


@pytest.mark.parametrize("key", ["r#{sk|reverse_timestamp}", "r#{sk|reverse_timestamp(99999)}#{pk}",
                                 "r#{sk|part(1, ':')|reverse_timestamp}"])
def test_reverse_timestamp_inline_gives_the_general_paths_key_or_error(key):
    """reverse_timestamp written out in the key and in a template timestamp: zero-padded to its maximum's width,
    and a value it refuses (not digits, above the maximum) mapped by the general path."""
    spec = validate_data({"source": {"table": "T", "partition_key": "pk", "sort_key": "sk"},
                          "target": {"table": "t", "families": {"f": {}}}, "migration_time": "2024-01-01T00:00:00Z",
                          "entities": [{"name": "e", "row_key": key, "lossy": ["sk"], "rest": {"family": "f"},
                                        "timestamp": {"template": key.replace("r#", "", 1).split("#")[0],
                                                      "format": "epoch_ms"},
                                        "columns": [{"attribute": "a", "family": "f", "encoding": "utf8"}]}]})
    assert compile_spec(spec, now_ms=NOW_MS).entities[0].specialised is not None
    texts = ["9999999999998", "9999999999999", "10000000000000", "0", "1600000000123", "99998", "100000", "-1", "1.5",
             "٣", "", "x:9999999999990", "x:99990", "x:1"]
    items = [{"pk": S("p"), "sk": S(text), "a": S("v")} for text in texts]
    assert_same(spec, items)
    mapped = compile_spec(spec, now_ms=NOW_MS).map_item(items[0])
    if key == "r#{sk|reverse_timestamp}":
        assert mapped.row_key == b"r#0000000000001" and mapped.cells[0].timestamp_micros == 1000
