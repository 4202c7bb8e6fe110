"""`ddb2bt rollback` without a terminal (CI logs): `progress:` lines every DDB2BT_PROGRESS_SECONDS and at the end, the
rows' total said to be unknown (Bigtable does not say how many rows a range holds before they are read)."""

from __future__ import annotations

import json
import re

import boto3
from typer.testing import CliRunner

from ddb2bt.app.migrate import migrate
from ddb2bt.app.options import RunOptions
from ddb2bt.cli.commands.rollback import progress_text
from ddb2bt.cli.main import app
from ddb2bt.mappers.spec import MappingSpec
from ddb2bt.pipelines.dynamodb.client import create_table, put_items

ITEMS = 300


def test_rollback_without_a_terminal_prints_progress_lines(bigtable_env, moto_server, unique_name, tmp_path,
                                                           monkeypatch):
    client = boto3.client("dynamodb", endpoint_url=moto_server.endpoint, region_name="us-east-1")
    create_table(client, unique_name, "pk", "sk")
    create_table(client, unique_name + "back", "pk", "sk")
    put_items(client, unique_name, [{"pk": {"S": f"u{i % 9}"}, "sk": {"S": f"o{i:04d}"}, "Total": {"N": f"{i}.50"}}
                                    for i in range(ITEMS)])
    spec = MappingSpec.model_validate({
        "source": {"table": unique_name, "endpoint_url": moto_server.endpoint, "region": "us-east-1",
                   "partition_key": "pk", "sort_key": "sk"},
        "target": {"table": unique_name, "families": {"x": {"max_versions": 1}}},
        "migration_time": "2024-01-01T00:00:00Z",
        "entities": [{"name": "item", "row_key": "{pk}#{sk}", "rest": {"family": "x", "encoding": "ddb_json"}}],
    })
    assert migrate(spec, RunOptions(run_dir=str(tmp_path / "migrate"))).ok
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(spec.model_dump(mode="json", by_alias=True)))
    monkeypatch.setenv("DDB2BT_PROGRESS_SECONDS", "0.05")
    done = CliRunner().invoke(app, ["rollback", str(spec_file), "--to-table", unique_name + "back", "--run-dir",
                                    str(tmp_path / "back"), "--wcu", "300", "--writers", "1"])
    assert done.exit_code == 0, done.output
    lines = [line for line in done.stderr.splitlines() if line.startswith("progress: ")]
    assert len(lines) >= 2, done.stderr
    label = re.escape(f"progress: rollback into {unique_name}back: ")
    figures = (r"(reading Bigtable \(total unknown\)|[\d,]+ rows read \(total unknown\) · [\d,]+ items? written · "
               r"[\d,]+ dead letters?|[\d,]+ items? compared with DynamoDB \(total unknown\) · [\d,]+ differ)")
    assert all(re.fullmatch(rf"{label}{figures} · \d:\d\d:\d\d elapsed", line) for line in lines), lines
    assert any("rows read (total unknown)" in line for line in lines), lines  # the write phase was seen under way
    assert f": {ITEMS:,} items compared with DynamoDB (total unknown) · 0 differ · " in lines[-1]
    assert "progress:" not in done.stdout and "rollback OK" in done.stdout


def test_progress_text_of_each_phase():
    assert progress_text("", {}) == "reading Bigtable (total unknown)"
    assert progress_text("write", {"rows_read": 1200, "items_written": 1, "rows_dead_lettered": 1, "items_refused": 1,
                                   "items_unkeyed": 0}) == \
        "1,200 rows read (total unknown) · 1 item written · 2 dead letters"
    assert progress_text("compare", {"compared": 5, "differing": 0}) == \
        "5 items compared with DynamoDB (total unknown) · 0 differ"
