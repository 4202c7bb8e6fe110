"""Smoke tests: the real local servers start, speak their protocols, and stop."""

import os
import signal
import socket
import struct
import sys
import time

import boto3
import pytest
from google.cloud.bigtable import Client, column_family
from google.cloud.bigtable.data import BigtableDataClient, SetCell

from ddb2bt.pipelines.local import servers as local_servers

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
    # dynalite turns a table ACTIVE on a 0 ms timer: a loaded machine can answer DescribeTable before it fires
    ddb.get_waiter("table_exists").wait(TableName=unique_name, WaiterConfig={"Delay": 0.1, "MaxAttempts": 50})
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


def _exits_while_listening(port: int) -> list[str]:
    """A server that listens, says why it is leaving, and exits with 4 once a client connected."""
    script = ("import socket, sys; s = socket.create_server(('127.0.0.1', %d)); s.accept(); "
              "print('out of patience', file=sys.stderr); sys.exit(4)" % port)
    return [sys.executable, "-c", script]


def test_a_server_that_exits_by_itself_while_in_use_says_why_when_the_context_ends():
    with pytest.raises(local_servers.ServerDied, match=r"broken exited with 4 while in use(.|\n)*out of patience"):
        with local_servers._serve("broken", _exits_while_listening, "{host}:{port}", timeout=5) as server:
            deadline = time.monotonic() + 10  # _serve's own readiness probe was the client it waited for
            while not _exited(server.pid) and time.monotonic() < deadline:
                time.sleep(0.05)


def _exited(pid: int) -> bool:
    """The process has ended and waits to be reaped (a zombie). Its closed port is not enough: a Python server
    closes its socket while the interpreter tears down, which on a loaded machine can take a while longer."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_a_server_killed_on_purpose_is_no_error():
    with local_servers._serve("killed", _exits_while_listening, "{host}:{port}", timeout=5) as server:
        os.kill(server.pid, signal.SIGKILL)  # what the fault tests do to a dependency


def test_dynalite_outlives_a_client_that_dies_in_the_middle_of_a_request(dynalite):
    """dynalite 4.0.0 alone crashes here ("Error: aborted"): a migration killed mid-Scan took the shared server
    down with it. The project's launcher keeps it serving."""
    with socket.create_connection((dynalite.host, dynalite.port)) as s:
        s.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nX-Amz-Target: DynamoDB_20120810.ListTables\r\n"
                  b"Content-Type: application/x-amz-json-1.0\r\nContent-Length: 100\r\n\r\n{")  # 99 bytes short
        time.sleep(0.2)  # the server is reading the body
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close with a reset
    time.sleep(0.5)
    ddb = boto3.client("dynamodb", endpoint_url=dynalite.endpoint, region_name="us-east-1")
    assert "TableNames" in ddb.list_tables()


def test_the_servers_are_found_where_setup_installs_them():
    """tools/setup.sh installs dynalite and the emulator under the repository's tools/: the module must look there."""
    assert (local_servers.ROOT / "pyproject.toml").is_file()
    assert (local_servers.ROOT / "tools" / "setup.sh").is_file()
