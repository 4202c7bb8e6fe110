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


@pytest.mark.parametrize("keys, message", [
    ((("id", "S"),), "is keyed by id (S), the source table {source} by pk (S), sk (S)"),
    ((("sk", "S"), ("pk", "S")), "is keyed by sk (S), pk (S), the source table {source} by pk (S), sk (S)"),
    ((("pk", "S"), ("sk", "N")), "is keyed by pk (S), sk (N), the source table {source} by pk (S), sk (S)"),
])
def test_a_table_keyed_otherwise_than_the_source_is_refused_when_the_spec_names_no_keys(
        invoke, bigtable_env, moto_server, unique_name, tmp_path, keys, message):  # fmt: skip
    """A spec without source.partition_key (migrate reads the keys from DescribeTable): rolling back --to-table a table
    keyed otherwise was not refused: a table keyed by another attribute dead-lettered every row, one with the key
    types changed stopped on "unexpected DecimalError ... a bug", and one with HASH and RANGE swapped was filled and
    called OK. The source table's key schema is the one to match."""
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({
        "source": {"table": unique_name, "endpoint_url": moto_server.endpoint, "region": "us-east-1"},
        "target": {"table": unique_name, "families": {"f": {"max_versions": 1}}},
        "entities": [{"name": "e", "row_key": "{pk}#{sk}", "rest": {"family": "f"}}]}))
    from ddb2bt.mappers.loader import load_spec
    from ddb2bt.pipelines.bigtable.sink import ensure_table

    ensure_table(load_spec(spec).target)
    client = make_client(ClientSettings(endpoint_url=moto_server.endpoint))
    create_table(client, unique_name, "pk", "sk")
    other = f"{unique_name}-to"
    client.create_table(TableName=other, BillingMode="PAY_PER_REQUEST",
                        KeySchema=[{"AttributeName": name, "KeyType": kind} for (name, _), kind in zip(keys, ("HASH", "RANGE"))],
                        AttributeDefinitions=[{"AttributeName": name, "AttributeType": t} for name, t in keys])  # fmt: skip
    result = invoke("rollback", spec, "--run-dir", tmp_path / "rb", "--to-table", other)
    assert result.exit_code == 2, result.output
    assert message.format(source=unique_name) in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "rb").exists()
