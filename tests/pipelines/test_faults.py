"""Faults against the real local servers: a killed run resumes, bad inputs become dead letters,
dead or misbehaving dependencies end the run quickly and loudly. Bigtable is checked cell by cell.
"""

from __future__ import annotations

import errno
import json
import os
import shlex
import signal
import subprocess
import threading
import time
import uuid
from pathlib import Path

import boto3
import pytest
import yaml

import apache_beam as beam

from ddb2bt.mappers.errors import ServiceError, UsageError, recover
from ddb2bt.mappers.results import Cell, MappedRow
from ddb2bt.mappers.spec import ColumnSpec, MappingSpec, TargetSpec
from ddb2bt.pipelines.run import checkpoint as ckpt
from ddb2bt.pipelines.local import servers as local_servers
from ddb2bt.pipelines.bigtable.sink import WriteToBigtable, ensure_table
from ddb2bt.pipelines.run.dead_letters import TooManyDeadLetters
from ddb2bt.pipelines.dynamodb.client import ClientSettings, create_table, put_items
from ddb2bt.pipelines.dynamodb.export import iter_export_items, read_manifest
from ddb2bt.pipelines.dynamodb.scan import RetryPolicy, ScanFailedError, scan_client, scan_pages, scan_segment
from ddb2bt.pipelines.local.proxy import HttpFaultProxy, serving
from ddb2bt.pipelines.pipeline import build_pipeline, query_counters
from ddb2bt.pipelines.run.local_runner import new_pipeline

from tests.installed import DDB2BT

from .cells import expected_cells, read_cells
from .export_fixtures import make_items, write_export
from .tables import KILL_ITEMS, KILL_SEGMENTS, kill_spec, migrate, numbers, run_through

def kill_when_done(proc: subprocess.Popen, run_dir: Path, segments: int, timeout: float = 120) -> frozenset[int]:
    """kill -9 the run (its whole process group) once `segments` are marked done; the markers then."""
    wait_for_segments(proc, run_dir, segments, timeout)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    return ckpt.completed_segments(str(run_dir))


def _stored(run_dir: Path) -> int:
    """Segments marked done so far; 0 while the run creates its checkpoint (read half-written, it is no JSON yet)."""
    try:
        return ckpt.segment_progress(str(run_dir))[0]
    except ckpt.ResumeError:
        return 0


def wait_for_segments(proc: subprocess.Popen, run_dir: Path, segments: int, timeout: float = 120) -> None:
    """Return once the run has `segments` marked done (fail if it ends or takes longer)."""
    deadline = time.monotonic() + timeout
    while _stored(run_dir) < segments:
        if proc.poll() is not None:
            pytest.fail(f"the run ended before {segments} segments were marked done:\n{proc.stdout.read()}")
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            pytest.fail(f"{segments} segments not marked done after {timeout}s")
        time.sleep(0.02)


@pytest.mark.slow
@pytest.mark.parametrize("beam_args, migration_time", [
    (("--direct_running_mode=in_memory",), "2024-01-01T00:00:00Z"),
    (("--direct_running_mode=multi_threading", "--direct_num_workers=2"), "2024-01-01T00:00:00Z"),
    (("--direct_running_mode=multi_processing", "--direct_num_workers=2"), "2024-01-01T00:00:00Z"),
    (("--direct_running_mode=in_memory",), None),  # cells take the run's "now": resume must keep the first one
], ids=["in_memory", "multi_threading", "multi_processing", "in_memory-no-migration_time"])
def test_kill_9_at_40_percent_then_resume_rereads_only_unfinished_segments(
        bigtable_env, kill_source, tmp_path, beam_args, migration_time):
    endpoint, table, items = kill_source
    target_table = f"b{uuid.uuid4().hex[:12]}"
    spec = kill_spec(table, endpoint, **({"migration_time": migration_time} if migration_time else {}))
    spec = spec.model_copy(update={"target": spec.target.model_copy(update={"table": target_table})})
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(yaml.safe_dump(spec.model_dump(mode="json", by_alias=True, exclude_none=True)))
    run_dir = tmp_path / "run"
    env = {**os.environ, **local_servers.emulator_env(bigtable_env.endpoint)}

    killed = migrate(spec_file, run_dir, "--", *beam_args, env=env)
    done = kill_when_done(killed, run_dir, segments=4)
    assert 4 <= len(done) < KILL_SEGMENTS

    resumed = migrate(spec_file, run_dir, "--resume", "--", *beam_args, env=env)
    output = resumed.communicate(timeout=300)[0]
    assert resumed.returncode == 0, output
    (read,) = numbers(r"read (\d+) items", output)
    client = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1")
    left_over = sum(1 for s in range(KILL_SEGMENTS) if s not in done for _ in scan_segment(client, table, s,
                                                                                              KILL_SEGMENTS))
    assert read == left_over < len(items) * 0.7  # only the segments not marked done were read again
    assert ckpt.completed_segments(str(run_dir)) == set(range(KILL_SEGMENTS))
    # the table is what one uninterrupted run writes: same values, timestamps, and one version per cell (without a
    # migration_time, at the first attempt's "now", which the checkpoint keeps)
    now_ms = None if migration_time else json.loads((run_dir / ckpt.CHECKPOINT_FILE).read_text())["now_ms"]
    assert read_cells(spec.target) == expected_cells(spec, items, now_ms=now_ms)


EXPORT_FILES = 12


@pytest.mark.slow
def test_kill_9_of_an_export_run_then_resume_rereads_only_unfinished_files_at_the_first_now(bigtable_env, tmp_path):
    """An export run keeps a checkpoint too: its "now" (no migration_time here, so every cell's timestamp) and its
    data files stored. The resumed table is what one uninterrupted run writes, one version per cell."""
    export_dir = write_export(tmp_path / "export", make_items(6_000, padding=300), files=EXPORT_FILES)
    items = list(iter_export_items(export_dir))
    spec = MappingSpec.model_validate({
        "source": {"partition_key": "pk", "sort_key": "sk", "export": {"path": export_dir}},
        "target": {"table": f"e{uuid.uuid4().hex[:12]}", "families": {"r": {}, "t": {"max_versions": 1}, "a": {}}},
        "entities": [{"name": "all", "row_key": {"template": "{pk}#{sk|sortable_number}", "on_delimiter": "escape"},
                      "columns": [{"attribute": "tags", "family": "t", "layout": "set", "encoding": "utf8"},
                                  {"attribute": "address", "family": "a", "layout": "map", "encoding": "ddb_json"}],
                      "rest": {"family": "r", "encoding": "ddb_json"}}],
    })
    spec_file, run_dir = tmp_path / "spec.yaml", tmp_path / "run"
    spec_file.write_text(yaml.safe_dump(spec.model_dump(mode="json", by_alias=True, exclude_none=True)))
    env = {**os.environ, **local_servers.emulator_env(bigtable_env.endpoint)}

    done = kill_when_done(migrate(spec_file, run_dir, env=env), run_dir, segments=3)
    assert 3 <= len(done) < EXPORT_FILES
    first_now = json.loads((run_dir / ckpt.CHECKPOINT_FILE).read_text())["now_ms"]
    assert first_now

    resumed = migrate(spec_file, run_dir, "--resume", env=env)
    output = resumed.communicate(timeout=300)[0]
    assert resumed.returncode == 0, output
    assert f"resume: {len(done)} of {EXPORT_FILES} export data files already stored" in output, output
    left_over = sum(f.item_count for number, f in enumerate(read_manifest(export_dir).files) if number not in done)
    assert numbers(r"read (\d+) items", output)[0] == left_over < len(items)  # only the files not stored
    assert ckpt.completed_segments(str(run_dir)) == set(range(EXPORT_FILES))
    assert json.loads((run_dir / ckpt.CHECKPOINT_FILE).read_text())["now_ms"] == first_now
    assert read_cells(spec.target) == expected_cells(spec, items, now_ms=first_now)


@pytest.mark.slow
def test_bigtable_dying_mid_run_ends_the_run_within_two_minutes(kill_source, tmp_path, monkeypatch):
    endpoint, table, _items = kill_source
    spec = kill_spec(table, endpoint, migration_time="2024-01-01T00:00:00Z")
    run_dir, outcome = str(tmp_path / "run"), {}

    def run() -> None:
        p = new_pipeline()
        build_pipeline(p, spec, dead_letter=str(tmp_path / "dead.jsonl"), run_dir=run_dir,
                       total_segments=KILL_SEGMENTS, now_ms=0)
        try:
            p.run().wait_until_finish()
        except Exception as err:  # noqa: BLE001 - what the run ended with is the point
            outcome["error"] = err

    with local_servers.bigtable_emulator() as emulator:  # a server of its own, to kill
        monkeypatch.setenv("BIGTABLE_EMULATOR_HOST", emulator.endpoint)
        ensure_table(spec.target)
        ckpt.Checkpoint.start(run_dir, ckpt.spec_hash(spec), KILL_SEGMENTS, table, resume=False)
        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        deadline = time.monotonic() + 120
        while ckpt.segment_progress(run_dir)[0] < 2 and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert thread.is_alive(), f"the run ended before Bigtable was killed: {outcome}"
        os.killpg(emulator.pid, signal.SIGKILL)
        killed = time.monotonic()
        thread.join(180)
        took = time.monotonic() - killed
    assert not thread.is_alive() and took < 120, f"the run went on for {took:.0f}s after Bigtable died"
    error = recover(outcome["error"])
    assert isinstance(error, ServiceError) and "Bigtable" in str(error), outcome["error"]
    assert "resume the run (--resume)" in str(error)
    assert 2 <= len(ckpt.completed_segments(run_dir)) < KILL_SEGMENTS


def segment_sizes(client, table: str) -> dict[int, int]:
    """Items per scan segment."""
    return {s: sum(1 for _ in scan_segment(client, table, s, KILL_SEGMENTS)) for s in range(KILL_SEGMENTS)}


def assert_reconciled_failure(output: str, run_dir: Path, spec_file: Path, sizes: dict[int, int],
                              dependency: str) -> None:
    """The CLI's end after a dependency died: the reconciliation (consistent with the segments stored, given the
    items per segment), then one error line with the exact resume command; no traceback."""
    assert "Traceback" not in output and "[while running" not in output, output
    read, written, dead, skipped = numbers(
        r"read (\d+) items so far: (\d+) written \([\d,]+ cells, [\d,]+ bytes\), (\d+) dead-lettered, (\d+) skipped",
        output)
    stored = ckpt.completed_segments(str(run_dir))
    assert f"segments: {len(stored)} of {KILL_SEGMENTS} stored" in output, output
    assert 1 <= len(stored) < KILL_SEGMENTS
    assert (dead, skipped) == (0, 0)
    assert sum(sizes[s] for s in stored) <= written <= read <= sum(sizes.values())  # every stored segment's rows are among those written
    if read > written:
        assert f"{read - written} items read were not stored when the run ended" in output, output
    error = output.strip().splitlines()[-1]
    resume = shlex.join(["ddb2bt", "migrate", str(spec_file), "--resume", "--run-dir", str(run_dir), "--yes"])
    assert error.startswith("error: ") and dependency in error and error.endswith(f"; resume with: {resume}"), error


def kill_dependency_mid_run(spec: MappingSpec, tmp_path: Path, server: local_servers.LocalServer, emulator: str,
                            segments: int) -> tuple[int, str, float, Path, Path]:
    """`ddb2bt migrate` of ``spec`` to the emulator at ``emulator``; kill -9 ``server`` once `segments` are stored.
    (exit code, output, seconds from the kill to the end, spec file, run folder)."""
    spec_file, run_dir = tmp_path / "spec.yaml", tmp_path / "run"
    spec_file.write_text(yaml.safe_dump(spec.model_dump(mode="json", by_alias=True, exclude_none=True)))
    proc = migrate(spec_file, run_dir, env={**os.environ, **local_servers.emulator_env(emulator)})
    wait_for_segments(proc, run_dir, segments)
    os.killpg(server.pid, signal.SIGKILL)
    killed = time.monotonic()
    output = proc.communicate(timeout=300)[0]
    return proc.returncode, output, time.monotonic() - killed, spec_file, run_dir


@pytest.mark.slow
def test_bigtable_dying_mid_run_ends_the_cli_with_a_reconciliation_and_the_resume_command(kill_source, tmp_path):
    endpoint, table, _items = kill_source
    with local_servers.bigtable_emulator() as emulator:  # a server of its own, to kill
        code, output, took, spec_file, run_dir = kill_dependency_mid_run(
            kill_spec(table, endpoint, migration_time="2024-01-01T00:00:00Z"), tmp_path, emulator, emulator.endpoint, 2)
    assert code == 3 and took < 120, (took, output)
    sizes = segment_sizes(boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1"), table)
    assert_reconciled_failure(output, run_dir, spec_file, sizes, "Bigtable")


@pytest.mark.slow
def test_dynamodb_dying_mid_run_ends_the_cli_with_a_reconciliation_and_the_resume_command(bigtable_env, tmp_path):
    with local_servers.dynalite() as server:  # a server of its own, to kill
        table = f"k{uuid.uuid4().hex[:12]}"
        items = [{"pk": {"S": f"p{i % 97}"}, "sk": {"S": f"i{i:06d}"}, "text": {"S": "x" * 150}}
                 for i in range(KILL_ITEMS)]
        with local_servers.patched_environ(local_servers.FAKE_AWS_ENV):
            client = boto3.client("dynamodb", endpoint_url=server.endpoint, region_name="us-east-1")
            create_table(client, table, "pk", "sk")
            put_items(client, table, items)
            sizes = segment_sizes(client, table)
        code, output, took, spec_file, run_dir = kill_dependency_mid_run(
            kill_spec(table, server.endpoint, migration_time="2024-01-01T00:00:00Z"), tmp_path, server,
            bigtable_env.endpoint, 1)
    assert code == 3 and took < 120, (took, output)
    assert_reconciled_failure(output, run_dir, spec_file, sizes, "DynamoDB")


# --------------------------------------------------------------------------- a misbehaving source


def test_truncated_scan_bodies_are_retried_and_nothing_is_lost(bigtable_env, small_source, tmp_path):
    server, spec, items = small_source
    proxy = HttpFaultProxy(server.host, server.port, truncate=3)
    counters = run_through(proxy, spec, tmp_path)
    assert proxy.truncated == 3
    assert counters["items_read"] == counters["rows_written"] == len(items)
    assert counters["scan_retries"] >= 3
    assert read_cells(spec.target) == expected_cells(spec, items)


def test_a_cut_body_without_a_checksum_is_still_retried(bigtable_env, small_source, tmp_path):
    """botocore parses a body it cannot read into an empty result; the scan must not take it for an empty page."""
    server, spec, items = small_source
    proxy = HttpFaultProxy(server.host, server.port, truncate=2, drop_checksums=True)
    counters = run_through(proxy, spec, tmp_path)
    assert proxy.truncated == 2 and counters["scan_retries"] == 2
    assert read_cells(spec.target) == expected_cells(spec, items)


def test_throttled_pages_are_counted_and_the_table_is_complete(bigtable_env, small_source, tmp_path):
    server, spec, items = small_source
    proxy = HttpFaultProxy(server.host, server.port, throttle=4)
    counters = run_through(proxy, spec, tmp_path)
    assert proxy.throttled == 4
    assert counters["scan_retries"] == 4 and counters["throttled_pages"] >= 1
    assert read_cells(spec.target) == expected_cells(spec, items)


def test_a_source_that_throttles_every_request_fails_within_the_deadline(small_source, caplog):
    server, spec, _items = small_source
    proxy = HttpFaultProxy(server.host, server.port, throttle=10**9)
    with serving(proxy) as port, caplog.at_level("WARNING"):
        # The deadline is well above botocore's own first call (two attempts, its throttling backoff and adaptive
        # rate limiter: a few seconds on a loaded machine), so that retries of ours are reached and reported.
        retry = RetryPolicy(deadline=10, max_delay=0.5, botocore_attempts=2)
        client = scan_client(ClientSettings(region="us-east-1", endpoint_url=f"http://127.0.0.1:{port}"), retry)
        started = time.monotonic()
        with pytest.raises(ScanFailedError) as failure:
            next(scan_pages(client, spec.source.table, retry=retry))
        elapsed = time.monotonic() - started
    assert isinstance(failure.value, ServiceError) and elapsed < 25
    assert "ThrottlingException" in str(failure.value) and "--resume" in str(failure.value)
    retries = [r.getMessage() for r in caplog.records if "retry" in r.getMessage()]
    assert retries and all("ThrottlingException" in line and "giving up after 10s" in line for line in retries)
    assert proxy.throttled > len(retries)  # botocore's own attempts come first


# --------------------------------------------------------------------------- bad items at the sink


def test_an_out_of_range_timestamp_is_a_dead_letter_and_the_run_goes_on(bigtable_env, unique_name):
    target = TargetSpec(table=unique_name, families={"f": None})
    ensure_table(target)
    item = {"pk": {"S": "x"}, "ts": {"N": "99999999999999999999"}}
    rows = [(MappedRow(b"good%d" % i, (Cell("f", b"q", 1000 * (i + 1), b"v%d" % i),), "thing"), {"i": i})
            for i in range(5)]
    too_late = MappedRow(b"too-late", (Cell("f", b"q", 99999999999999999999 * 1000, b"v"),), "thing")
    too_early = MappedRow(b"too-early", (Cell("f", b"q", -(2**70), b"v"),), "thing")
    with new_pipeline() as p:
        letters = (p | beam.Create([rows[:3] + [(too_late, item)], [(too_early, item)] + rows[3:]])
                   | WriteToBigtable(target)
                   | beam.Map(lambda d: (d.stage, d.row_key, d.item == item, "ValueError" in d.reason)))
        beam.testing.util.assert_that(letters, beam.testing.util.equal_to(
            [("write", b"too-late", True, True), ("write", b"too-early", True, True)]))
    assert read_cells(target) == {b"good%d" % i: [("f", b"q", 1000 * (i + 1), b"v%d" % i)] for i in range(5)}


# --------------------------------------------------------------------------- counted retries, bounded calls


def test_throttled_pages_and_retries_reach_the_runs_reconciliation(bigtable_env, small_source, tmp_path):
    """`migrate` (the use case the CLI renders) reports the source's retries and throttled pages with its counters."""
    from ddb2bt.app.migrate import migrate as run_migration
    from ddb2bt.app.options import RunOptions

    server, spec, items = small_source
    proxy = HttpFaultProxy(server.host, server.port, throttle=3)
    with serving(proxy) as port:
        spec = spec.model_copy(update={"source": spec.source.model_copy(update={"endpoint_url": f"http://127.0.0.1:{port}"})})
        result = run_migration(spec, RunOptions(run_dir=str(tmp_path / "run")))
    assert result.ok, result.problems
    assert proxy.throttled == 3
    assert result.counters["scan_retries"] == 3 and result.counters["throttled_pages"] >= 1
    assert result.counters["rows_written"] == len(items) and result.counters["cells_overwritten"] == 0


def test_a_throttle_botocore_retried_and_absorbed_still_marks_the_page_throttled(small_source):
    """With several segments read at once, throttles spread over their requests and botocore's own attempts absorb
    each: the page is still counted as throttled (throttled_pages), not only as retried."""
    server, spec, items = small_source
    proxy = HttpFaultProxy(server.host, server.port, throttle=1)
    with serving(proxy) as port, local_servers.patched_environ(local_servers.FAKE_AWS_ENV):
        client = scan_client(ClientSettings(region="us-east-1", endpoint_url=f"http://127.0.0.1:{port}"))
        pages = list(scan_pages(client, spec.source.table))
        again = list(scan_pages(client, spec.source.table))  # no throttle left: nothing marked
    assert proxy.throttled == 1
    assert pages[0].throttled and pages[0].retries == 1  # botocore's one retry, no retry of ours
    assert sum(len(page.items) for page in pages) == len(items)
    assert not any(page.throttled or page.retries for page in again)


def test_bigtable_admin_calls_end_within_their_deadline_when_bigtable_is_dead_or_hung(monkeypatch):
    from ddb2bt.pipelines.bigtable.sink import ADMIN_DEADLINE
    from ddb2bt.pipelines.run.service_errors import as_ddb2bt_error

    assert ADMIN_DEADLINE <= 60
    target = TargetSpec(table="t", families={"f": None})
    with _silent_server() as hung:
        for endpoint in (f"127.0.0.1:{local_servers.free_port()}", hung):  # nobody listening; accepts, never answers
            monkeypatch.setenv("BIGTABLE_EMULATOR_HOST", endpoint)
            started = time.monotonic()
            with pytest.raises(Exception) as failure:
                ensure_table(target, deadline=3)
            assert time.monotonic() - started < 6, endpoint
            error = as_ddb2bt_error(failure.value)
            assert isinstance(error, ServiceError) and "unreachable or too slow" in str(error), failure.value


def test_dynamodb_calls_end_within_their_timeouts_when_the_server_hangs():
    from botocore.exceptions import ReadTimeoutError

    from ddb2bt.pipelines.dynamodb.client import make_client

    config = make_client(ClientSettings(region="us-east-1")).meta.config
    assert (config.connect_timeout, config.read_timeout) == (5.0, 20.0)
    assert config.retries == {"mode": "adaptive", "total_max_attempts": 5}  # a hung server: about two minutes at most
    with _silent_server() as hung:
        client = make_client(ClientSettings(region="us-east-1", endpoint_url=f"http://{hung}", read_timeout=0.5,
                                            connect_timeout=0.5, max_attempts=2))
        started = time.monotonic()
        with pytest.raises(ReadTimeoutError):
            client.describe_table(TableName="T")
    assert time.monotonic() - started < 5


class _silent_server:
    """A loopback TCP server that accepts connections and never answers (a hung dependency); `with` gives host:port."""

    def __enter__(self) -> str:
        import socket

        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", 0))
        self._socket.listen(64)
        self._held: list = []
        threading.Thread(target=self._accept, daemon=True).start()
        return "127.0.0.1:%d" % self._socket.getsockname()[1]

    def _accept(self) -> None:
        while True:
            try:
                self._held.append(self._socket.accept())
            except OSError:
                return

    def __exit__(self, *_: object) -> None:
        self._socket.close()
        for connection, _address in self._held:
            connection.close()


# --------------------------------------------------------------------------- a run that is mostly dead letters


def test_a_run_that_dead_letters_everything_stops_early_and_keeps_its_dead_letters(bigtable_env, kill_source, tmp_path):
    """--max-dead-letters (default 10%): a spec that maps nothing stops after the first pages, not after the table."""
    endpoint, table, items = kill_source
    spec = kill_spec(table, endpoint, migration_time="2024-01-01T00:00:00Z")
    entity = spec.entities[0].model_copy(update={"columns": [ColumnSpec(attribute="price", family="d", required=True)]})
    data = spec.model_copy(update={"entities": [entity]}).model_dump(mode="json", by_alias=True, exclude_none=True)
    data["target"]["table"] = f"b{uuid.uuid4().hex[:12]}"
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(yaml.safe_dump(data))
    run_dir = tmp_path / "run"
    env = {**os.environ, **local_servers.emulator_env(bigtable_env.endpoint)}

    output = migrate(spec_file, run_dir, env=env).communicate(timeout=300)[0]
    error = output.strip().splitlines()[-1]
    assert error.startswith("error: migration stopped:") and "more than --max-dead-letters 10% allows" in error, output
    assert "required attribute is missing" in error
    accept = shlex.join(["ddb2bt", "migrate", str(spec_file), "--resume", "--run-dir", str(run_dir), "--yes",
                         "--max-dead-letters", "100%"])
    assert error.endswith(f"resume with --max-dead-letters 100%: {accept}"), error  # the exact command, not SPEC
    assert "Traceback" not in output and "[while running" not in error, output  # one line, not Beam's log
    letters = (run_dir / "dead_letters.jsonl").read_text().splitlines()
    dead, read = numbers(r"stopped: (\d+) of (\d+) items read", error)
    assert len(letters) == dead and 1000 <= read < len(items) / 2  # stopped early, every dead letter so far kept
    assert (run_dir / "dead_letters.jsonl").stat().st_mode & 0o777 == 0o600

    accepted = migrate(spec_file, run_dir, "--resume", "--max-dead-letters", "100%", env=env)
    output = accepted.communicate(timeout=300)[0]
    assert accepted.returncode == 0, output
    assert len((run_dir / "dead_letters.jsonl").read_text().splitlines()) == len(items)


def test_a_small_run_over_the_limit_is_not_ok(bigtable_env, small_source, tmp_path):
    """Under 1,000 items a percentage is judged on the run's totals: 300 of 300 dead-lettered is no "run OK"."""
    from ddb2bt.app.migrate import migrate as run_migration
    from ddb2bt.app.options import RunOptions

    _server, spec, items = small_source
    entity = spec.entities[0].model_copy(update={"columns": [ColumnSpec(attribute="price", family="d", required=True)]})
    spec = spec.model_copy(update={"entities": [entity]})
    result = run_migration(spec, RunOptions(run_dir=str(tmp_path / "a")))
    assert result.counters["dead_lettered"] == len(items) and result.dead_letter_lines == len(items)
    assert result.problems == [f"{len(items)} of {len(items)} items read were dead-lettered (100%), more than "
                               "--max-dead-letters 10% allows: see the dead letters"]
    assert run_migration(spec, RunOptions(run_dir=str(tmp_path / "b"), max_dead_letters="100%")).ok
    # a count is judged as the dead letters come: the 300th stops the run, which ends FAILED with that error
    stopped = run_migration(spec, RunOptions(run_dir=str(tmp_path / "c"), max_dead_letters="299"))
    error = stopped.error
    assert stopped.state == "FAILED" and not stopped.ok and stopped.problems == [error.one_line()]
    assert isinstance(error, TooManyDeadLetters) and not isinstance(error, UsageError), error  # the run had started
    assert "300 items were dead-lettered, more than --max-dead-letters 299 allows" in str(error)
    assert stopped.counters["items_read"] == stopped.counters["dead_lettered"] == len(items)  # the live totals
    assert stopped.reasons["dead_lettered"] == {"cannot map (entity thing, attribute price)": len(items)}
    assert stopped.dead_letter_lines == len(items) and stopped.segments_done < 2  # the last one is not stored
    from ddb2bt.cli.commands.migrate import as_json, failure_line, render

    shown = as_json(stopped, "spec.yaml")
    assert shown["state"] == "FAILED" and not shown["ok"] and shown["counters"]["dead_lettered"] == len(items)
    assert shown["error"] == {"kind": "TooManyDeadLetters", "message": error.one_line(), "exit_code": 1}
    assert shown["dead_lettered_by_reason"] == {"cannot map (entity thing, attribute price)": len(items)}
    text = render(stopped, "spec.yaml")
    assert text[0] == f"read {len(items)} items so far: 0 written (0 cells, 0 bytes), {len(items)} dead-lettered, 0 skipped"
    assert f"dead-lettered {len(items)}: {len(items)} cannot map (entity thing, attribute price)" in text
    assert not any(line.startswith(("PROBLEM", "run OK", "run FAILED")) for line in text)  # the error line ends it
    accept = f"ddb2bt migrate spec.yaml --resume --run-dir {tmp_path / 'c'} --max-dead-letters 100%"
    assert stopped.resume_command("spec.yaml", accept_dead_letters=True) == accept  # in place of 299, not beside it
    assert failure_line(stopped, "spec.yaml") == f"{error.one_line()}: {accept}"  # what to do, the exact command
    assert len((tmp_path / "c" / "dead_letters.jsonl").read_text().splitlines()) == len(items)  # joined after the stop


def test_cells_a_later_item_overwrites_are_not_counted_as_written(bigtable_env, unique_name):
    """Two items folded onto one cell (same row, family, qualifier, timestamp): the table holds one, so does the count."""
    target = TargetSpec(table=unique_name, families={"f": None})
    ensure_table(target)
    first = MappedRow(b"order#1", (Cell("f", b"sku-9", 1000, b"1"), Cell("f", b"a", 1000, b"x")), "line")
    second = MappedRow(b"order#1", (Cell("f", b"sku-9", 1000, b"2"),), "line")
    other = MappedRow(b"order#2", (Cell("f", b"sku-9", 1000, b"3"),), "line")
    p = new_pipeline()
    _ = p | beam.Create([[(first, {}), (second, {}), (other, {})]]) | WriteToBigtable(target)
    result = p.run()
    result.wait_until_finish()
    counters = query_counters(result)
    table = read_cells(target)
    assert sum(len(cells) for cells in table.values()) == 3
    assert (counters["rows_written"], counters["cells_written"], counters["cells_overwritten"]) == (3, 3, 1)


def test_overwrites_across_write_batches_are_seen_for_the_last_rows_written(bigtable_env, unique_name):
    """A row whose folded items a batch boundary cuts (each element is its own write batch here) is remembered
    for the next batch; one written RECENT_ROWS rows earlier is not (migrate's count is bounded; validate's exact)."""
    from ddb2bt.pipelines.bigtable.sink import RECENT_ROWS, FlowControl

    target = TargetSpec(table=unique_name, families={"f": None})
    ensure_table(target)
    row = lambda key, qualifier: (MappedRow(key, (Cell("f", qualifier, 1000, key + qualifier),), "line"), {})  # noqa: E731
    far = [row(b"r%03d" % i, b"q") for i in range(RECENT_ROWS)]
    batches = [[row(b"order#1", b"sku-9"), row(b"order#1", b"sku-1")],
               [row(b"order#1", b"sku-9"), row(b"order#2", b"sku-9")],  # order#1's sku-9 again, one batch later
               [row(b"order#2", b"sku-9")], far,  # order#2's again; then RECENT_ROWS other rows
               [row(b"order#1", b"sku-1")]]  # order#1 is forgotten by now: this overwrite is not seen
    p = new_pipeline()
    _ = p | beam.Create(batches) | WriteToBigtable(target, FlowControl(max_pending_entries=1))
    result = p.run()
    result.wait_until_finish()
    counters = query_counters(result)
    assert sum(len(cells) for cells in read_cells(target).values()) == 3 + RECENT_ROWS
    assert (counters["rows_written"], counters["cells_overwritten"]) == (6 + RECENT_ROWS, 2)
    assert counters["cells_written"] == 3 + RECENT_ROWS + 1  # the one overwrite it could not see


def slow_run(bigtable_env, kill_source, tmp_path: Path) -> tuple[MappingSpec, list[dict], Path, dict[str, str]]:
    """The kill table to a table of its own, read at 60 RCU/s (~270 RCU in all: seconds long, so a fault lands
    mid-run): (spec, items, spec file, the CLI's environment)."""
    endpoint, table, items = kill_source
    spec = kill_spec(table, endpoint, migration_time="2024-01-01T00:00:00Z")
    spec = spec.model_copy(update={"target": spec.target.model_copy(update={"table": f"b{uuid.uuid4().hex[:12]}"}),
                                   "source": spec.source.model_copy(update={"on_demand_rcu": 120})})
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(yaml.safe_dump(spec.model_dump(mode="json", by_alias=True, exclude_none=True)))
    return spec, items, spec_file, {**os.environ, **local_servers.emulator_env(bigtable_env.endpoint)}


@pytest.mark.slow
@pytest.mark.parametrize("group, beam_args", [
    (False, ()),
    (True, ("--", "--direct_running_mode=multi_processing", "--direct_num_workers=2")),
], ids=["process-in_memory", "group-multi_processing"])
def test_sigterm_stops_a_run_like_ctrl_c_and_the_resume_command_completes_it(bigtable_env, kill_source, tmp_path,
                                                                             group, beam_args):
    """Kubernetes, Docker and Dataflow's launcher stop a process with SIGTERM (to it alone, not its group; `docker
    stop` of a shell's job or systemd's KillMode=control-group, to the whole group, worker processes too): the run
    stops after the batch in flight, reconciles, names the resume command; the resume completes the table exactly.
    The progress says SIGTERM came (it said "Ctrl-C again to quit now" to a process nobody can press Ctrl-C at)."""
    spec, items, spec_file, env = slow_run(bigtable_env, kill_source, tmp_path)
    run_dir = tmp_path / "run"

    stopped = migrate(spec_file, run_dir, *beam_args, env=env)
    wait_for_segments(stopped, run_dir, 2)
    (os.killpg if group else os.kill)(stopped.pid, signal.SIGTERM)
    output = ended(stopped, 120)
    assert stopped.returncode == 130, output
    assert "Traceback" not in output and "segments: " in output and "stored" in output, output
    assert "SIGTERM received: stopping after the batch in flight" in output and "Ctrl-C" not in output, output
    resume = shlex.join(["ddb2bt", "migrate", str(spec_file), *[arg for arg in beam_args if arg != "--"], "--resume",
                         "--run-dir", str(run_dir), "--yes"])
    error = output.strip().splitlines()[-1]
    assert error.startswith("error: interrupted: ") and error.endswith(f"resume with: {resume}"), error
    assert 2 <= numbers(r"error: interrupted: (\d+) of", error)[0] < KILL_SEGMENTS

    run_as_printed(resume, env, tmp_path)  # the exact command printed (Beam's options and all)
    assert ckpt.completed_segments(str(run_dir)) == set(range(KILL_SEGMENTS))
    assert read_cells(spec.target) == expected_cells(spec, items)  # one version per cell: nothing written twice


def ended(proc: subprocess.Popen, timeout: float) -> str:
    """The output of ``proc`` once it ended (its process group killed if it has not within ``timeout`` seconds)."""
    try:
        return proc.communicate(timeout=timeout)[0]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def run_as_printed(command: str, env: dict[str, str], cwd: Path) -> str:
    """Run ``command`` (`ddb2bt ...` as the CLI printed it) to its end; its output, once it ended with exit 0."""
    run = subprocess.Popen([DDB2BT, *shlex.split(command)[1:]], env=env, cwd=cwd, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, start_new_session=True)
    output = run.communicate(timeout=300)[0]
    assert run.returncode == 0, output
    return output


def worker_processes(group: int) -> list[int]:
    """The Beam SDK worker processes (``sdk_worker_main``, not the shells that started them) in process group
    ``group``."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            command = Path(f"/proc/{entry}/cmdline").read_bytes()
            if b"sdk_worker_main" in command and not command.startswith(b"/bin/sh") and os.getpgid(int(entry)) == group:
                found.append(int(entry))
        except (ValueError, OSError):
            continue
    return found


@pytest.mark.slow
def test_a_worker_process_killed_mid_run_ends_it_with_one_line_a_reconciliation_and_the_resume(
        bigtable_env, kill_source, tmp_path):
    """The out-of-memory killer takes one worker process of a multi-process run: Beam's runner waited for it forever
    (and printed its threads' tracebacks). Now the run ends within seconds, reconciled, with one line and the exact
    resume command (exit 3); the resume completes the table with one version per cell."""
    spec, items, spec_file, env = slow_run(bigtable_env, kill_source, tmp_path)
    run_dir = tmp_path / "run"
    beam_args = ("--", "--direct_running_mode=multi_processing", "--direct_num_workers=2")

    failed = migrate(spec_file, run_dir, *beam_args, env=env)
    wait_for_segments(failed, run_dir, 2)
    workers = worker_processes(failed.pid)
    assert len(workers) == 2, workers
    os.kill(workers[0], signal.SIGKILL)
    output = ended(failed, 60)
    assert failed.returncode == 3, output
    assert "Traceback" not in output and "segments: " in output, output
    resume = shlex.join(["ddb2bt", "migrate", str(spec_file), *beam_args[1:], "--resume", "--run-dir", str(run_dir),
                         "--yes"])
    error = output.strip().splitlines()[-1]
    assert error.startswith("error: a worker process of the run was killed by SIGKILL"), error
    assert f"see {run_dir / 'workers.log'}" in error and error.endswith(f"; resume with: {resume}"), error
    stored = ckpt.completed_segments(str(run_dir))
    assert f"segments: {len(stored)} of {KILL_SEGMENTS} stored" in output and 2 <= len(stored) < KILL_SEGMENTS

    run_as_printed(resume, env, tmp_path)
    assert ckpt.completed_segments(str(run_dir)) == set(range(KILL_SEGMENTS))
    assert read_cells(spec.target) == expected_cells(spec, items)


@pytest.fixture
def small_disk(tmp_path):
    """A 16 MiB tmpfs of its own (a disk this test may fill); skipped where this user cannot mount one."""
    mount = tmp_path / "disk"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount)], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(disk: Path) -> Path:
    """Fill ``disk`` up (as another process would); the file that did."""
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as handle:
        with pytest.raises(OSError) as full:
            while True:
                handle.write(b"\0" * 65536)
    assert full.value.errno == errno.ENOSPC
    return filler


@pytest.mark.slow
def test_a_run_folder_whose_disk_fills_up_mid_run_stops_reconciled_and_resumes_exactly(
        bigtable_env, kill_source, small_disk, tmp_path):
    """The checkpoint's writes fail (ENOSPC): the run stops with one line naming the folder and the resume command,
    no "a bug: please report it"; what it marked is true, so once there is room the resume completes the table with
    one version per cell."""
    spec, items, spec_file, env = slow_run(bigtable_env, kill_source, tmp_path)
    run_dir = small_disk / "run"

    failed = migrate(spec_file, run_dir, env=env)
    wait_for_segments(failed, run_dir, 2)
    filler = fill(small_disk)
    output = failed.communicate(timeout=120)[0]
    assert failed.returncode == 3, output
    assert "Traceback" not in output and "a bug" not in output and "segments: " in output, output
    resume = shlex.join(["ddb2bt", "migrate", str(spec_file), "--resume", "--run-dir", str(run_dir), "--yes"])
    error = output.strip().splitlines()[-1]
    assert error.startswith(f"error: the run folder {run_dir} cannot be written (No space left on device)"), error
    assert error.endswith(f"; resume with: {resume}"), error
    assert 2 <= len(ckpt.completed_segments(str(run_dir))) < KILL_SEGMENTS
    assert not list((run_dir / ckpt.SEGMENTS_DIR).glob("*.tmp"))  # no half-written savepoint left behind

    filler.unlink()
    resumed = migrate(spec_file, run_dir, "--resume", env=env)
    output = resumed.communicate(timeout=300)[0]
    assert resumed.returncode == 0, output
    assert ckpt.completed_segments(str(run_dir)) == set(range(KILL_SEGMENTS))
    assert read_cells(spec.target) == expected_cells(spec, items)


@pytest.mark.slow
def test_dead_letters_a_full_disk_keeps_from_the_file_are_counted_where_they_are(bigtable_env, kill_source, small_disk,
                                                                                 tmp_path):
    """A run that dead-letters every item stops on a full disk: joining its dead letters into the file fails too. It
    said `dead letters: FILE (0 lines; N more ... were not written ...: running it again reads them again)`, and left
    the file cut short; now the count is the part files' (what is kept), the file is as it was, and the resume joins
    every dead letter into it, once."""
    spec, items, _spec_file, env = slow_run(bigtable_env, kill_source, tmp_path)
    entity = spec.entities[0].model_copy(update={"columns": [ColumnSpec(attribute="price", family="d", required=True)]})
    spec = spec.model_copy(update={"entities": [entity]})
    spec_file, run_dir = tmp_path / "spec.yaml", small_disk / "run"
    spec_file.write_text(yaml.safe_dump(spec.model_dump(mode="json", by_alias=True, exclude_none=True)))
    letters, parts = run_dir / "dead_letters.jsonl", run_dir / "dead_letters.jsonl.parts"

    failed = migrate(spec_file, run_dir, "--max-dead-letters", "100%", env=env)
    wait_for_segments(failed, run_dir, 2)
    filler = fill(small_disk)
    output = failed.communicate(timeout=120)[0]
    assert failed.returncode == 3, output
    assert "Traceback" not in output and "a bug" not in output, output
    kept = len({line for part in parts.glob("part-*.jsonl") for line in part.read_bytes().splitlines() if line})
    assert kept >= 2 * len(items) // KILL_SEGMENTS // 2, (kept, output)  # at least the stored segments' (about)
    assert f"dead letters: {kept} in {parts}, not joined into {letters} (No space left on device; --resume joins " \
           f"them; " in output, output
    assert not letters.exists() or not letters.read_bytes(), "a dead-letter file cut short"
    assert not list(run_dir.glob("*.joining"))
    assert "more dead-lettered items were not written" not in output, output  # they were, in the parts

    filler.unlink()
    resumed = migrate(spec_file, run_dir, "--resume", "--max-dead-letters", "100%", env=env)
    output = resumed.communicate(timeout=300)[0]
    assert resumed.returncode == 0, output
    lines = letters.read_text().splitlines()
    assert len(lines) == len(set(lines)) == len(items)
    assert sorted(json.loads(line)["item"]["sk"]["S"] for line in lines) == sorted(i["sk"]["S"] for i in items)


@pytest.mark.slow
def test_bigtable_dying_mid_validate_ends_it_within_two_minutes_with_one_line(kill_source, tmp_path):
    """validate looks rows up in Bigtable: with Bigtable dead it retried each lookup for the client's default of 600 s
    (and the scan threads waited behind it), past "stop within minutes"."""
    from ddb2bt.app.migrate import migrate as migrate_here
    from ddb2bt.app.options import RunOptions
    from tests.installed import DDB2BT

    endpoint, table, _items = kill_source
    spec = kill_spec(table, endpoint, migration_time="2024-01-01T00:00:00Z")
    spec = spec.model_copy(update={"source": spec.source.model_copy(update={"on_demand_rcu": 120})})
    spec_file, run_dir = tmp_path / "spec.yaml", tmp_path / "validation"
    spec_file.write_text(yaml.safe_dump(spec.model_dump(mode="json", by_alias=True, exclude_none=True)))
    with local_servers.bigtable_emulator() as emulator:  # a server of its own, to kill
        env = {**os.environ, **local_servers.emulator_env(emulator.endpoint)}
        with local_servers.patched_environ(local_servers.emulator_env(emulator.endpoint)):
            assert migrate_here(spec, RunOptions(run_dir=str(tmp_path / "migrated"))).ok
        proc = subprocess.Popen([DDB2BT, "validate", str(spec_file), "--run-dir", str(run_dir)], env=env,
                                cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
        try:
            wait_for_segments(proc, run_dir, 2)
            os.killpg(emulator.pid, signal.SIGKILL)
            killed = time.monotonic()
            output = proc.communicate(timeout=180)[0]
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    took = time.monotonic() - killed
    assert proc.returncode == 3 and took < 120, (took, output)
    assert "Traceback" not in output and "a bug" not in output and "[while running" not in output, output
    error = output.strip().splitlines()[-1]
    assert error.startswith("error: Bigtable is unreachable"), error
    assert error.endswith(f"; resume with: ddb2bt validate {spec_file} --resume --run-dir {run_dir}"), error
    # what was compared so far: the segments marked, and every item of theirs compared and found, cell by cell
    done = ckpt.completed_segments(str(run_dir))
    sizes = segment_sizes(boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1"), table)
    segments, read, compared, found, rows, matched, cells = numbers(
        r"compared so far: (\d+) of 10 segments \((\d+) items read; in the segments finished (\d+) items compared, "
        r"(\d+)/(\d+) rows found, (\d+)/(\d+) cells match, 0 differences; the differences file is written when the "
        r"validation ends\)", output)
    assert 2 <= segments == len(done) < KILL_SEGMENTS
    assert compared == found == rows == sum(sizes[s] for s in done) <= read
    assert matched == cells > 0


@pytest.mark.slow
def test_a_validation_whose_disk_fills_up_mid_run_stops_with_one_line_and_resumes(bigtable_env, kill_source, small_disk,
                                                                                  tmp_path):
    """validate's part files (differences, row keys, stats, dead letters) fail with ENOSPC: it said 'unexpected
    OSError ... (a bug)'; now the folder, what to do and the resume command (exit 3), and the resume ends OK."""
    from ddb2bt.app.migrate import migrate as migrate_here
    from ddb2bt.app.options import RunOptions
    from tests.installed import DDB2BT

    endpoint, table, _items = kill_source
    spec = kill_spec(table, endpoint, migration_time="2024-01-01T00:00:00Z")
    spec = spec.model_copy(update={"source": spec.source.model_copy(update={"on_demand_rcu": 120})})
    spec_file, run_dir = tmp_path / "spec.yaml", small_disk / "validation"
    spec_file.write_text(yaml.safe_dump(spec.model_dump(mode="json", by_alias=True, exclude_none=True)))
    assert migrate_here(spec, RunOptions(run_dir=str(tmp_path / "migrated"))).ok
    env = {**os.environ, **local_servers.emulator_env(bigtable_env.endpoint)}

    def validate(*more: str) -> subprocess.Popen:
        return subprocess.Popen([DDB2BT, "validate", str(spec_file), "--run-dir", str(run_dir), *more], env=env,
                                cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)

    proc = validate()
    try:
        wait_for_segments(proc, run_dir, 2)
        filler = fill(small_disk)
        output = proc.communicate(timeout=180)[0]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 3, output
    assert "Traceback" not in output and "a bug" not in output, output
    error = output.strip().splitlines()[-1]
    assert error.startswith(f"error: the run folder {run_dir} cannot be written (No space left on device)"), error
    assert error.endswith(f"; resume with: ddb2bt validate {spec_file} --resume --run-dir {run_dir}"), error

    filler.unlink()
    resumed = validate("--resume")
    output = resumed.communicate(timeout=300)[0]
    assert resumed.returncode == 0, output
