"""Bad specs: one clear message naming the file, the field path and (YAML) the line; pinned here."""

import pytest

from ddb2bt.mappers.loader import SpecError, load_spec

BASE = """\
source:
  table: T
  partition_key: pk
  sort_key: sk
target:
  table: t
  families:
    f: {max_versions: 1}
entities:
  - name: a
    row_key: "{pk}"
    columns:
      - {attribute: x, family: f}
"""

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
     ":11: entities[0].row_key.template: unknown transform 'revers' (known: epoch_ms"),
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
     ":7: not valid YAML/JSON"),
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


def test_spec_survives_a_json_round_trip(tmp_path):
    """Beam workers and checkpoints carry the spec as JSON; durations must read back."""
    from ddb2bt.mappers.spec import MappingSpec

    path = tmp_path / "spec.yaml"
    path.write_text(BASE.replace("{max_versions: 1}", "{max_versions: 1, max_age: 30d}"))
    spec = load_spec(path)
    assert MappingSpec.model_validate(spec.model_dump(mode="json", by_alias=True)) == spec
