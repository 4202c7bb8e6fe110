"""init: every template writes a spec that loads, and the templates map the items they describe."""

import pytest

from ddb2bt.mappers.compiler import compile_spec
from ddb2bt.mappers.loader import load_spec
from ddb2bt.mappers.results import MappedRow, Skipped
from ddb2bt.templates import catalog


@pytest.mark.parametrize("name", list(catalog.TEMPLATES))
def test_init_writes_a_spec_that_loads(invoke, tmp_path, name):
    out = tmp_path / "specs" / "spec.yaml"
    result = invoke("init", "--template", name, "-o", out)
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert not any(line.startswith("$schema:") for line in text.splitlines()) and "ddb2bt schema -o spec.schema.json" in text
    assert text.lstrip().startswith("#")  # commented
    load_spec(out)


def test_list_shows_every_template_with_a_description(invoke):
    result = invoke("init", "--list")
    assert result.exit_code == 0
    lines = result.output.strip().splitlines()
    assert [line.split()[0] for line in lines] == list(catalog.TEMPLATES)
    assert all(len(line.split(maxsplit=1)) == 2 for line in lines)


def test_refuses_to_overwrite_without_force(invoke, tmp_path):
    out = tmp_path / "spec.yaml"
    out.write_text("mine")
    result = invoke("init", "-t", "key-value", "-o", out)
    assert result.exit_code == 2
    assert result.stderr == f"error: {out} already exists; pass --force to overwrite it or -o to write elsewhere\n"
    assert out.read_text() == "mine"
    assert invoke("init", "-t", "key-value", "-o", out, "--force").exit_code == 0


def test_unknown_template(invoke, tmp_path):
    result = invoke("init", "-t", "graph", "-o", tmp_path / "s.yaml")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: no template 'graph'; choose one of: key-value, single-table")


def test_template_is_required(invoke):
    result = invoke("init")
    assert result.exit_code == 2 and "--template" in result.output


S, N = (lambda v: {"S": v}), (lambda v: {"N": v})
EXAMPLES = {
    "time-series": ({"device": S("sensor-0042"), "sk": S("temperature#1694359308000"), "Value": N("21.5"), "Unit": S("C")},
                    b"sensor-0042#temperature#8305640691999"),
    "versioned": ({"pk": S("C-1001"), "sk": S("v2_Terms"), "Terms": {"M": {"a": N("1")}}, "Editor": S("ana"),
                   "UpdatedAt": S("2023-09-10T15:21:48Z")}, b"C-1001"),
    "multi-tenant": ({"TenantId": S("acme"), "OrderId": S("2023-000123"), "Status": S("shipped"), "Total": N("120.5")},
                     b"acme#2023-000123"),
    "write-sharded": ({"pk": S("2023-09-10.7"), "EventId": S("e-000918"), "Kind": S("click"), "At": S("2023-09-10T15:21:48Z")},
                      None),
}


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_new_templates_map_their_documented_example(name):
    spec = load_spec(catalog.resources.files("ddb2bt.templates") / catalog.get(name).file)
    item, key = EXAMPLES[name]
    row = compile_spec(spec).map_item(item)
    assert isinstance(row, MappedRow), row
    if key is not None:
        assert row.row_key == key
    if name == "write-sharded":
        bucket, rest = row.row_key.split(b"#", 1)
        assert rest == b"2023-09-10#e-000918" and bucket.isdigit()
    if name == "versioned":
        assert {cell.qualifier for cell in row.cells} == {b"Terms", b"Terms.editor"}
        latest = compile_spec(spec).map_item({**item, "sk": S("v0_Terms")})
        assert isinstance(latest, Skipped)


def test_time_series_key_never_starts_with_the_time():
    spec = load_spec(catalog.resources.files("ddb2bt.templates") / "time_series.yaml")
    assert spec.entities[0].row_key.template.startswith("{device}")


def test_schema_prints_the_shipped_schema(invoke, tmp_path):
    from ddb2bt.mappers.schema import SCHEMA_PATH

    result = invoke("schema")
    assert result.exit_code == 0 and result.stdout == SCHEMA_PATH.read_text()
    assert invoke("schema", "-o", tmp_path / "s.json").exit_code == 0
    assert (tmp_path / "s.json").read_text() == SCHEMA_PATH.read_text()


def test_every_output_file_makes_its_missing_folders_and_refuses_a_file_in_the_way(invoke, tmp_path):
    """`-o new/folder/file` is written as init, infer, report and migrate-plan --out write theirs (schema said
    'No such file or directory', with no fix); a path under a file is one line naming --output, nothing made."""
    from ddb2bt.mappers.schema import SCHEMA_PATH

    for command in (("schema",), ("init", "--template", "key-value")):
        target = tmp_path / command[0] / "new" / "spec.out"
        result = invoke(*command, "-o", target)
        assert result.exit_code == 0, result.output
        assert target.is_file() and (command[0] != "schema" or target.read_text() == SCHEMA_PATH.read_text())
        blocked = invoke(*command, "-o", target / "under-a-file")
        assert blocked.exit_code == 2 and blocked.stderr.startswith(f"error: --output {target / 'under-a-file'} "
                                                                    "cannot be written (")
        assert blocked.stderr.count("\n") == 1 and blocked.stderr.endswith("choose a --output path this user can write\n")


# Each starter's documented data, a few items each (the QA found time-series, versioned and write-sharded failing
# their own migrate-plan: a declared-lossy attribute that did not decode, a salted key taken for a time-first key).
DOCUMENTED = {
    "time-series": [{"device": S("sensor-0042"), "sk": S(sk), "Value": N("21.5"), "Unit": S("C")}
                    for sk in ("temperature#1694359308000", "temperature#1694359309000", "humidity#1694359308123")],
    "versioned": [{"pk": S("C-1001"), "sk": S(f"v{n}_Terms"), "Terms": {"M": {"a": N(str(n))}}, "Editor": S("ana"),
                   "UpdatedAt": S(f"2023-09-1{n}T15:21:48Z")} for n in range(3)],
    "multi-tenant": [{"TenantId": S(t), "OrderId": S(f"2023-00012{n}"), "Status": S("shipped"), "Total": N("120.5")}
                     for t in ("acme", "globex") for n in range(3)],
    "write-sharded": [{"pk": S(f"2023-09-10.{n}"), "EventId": S(f"e-00091{n}"), "Kind": S("click"),
                       "At": S(f"2023-09-10T15:21:4{n}Z")} for n in range(3)],
}


@pytest.mark.parametrize("name", list(DOCUMENTED))
def test_every_starter_plans_clean_on_its_documented_data(name):
    from ddb2bt.mappers.analysis.plan import build_plan

    spec = load_spec(catalog.resources.files("ddb2bt.templates") / catalog.get(name).file)
    plan = build_plan(spec, DOCUMENTED[name], now_ms=1_700_000_000_000)
    assert not plan.has_errors, [lint.message for lint in plan.lints]
    assert plan.dead_letters.total == 0


@pytest.mark.parametrize("where, reason", [("folder", "is a folder"), ("file/spec.yaml", "Not a directory")])
def test_an_output_that_cannot_be_a_file_is_one_line_naming_the_flag(invoke, tmp_path, where, reason):
    (tmp_path / "folder").mkdir()
    (tmp_path / "file").write_text("mine")
    out = tmp_path / where
    for extra in ((), ("--force",)):
        result = invoke("init", "-t", "key-value", "-o", out, *extra)
        assert result.exit_code == 2, result.output
        assert result.stderr.startswith(f"error: --output {out} cannot be written ("), result.stderr
        assert reason in result.stderr and result.stderr.count("\n") == 1
    assert (tmp_path / "file").read_text() == "mine" and not any((tmp_path / "folder").iterdir())


def test_output_dash_prints_to_stdout_as_report_does(invoke, tmp_path, monkeypatch):
    """`-o -` is stdout (as `report -o -`): init and schema wrote a file named '-' and said `migrate-plan -` next."""
    from pathlib import Path

    from ddb2bt.mappers.schema import SCHEMA_PATH

    monkeypatch.chdir(tmp_path)
    spec = invoke("init", "-t", "key-value", "-o", "-")
    assert spec.exit_code == 0 and spec.stdout == catalog.starter_spec("key-value"), spec.output
    schema = invoke("schema", "-o", "-")
    assert schema.exit_code == 0 and schema.stdout == SCHEMA_PATH.read_text()
    assert not Path("-").exists()
