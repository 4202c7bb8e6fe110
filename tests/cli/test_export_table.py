"""An export of another table than the spec's source.table is refused before anything is read into Bigtable: one
line naming both tables, exit 2, no table created. The export is tests/data/aws_exports/documented (a full export of
`posts`, laid out as AWS documents it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from google.cloud.bigtable import Client

DOCUMENTED = Path(__file__).resolve().parents[1] / "data" / "aws_exports" / "documented" / "ddb" / "posts"
FULL = DOCUMENTED / "AWSDynamoDB" / "01714564800000-a1b2c3d4"


def write_spec(path: Path, table: str, target: str) -> Path:
    path.write_text(json.dumps({
        "source": {"table": table, "partition_key": "pk", "sort_key": "sk", "export": {"path": str(FULL)}},
        "target": {"table": target, "families": {"f": {"max_versions": 1}}},
        "migration_time": "2024-01-01T00:00:00Z",
        "entities": [{"name": "item", "row_key": "{pk}#{sk}", "rest": {"family": "f"}}]}), encoding="utf-8")
    return path


def tables(bigtable_env) -> set[str]:
    admin = Client(project="ddb2bt-local", admin=True).instance("ddb2bt-local")
    return {table.table_id for table in admin.list_tables()}


@pytest.mark.parametrize("command", [("migrate-plan",), ("report", "-o", "-"), ("validate",), ("migrate", "-y")])
def test_an_export_of_another_table_is_refused(bigtable_env, invoke, tmp_path, unique_name, command):
    spec = write_spec(tmp_path / "spec.json", "Videos", unique_name)
    result = invoke(command[0], spec, *command[1:], *(("--run-dir", tmp_path / "run") if command[0] in (
        "migrate", "validate") else ()))
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines()[-1] == (
        f"error: the export in {FULL} is of table posts (arn:aws:dynamodb:us-east-1:123456789012:table/posts), but "
        "source.table is Videos; point source.export.path at an export of Videos, or fix source.table")
    assert "Traceback" not in result.output and unique_name not in tables(bigtable_env)
    assert not (tmp_path / "run").exists()


def test_the_export_of_the_named_table_migrates(bigtable_env, invoke, tmp_path, unique_name):
    spec = write_spec(tmp_path / "spec.json", "arn:aws:dynamodb:us-east-1:123456789012:table/posts", unique_name)
    result = invoke("migrate", spec, "-y", "--run-dir", tmp_path / "run")
    assert result.exit_code == 0, result.output
    assert "read 5 items: 5 written" in result.stdout and unique_name in tables(bigtable_env)
