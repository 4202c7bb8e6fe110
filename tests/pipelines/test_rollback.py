"""`ddb2bt rollback` against real servers: moto_server (or dynalite) and the Bigtable emulator.

Bigtable is filled by a real `migrate` (or, for the large kill test, by the spec's own mapper writing through the
data client, which is what migrate's sink sends), the rollback writes into a second DynamoDB table, and the two
tables are compared item by item, type for type (a Scan of each, canonical values).
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import time
from pathlib import Path

import boto3
import pytest

from ddb2bt.app.migrate import migrate
from ddb2bt.app.options import RunOptions
from ddb2bt.app.rollback import RollbackError, RollbackRequest, rollback
from ddb2bt.mappers.compiler import compile_spec
from ddb2bt.mappers.decode import comparable
from ddb2bt.mappers.results import MappedRow
from ddb2bt.mappers.spec import MappingSpec
from ddb2bt.pipelines.local import servers as local_servers
from ddb2bt.pipelines.bigtable.entries import to_mutation_entry
from ddb2bt.pipelines.bigtable.sink import ensure_table
from ddb2bt.pipelines.dynamodb.client import create_table, put_items

ROOT = Path(__file__).resolve().parents[2]
DDB2BT = ROOT / ".venv" / "bin" / "ddb2bt"


def rich_items(count: int) -> list[dict]:
    """Items with every DynamoDB type: 38-digit numbers, sets, binary, empty strings, NULL, nested maps and lists."""
    items = []
    for i in range(count):
        item = {"pk": {"S": f"user{i % 7}"}, "sk": {"S": f"order#{i:05d}"},
                "Total": {"N": f"{'9' * 37}{i % 10}" if i % 3 else f"-{i + 1}.25E-{100 + i % 20}"},
                "Name": {"S": "" if i % 5 == 0 else f"name é {i}"},
                "Img": {"B": bytes([i % 256, 0, 255])},
                "Tags": {"SS": ["a", f"t{i}"]}, "Sizes": {"NS": ["1", f"{i}.5", "1E+30"]},
                "Raw": {"BS": [b"\x00", bytes([i % 256 + 1 if i % 256 < 255 else 1])]},
                "Gone": {"NULL": True}, "Flag": {"BOOL": i % 2 == 0},
                "Doc": {"M": {"lines": {"L": [{"N": str(i)}, {"S": ""}, {"M": {"deep": {"L": [{"NULL": True}]}}}]},
                              "bin": {"B": b"\x01\x02"}, "empty": {"M": {}}}}}
        if i % 4 == 0:
            del item["Tags"]
        items.append(item)
    return items


def make_spec(source: str, endpoint: str) -> MappingSpec:
    return MappingSpec.model_validate({
        "source": {"table": source, "endpoint_url": endpoint, "region": "us-east-1", "partition_key": "pk",
                   "sort_key": "sk"},
        "target": {"table": source, "families": {"o": {"max_versions": 1}, "x": {"max_versions": 1}}},
        "migration_time": "2024-01-01T00:00:00Z",
        "entities": [{"name": "order", "row_key": {"template": "{pk}#{sk}", "on_delimiter": "escape"},
                      "columns": [{"attribute": "Total", "family": "o", "encoding": "decimal"},
                                  {"attribute": "Tags", "family": "o", "layout": "set", "encoding": "utf8",
                                   "qualifier": "tag:"},
                                  {"attribute": "Name", "family": "o", "encoding": "utf8"}],
                      "rest": {"family": "x", "encoding": "ddb_json"}}],
    })


def client_for(endpoint: str):
    return boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1")


def table_items(endpoint: str, table: str) -> dict:
    """Every item of a table by key, canonical (numbers, sets, binaries in one spelling)."""
    paginator = client_for(endpoint).get_paginator("scan")
    found = {}
    for page in paginator.paginate(TableName=table, ConsistentRead=True):
        for item in page["Items"]:
            found[(item["pk"]["S"], item["sk"]["S"])] = {name: comparable(value) for name, value in item.items()}
    return found


def canonical(items: list[dict]) -> dict:
    return {(i["pk"]["S"], i["sk"]["S"]): {name: comparable(value) for name, value in i.items()} for i in items}


def write_bigtable(spec: MappingSpec, items: list[dict]) -> None:
    """What migrate's sink writes for these items, through the data client."""
    from google.cloud.bigtable.data import BigtableDataClient

    ensure_table(spec.target)
    compiled = compile_spec(spec)
    rows = [compiled.map_item(item) for item in items]
    assert all(isinstance(row, MappedRow) for row in rows)
    with BigtableDataClient(project=spec.target.project) as client:
        table = client.get_table(spec.target.instance, spec.target.table)
        for start in range(0, len(rows), 500):
            table.bulk_mutate_rows([to_mutation_entry(row) for row in rows[start:start + 500]])


def migrated(endpoint: str, table: str, count: int, tmp_path: Path) -> tuple[list[dict], object, MappingSpec]:
    """A DynamoDB table of rich items, migrated into Bigtable by `migrate`: (items, client, spec)."""
    items = rich_items(count)
    client = client_for(endpoint)
    create_table(client, table, "pk", "sk")
    put_items(client, table, items)
    spec = make_spec(table, endpoint)
    result = migrate(spec, RunOptions(run_dir=str(tmp_path / "migrate")))
    assert result.ok, result.problems
    return items, client, spec


@pytest.fixture(params=["moto_server", "dynalite"])
def dynamodb(request):
    return request.getfixturevalue(request.param)


def test_migrate_then_rollback_gives_the_table_back_type_for_type(bigtable_env, dynamodb, unique_name, tmp_path):
    items, client, spec = migrated(dynamodb.endpoint, unique_name, 60, tmp_path)
    create_table(client, unique_name + "back", "pk", "sk")
    seen: list[tuple[str, dict]] = []
    result = rollback(spec, RollbackRequest(to_table=unique_name + "back"), RunOptions(run_dir=str(tmp_path / "rb")),
                      progress=lambda phase, counters: seen.append((phase, counters)))
    assert result.ok, result.problems
    assert table_items(dynamodb.endpoint, unique_name + "back") == table_items(dynamodb.endpoint, unique_name)
    assert table_items(dynamodb.endpoint, unique_name + "back") == canonical(items)
    c = result.counters
    assert (c["rows_read"], c["rows_decoded"], c["items_decoded"], c["items_written"]) == (60, 60, 60, 60)
    assert (result.compared, result.differences, result.dead_letter_lines) == (60, 0, 0)
    assert seen and seen[-1][0] == "compare" and any(p == "write" and n["items_written"] == 60 for p, n in seen)
    assert stat.S_IMODE(os.stat(result.dead_letter).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(result.differences_file).st_mode) == 0o600
    checkpoint = tmp_path / "rb" / "checkpoint.json"  # the ranges' and batches' row keys: user data too
    assert "after" in json.loads(checkpoint.read_text()) and stat.S_IMODE(checkpoint.stat().st_mode) == 0o600


def test_undecodable_rows_are_dead_letters_and_reconciled(bigtable_env, moto_server, unique_name, tmp_path):
    from google.cloud.bigtable.data import BigtableDataClient, RowMutationEntry, SetCell

    spec = make_spec(unique_name, moto_server.endpoint)
    items = rich_items(5)
    write_bigtable(spec, items)
    with BigtableDataClient(project=spec.target.project) as client:  # rows no reading of the spec explains
        table = client.get_table(spec.target.instance, spec.target.table)
        table.bulk_mutate_rows([RowMutationEntry(b"no-delimiter", [SetCell("o", b"Total", b"1", 1000)]),
                                RowMutationEntry(b"user1#odd", [SetCell("o", b"Total", b"not a number", 1000)])])
    create_table(client_for(moto_server.endpoint), unique_name, "pk", "sk")
    result = rollback(spec, RollbackRequest(), RunOptions(run_dir=str(tmp_path / "rb")))
    assert not result.ok
    c = result.counters
    # the row without the key's delimiter cannot be decoded; the other decodes to a number DynamoDB refuses
    assert (c["rows_read"], c["rows_decoded"], c["rows_dead_lettered"]) == (7, 6, 1)
    assert (c["items_decoded"], c["items_written"], c["items_refused"]) == (6, 5, 1)
    with open(result.dead_letter) as handle:
        decode, write = sorted((json.loads(line) for line in handle), key=lambda letter: letter["stage"])
    assert (decode["stage"], decode["row_key"], decode["item"]) == ("decode", "no-delimiter", None)
    assert "cannot be decoded" in decode["reason"] and "no entity writes [('o', b'Total')]" in decode["reason"]
    assert write["stage"] == "write" and write["item"]["Total"] == {"N": "not a number"}
    assert write["row_key"] == "user1#odd" and "DynamoDB refused the item" in write["reason"]
    assert stat.S_IMODE(os.stat(result.dead_letter).st_mode) == 0o600
    assert any("2 dead letters" in problem for problem in result.problems)
    assert table_items(moto_server.endpoint, unique_name) == canonical(items)


def test_a_one_process_rollback_checks_writes_and_compares_through_one_dynamodb_client(
        bigtable_env, moto_server, unique_name, tmp_path, monkeypatch):
    """The table's check, the writers and the comparison share the client the sink made (each client is a botocore
    session built anew), and the rollback is whole and equal through it."""
    from ddb2bt.pipelines.dynamodb import sink

    made = []

    def counted(settings):
        made.append(settings)
        return real(settings)

    real = sink.make_client
    monkeypatch.setattr(sink, "make_client", counted)
    spec = make_spec(unique_name, moto_server.endpoint)
    items = rich_items(30)
    write_bigtable(spec, items)
    create_table(client_for(moto_server.endpoint), unique_name, "pk", "sk")
    result = rollback(spec, RollbackRequest(processes=1, writers=3), RunOptions(run_dir=str(tmp_path / "rb")))
    assert result.ok and result.counters["items_written"] == 30 and (result.compared, result.differences) == (30, 0)
    assert len(made) == 1
    assert table_items(moto_server.endpoint, unique_name) == canonical(items)


def test_refusals_write_nothing(bigtable_env, moto_server, unique_name, tmp_path):
    spec = make_spec(unique_name, moto_server.endpoint)
    write_bigtable(spec, rich_items(3))
    with pytest.raises(RollbackError, match="does not exist"):
        rollback(spec, RollbackRequest(to_table=unique_name + "none"), RunOptions(run_dir=str(tmp_path / "a")))
    client = client_for(moto_server.endpoint)
    create_table(client, unique_name + "k", "id")
    with pytest.raises(RollbackError, match="keyed by id"):
        rollback(spec, RollbackRequest(to_table=unique_name + "k"), RunOptions(run_dir=str(tmp_path / "b")))
    create_table(client, unique_name, "pk", "sk")
    assert rollback(spec, RollbackRequest(), RunOptions(run_dir=str(tmp_path / "c"))).ok
    with pytest.raises(RollbackError, match="already holds a rollback"):
        rollback(spec, RollbackRequest(), RunOptions(run_dir=str(tmp_path / "c")))
    with pytest.raises(RollbackError, match="another since"):
        rollback(spec, RollbackRequest(since_us=5), RunOptions(run_dir=str(tmp_path / "c"), resume=True))
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def spec_file(tmp_path: Path, spec: MappingSpec) -> Path:
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec.model_dump(mode="json", by_alias=True, exclude_none=True)))
    return path


def run_cli(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([str(DDB2BT), *args], env=env, capture_output=True, text=True, timeout=600)


def start_killable(moto_server, bigtable_env, unique_name: str, tmp_path: Path):
    """1,500 rich items in Bigtable and `ddb2bt rollback` of them started in two worker processes, slowed by a write
    budget, and let run until 300 items are committed: (items, spec file, CLI arguments, env, run folder, process)."""
    items = rich_items(1500)
    spec = make_spec(unique_name, moto_server.endpoint)
    write_bigtable(spec, items)
    client = client_for(moto_server.endpoint)
    for suffix in ("killed", "whole"):
        create_table(client, unique_name + suffix, "pk", "sk")
    path = spec_file(tmp_path, spec)
    env = {**os.environ, **local_servers.emulator_env(bigtable_env.endpoint)}
    run_dir = tmp_path / "killed"
    args = [str(path), "--to-table", unique_name + "killed", "--run-dir", str(run_dir), "--processes", "2",
            "--wcu", "400", "--writers", "2"]
    process = subprocess.Popen([str(DDB2BT), "rollback", *args], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, start_new_session=True)
    checkpoint = run_dir / "checkpoint.json"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        if checkpoint.exists():
            if json.loads(checkpoint.read_text() or "{}").get("counters", {}).get("items_written", 0) >= 300:
                break
        time.sleep(0.05)
    assert process.poll() is None, process.communicate()
    return items, path, args, env, run_dir, process


def resume_and_compare(items: list[dict], path: Path, args: list[str], env: dict, run_dir: Path, moto_server,
                       unique_name: str, tmp_path: Path) -> None:
    """What the kill left: some ranges unfinished, fewer items; then --resume, and the table equals an uninterrupted
    rollback's and the source items, item by item."""
    saved = json.loads((run_dir / "checkpoint.json").read_text())
    key_ranges = json.loads((run_dir / "rollback.json").read_text())["ranges"]
    assert 300 <= saved["counters"]["items_written"] < 1500 and len(saved["done"]) < len(key_ranges)
    assert len(table_items(moto_server.endpoint, unique_name + "killed")) < 1500

    resumed = run_cli("rollback", *args[:-4], "--resume", "--format", "json", env=env)
    assert resumed.returncode == 0, resumed.stderr + resumed.stdout
    report = json.loads(resumed.stdout)
    assert report["resumed"] and report["counters"]["items_written"] == 1500
    assert report["counters"]["rows_read"] == 1500 and report["differences"] == 0 and report["compared"] == 1500

    whole = run_cli("rollback", str(path), "--to-table", unique_name + "whole", "--run-dir", str(tmp_path / "whole"),
                    env=env)
    assert whole.returncode == 0, whole.stderr + whole.stdout
    assert "rollback OK" in whole.stdout
    killed = table_items(moto_server.endpoint, unique_name + "killed")
    assert killed == table_items(moto_server.endpoint, unique_name + "whole") == canonical(items)


def descendants(pid: int) -> list[int]:
    found = []
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        found += [int(child), *descendants(int(child))]
    return found


def running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def all_end(pids: list[int], seconds: float = 30) -> bool:
    deadline = time.monotonic() + seconds
    while any(running(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_kill_9_and_resume_equals_an_uninterrupted_rollback(bigtable_env, moto_server, unique_name, tmp_path):
    items, path, args, env, run_dir, process = start_killable(moto_server, bigtable_env, unique_name, tmp_path)
    workers = [pid for pid in descendants(process.pid) if b"forkserver" in Path(f"/proc/{pid}/cmdline").read_bytes()]
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert len(workers) == 3  # the forkserver and the two workers forked from it
    assert all_end(workers)  # they end with their parent: no orphan goes on writing
    resume_and_compare(items, path, args, env, run_dir, moto_server, unique_name, tmp_path)


def test_a_killed_worker_process_stops_the_run_and_resume_equals_an_uninterrupted_rollback(
        bigtable_env, moto_server, unique_name, tmp_path):
    items, path, args, env, run_dir, process = start_killable(moto_server, bigtable_env, unique_name, tmp_path)
    server = next(pid for pid in descendants(process.pid)
                  if b"forkserver" in Path(f"/proc/{pid}/cmdline").read_bytes())
    workers = descendants(server)
    os.kill(workers[0], signal.SIGKILL)
    out, err = (part.decode() for part in process.communicate(timeout=120))
    assert process.returncode == 3, err + out
    assert f"rollback worker process {workers[0]} ended (killed by SIGKILL)" in err and "--resume" in err
    assert all_end([server, *workers])
    resume_and_compare(items, path, args, env, run_dir, moto_server, unique_name, tmp_path)


def test_ctrl_c_stops_every_worker_process_and_resume_equals_an_uninterrupted_rollback(
        bigtable_env, moto_server, unique_name, tmp_path):
    items, path, args, env, run_dir, process = start_killable(moto_server, bigtable_env, unique_name, tmp_path)
    helpers = descendants(process.pid)  # the forkserver, its two workers, multiprocessing's resource tracker
    os.killpg(process.pid, signal.SIGINT)  # what a terminal sends to the whole foreground group
    out, err = (part.decode() for part in process.communicate(timeout=120))
    assert process.returncode == 130, err + out
    assert "rollback stopped" in err and "--resume" in err and "Traceback" not in err
    assert len(helpers) >= 3 and all_end(helpers)
    resume_and_compare(items, path, args, env, run_dir, moto_server, unique_name, tmp_path)


def test_since_carries_the_applications_writes_after_cutover_back(bigtable_env, moto_server, unique_name, tmp_path):
    from google.cloud.bigtable.data import BigtableDataClient, RowMutationEntry, SetCell
    from google.cloud.bigtable.data.mutations import DeleteAllFromRow

    items, client, spec = migrated(moto_server.endpoint, unique_name, 20, tmp_path)
    time.sleep(0.01)
    cutover_us = int(time.time() * 1_000_000)
    time.sleep(0.01)
    # After cutover the application writes Bigtable directly, as the spec lays items out: a new item, a changed
    # total (a second version of one cell), and a row deleted (which --since cannot see).
    new = {"pk": {"S": "user9"}, "sk": {"S": "order#new"}, "Total": {"N": "12345678901234567890123456789012345678"},
           "Name": {"S": "after cutover"}, "Doc": {"M": {"x": {"L": [{"N": "1"}]}}}}
    now_ms = int(time.time() * 1000)
    # the application stamps its cells with the time it writes them, not the backfill's migration_time
    row = compile_spec(spec.model_copy(update={"migration_time": None}), now_ms=now_ms).map_item(new)
    assert isinstance(row, MappedRow)
    changed_key = "user1#order#00001".encode()
    gone_key = "user2#order#00002".encode()
    with BigtableDataClient(project=spec.target.project) as bt:
        table = bt.get_table(spec.target.instance, spec.target.table)
        table.bulk_mutate_rows([to_mutation_entry(row),
                                RowMutationEntry(changed_key, [SetCell("o", b"Total", b"42.5", now_ms * 1000)]),
                                RowMutationEntry(gone_key, [DeleteAllFromRow()])])
    since = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(cutover_us // 1_000_000)) + f".{cutover_us % 1_000_000:06d}Z"
    create_table(client, unique_name + "since", "pk", "sk")
    env = {**os.environ, **local_servers.emulator_env(bigtable_env.endpoint)}
    done = run_cli("rollback", str(spec_file(tmp_path, spec)), "--to-table", unique_name + "since", "--since", since,
                   "--run-dir", str(tmp_path / "since"), env=env)
    assert done.returncode == 0, done.stderr + done.stdout
    assert "rows deleted in Bigtable since then" in done.stdout
    back = table_items(moto_server.endpoint, unique_name + "since")
    changed = dict(items[1], Total={"N": "42.5"})
    assert back == canonical([new, changed])

    # and into the source table itself: the two writes land, the other items stay as they were
    done = run_cli("rollback", str(spec_file(tmp_path, spec)), "--since", since, "--run-dir", str(tmp_path / "src"),
                   env=env)
    assert done.returncode == 0, done.stderr + done.stdout
    expected = canonical(items) | canonical([new, changed])
    assert table_items(moto_server.endpoint, unique_name) == expected


def test_throttling_and_unprocessed_items_are_retried_within_the_budget():
    """BatchWriteItem answers as DynamoDB gives them (botocore's own parser, through its Stubber)."""
    import botocore.session
    from botocore.stub import Stubber

    from ddb2bt.pipelines.dynamodb.sink import DynamoWriter, WriteBudget, WriteStalled

    client = botocore.session.get_session().create_client("dynamodb", region_name="us-east-1")
    items = [{"pk": {"S": f"p{i}"}, "sk": {"S": "s"}} for i in range(3)]
    puts = [{"PutRequest": {"Item": item}} for item in items]
    with Stubber(client) as stub:
        stub.add_client_error("batch_write_item", "ProvisionedThroughputExceededException", http_status_code=400)
        stub.add_response("batch_write_item", {"UnprocessedItems": {"T": puts[1:]}}, {"RequestItems": {"T": puts}})
        stub.add_response("batch_write_item", {"UnprocessedItems": {}}, {"RequestItems": {"T": puts[1:]}})
        writer = DynamoWriter(client, "T", ("pk", "sk"), WriteBudget(None))
        assert writer.write(items) == []
        stub.assert_no_pending_responses()
    assert writer.retries == 2
    with Stubber(client) as stub:  # a request DynamoDB refuses names no item: each is tried alone
        stub.add_client_error("batch_write_item", "ValidationException", "Item size has exceeded the maximum")
        stub.add_response("put_item", {})
        stub.add_client_error("put_item", "ValidationException", "Item size has exceeded the maximum allowed size")
        stub.add_response("put_item", {})
        refused = DynamoWriter(client, "T", ("pk", "sk"), WriteBudget(None)).write(items)
    assert [(item["pk"]["S"], "maximum allowed size" in reason) for item, reason in refused] == [("p1", True)]
    with Stubber(client) as stub:
        for _ in range(50):
            stub.add_client_error("batch_write_item", "ThrottlingException", http_status_code=400)
        with pytest.raises(WriteStalled, match="--resume"):
            DynamoWriter(client, "T", ("pk", "sk"), WriteBudget(None), retry_seconds=0.2).write(items)
    budget = WriteBudget(100)
    began = time.monotonic()
    for _ in range(6):
        budget.take(50)
    assert time.monotonic() - began >= 1.5  # 300 units at 100 a second, the first second's worth at once


def test_dynamodb_gone_mid_rollback_is_one_line_with_what_is_kept_and_the_command(bigtable_env, moto_server,
                                                                                   unique_name, tmp_path, monkeypatch):
    """DynamoDB (or Bigtable) dying under the write phase: one ServiceError line (exit 3) that says the ranges are
    committed up to their last row written and gives the command that goes on (it was the failure's line alone)."""
    from botocore.exceptions import EndpointConnectionError

    from ddb2bt.app import rollback as use_case
    from ddb2bt.mappers.errors import ServiceError

    _items, client, spec = migrated(moto_server.endpoint, unique_name, 10, tmp_path)
    create_table(client, unique_name + "back", "pk", "sk")

    def gone(*args, **kwargs):
        raise EndpointConnectionError(endpoint_url="http://127.0.0.1:9")

    monkeypatch.setattr(use_case, "_write_ranges", gone)
    run_dir = tmp_path / "rb"
    with pytest.raises(ServiceError) as stopped:
        rollback(spec, RollbackRequest(to_table=unique_name + "back"), RunOptions(run_dir=str(run_dir)))
    assert stopped.value.one_line() == (
        'Could not connect to the endpoint URL: "http://127.0.0.1:9"; check --endpoint-url, your network, and that '
        "DynamoDB is reachable; the rollback stopped with every range committed up to its last row written; once it "
        f"is back, continue it with: ddb2bt rollback SPEC --resume --run-dir {run_dir} --to-table {unique_name}back")


def test_the_go_on_line_of_a_stopped_rollback_is_the_command_that_finishes_it(bigtable_env, moto_server, unique_name,
                                                                             tmp_path, monkeypatch):
    """It said "continue it with the same command and --resume --run-dir R": no command to paste, and the same
    command without --since, --start or --end is refused by the resume (another rollback)."""
    import shlex

    from botocore.exceptions import EndpointConnectionError
    from typer.testing import CliRunner

    from ddb2bt.app import rollback as use_case
    from ddb2bt.cli.main import app

    items, client, spec = migrated(moto_server.endpoint, unique_name, 10, tmp_path)
    create_table(client, unique_name + "back", "pk", "sk")
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps(spec.model_dump(mode="json", by_alias=True)))
    real = use_case._write_ranges

    def gone(*args, **kwargs):
        raise EndpointConnectionError(endpoint_url="http://127.0.0.1:9")

    monkeypatch.setattr(use_case, "_write_ranges", gone)
    run_dir = tmp_path / "r b"  # quoted in the line
    stopped = CliRunner().invoke(app, ["rollback", str(spec_path), "--to-table", unique_name + "back", "--since",
                                       "2000-01-01T00:00:00.000001Z", "--start", "a", "--writers", "2",
                                       "--processes", "1", "--aws-region", "us-east-1", "--run-dir", str(run_dir)])
    assert stopped.exit_code == 3, stopped.output
    command = shlex.split(stopped.stderr.splitlines()[-1].split("continue it with: ", 1)[1])
    assert command[:3] == ["ddb2bt", "rollback", str(spec_path)], command
    assert "--aws-region" in command and "--since" in command and str(run_dir) in command, command
    monkeypatch.setattr(use_case, "_write_ranges", real)
    again = CliRunner().invoke(app, command[1:])
    assert again.exit_code == 0, again.output
    assert "(resumed)" in again.stdout, again.stdout
    assert table_items(moto_server.endpoint, unique_name + "back") == canonical(items)


def test_a_lossy_spec_is_not_rolled_back_over_the_source_table_without_accept_loss(bigtable_env, moto_server,
                                                                                      unique_name, tmp_path):
    """Each put replaces the whole item: a spec that drops `Img` rolled back into the table the items came from would
    remove Img from every live item. Refused (nothing written) unless --accept-loss; --to-table is never refused."""
    items, client, spec = migrated(moto_server.endpoint, unique_name, 6, tmp_path)
    entity = spec.entities[0].model_copy(update={"drop": ["Img"]})
    lossy = spec.model_copy(update={"entities": [entity]})
    path = spec_file(tmp_path, lossy)
    env = {**os.environ, **local_servers.emulator_env(bigtable_env.endpoint)}
    refused = run_cli("rollback", str(path), "--run-dir", str(tmp_path / "refused"), env=env)
    assert refused.returncode == 2, refused.stderr + refused.stdout
    assert "order.Img" in refused.stderr and "--accept-loss" in refused.stderr and "--to-table" in refused.stderr
    assert "Traceback" not in refused.stderr and not (tmp_path / "refused").exists()
    assert table_items(moto_server.endpoint, unique_name) == canonical(items)  # Img still on every item

    create_table(client, unique_name + "new", "pk", "sk")
    elsewhere = run_cli("rollback", str(path), "--to-table", unique_name + "new", "--run-dir", str(tmp_path / "new"),
                        env=env)
    assert elsewhere.returncode == 0, elsewhere.stderr + elsewhere.stdout
    assert table_items(moto_server.endpoint, unique_name + "new") == canonical(
        [{name: value for name, value in item.items() if name != "Img"} for item in items])

    accepted = run_cli("rollback", str(path), "--accept-loss", "--run-dir", str(tmp_path / "accepted"), env=env)
    assert accepted.returncode == 0, accepted.stderr + accepted.stdout
    assert "cannot be rebuilt" in accepted.stdout
    assert table_items(moto_server.endpoint, unique_name) == table_items(moto_server.endpoint, unique_name + "new")


def test_cells_a_gc_rule_condemns_are_not_read_back_though_bigtable_still_returns_them(
        bigtable_env, moto_server, unique_name, tmp_path):
    """GC runs late (Cloud Bigtable: up to a week; the emulator: once started, or never), so a read returns cells a
    family's rule already condemns. A spec reading every version (a list column here) then read a max_versions 1
    column's older value beside its newer one ("items of one row cannot be told apart": the row dead-lettered),
    and an item held in a max_age family past its age was put back. Rollback reads as after GC."""
    from google.cloud.bigtable.data import BigtableDataClient, ReadRowsQuery, RowMutationEntry, SetCell

    spec = MappingSpec.model_validate({
        "source": {"table": unique_name, "endpoint_url": moto_server.endpoint, "region": "us-east-1",
                   "partition_key": "pk", "sort_key": "sk"},
        "target": {"table": unique_name, "families": {"o": {"max_versions": 1}, "l": {},
                                                      "t": {"max_age": "1d", "max_versions": 2}}},
        "migration_time": "2024-01-01T00:00:00Z",
        "entities": [
            {"name": "order", "match": {"sk": {"prefix": "order#"}}, "row_key": "{pk}#{sk}",
             "columns": [{"attribute": "Total", "family": "o", "encoding": "decimal"},
                         {"attribute": "Lines", "family": "l", "layout": "list", "encoding": "utf8"}]},
            {"name": "session", "match": {"sk": {"prefix": "session#"}}, "row_key": "{pk}#{sk}",
             "columns": [{"attribute": "Token", "family": "t", "encoding": "utf8"}]}],
    })  # fmt: skip
    now_ms = int(time.time() * 1000)
    order = {"pk": {"S": "u1"}, "sk": {"S": "order#1"}, "Total": {"N": "12345678901234567890123456789012345678"},
             "Lines": {"L": [{"S": "a"}, {"S": "b"}]}}
    session = {"pk": {"S": "u1"}, "sk": {"S": "session#1"}, "Token": {"S": "live"}}
    write_bigtable(spec, [order])
    compiled = compile_spec(spec.model_copy(update={"migration_time": None}), now_ms=now_ms)  # written now
    live = compiled.map_item(session)
    assert isinstance(live, MappedRow)
    migrated_us = 1_704_067_200_000_000  # the migration_time: the order's Total cell
    with BigtableDataClient(project=spec.target.project) as bt:
        table = bt.get_table(spec.target.instance, spec.target.table)
        table.bulk_mutate_rows([
            to_mutation_entry(live),
            # an older Total than the one migrated, in a family that keeps one version: condemned, not yet collected
            RowMutationEntry(b"u1#order#1", [SetCell("o", b"Total", b"1", migrated_us - 1000)]),
            # a session whose only cell is older than its family's max_age: expired, not yet collected
            RowMutationEntry(b"u1#session#old", [SetCell("t", b"Token", b"expired", (now_ms - 3 * 86_400_000) * 1000)]),
        ])  # fmt: skip
        cells = {row.row_key: len(row.cells) for row in table.read_rows(ReadRowsQuery())}
    if cells.get(b"u1#session#old") is None or cells[b"u1#order#1"] < 4:
        pytest.skip("this emulator already collected the condemned cells: nothing to read past")
    client = client_for(moto_server.endpoint)
    create_table(client, unique_name + "back", "pk", "sk")
    result = rollback(spec, RollbackRequest(to_table=unique_name + "back"), RunOptions(run_dir=str(tmp_path / "rb")))
    assert result.dead_letter_lines == 0, Path(result.dead_letter).read_text()
    assert table_items(moto_server.endpoint, unique_name + "back") == canonical([order, session])

def test_attributes_kept_as_text_alone_come_back_in_their_own_type(bigtable_env, moto_server, unique_name, tmp_path):
    """A single-table design that keeps an order number (N) and a flag (BOOL) only in a qualifier, and a placed-at
    epoch (N) only as the cells' timestamp: Bigtable holds their text, no type. The rollback learns their types from a
    sample of the source, so they come back as N and BOOL — not as S, which its own comparison (decoding with the
    same types) would have called equal. `--type` still decides; an attribute of two types in the sample is written
    as S, and the notes say so."""
    client = boto3.client("dynamodb", endpoint_url=moto_server.endpoint, region_name="us-east-1")
    back = unique_name + "back"
    for name in (unique_name, back):
        create_table(client, name, "pk", "sk")
    items = [{"pk": {"S": "u1"}, "sk": {"S": f"ORDER#{i}"}, "order_no": {"N": str(100 + i)}, "flag": {"BOOL": i != 1},
              "placed": {"N": str(1_700_000_000 + i)}, "total": {"S": f"{i}.50"}} for i in range(3)]
    put_items(client, unique_name, items)
    spec = MappingSpec.model_validate({
        "source": {"table": unique_name, "endpoint_url": moto_server.endpoint, "region": "us-east-1"},
        "target": {"table": unique_name, "families": {"o": {"max_versions": 1}}},
        "entities": [{"name": "order", "row_key": "{pk}#{sk}", "timestamp": {"attribute": "placed", "format": "epoch_s"},
                      "columns": [{"attribute": "total", "family": "o", "qualifier": "total#{order_no}#{flag}",
                                   "encoding": "utf8"}]}],
    })  # fmt: skip
    assert migrate(spec, RunOptions(run_dir=str(tmp_path / "run"), total_segments=1)).ok

    result = rollback(spec, RollbackRequest(to_table=back, processes=1), RunOptions(run_dir=str(tmp_path / "rb")))
    assert result.ok and result.compared == 3, result.problems
    assert table_items(moto_server.endpoint, back) == canonical(items)
    assert "flag BOOL, order_no N, placed N" in " ".join(result.notes)

    # --type decides over the sample; an attribute of two types in the sample is written as S, said in the notes
    client.put_item(TableName=unique_name, Item={**items[0], "sk": {"S": "ORDER#9"}, "order_no": {"S": "A-9"}})
    again = rollback(spec, RollbackRequest(to_table=back, processes=1, types={"flag": "S"}),
                     RunOptions(run_dir=str(tmp_path / "rb2")))  # fmt: skip
    assert table_items(moto_server.endpoint, back) == canonical(
        [{**item, "flag": {"S": str(item["flag"]["BOOL"]).lower()}, "order_no": {"S": item["order_no"]["N"]}}
         for item in items])  # fmt: skip
    assert "order_no (N/S): written as S; give its type with --type" in " ".join(again.notes)
