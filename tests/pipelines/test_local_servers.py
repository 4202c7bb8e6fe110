"""Smoke tests: the real local servers start, speak their protocols, and stop."""

import os

import boto3
import pytest
from google.cloud.bigtable import Client, column_family
from google.cloud.bigtable.data import BigtableDataClient, SetCell

from ddb2bt.pipelines import local_servers

pytestmark = pytest.mark.servers


def test_bigtable_emulator_write_and_read_back(bigtable_env, unique_name):
    admin = Client(project="p", admin=True)
    admin.instance("i").table(unique_name).create(column_families={"cf": column_family.MaxVersionsGCRule(1)})

    with BigtableDataClient(project="p") as client:
        table = client.get_table("i", unique_name)
        # Bigtable keeps millisecond granularity: timestamps must be multiples of 1000 micros.
        table.mutate_row(b"row#1", SetCell("cf", b"q", b"value", timestamp_micros=1_700_000_000_000_000))
        row = table.read_row(b"row#1")

    [cell] = row.cells
    assert (cell.family, cell.qualifier, cell.value, cell.timestamp_micros) == (
        "cf", b"q", b"value", 1_700_000_000_000_000)


@pytest.mark.parametrize("server", ["dynalite", "moto_server"])
def test_dynamodb_server_put_and_scan(server, request, unique_name):
    endpoint = request.getfixturevalue(server).endpoint
    ddb = boto3.client("dynamodb", endpoint_url=endpoint)
    ddb.create_table(
        TableName=unique_name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    assert ddb.describe_table(TableName=unique_name)["Table"]["TableStatus"] == "ACTIVE"
    item = {"pk": {"S": "hats"}, "Price": {"N": "30"}, "Img": {"B": b"\x00\xff"}}
    ddb.put_item(TableName=unique_name, Item=item)

    assert ddb.scan(TableName=unique_name)["Items"] == [item]


@pytest.mark.parametrize("start", [local_servers.bigtable_emulator, local_servers.moto_server, local_servers.dynalite])
def test_server_is_stopped_after_the_context(start):
    with start() as server:
        assert local_servers.port_open(server.host, server.port)
    assert not local_servers.port_open(server.host, server.port)
    with pytest.raises(ProcessLookupError):
        os.kill(server.pid, 0)


def test_missing_binary_says_to_run_setup(monkeypatch, tmp_path):
    monkeypatch.setattr(local_servers, "ROOT", tmp_path)
    with pytest.raises(local_servers.ServerNotInstalled, match="make setup"):
        local_servers.find_dynalite()


def test_start_failure_shows_the_server_output():
    failing = lambda port: ["sh", "-c", f"echo cannot bind {port} >&2; exit 3"]  # noqa: E731
    with pytest.raises(local_servers.ServerStartError, match=r"exited with 3(.|\n)*cannot bind"):
        with local_servers._serve("broken", failing, "{host}:{port}", timeout=5):
            pass
