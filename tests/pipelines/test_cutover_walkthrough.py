"""docs/CUTOVER.md's local walkthrough, command for command, on the embedded servers: full-export backfill → live
changes → catch-up → more changes → tail → `cutover-status` READY; then Bigtable equals the spec applied to the table."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import boto3

from ddb2bt.mappers.loader import load_spec
from ddb2bt.pipelines import local_servers

from .cells import expected_cells, read_cells
from .streams import table_items


def test_walkthrough(bigtable_env, moto_server, unique_name, tmp_path):
    env = {**os.environ, **local_servers.emulator_env(bigtable_env.endpoint)}
    folder = str(tmp_path / "cutover")
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

    def step(name: str) -> str:
        done = subprocess.run([sys.executable, "-m", "tests.pipelines.cutover_walkthrough", name, "--endpoint",
                               moto_server.endpoint, "--table", unique_name, "--dir", folder],
                              env=env, cwd=here, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def ddb2bt(*args: str, code: int | None = 0) -> str:
        done = subprocess.run([sys.executable, "-c", "from ddb2bt.cli.main import run; run()", *args],
                              env=env, capture_output=True, text=True, timeout=300)
        assert code is None or done.returncode == code, done.stdout + done.stderr
        return done.stdout

    spec, run = f"{folder}/spec.json", f"{folder}/run"
    step("create")
    step("full-export")
    step("changes")  # the table changes after the export's time: the backfill writes the export's state
    assert "run OK" in ddb2bt("migrate", spec, "--run-dir", run, "--yes")  # --yes: no terminal to confirm on
    step("changes")
    step("incremental-export")
    assert "timeline applied up to" in ddb2bt("catch-up", spec, "--run-dir", run, "--export", f"{folder}/inc")
    step("changes")
    assert "tail stopped" in ddb2bt("tail", spec, "--run-dir", run, "--until-idle", "2", "--poll-seconds", "0.2")
    # Some posts are unmappable on purpose (no Title): their changes are dead letters, so NOT READY for them alone.
    status = ddb2bt("cutover-status", "--run-dir", run, "--lag-threshold", "300", code=None)
    assert "READY to cut over" in status or "NOT READY: dead letters:" in status, status
    assert "FAIL stream" not in status and "FAIL parity" not in status and "FAIL tail" not in status, status
    assert [line.split()[0] for line in status.splitlines()[:3]] == ["backfill", "catch-up", "tail"]

    loaded = load_spec(spec)
    client = boto3.client("dynamodb", endpoint_url=moto_server.endpoint, region_name="us-east-1")
    assert read_cells(loaded.target) == expected_cells(loaded, table_items(client, unique_name))
    found = json.loads(ddb2bt("cutover-status", "--run-dir", run, "--format", "json", "--lag-threshold", "300",
                              code=None))
    unresolved = sum(found["unresolved_dead_letters"].values())
    assert found["ready"] == (unresolved == 0) and found["parity"]["holds"] and found["parity"]["random_keys"] > 0
