"""`ddb2bt rollback` on bad input: one line, exit 2, nothing written (and the run folder not created)."""

from __future__ import annotations

import json

import pytest

from ddb2bt.pipelines.dynamodb.client import ClientSettings, create_table, make_client


def write_spec(path, table: str, endpoint: str):
    path.write_text(json.dumps({
        "source": {"table": table, "endpoint_url": endpoint, "region": "us-east-1", "partition_key": "pk"},
        "target": {"table": table, "families": {"f": {"max_versions": 1}}},
        "entities": [{"name": "e", "row_key": "{pk}", "rest": {"family": "f"}}]}))
    return path


@pytest.mark.parametrize("args, message", [
    (["--since", "yesterday"], "--since 'yesterday' is no time"),
    (["--since", "²"], "--since '²' is no time"),  # a digit to str.isdigit(), none to int()
    (["--type", "n=X"], "--type 'n=X' is not NAME=TYPE"),
    (["--dead-letter", "x.jsonl"], "No such option: --dead-letter"),  # it lives in the run folder
    (["--writers", "0"], "--writers"),
])
def test_bad_options_are_one_line_exit_2(invoke, tmp_path, args, message):
    spec = write_spec(tmp_path / "spec.json", "t", "http://127.0.0.1:9")
    result = invoke("rollback", spec, "--run-dir", tmp_path / "rb", *args)
    assert result.exit_code == 2, result.output
    assert message in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "rb").exists()


def test_a_missing_or_otherwise_keyed_table_is_refused_before_anything_is_written(invoke, bigtable_env, moto_server,
                                                                                  unique_name, tmp_path):
    spec = write_spec(tmp_path / "spec.json", unique_name, moto_server.endpoint)
    from ddb2bt.pipelines.bigtable.sink import ensure_table
    from ddb2bt.mappers.loader import load_spec

    ensure_table(load_spec(spec).target)
    result = invoke("rollback", spec, "--run-dir", tmp_path / "rb")
    assert result.exit_code == 2
    assert f"DynamoDB table {unique_name} does not exist" in result.stderr and "--to-table" in result.stderr
    create_table(make_client(ClientSettings(endpoint_url=moto_server.endpoint)), unique_name, "pk", "sk")
    result = invoke("rollback", spec, "--run-dir", tmp_path / "rb")
    assert result.exit_code == 2
    assert "is keyed by pk, sk, the spec's items by pk" in result.stderr
    assert not (tmp_path / "rb").exists()
