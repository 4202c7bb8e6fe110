"""docs/CUTOVER.md's worked example, command for command, in subprocesses with exactly the environment
`eval "$(ddb2bt local up)"` gives (the fixtures' servers; no other flag): full-export backfill → live changes →
catch-up → more changes → tail → `cutover-status` READY; then Bigtable equals the spec applied to the table."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path

from ddb2bt.app.local import LocalState, Server
from ddb2bt.mappers.loader import load_spec
from ddb2bt.pipelines.cutover.workload import dynamodb, table_items

from .cells import expected_cells, read_cells
from tests.installed import DDB2BT

DOC = Path(__file__).resolve().parents[2] / "docs" / "CUTOVER.md"


def documented_commands() -> list[list[str]]:
    """The worked example's commands after `local up`, as the doc writes them (comments cut, `$W` expanded)."""
    text = DOC.read_text(encoding="utf-8").split("## Worked example", 1)[1]
    block = text.split("```bash", 1)[1].split("```", 1)[0]
    variables: dict[str, str] = {}
    commands = []
    for line in block.splitlines():
        line = line.split("  #", 1)[0].strip()
        if not line or line.startswith("eval "):
            continue
        assignment = re.fullmatch(r'(\w+)="([^"]*)"', line)
        if assignment:
            variables[assignment[1]] = assignment[2]
            continue
        for name, value in variables.items():
            line = line.replace(f"${name}", value)
        commands.append(shlex.split(line))
    return commands


def test_walkthrough(bigtable_env, moto_server, unique_name, tmp_path):
    state = LocalState(str(tmp_path / "local"), os.getpid(), Server("moto_server", moto_server.endpoint, 0),
                       Server("bigtable-emulator", bigtable_env.endpoint, 0), ())
    env = {**os.environ, **state.environ()}
    for name in ("AWS_PROFILE", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"):
        env.pop(name, None)
    outputs = []
    commands = documented_commands()
    assert [command[:3] for command in commands][:3] == [["ddb2bt", "local", "walkthrough"]] * 3
    for command in commands:
        assert command[0] == "ddb2bt", command  # only installed commands
        command = [arg.replace("posts", unique_name) if arg == "posts" else arg for arg in command]
        done = subprocess.run([DDB2BT, *command[1:]],
                              env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
        # cutover-status exits 1 while dead letters are unresolved (NOT READY)
        assert done.returncode == 0 or command[1] == "cutover-status", (command, done.stdout + done.stderr)
        outputs.append((command, done.stdout))

    created = next(out for command, out in outputs if command[1:3] == ["local", "walkthrough"] and "create" in command)
    assert f"table {unique_name}: 60 items" in created  # the doc's count: every key once
    assert "run OK" in next(out for command, out in outputs if command[1] == "migrate")
    assert "timeline applied up to" in next(out for command, out in outputs if command[1] == "catch-up")
    assert "tail stopped" in next(out for command, out in outputs if command[1] == "tail")
    status = outputs[-1][1]
    assert outputs[-1][0][1] == "cutover-status"
    # Some posts are unmappable on purpose (no Title): their changes are dead letters, so NOT READY for them alone.
    assert "READY to cut over" in status or "NOT READY: dead letters:" in status, status
    assert "FAIL stream" not in status and "FAIL parity" not in status and "FAIL tail" not in status, status
    assert [line.split()[0] for line in status.splitlines()[:3]] == ["backfill", "catch-up", "tail"]

    folder = tmp_path / "out" / "cutover"
    loaded = load_spec(str(folder / "spec.json"))
    assert loaded.source.endpoint_url is None  # the spec reads the shell's endpoint, as any user's would
    assert read_cells(loaded.target) == expected_cells(loaded, table_items(dynamodb(moto_server.endpoint), unique_name))
    found = json.loads(subprocess.run(
        [DDB2BT, "cutover-status", "--run-dir",
         str(folder / "run"), "--format", "json", "--lag-threshold", "300"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300).stdout)
    unresolved = sum(found["unresolved_dead_letters"].values())
    assert found["ready"] == (unresolved == 0) and found["parity"]["holds"] and found["parity"]["random_keys"] > 0


def test_walkthrough_refuses_a_dynamodb_that_is_not_local(tmp_path):
    """Without `local up` the shell's DynamoDB is AWS's: one line, exit 2, nothing created or written."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("AWS_ENDPOINT_URL")}
    env.update(AWS_REGION="us-east-1", HTTPS_PROXY="http://127.0.0.1:9")  # were it to call AWS, it could not
    done = subprocess.run([DDB2BT, "local", "walkthrough",
                           "create", "--dir", "out/cutover"], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "dynamodb.us-east-1.amazonaws.com, not a local one" in done.stderr
    assert 'eval "$(ddb2bt local up)"' in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not (tmp_path / "out").exists()
