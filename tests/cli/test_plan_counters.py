"""migrate-plan and migrate with an aggregate (counter) family, against the emulator: the plan's target diff shows the
family's value type, migrate creates it with it, and a family of the same name but the other type is refused, by the
plan and by migrate, with the fix (a family's type cannot be changed), before anything is written."""

from __future__ import annotations

import json

import pytest

from ddb2bt.mappers.loader import load_spec
from ddb2bt.pipelines.bigtable.sink import admin_table, ensure_table, existing_families
from ddb2bt.pipelines.dynamodb.client import ClientSettings, create_table, make_client, put_items

pytestmark = pytest.mark.servers

SPEC = """\
source: {{table: {table}, endpoint_url: "{endpoint}", region: us-east-1}}
target: {{table: {table}, families: {{f: {{}}, stats: {stats}}}}}
migration_time: "2024-01-01T00:00:00Z"
entities:
  - name: item
    row_key: "{{pk}}"
    columns: [{{attribute: v, family: f}}, {{attribute: likes, family: {counter_family}, encoding: int64}}]
"""


def write_spec(path, table, endpoint, stats="{aggregate: sum}", counter_family="stats"):
    path.write_text(SPEC.format(table=table, endpoint=endpoint, stats=stats, counter_family=counter_family))
    return path


@pytest.fixture
def source(moto_server, unique_name):
    client = make_client(ClientSettings(endpoint_url=moto_server.endpoint))
    create_table(client, unique_name, "pk")
    put_items(client, unique_name, [{"pk": {"S": k}, "v": {"S": k}, "likes": {"N": str(n)}} for n, k in enumerate("abc")])
    return unique_name, moto_server.endpoint


def plan(invoke, spec, *args):
    return invoke("migrate-plan", spec, "--sample", "10", *args)


def test_plan_shows_the_aggregate_family_and_migrate_creates_it(invoke, bigtable_env, source, tmp_path):
    table, endpoint = source
    spec = write_spec(tmp_path / "spec.yaml", table, endpoint)
    result = plan(invoke, spec)
    assert result.exit_code == 0, result.output
    assert "  + family stats: Int64 sum aggregate (migrate creates it)" in result.stdout
    assert "  + family f: keep every version (no GC rule) (migrate creates it)" in result.stdout

    assert invoke("migrate", spec, "--yes", "--run-dir", tmp_path / "run").exit_code == 0
    families = existing_families(admin_table(load_spec(spec).target))
    assert families["stats"].aggregate == "sum" and families["f"].aggregate is None
    again = plan(invoke, spec)
    assert "  = family stats: Int64 sum aggregate" in again.stdout


def test_a_plain_family_where_the_spec_wants_counters_is_refused_with_the_fix(invoke, bigtable_env, source, tmp_path):
    table, endpoint = source
    plain = write_spec(tmp_path / "plain.yaml", table, endpoint, stats="{}", counter_family="f")
    ensure_table(load_spec(plain).target)  # the table as it was made before counters were declared
    spec = write_spec(tmp_path / "spec.yaml", table, endpoint)

    result = plan(invoke, spec)
    assert result.exit_code == 1, result.output
    assert ("  ! family stats: table has 'keep every version (no GC rule)', spec wants 'Int64 sum aggregate' "
            "(migrate refuses the table: a family's type cannot be changed; name another family in the spec, or "
            "write to a new table)") in result.stdout
    data = json.loads(plan(invoke, spec, "--format", "json").stdout)
    assert data["target"]["blocking"] is True

    migrated = invoke("migrate", spec, "--yes", "--run-dir", tmp_path / "run")
    assert migrated.exit_code == 2, migrated.output
    assert (f"Bigtable table {table!r} already exists with family 'stats': expected Int64 sum aggregate, found keep "
            "every version (no GC rule). Nothing was written. A family's type cannot be changed") in migrated.stderr
    assert "give the family another name in the spec (migrate creates it), or write to a new table" in migrated.stderr
    assert not (tmp_path / "run").exists()


def test_an_aggregate_family_where_the_spec_wants_a_plain_one_is_refused(bigtable_env, source, tmp_path):
    from ddb2bt.pipelines.bigtable.sink import SchemaMismatchError

    table, endpoint = source
    ensure_table(load_spec(write_spec(tmp_path / "counters.yaml", table, endpoint)).target)
    plain = load_spec(write_spec(tmp_path / "plain.yaml", table, endpoint, stats="{}", counter_family="f"))
    with pytest.raises(SchemaMismatchError, match="family 'stats': expected keep every version \\(no GC rule\\), "
                                                  "found Int64 sum aggregate"):
        ensure_table(plain.target)
