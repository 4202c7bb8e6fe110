"""A validation killed with SIGKILL mid-run, then resumed: done segments are not read again, and nothing found in
them is lost or counted twice. Also: --sample picks items across the whole table, not its first pages."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import boto3
import yaml

from ddb2bt.app.migrate import migrate
from ddb2bt.app.options import RunOptions
from ddb2bt.mappers.spec import MappingSpec
from ddb2bt.pipelines.run import checkpoint as ckpt
from ddb2bt.pipelines.local import servers as local_servers
from ddb2bt.pipelines.dynamodb.scan import scan_segment
from ddb2bt.pipelines.sources import random_sample

from .tables import KILL_ITEMS, KILL_SEGMENTS, kill_spec
from tests.installed import DDB2BT

ITEMS, SEGMENTS = KILL_ITEMS, KILL_SEGMENTS  # the same 12,000 items in dynalite as the migration's kill test

PARTITIONS = 97  # kill_source's items: pk p{i % 97}, sk i{i:06d}
TS = 1_704_067_200_000_000
TAMPERED = range(0, ITEMS, ITEMS // 20)  # 20 items spread over the key space


def make_spec(endpoint: str, table: str, indexed: bool = False) -> MappingSpec:
    """With ``indexed``, a GSI on `n` (every item has it) as index rows in a table of its own."""
    indexes = [{"name": "by_n", "type": "global", "partition_key": "n", "projection": {"type": "KEYS_ONLY"},
                "family": "i", "target": {"table": f"{table}.by_n"}}] if indexed else []
    return kill_spec(table, endpoint, migration_time="2024-01-01T00:00:00Z", indexes=indexes)


def validate(spec_file: Path, run_dir: Path, *args: str, env: dict) -> subprocess.Popen:
    """`ddb2bt validate` in its own process group, so a kill reaches the runner's workers too."""
    return subprocess.Popen([DDB2BT, "validate", str(spec_file), "--run-dir", str(run_dir), "--format", "json", *args],
                            env=env, cwd=spec_file.parent, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def test_kill_9_then_resume_reads_only_unfinished_segments(bigtable_env, kill_source, tmp_path):
    """With the target scan over the main table and an index table: the row keys (index rows too) that the killed
    attempt's finished segments mapped to are kept, so only the stray rows are extra rows."""
    from google.cloud.bigtable.data import BigtableDataClient, SetCell

    endpoint, table, items = kill_source
    spec = make_spec(endpoint, table, indexed=True)
    assert migrate(spec, RunOptions(run_dir=str(tmp_path / "migrated"))).ok
    with BigtableDataClient(project=spec.target.project) as client:
        target = client.get_table(spec.target.instance, spec.target.table)
        for i in TAMPERED:
            target.mutate_row(f"p{i % PARTITIONS}#i{i:06d}".encode(), [SetCell("d", b"n", b'{"N":"-1"}', TS)])
        target.mutate_row(b"stray#row", [SetCell("d", b"n", b'{"N":"1"}', TS)])
        client.get_table(spec.target.instance, f"{table}.by_n").mutate_row(b"stray-index-row",
                                                                          [SetCell("i", b"pk", b'{"S":"p1"}', TS)])
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(yaml.safe_dump(spec.model_dump(mode="json", by_alias=True, exclude_none=True)))
    run_dir = tmp_path / "validation"
    env = {**os.environ, **local_servers.emulator_env(bigtable_env.endpoint)}

    killed = validate(spec_file, run_dir, "--target-scan", env=env)
    deadline = time.monotonic() + 120
    while len(ckpt.completed_segments(str(run_dir))) < 3 if (run_dir / "segments").exists() else True:
        assert killed.poll() is None, f"the validation ended before it was killed: {killed.communicate()}"
        assert time.monotonic() < deadline, "no 3 segments done in 120 s"
        time.sleep(0.02)
    os.killpg(killed.pid, signal.SIGKILL)
    killed.wait()
    done = ckpt.completed_segments(str(run_dir))
    assert 3 <= len(done) < SEGMENTS

    resumed = validate(spec_file, run_dir, "--resume", "--target-scan", env=env)
    out, err = resumed.communicate(timeout=300)
    assert resumed.returncode == 1, err  # differences were found
    result = json.loads(out)
    client = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1")
    left_over = sum(1 for s in range(SEGMENTS) if s not in done for _ in scan_segment(client, table, s, SEGMENTS))
    assert result["counters"]["items_read"] == left_over < ITEMS * 0.8  # done segments were not read again
    assert result["totals"]["items_read"] == result["totals"]["items_compared"] == ITEMS  # the whole table, once
    assert result["totals"]["index_rows_compared"] == ITEMS
    assert ckpt.completed_segments(str(run_dir)) == set(range(SEGMENTS))
    # every tampered item found once: those in segments the killed run finished, and the others
    assert result["counts"] == {"different_value": len(TAMPERED), "different_attribute": len(TAMPERED), "extra_row": 2}
    lines = [json.loads(line) for line in (run_dir / "differences.jsonl").read_text().splitlines()]
    assert sorted((line["row_key"], line.get("index")) for line in lines if line["kind"] == "extra_row") == [
        ("stray#row", None), ("stray-index-row", "by_n")]
    assert result["problems"] == []


def test_a_sample_is_spread_over_the_whole_table(kill_source):
    endpoint, table, _items = kill_source
    spec = make_spec(endpoint, table)
    sample = random_sample(spec.source, 100, item_count=ITEMS, seed=7)
    assert len(sample) == 100
    client = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1")
    first_pages = [item["sk"]["S"] for item in scan_segment(client, table, limit=100)][:100]
    partitions = {item["pk"]["S"] for item in sample}
    assert len(partitions) >= 8  # the first 100 items of a scan come from one or two partitions
    assert len({item["sk"]["S"] for item in sample} & set(first_pages)) < 50
    again = random_sample(spec.source, 100, item_count=ITEMS, seed=8)
    assert {item["sk"]["S"] for item in again} != {item["sk"]["S"] for item in sample}
