"""`ddb2bt local up|status|down`: real servers in the background, the seed tables, the shell's exports; nothing left."""

from __future__ import annotations

import os
import signal
import subprocess

import pytest

from ddb2bt.app import local
from ddb2bt.app.seeds import SEEDED, seed_spec
from ddb2bt.mappers.loader import load_spec
from ddb2bt.pipelines.local.servers import port_open
from ddb2bt.templates import catalog
from tests.golden import seed_items
from tests.pipelines.cells import expected_cells, read_cells

pytestmark = pytest.mark.servers


def shell(lines: str, env: dict[str, str]) -> dict[str, str]:
    """The environment a POSIX shell with ``env`` has after `eval "$(…)"` of ``lines``."""
    done = subprocess.run(["sh", "-c", 'eval "$DDB2BT_TEST_LINES"; unset DDB2BT_TEST_LINES; env -0'],
                          env={**env, "DDB2BT_TEST_LINES": lines}, capture_output=True, check=True)
    return dict(entry.split("=", 1) for entry in done.stdout.decode().split("\0") if "=" in entry)


def apply_exports(stdout: str, monkeypatch) -> dict[str, str]:
    """Do what `eval "$(ddb2bt local up)"` does in a shell (run in one); the variables its `export` lines set."""
    after = shell(stdout, dict(os.environ))
    for name in set(os.environ) | set(after):
        if name not in after:
            monkeypatch.delenv(name)
        elif os.environ.get(name) != after[name]:
            monkeypatch.setenv(name, after[name])
    names = [line.split(" ", 1)[1].split("=", 1)[0] for line in stdout.splitlines() if line.startswith("export ")]
    return {name: after[name] for name in names}


def pids(state: local.LocalState) -> list[int]:
    return [state.supervisor_pid, state.dynamodb.pid, state.bigtable.pid]


def gone(state: local.LocalState) -> bool:
    ports = [int(state.dynamodb.endpoint.rsplit(":", 1)[1]), int(state.bigtable.endpoint.rsplit(":", 1)[1])]
    return not any(local.alive(pid) for pid in pids(state)) and not any(port_open("127.0.0.1", p) for p in ports)


@pytest.fixture
def folder(tmp_path):
    path = tmp_path / "local"
    yield path
    local.down(path)  # whatever the test did, nothing stays running


def test_up_migrate_down(folder, invoke, monkeypatch, tmp_path):
    monkeypatch.setenv("AWS_PROFILE", "prod")  # the user's own (no such profile here): `up` ignores it, `down` gives it back
    before = dict(os.environ)
    up = invoke("local", "up", "--dir", folder)
    assert up.exit_code == 0, up.output
    exported = apply_exports(up.stdout, monkeypatch)
    assert "AWS_PROFILE" not in os.environ
    assert "cbt -project ddb2bt-local -instance ddb2bt-local ls" in up.stderr
    assert set(exported) == {"BIGTABLE_EMULATOR_HOST", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_DYNAMODB_STREAMS",
                             "AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION",
                             "AWS_REGION"}
    assert "unset AWS_IGNORE_CONFIGURED_ENDPOINT_URLS" in up.stdout.splitlines()
    assert "table Videos: 9 items" in up.stderr and "ddb2bt init --template single-table" in up.stderr
    state = local.status(folder)
    assert state is not None and all(local.alive(pid) for pid in pids(state))
    assert {t.table for t in state.tables} == {"ProductCatalog", "Videos", "Invoices"}

    again = invoke("local", "up", "--dir", folder)  # safe to re-run: nothing new starts
    assert again.exit_code == 0 and "already up" in again.stderr and again.stdout == up.stdout
    status = invoke("local", "status", "--dir", folder)
    assert status.exit_code == 0 and status.stdout == up.stdout

    # a seed spec, written by `init` and migrated with nothing but the exported variables
    spec = tmp_path / "videos.yaml"
    assert invoke("init", "--template", "single-table", "-o", spec).exit_code == 0
    migrated = invoke("migrate", spec, "--run-dir", tmp_path / "run", "--yes")
    assert migrated.exit_code == 0, migrated.output
    assert "read 9 items: 9 written" in migrated.stdout and f"Bigtable emulator at {exported['BIGTABLE_EMULATOR_HOST']}" \
        in migrated.stderr
    loaded = load_spec(spec)
    template = catalog.get("single-table")
    assert read_cells(loaded.target) == expected_cells(loaded, list(seed_items(template.seed)))

    down = invoke("local", "down", "--dir", folder)
    assert down.exit_code == 0, down.output
    restored = shell(down.stdout, dict(os.environ))
    assert {name: restored.get(name) for name in [*exported, "AWS_PROFILE"]} == \
        {name: before.get(name) for name in [*exported, "AWS_PROFILE"]}
    assert not [name for name in restored if name.startswith("DDB2BT_LOCAL_SAVED")]
    assert gone(state), "a process or a port is left"
    assert invoke("local", "status", "--dir", folder).exit_code == 1
    assert "nothing to stop" in invoke("local", "down", "--dir", folder).stderr


def test_a_killed_supervisor_leaves_nothing_behind(folder):
    first = local.up(folder).state
    os.kill(first.supervisor_pid, signal.SIGKILL)  # its servers stay up, orphaned
    assert local._wait_gone(first.supervisor_pid, 10) and local.alive(first.dynamodb.pid)
    assert local.status(folder) is None

    second = local.up(folder)  # cleans up the orphans, then starts afresh
    assert not second.already_up and set(second.cleaned) == {first.dynamodb.pid, first.bigtable.pid}
    assert gone(first)
    assert {t.table for t in second.state.tables} == {seed_spec(t).source.table for t in SEEDED}
    local.down(folder)
    assert gone(second.state)


def test_a_dead_server_is_not_up(folder, invoke):
    """A server killed under a live supervisor (left a zombie until reaped) makes `status` say down, naming it."""
    first = local.up(folder).state
    os.kill(first.dynamodb.pid, signal.SIGKILL)
    assert local._wait_gone(first.dynamodb.pid, 10)
    status = invoke("local", "status", "--dir", folder)
    assert status.exit_code == 1 and status.stdout == ""
    assert f"down: {first.dynamodb.name} (pid {first.dynamodb.pid}) died" in status.stderr

    again = invoke("local", "up", "--dir", folder)  # restarts rather than saying "already up"
    assert again.exit_code == 0, again.output
    assert "already up" not in again.stderr and f"{first.dynamodb.name} (pid {first.dynamodb.pid}) died" in again.stderr
    assert gone(first)
    assert invoke("local", "status", "--dir", folder).exit_code == 0


def test_unknown_dynamodb_server_is_a_usage_error(invoke, tmp_path):
    result = invoke("local", "up", "--dir", tmp_path, "--dynamodb", "dynamodb-local")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: Invalid value for '--dynamodb': 'dynamodb-local' is not one of 'moto', "
                                    "'dynalite'.")
    assert not (tmp_path / "state.json").exists()


def test_tail_after_local_up_needs_no_other_flag(folder, tmp_path, monkeypatch):
    """The shell of `eval "$(ddb2bt local up)"` and nothing else: init, migrate, then `tail SPEC --run-dir R` follows
    the seed table's stream on moto (AWS_ENDPOINT_URL=http://127.0.0.1:9, the tests' net, is not in that shell)."""
    import subprocess
    import sys
    import time
    from pathlib import Path

    import boto3

    ddb2bt = str(Path(sys.executable).parent / "ddb2bt")
    shell = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    up = subprocess.run([ddb2bt, "local", "up", "--dir", str(folder)], env=shell, capture_output=True, text=True,
                        timeout=180)
    assert up.returncode == 0, up.stderr
    exported = apply_exports(up.stdout, monkeypatch)  # this test's own reads and writes go where the shell's do
    assert exported["AWS_ENDPOINT_URL_DYNAMODB_STREAMS"] == exported["AWS_ENDPOINT_URL_DYNAMODB"] == \
        exported["AWS_ENDPOINT_URL"]
    shell.update(exported)

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([ddb2bt, *args], env=shell, capture_output=True, text=True, timeout=300, cwd=tmp_path)

    assert run("init", "--template", "single-table", "-o", "videos.yaml").returncode == 0
    migrated = run("migrate", "videos.yaml", "--run-dir", "run", "--yes")
    assert migrated.returncode == 0, migrated.stderr
    spec = load_spec(tmp_path / "videos.yaml")
    client = boto3.client("dynamodb")  # the exported variables only
    table = spec.source.table

    def items() -> list[dict]:
        return [item for page in client.get_paginator("scan").paginate(TableName=table) for item in page["Items"]]

    before = items()
    key_names = [name for name in (spec.source.partition_key, spec.source.sort_key) if name]
    client.delete_item(TableName=table, Key={name: before[0][name] for name in key_names})
    changed = dict(before[1])
    for name, value in changed.items():
        if name not in key_names and "S" in value:
            changed[name] = {"S": value["S"] + " (changed)"}
    client.put_item(TableName=table, Item=changed)
    want = expected_cells(spec, items())
    assert read_cells(spec.target) != want

    tail = subprocess.Popen([ddb2bt, "tail", "videos.yaml", "--run-dir", "run"], env=shell, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while read_cells(spec.target) != want and tail.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
        assert tail.poll() is None, tail.communicate()
        assert read_cells(spec.target) == want
    finally:
        tail.send_signal(signal.SIGINT)  # Ctrl-C: how a tail is stopped
        out, err = tail.communicate(timeout=60)
    assert tail.returncode == 130 and "Traceback" not in err, (out, err)  # 130: interrupted


@pytest.mark.parametrize("state", ["5", "[1]", "{"])
def test_a_state_file_that_is_not_ours_is_named_with_what_to_do(invoke, tmp_path, state):
    """A --dir whose state.json holds something else (5 said "unexpected TypeError ... (a bug)"): one line naming the
    file and what to do, exit 2, for status and down alike."""
    (tmp_path / "state.json").write_text(state)
    for command in ("status", "down"):
        result = invoke("local", command, "--dir", tmp_path)
        assert result.exit_code == 2, result.output
        assert result.stderr.strip().splitlines()[-1].startswith(f"error: {tmp_path / 'state.json'} is not a "
                                                                 "local-mode state file"), result.stderr
        assert "a bug" not in result.output


def test_a_dir_under_a_file_is_named_with_what_to_do(invoke, tmp_path):
    """--dir below a file: it said only "error: .../state.json: Not a directory"."""
    (tmp_path / "file").write_text("")
    for command in ("up", "status", "down"):
        result = invoke("local", command, "--dir", tmp_path / "file" / "local")
        assert result.exit_code == 2, result.output
        assert result.stderr.strip().splitlines()[-1] == (f"error: --dir {tmp_path / 'file' / 'local'} cannot be "
                                                          "used (Not a directory); choose a --dir this user can write")
