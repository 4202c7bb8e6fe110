"""Bad specs: one clear message naming the file, the field path and (YAML) the line; pinned here."""

import os
import time

import pytest

from ddb2bt.mappers.loader import SpecError, load_spec
from .spec_texts import BASE, COUNTER_CASES

SECOND_ENTITY = """\
  - name: b
    match: {sk: Video}
    row_key: "{pk}"
    rest: {family: f}
"""

CASES = [
    ("misspelt key", BASE.replace("row_key:", "row_kee:"),
     ":11: entities[0].row_kee: unknown key (check the spelling"),
    ("unknown transform", BASE.replace('"{pk}"', '"{pk|revers}"'),
     ":11: entities[0].row_key.template: unknown transform 'revers' (did you mean 'reverse'? known: epoch_ms"),
    ("bad transform argument", BASE.replace('"{pk}"', '"{pk|pad(\'x\')}"'),
     ":11: entities[0].row_key.template: transform pad: argument 'width' must be int, got 'x'"),
    ("family used but not declared", BASE.replace("family: f}", "family: g}"),
     ":13: entities[0].columns[0].family: family 'g' is not declared; declare it under target.families (declared: f)"),
    ("entity that can never match", BASE + SECOND_ENTITY,
     ":15: entities[1].match: this entity can never match: entities[0] ('a') comes first and matches every item"),
    ("contradictory conditions", BASE.replace("    row_key", "    match: {sk: {equals: Video, prefix: Comment}}\n    row_key"),
     ":11: entities[0].match.sk: this entity can never match: equals 'Video' does not start with prefix 'Comment'"),
    ("template naming a missing key attribute", BASE.replace('"{pk}"', '"{pk}#{videoId}"'),
     ":11: entities[0].row_key: row_key uses {videoId}, which is not a key attribute of the table (pk, sk)"),
    ("touching placeholders", BASE.replace('"{pk}"', '"{pk}{sk}"'),
     ":11: entities[0].row_key: {pk} and {sk} touch; separate them with the delimiter '#'"),
    ("not YAML", BASE.replace("table: t", "table: [t"),
     ":7: not valid YAML: expected ',' or ']'"),
    ("duplicate key", BASE.replace("  table: t\n", "  table: t\n  table: u\n"),
     ":7: target.table: duplicate key 'table'"),
    ("bad duration", BASE.replace("{max_versions: 1}", "{max_age: 3 days}"),
     ":8: target.families.f.max_age: '3 days' is not a duration; write e.g. '30d'"),
    ("ttl without max_age", BASE.replace("    columns:", "    ttl: {attribute: exp}\n    columns:"),
     ":12: entities[0].ttl: family 'f' has no max_age GC rule"),
    ("missing target", BASE.replace("target:\n  table: t\n  families:\n    f: {max_versions: 1}\n", ""),
     ":1: target: required key is missing"),
    ("unknown encoding", BASE.replace("family: f}", "family: f, encoding: utf16}"),
     ":13: entities[0].columns[0].encoding: Input should be 'auto', 'utf8'"),
    ("entity without row key", BASE.replace('    row_key: "{pk}"\n', ""),
     ":10: entities[0]: entity 'a' maps items, so it needs a row_key"),
    ("bad regex", BASE.replace("    row_key", "    match: {sk: {regex: '('}}\n    row_key"),
     ":11: entities[0].match.sk.regex: invalid regular expression '('"),
    ("duplicate entity names", BASE + SECOND_ENTITY.replace("name: b", "name: a").replace("{sk: Video}", "{sk: V}"),
     "entities[1].name: entity name 'a' is already used by entities[0]"),
    ("neither table nor export", BASE.replace("  table: T\n", ""),
     ":1: source: give source.table (a live table) or source.export"),
    # a value of the wrong type is refused, not read as another (YAML's true is no count of versions)
    ("true as a count", BASE.replace("max_versions: 1", "max_versions: true"),
     ":8: target.families.f.max_versions: expected an integer, got true"),
    ("a fraction as a count", BASE.replace("max_versions: 1", "max_versions: 2.5"),
     ":8: target.families.f.max_versions: expected an integer, got 2.5"),
    ("a quoted count", BASE.replace("max_versions: 1", "max_versions: '3'"),
     ":8: target.families.f.max_versions: expected an integer, got '3'"),
    ("true as scan segments", BASE.replace("  sort_key: sk\n", "  sort_key: sk\n  total_segments: yes\n"),
     ":5: source.total_segments: expected an integer, got true"),
    ("true as a read budget", BASE.replace("  sort_key: sk\n", "  sort_key: sk\n  read_budget: true\n"),
     ":5: source.read_budget: expected a number, got true"),
    # YAML reads 2024-13-01 as a timestamp and PyYAML's constructor raised a bare ValueError ('a bug', exit 1)
    ("an impossible date", BASE.replace("entities:", "migration_time: 2024-13-01\nentities:"),
     ":9: migration_time: '2024-13-01' is not a time: write an ISO-8601 time such as '2024-01-01T00:00:00Z'"),
    ("an impossible day and time", BASE.replace("entities:", "migration_time: 2024-02-30 10:00:00\nentities:"),
     ":9: migration_time: '2024-02-30 10:00:00' is not a time: write an ISO-8601 time"),
    *COUNTER_CASES,
]


@pytest.mark.parametrize("text, message", [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_bad_spec_message(tmp_path, text, message):
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    rendered = str(caught.value)
    assert rendered.startswith(str(path)), rendered
    assert message in rendered, rendered


def test_several_problems_are_all_reported(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(BASE.replace("family: f}", "family: g}").replace('"{pk}"', '"{pk}#{nope}"'))
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    lines = str(caught.value).splitlines()
    assert len(lines) == 2 and "not declared" in str(caught.value) and "{nope}" in str(caught.value)


def test_unreadable_file(tmp_path):
    with pytest.raises(SpecError, match="cannot read the spec"):
        load_spec(tmp_path / "missing.yaml")


def test_json_specs_load_too(tmp_path):
    import json

    import yaml

    path = tmp_path / "spec.json"
    path.write_text(json.dumps(yaml.safe_load(BASE)))
    assert load_spec(path).entities[0].name == "a"


def test_a_whole_read_budget_is_a_fraction_still(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(BASE.replace("  sort_key: sk\n", "  sort_key: sk\n  read_budget: 1\n"))
    assert load_spec(path).source.read_budget == 1.0


def test_spec_survives_a_json_round_trip(tmp_path):
    """Beam workers and checkpoints carry the spec as JSON; durations must read back."""
    from ddb2bt.mappers.spec import MappingSpec

    path = tmp_path / "spec.yaml"
    path.write_text(BASE.replace("{max_versions: 1}", "{max_versions: 1, max_age: 30d}"))
    spec = load_spec(path)
    assert MappingSpec.model_validate(spec.model_dump(mode="json", by_alias=True)) == spec


# --------------------------------------------------------------------------- specs that cannot work (issue 11)

CANNOT_WORK = [
    ("empty delimiter", BASE.replace('row_key: "{pk}"', 'row_key: {template: "{pk}", delimiter: ""}'),
     ":11: entities[0].row_key.delimiter: the delimiter cannot be empty"),
    ("table id Bigtable refuses", BASE.replace("table: t", "table: bad table!"),
     ":6: target.table: 'bad table!' is not a Bigtable table id: 1-50 letters, digits, '_', '-' or '.', "
     "not starting with '-' or '.' (e.g. 'bad_table')"),
    ("table id of 51 characters", BASE.replace("table: t", "table: " + "t" * 51),
     ":6: target.table: '" + "t" * 51 + "' is not a Bigtable table id"),
    ("table id starting with a dot", BASE.replace("table: t", "table: .t"),
     ":6: target.table: '.t' is not a Bigtable table id"),
    ("family id Bigtable refuses", BASE.replace("f: {max_versions: 1}", "my family: {max_versions: 1}"),
     ":7: target.families: family name 'my family' must be 1-64 characters of letters, digits, '-', '_' or '.'"),
    ("fixed timestamp before 1970", BASE.replace("    columns:", "    timestamp: {fixed: '1969-07-20T20:17:00Z'}\n    columns:"),
     ":12: entities[0].timestamp.fixed: 1969-07-20T20:17:00+00:00 is before 1970; Bigtable cell timestamps cannot be negative"),
    ("migration_time before 1970", BASE + "migration_time: '1960-01-01T00:00:00'\n",
     ":14: migration_time: 1960-01-01T00:00:00+00:00 is before 1970"),
    ("migration_time that is no time", BASE + "migration_time: 1e400\n",
     ":14: migration_time: '1e400' is not a time: write an ISO-8601 time such as '2024-01-01T00:00:00Z'"),
    ("migration_time a float cannot hold", BASE + "migration_time: 1.0e+400\n",
     ":14: migration_time: 1.0E+400 is not a time: write an ISO-8601 time"),
    ("number of more than 38 digits", BASE.replace("    row_key", "    match: {n: 1.000000000000000000000000000000000000001}\n    row_key"),
     ":11: entities[0].match.n.equals: '1.000000000000000000000000000000000000001' has more than 38 significant digits; "
     "a DynamoDB number is finite, with at most 38 significant digits"),
    ("number beyond DynamoDB's range", BASE.replace("    row_key", "    match: {n: {equals: -1.5e+126}}\n    row_key"),
     ":11: entities[0].match.n.equals: '-1.5E+126' is outside DynamoDB's number range"),
    # Bigtable's GC rules are protobuf int32 and Duration fields: a value beyond them used to fail only in migrate
    ("max_versions beyond int32", BASE.replace("{max_versions: 1}", "{max_versions: 3000000000}"),
     ":8: target.families.f.max_versions: Input should be less than or equal to 2147483647"),
    ("max_age beyond a protobuf Duration", BASE.replace("{max_versions: 1}", "{max_age: 3652501d}"),
     ":8: target.families.f.max_age: max_age is longer than Bigtable allows (at most 3652500d, 10,000 years)"),
    ("max_age beyond a timedelta", BASE.replace("{max_versions: 1}", "{max_age: 99999999999999999999}"),
     ":8: target.families.f.max_age: 99999999999999999999 is longer than Bigtable allows"),
    ("on_demand_rcu beyond int32", BASE.replace("  sort_key: sk\n", f"  sort_key: sk\n  on_demand_rcu: {10**40}\n"),
     ":5: source.on_demand_rcu: Input should be less than or equal to 2147483647"),
]


@pytest.mark.parametrize("text, message", [case[1:] for case in CANNOT_WORK], ids=[case[0] for case in CANNOT_WORK])
def test_spec_that_cannot_work_is_an_error(tmp_path, text, message):
    test_bad_spec_message(tmp_path, text, message)


@pytest.mark.parametrize("value, message", [
    (".nan", "entities[0].match.n.equals: 'NaN' is not a finite number; a DynamoDB number is finite"),
    ("-.inf", "entities[0].match.n.equals: '-Infinity' is not a finite number"),
    ("[1, 2]", "entities[0].match.n.equals: expected a string, a number or true/false, got a list"),
    ("{equals: {a: 1}}", "entities[0].match.n.equals: expected a string, a number or true/false, got a mapping"),
])
def test_a_value_of_no_accepted_type_is_one_line(tmp_path, value, message):
    """A union field (equals: string, number or boolean) gave one line per member; now one line says what it takes."""
    rendered = refusal(tmp_path / "spec.yaml", BASE.replace("    row_key", f"    match: {{n: {value}}}\n    row_key"))
    assert f":11: {message}" in rendered


def test_spec_numbers_are_exact_in_yaml_and_json(tmp_path):
    """Numbers are read from their text, never through float (which makes 30.0000000000000000000000000001 30)."""
    import json
    from decimal import Decimal

    import yaml

    text = BASE.replace("    row_key", "    match: {n: 30.0000000000000000000000000001, m: -1_000.5, o: 1:30.5}\n    row_key")
    data = yaml.safe_load(text)
    data["entities"][0]["match"] = {"n": "@N@"}
    exact = {"n": Decimal("30.0000000000000000000000000001"), "m": Decimal("-1000.5"), "o": Decimal("90.5")}
    for path, content in [(tmp_path / "spec.yaml", text),
                          (tmp_path / "spec.json", json.dumps(data).replace('"@N@"', "30.0000000000000000000000000001"))]:
        path.write_text(content)
        match = load_spec(path).entities[0].match
        assert {name: condition.equals for name, condition in match.items()} == {
            name: exact[name] for name in match
        }, path


@pytest.mark.parametrize("table", ["t", "_t", "9", "a.b-c_d", "t" * 50])
def test_valid_table_ids_pass(tmp_path, table):
    path = tmp_path / "spec.yaml"
    path.write_text(BASE.replace("table: t", f"table: '{table}'"))
    assert load_spec(path).target.table == table


# --------------------------------------------------------------------------- hostile spec files (issue 11)

ALIAS_BOMB = "a: &a [lol,lol,lol,lol,lol,lol,lol,lol,lol]\n" + "".join(
    f"{name}: &{name} [{', '.join([f'*{previous}'] * 9)}]\n" for previous, name in zip("abcdefgh", "bcdefghi")
)


def refusal(path, data, seconds: float = 5.0) -> str:
    """The one-line SpecError for a spec file holding `data`, which must come quickly."""
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    started = time.monotonic()
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    assert time.monotonic() - started < seconds
    rendered = str(caught.value)
    assert rendered.startswith(f"{path}:") and "\n" not in rendered, rendered
    return rendered


def test_alias_bomb_is_refused_at_once(tmp_path):
    assert len(ALIAS_BOMB) < 700  # the fault sweep's took 70-91 s to refuse
    message = refusal(tmp_path / "spec.yaml", ALIAS_BOMB, seconds=2)
    assert ": the spec expands to more than 200,000 values (YAML aliases expanded)" in message


def test_aliases_in_moderation_are_fine(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(BASE.replace("f: {max_versions: 1}", "f: &keep-one {max_versions: 1}\n    g: *keep-one"))
    assert load_spec(path).target.families["g"].max_versions == 1


def test_alias_to_its_own_container_is_refused(tmp_path):
    assert ":1: alias *a refers to a value that contains it" in refusal(tmp_path / "spec.yaml", "a: &a [x, *a]\n")


@pytest.mark.parametrize("name, text, line", [
    ("flow", "source: " + "[" * 5000 + "]" * 5000 + "\n", 1),
    ("block", "".join("  " * depth + "a:\n" for depth in range(40)), 32),
    ("aliases", "a0: &a0 x\n" + "".join(f"a{n + 1}: &a{n + 1} [*a{n}]\n" for n in range(40)), 32),
    ("json", '{"source":\n' + "[" * 5000 + "]" * 5000 + "}\n", 2),
])
def test_deep_nesting_is_refused_with_its_line(tmp_path, name, text, line):
    suffix = ".json" if name == "json" else ".yaml"
    message = refusal(tmp_path / f"spec{suffix}", text)
    assert f":{line}: nested more than 32 levels deep" in message


def test_bytes_that_are_not_utf8_are_named_with_file_and_line(tmp_path):
    latin1 = BASE.replace("table: T", "table: Café").encode("latin-1")
    assert ":2: not UTF-8 text: byte 0xe9 at column 13; save the spec as UTF-8" in refusal(tmp_path / "spec.yaml", latin1)


def test_a_byte_order_mark_is_not_an_error(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_bytes(b"\xef\xbb\xbf" + BASE.encode())
    assert load_spec(path).target.table == "t"


def test_control_characters_are_refused_with_their_line(tmp_path):
    message = refusal(tmp_path / "spec.yaml", BASE.replace("table: t", "table: t\x00"))
    assert ":6: not valid YAML: character U+0000 is not allowed" in message


def json_spec(indent: int | str = 2) -> str:
    import json

    import yaml

    return json.dumps(yaml.safe_load(BASE), indent=indent) + "\n"


def test_json_spec_is_parsed_as_json(tmp_path):
    text = json_spec()
    lines = text.splitlines()
    at = next(n for n, line in enumerate(lines) if '"max_versions": 1' in line)
    lines[at] += ","  # a trailing comma: YAML accepts it, JSON does not
    message = refusal(tmp_path / "spec.json", "\n".join(lines))
    assert f":{at + 2}: not valid JSON: Expecting property name enclosed in double quotes" in message
    assert "not valid JSON" in refusal(tmp_path / "yaml.json", BASE)  # YAML text in a .json file
    assert load_spec(_written(tmp_path / "trailing.yaml", "\n".join(lines))).target.table == "t"


def _written(path, text: str):
    path.write_text(text)
    return path


def test_json_spec_errors_keep_their_lines(tmp_path):
    text = json_spec(indent="\t").replace('"row_key"', '"row_kee"')
    line = next(n for n, content in enumerate(text.splitlines(), 1) if "row_kee" in content)
    assert f":{line}: entities[0].row_kee: unknown key" in refusal(tmp_path / "spec.json", text)


def test_json_duplicate_key_is_refused_with_its_line(tmp_path):
    text = json_spec().replace('"table": "t",', '"table": "t",\n    "table": "u",')
    line = text.splitlines().index('    "table": "u",') + 1
    assert f":{line}: target.table: duplicate key 'table'" in refusal(tmp_path / "spec.json", text)


@pytest.mark.parametrize("content", ["", "\n\n", "# only a comment\n"])
def test_empty_spec_is_refused(tmp_path, content):
    assert "the spec is empty; write source, target and entities" in refusal(tmp_path / "spec.yaml", content)


def test_directory_is_refused(tmp_path):
    with pytest.raises(SpecError, match="is a directory; give the spec file"):
        load_spec(tmp_path)


def test_spec_too_large_is_refused_before_parsing(tmp_path):
    from ddb2bt.mappers.loader import MAX_SPEC_BYTES

    assert ": larger than 4 MiB: not a spec" in refusal(tmp_path / "spec.yaml", "#" * (MAX_SPEC_BYTES + 1), seconds=2)


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root reads any file")
def test_unreadable_spec_is_refused(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(BASE)
    path.chmod(0)
    with pytest.raises(SpecError, match="cannot read the spec: Permission denied"):
        load_spec(path)


@pytest.mark.parametrize("name, written", [("a:b", '"a:b"'), ("a.b", "a.b"), ("a#b", '"a#b"'), ("tenant", "tenant")])
def test_the_match_a_row_key_attribute_needs_is_given_as_yaml_that_reads_back(tmp_path, name, written):
    """The fix for a row key using a non-key attribute is a match the user pastes into the spec: for a name with a
    colon it was `match: {a:b: {exists: true}}`, which YAML does not read as that attribute. Now quoted where needed,
    and what it says, pasted, makes the spec load."""
    import yaml

    path = tmp_path / "spec.yaml"
    path.write_text(BASE.replace('"{pk}"', '"{pk}#{' + name + '}"'))
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    fix = str(caught.value).rpartition("add match: ")[2].strip()
    assert fix.startswith("{" + written + ": {exists: true}}"), fix
    assert yaml.safe_load(fix.removesuffix(")")) == {name: {"exists": True}}
