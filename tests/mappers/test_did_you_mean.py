"""Misspelt spec keys and enum values: the error names the closest allowed spelling (difflib)."""

import pytest

from ddb2bt.mappers.loader import SpecError, did_you_mean, load_spec
from tests.mappers.spec_texts import BASE

CASES = [
    ("key in an entity", BASE.replace("row_key:", "row_kee:"),
     ":11: entities[0].row_kee: unknown key (check the spelling: did you mean 'row_key'?)"),
    ("key in the source", BASE.replace("  sort_key: sk\n", "  sort_key: sk\n  regoin: eu-west-1\n"),
     ":5: source.regoin: unknown key (check the spelling: did you mean 'region'?)"),
    ("key in a column", BASE.replace("family: f}", "family: f, layuot: set}"),
     ":13: entities[0].columns[0].layuot: unknown key (check the spelling: did you mean 'layout'?)"),
    ("key in a match condition (a union)", BASE.replace("    row_key", "    match: {sk: {prefx: V}}\n    row_key"),
     ":11: entities[0].match.sk.prefx: unknown key (check the spelling: did you mean 'prefix'?)"),
    ("key in a family's GC policy", BASE.replace("{max_versions: 1}", "{max_version: 1}"),
     ":8: target.families.f.max_version: unknown key (check the spelling: did you mean 'max_versions'?)"),
    ("nothing close: the keys allowed are listed", BASE.replace("family: f}", "family: f, zzzz: 1}"),
     ":13: entities[0].columns[0].zzzz: unknown key (check the spelling; keys allowed here: attribute, encoding, "
     "family, layout, qualifier, required, timestamp)"),
    ("enum value", BASE.replace("family: f}", "family: f, encoding: utf-8}"),
     ":13: entities[0].columns[0].encoding: Input should be 'auto', 'utf8', 'decimal', 'int64', 'float64', 'bytes', "
     "'bool', 'json' or 'ddb_json'; did you mean 'utf8'?"),
    ("enum value, other case", BASE.replace("family: f}", "family: f, encoding: JSON}"),
     "; did you mean 'json'?"),
    ("literal value", BASE.replace("{max_versions: 1}", "{max_versions: 1, combine: unoin}"),
     ":8: target.families.f.combine: Input should be 'union' or 'intersection'; did you mean 'union'?"),
    ("top-level literal", BASE + "unmatched: skp\n", ": unmatched: Input should be 'dead_letter', 'skip' or 'fail'; "
     "did you mean 'skip'?"),
    ("layout value", BASE.replace("family: f}", "family: f, layout: sett}"),
     ":13: entities[0].columns[0].layout: Input should be 'cell', 'json', 'set', 'map' or 'list'; did you mean 'set'?"),
    ("transform in a row key", BASE.replace('"{pk}"', '"{pk|strip_prefx(\'V\')}"'),
     ":11: entities[0].row_key.template: unknown transform 'strip_prefx' (did you mean 'strip_prefix'? known: "
     "epoch_ms, epoch_s, lower, pad, part,"),
    ("transform, other case", BASE.replace('"{pk}"', '"{pk|Upper}"'), "unknown transform 'Upper' (did you mean 'upper'?"),
    ("family used but not declared", BASE.replace("family: f}", "family: vidoe}").replace("f: {max", "video: {max"),
     ":13: entities[0].columns[0].family: family 'vidoe' is not declared; did you mean 'video'? Otherwise, declare it "
     "under target.families (declared: video)"),
]


@pytest.mark.parametrize("text, message", [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_misspelling_names_the_closest_spelling(tmp_path, text, message):
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    assert message in str(caught.value), str(caught.value)


@pytest.mark.parametrize("text, listed", [
    (BASE.replace("family: f}", "family: f, encoding: qqqqqq}"), "Input should be 'auto'"),
    (BASE.replace('"{pk}"', '"{pk|qqqqqq}"'), "unknown transform 'qqqqqq' (known: epoch_ms"),
    (BASE.replace("family: f}", "family: qqqqqq}"), "family 'qqqqqq' is not declared; declare it under target.families"),
], ids=["enum", "transform", "family"])
def test_no_guess_for_a_value_far_from_every_choice(tmp_path, text, listed):
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    assert "did you mean" not in str(caught.value) and listed in str(caught.value), str(caught.value)


def test_did_you_mean():
    assert did_you_mean("row_kee", ["row_key", "rest", "columns"]) == "did you mean 'row_key'?"
    assert did_you_mean("ROW_KEY", ["row_key"]) == "did you mean 'row_key'?"
    assert did_you_mean("xyz", ["row_key"]) == "" and did_you_mean(3, ["3"]) == ""


def test_misspelt_key_in_the_cli(tmp_path):
    """The CLI shows the suggestion on its one line, exit 2."""
    from typer.testing import CliRunner

    from ddb2bt.cli.main import app

    path = tmp_path / "spec.yaml"
    path.write_text(BASE.replace("row_key:", "rowkey:"))
    result = CliRunner().invoke(app, ["migrate-plan", str(path)])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        f"error: {path}:11: entities[0].rowkey: unknown key (check the spelling: did you mean 'row_key'?)"]
