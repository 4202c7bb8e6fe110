"""migrate-plan reads the Bigtable target (read-only) and shows a terraform-like diff before the preview.

Real servers: a table in moto_server, the Bigtable emulator (or no emulator, or a dead endpoint).
"""

from __future__ import annotations

import json

import pytest

from ddb2bt.mappers.loader import load_spec
from ddb2bt.pipelines.bigtable.sink import admin_table, ensure_table, existing_families
from ddb2bt.pipelines.dynamodb.client import ClientSettings, create_table, make_client, put_items

pytestmark = pytest.mark.servers

SPEC = """\
source: {{table: {table}, endpoint_url: "{endpoint}", region: us-east-1}}
target: {{table: {table}, families: {{{families}}}}}
migration_time: "2024-01-01T00:00:00Z"
entities:
  - name: item
    row_key: "{{pk}}"
    columns: [{{attribute: v, family: f}}]
"""


def write_spec(path, table, endpoint, families="f: {max_versions: 1}"):
    path.write_text(SPEC.format(table=table, endpoint=endpoint, families=families))
    return path


@pytest.fixture
def source(moto_server, unique_name):
    """A three-item DynamoDB table; its name is also the Bigtable table's."""
    client = make_client(ClientSettings(endpoint_url=moto_server.endpoint))
    create_table(client, unique_name, "pk")
    put_items(client, unique_name, [{"pk": {"S": k}, "v": {"S": k * 2}} for k in "abc"])
    return unique_name, moto_server.endpoint


def plan(invoke, spec, *args):
    return invoke("migrate-plan", spec, "--sample", "10", *args)


def test_gc_rule_mismatch_exits_1_and_shows_the_diff(invoke, bigtable_env, source, tmp_path):
    table, endpoint = source
    existing = write_spec(tmp_path / "existing.yaml", table, endpoint, "f: {max_versions: 3}, x: {max_age: 7d}")
    ensure_table(load_spec(existing).target)  # the table as someone else made it
    spec = write_spec(tmp_path / "spec.yaml", table, endpoint, "f: {max_versions: 1}, g: {}")

    result = plan(invoke, spec)
    assert result.exit_code == 1, result.output
    assert result.stderr.splitlines()[0] == (f"plan {table} → Bigtable emulator at {bigtable_env.endpoint}: "
                                             f"projects/ddb2bt-local/instances/ddb2bt-local/tables/{table}")
    out = result.stdout
    assert "  ! family f: GC rule differs: table has 'keep at most 3 versions', spec wants 'keep at most 1 version' " \
           "(migrate refuses the table)" in out
    assert "  + family g: keep every version (no GC rule) (migrate creates it)" in out
    assert "  · family x: drop cells older than 1w (not in the spec; left alone)" in out
    assert "migrate would refuse this table" in out
    assert out.index("target: ") < out.index("Column families")  # the diff comes before the preview
    assert "errors: fix them before migrating (1 error," in out

    data = json.loads(plan(invoke, spec, "--format", "json").stdout)
    assert data["target"]["blocking"] is True and data["target"]["exists"] is True
    refused = [c for c in data["target"]["changes"] if c["symbol"] == "!"]
    assert refused == [{"symbol": "!", "family": "f", "wanted": "keep at most 1 version",
                        "found": "keep at most 3 versions", "text": refused[0]["text"]}]

    migrated = invoke("migrate", spec, "--yes", "--run-dir", tmp_path / "run")  # migrate refuses what the plan said
    assert migrated.exit_code == 2 and "different garbage collection" in migrated.stderr
    assert existing_families(admin_table(load_spec(spec).target)).keys() == {"f", "x"}  # nothing was changed
    assert not (tmp_path / "run").exists()


def test_missing_table_is_created_and_rows_already_there_are_a_warning(invoke, bigtable_env, source, tmp_path):
    table, endpoint = source
    spec = write_spec(tmp_path / "spec.yaml", table, endpoint)
    result = plan(invoke, spec)
    assert result.exit_code == 0, result.output
    assert f"  + table {table}: does not exist; migrate creates it" in result.stdout
    assert "  + family f: keep at most 1 version (migrate creates it)" in result.stdout
    assert existing_families(admin_table(load_spec(spec).target)) is None  # the plan created nothing

    assert invoke("migrate", spec, "--yes", "--run-dir", tmp_path / "run").exit_code == 0
    again = plan(invoke, spec)
    assert again.exit_code == 0
    assert "  = family f: keep at most 1 version" in again.stdout
    assert f"  ~ table {table} already holds rows" in again.stdout
    assert plan(invoke, spec, "--strict").exit_code == 1  # a warning


def test_target_without_names_is_not_read_but_the_plan_goes_on(invoke, source, tmp_path, monkeypatch):
    monkeypatch.delenv("BIGTABLE_EMULATOR_HOST", raising=False)
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT", raising=False)
    table, endpoint = source
    result = plan(invoke, write_spec(tmp_path / "spec.yaml", table, endpoint))
    assert result.exit_code == 0, result.output
    notes = [line for line in result.stdout.splitlines() if line.startswith("  ? ")]
    assert notes == [f"  ? target not read: no Bigtable project and instance given for table '{table}'; pass "
                     "--project and --instance (or set target.project/target.instance in the spec, or "
                     "GOOGLE_CLOUD_PROJECT), or set BIGTABLE_EMULATOR_HOST to write to the emulator"]
    assert "sample: 3 items → 3 mapped" in result.stdout  # the rest of the plan is there
    assert json.loads(plan(invoke, tmp_path / "spec.yaml", "--format", "json").stdout)["target"]["read"] is False
    assert plan(invoke, tmp_path / "spec.yaml", "--strict").exit_code == 1


def test_unreachable_target_is_one_line(invoke, source, tmp_path, monkeypatch):
    monkeypatch.setenv("BIGTABLE_EMULATOR_HOST", "127.0.0.1:9")  # nothing listens there
    table, endpoint = source
    result = plan(invoke, write_spec(tmp_path / "spec.yaml", table, endpoint))
    assert result.exit_code == 0, result.output
    notes = [line for line in result.stdout.splitlines() if line.startswith("  ? ")]
    assert len(notes) == 1 and notes[0].startswith("  ? target not read: Bigtable is unreachable"), result.stdout
    assert "Traceback" not in result.output


def test_migrate_plan_file_names_its_spec(invoke, bigtable_env, source, tmp_path, monkeypatch):
    """`migrate --plan FILE` without SPEC runs the spec the plan reviewed, and still refuses it once it changed."""
    table, endpoint = source
    monkeypatch.chdir(tmp_path)
    spec = write_spec(tmp_path / "spec.yaml", table, endpoint)
    (tmp_path / "plan.json").write_text("{}")
    (tmp_path / "plan.json").chmod(0o644)
    assert plan(invoke, "spec.yaml", "--out", "plan.json").exit_code == 0
    assert (tmp_path / "plan.json").stat().st_mode & 0o777 == 0o600  # sample items are user data, as dead letters
    reviewed = spec.read_text()

    spec.write_text(reviewed.replace("2024-01-01", "2024-06-01"))  # what it migrates changed since the review
    changed = invoke("migrate", "--plan", "plan.json", "--run-dir", "no")
    assert changed.exit_code == 2, changed.output
    assert "spec spec.yaml (the one the plan in plan.json reviewed)" in changed.stderr
    assert "the spec (what it migrates or where it writes) changed" in changed.stderr.splitlines()[-1]
    assert not (tmp_path / "no").exists() and existing_families(admin_table(load_spec(spec).target)) is None

    spec.write_text(reviewed)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # spec.yaml is not here: the plan's absolute path is
    applied = invoke("migrate", "--plan", "../plan.json", "--run-dir", "run")
    assert applied.exit_code == 0, applied.output
    assert f"spec {spec} (the one the plan in ../plan.json reviewed)" in applied.stderr
    assert "read 3 items: 3 written" in applied.stdout

    spec.unlink()
    gone = invoke("migrate", "--plan", "../plan.json", "--run-dir", "gone")
    assert gone.exit_code == 2
    assert gone.stderr.strip() == (f"error: the spec the plan in ../plan.json reviewed (spec.yaml = {spec}) is not "
                                   "there anymore; give it: `ddb2bt migrate SPEC --plan FILE`")
