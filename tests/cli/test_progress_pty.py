"""`ddb2bt migrate` on a pseudo-terminal, as a person runs it: it asks, the bar moves, Ctrl-C stops it cleanly, and the
printed resume command finishes the table.

The Bigtable emulator sits behind a proxy that delays each request, and the writer sends at most
20 mutations at a time, so a 1,200-item table takes a few seconds: long enough to watch and to
interrupt between segments.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from ddb2bt.mappers.loader import load_spec
from ddb2bt.pipelines.local import servers as local_servers
from ddb2bt.pipelines.bigtable.read import read_cells
from ddb2bt.pipelines.bigtable.sink import admin_table, existing_families
from ddb2bt.pipelines.dynamodb.client import ClientSettings, create_table, make_client, put_items
from ddb2bt.pipelines.local.proxy import DelayProxy, serving
from tests.installed import DDB2BT

from .terminal import Terminal

pytestmark = pytest.mark.servers

ITEMS, SEGMENTS = 1200, 12
"""A page per segment: a worker's lane of 6 (multi_processing) still has segments to map once its first is stored
(its done marker comes out of the writer a page later, that page mapped meanwhile); with 3 per lane it could have
none left, and the Ctrl-C then stopped nothing."""
SLOW = ("--flush-limit-mutation-count", "20", "--flow-control-max-mutation-count", "20")
SPEC = """\
source: {{table: {table}, endpoint_url: "{endpoint}", region: us-east-1, total_segments: {segments}}}
target: {{table: {table}, families: {{f: {{max_versions: 1}}}}}}
migration_time: "2024-01-01T00:00:00Z"
entities:
  - name: item
    row_key: "{{pk}}"
    columns: [{{attribute: v, family: f}}, {{attribute: n, family: f}}]
"""


@pytest.fixture
def slow_run(moto_server, bigtable_emulator, unique_name, tmp_path):
    """(spec, environment) of a 1,200-item table whose writes go through a 50 ms delay."""
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "BIGTABLE_", "GOOGLE_"))},
           **local_servers.FAKE_AWS_ENV, "TERM": "xterm-256color", "COLUMNS": "160", "LINES": "40"}
    client = make_client(ClientSettings(endpoint_url=moto_server.endpoint))
    create_table(client, unique_name, "pk")
    put_items(client, unique_name, ({"pk": {"S": f"k{i:05d}"}, "v": {"S": f"value {i}"}, "n": {"N": str(i)}}
                                    for i in range(ITEMS)))
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.format(table=unique_name, endpoint=moto_server.endpoint, segments=SEGMENTS))
    host, port = bigtable_emulator.endpoint.split(":")
    with serving(DelayProxy(host, int(port), delay=0.05)) as proxy_port:
        yield spec, {**env, "BIGTABLE_EMULATOR_HOST": f"127.0.0.1:{proxy_port}"}


def stored_rows(spec: Path, emulator: str, monkeypatch) -> int:
    monkeypatch.setenv("BIGTABLE_EMULATOR_HOST", emulator)
    return sum(1 for _ in read_cells(load_spec(spec).target))


MULTI = ("--direct_running_mode", "multi_processing", "--direct_num_workers", "2")


@pytest.mark.parametrize("mode", [pytest.param((), id="in_memory"),
                                  pytest.param(MULTI, id="multi_processing", marks=pytest.mark.slow)])
def test_prompt_progress_ctrl_c_and_resume(slow_run, bigtable_emulator, tmp_path, monkeypatch, mode):
    """In memory, and with worker processes, which a Ctrl-C sent to the whole process group would kill."""
    spec, env = slow_run
    run_dir = tmp_path / "run"
    term = Terminal([DDB2BT, "migrate", str(spec), "--run-dir", str(run_dir), *SLOW, *mode], env, tmp_path)
    term.expect(r"Start the migration\? \[y/N\]")
    term.send(b"y\r")

    term.expect(rf"[1-9]/{SEGMENTS} segments stored")  # the bar shows stored segments, rows, items moving; then Ctrl-C
    term.send(b"\x03")
    code = term.wait()
    text = term.text()
    assert code == 130, text
    read = {int(n.replace(",", "")) for n in re.findall(r"([\d,]+)/1,200 items read", text)}
    assert len(read - {0}) >= 2, f"the bar did not move: {sorted(read)}"
    assert re.search(r"\d+% ETA \d:\d\d:\d\d", text)
    assert "Traceback" not in text and "cannot schedule new futures" not in text and "Unflushed" not in text
    errors = [line for line in text.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and errors[0].startswith("error: interrupted: "), text
    stored = int(re.search(rf"interrupted: (\d+) of {SEGMENTS} scan segments stored", errors[0]).group(1))
    assert 1 <= stored < SEGMENTS
    assert f"segments: {stored} of {SEGMENTS} stored" in text and re.search(r"read [\d,]+ items so far", text)

    resume = shlex.split(errors[0].split("resume with: ", 1)[1])
    assert resume[:3] == ["ddb2bt", "migrate", str(spec)] and resume[-3:] == ["--resume", "--run-dir", str(run_dir)]
    assert all(flag in resume for flag in (*SLOW, *mode))  # the same options again
    if mode:
        assert (run_dir / "workers.log").stat().st_mode & 0o777 == 0o600  # the workers' own output, not on the bar
    finished = subprocess.run([DDB2BT, *resume[1:], "--yes"], env=env, cwd=tmp_path, capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=180)
    assert finished.returncode == 0, finished.stderr
    assert f"resume: {stored} of {SEGMENTS} segments already stored" in finished.stderr
    assert "run OK" in finished.stdout and f"segments: {SEGMENTS} of {SEGMENTS} stored" in finished.stdout
    assert stored_rows(spec, bigtable_emulator.endpoint, monkeypatch) == ITEMS


def test_answering_no_writes_nothing(slow_run, bigtable_emulator, tmp_path, monkeypatch):
    spec, env = slow_run
    term = Terminal([DDB2BT, "migrate", str(spec), "--run-dir", str(tmp_path / "run")], env, tmp_path)
    term.expect(r"\+ table \w+: does not exist; migrate creates it")
    term.expect(r"Start the migration\? \[y/N\]")
    term.send(b"n\r")
    assert term.wait() == 1
    assert "not started: nothing was written" in term.text()
    monkeypatch.setenv("BIGTABLE_EMULATOR_HOST", bigtable_emulator.endpoint)
    assert existing_families(admin_table(load_spec(spec).target)) is None and not (tmp_path / "run").exists()
