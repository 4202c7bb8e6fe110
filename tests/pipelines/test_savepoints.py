"""Savepoints inside a scan segment: after each stored page the segment's position (the page's LastEvaluatedKey) is
saved, so a run killed part way through a segment resumes there and reads again at most the pages in flight.

Against the real servers: dynalite (which serves real 1 MB Scan pages and, like DynamoDB right after a load, reports
ItemCount 0) and the Bigtable emulator, checked cell by cell.
"""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from pathlib import Path

import apache_beam as beam
import boto3
import pytest
import yaml
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.util import assert_that, equal_to

from ddb2bt.mappers.results import Cell, MappedRow
from ddb2bt.mappers.spec import MappingSpec, TargetSpec
from ddb2bt.pipelines.run import checkpoint as ckpt
from ddb2bt.pipelines.local import servers as local_servers
from ddb2bt.pipelines.run.batches import Batch, SegmentAt, SegmentDone
from ddb2bt.pipelines.bigtable.sink import WriteToBigtable, ensure_table
from ddb2bt.pipelines.dynamodb.client import create_table, put_items
from ddb2bt.pipelines.dynamodb.scan import scan_pages
from ddb2bt.pipelines.pipeline import _PersistFn
from ddb2bt.pipelines.run.local_runner import new_pipeline

from .cells import expected_cells, read_cells
from .tables import migrate, numbers
from .torn_down import FAILS, WAITED, WRITES, NoteTeardown, StageThenWait

ITEMS, PADDING = 4_000, 2_400
"""About 10 MB: ten 1 MB Scan pages in one segment."""
RATE_RCU = 256
"""The spec's on_demand_rcu; at read_budget 0.5 the scan reads about one 1 MB page (128 RCU) per second, so that a
kill lands part way through the segment."""


@pytest.fixture(scope="module")
def paged_source(dynalite):
    """One table of ITEMS items, about ten Scan pages; the page boundaries as a one-segment scan sees them."""
    table = f"s{uuid.uuid4().hex[:12]}"
    items = [{"pk": {"S": f"p{i % 53}"}, "sk": {"S": f"i{i:06d}"}, "n": {"N": str(i)},
              "text": {"S": f"item {i} " + "y" * PADDING}} for i in range(ITEMS)]
    with local_servers.patched_environ(local_servers.FAKE_AWS_ENV):
        client = boto3.client("dynamodb", endpoint_url=dynalite.endpoint, region_name="us-east-1")
        create_table(client, table, "pk", "sk")
        put_items(client, table, items)
        pages = [(len(page.items), page.last_key) for page in scan_pages(client, table)]
    return dynalite.endpoint, table, items, pages


def one_segment_spec(tmp_path: Path, endpoint: str, table: str) -> tuple[MappingSpec, Path]:
    spec = MappingSpec.model_validate({
        "source": {"table": table, "endpoint_url": endpoint, "region": "us-east-1", "partition_key": "pk",
                   "sort_key": "sk", "read_budget": 0.5, "on_demand_rcu": RATE_RCU},
        "target": {"table": f"b{uuid.uuid4().hex[:12]}", "families": {"d": None}},
        "entities": [{"name": "thing", "row_key": "{pk}#{sk}", "rest": {"family": "d"}}],
    })
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(yaml.safe_dump(spec.model_dump(mode="json", by_alias=True, exclude_none=True)))
    return spec, spec_file


def saved_key(run_dir: Path) -> dict | None:
    return ckpt.saved_positions(str(run_dir)).get(0)


@pytest.mark.slow
@pytest.mark.parametrize("beam_args", [
    ("--direct_running_mode=in_memory",),
    ("--direct_running_mode=multi_threading", "--direct_num_workers=2"),
    ("--direct_running_mode=multi_processing", "--direct_num_workers=2"),
], ids=["in_memory", "multi_threading", "multi_processing"])
def test_kill_9_at_half_of_a_one_segment_table_then_resume_reads_again_at_most_two_pages(
        bigtable_env, paged_source, tmp_path, beam_args):
    endpoint, table, items, pages = paged_source
    assert len(pages) >= 8, f"the table should span several Scan pages, not {len(pages)}"
    page_items = max(count for count, _ in pages)
    keys = [key for _, key in pages]
    spec, spec_file = one_segment_spec(tmp_path, endpoint, table)
    run_dir = tmp_path / "run"
    env = {**os.environ, **local_servers.emulator_env(bigtable_env.endpoint)}

    killed = migrate(spec_file, run_dir, "--total-segments", "1", "--", *beam_args, env=env)
    deadline = time.monotonic() + 180
    while (key := saved_key(run_dir)) is None or keys.index(key) < len(keys) // 2 - 1:  # half the pages stored
        assert killed.poll() is None, f"the run ended before half its pages were stored:\n{killed.stdout.read()}"
        assert time.monotonic() < deadline, "half the pages were not stored in time"
        time.sleep(0.02)
    os.killpg(killed.pid, signal.SIGKILL)
    killed.wait()
    saved = saved_key(run_dir)
    assert saved is not None and not ckpt.completed_segments(str(run_dir))
    stored_before = len(read_cells(spec.target))  # one row per item
    upto = sum(count for count, _ in pages[: keys.index(saved) + 1])
    assert upto <= stored_before < len(items), "the savepoint ran ahead of what Bigtable holds"
    assert stored_before >= len(items) // 3

    resumed = migrate(spec_file, run_dir, "--resume", "--", *beam_args, env=env)
    output = resumed.communicate(timeout=300)[0]
    assert resumed.returncode == 0, output
    assert "resume: 0 of 1 segments already stored; the rest are read; 1 go on from their savepoint" in output, output
    (read,) = numbers(r"read (\d+) items", output)
    assert read == len(items) - upto  # it started at the savepoint, not at the segment's start
    read_again = read - (len(items) - stored_before)  # items already in Bigtable that were read a second time
    assert 0 <= read_again <= 2 * page_items, f"{read_again} items read again (a page holds up to {page_items})"
    assert ckpt.completed_segments(str(run_dir)) == {0}
    now_ms = json.loads((run_dir / ckpt.CHECKPOINT_FILE).read_text())["now_ms"]
    assert read_cells(spec.target) == expected_cells(spec, items, now_ms=now_ms)  # as one uninterrupted run writes


@pytest.mark.slow
@pytest.mark.parametrize("beam_args", [
    ("--direct_running_mode=in_memory",),
    ("--direct_running_mode=multi_processing", "--direct_num_workers=2"),
], ids=["in_memory", "multi_processing"])
def test_kill_9_while_four_segments_are_read_at_once_then_resume_loses_nothing(bigtable_env, paged_source, tmp_path,
                                                                                beam_args):
    """in_memory reads four segments at once, multi_processing two in each of its two worker processes, their pages
    interleaved, each reader a page ahead: a kill of the whole process group with pages of several segments in
    flight (read, not yet stored) loses none of them, since a savepoint follows a page only once it is stored; the
    resume goes on from each segment's savepoint and the table ends cell for cell as one uninterrupted run writes
    it."""
    endpoint, table, items, _ = paged_source
    spec, spec_file = one_segment_spec(tmp_path, endpoint, table)
    run_dir = tmp_path / "run"
    env = {**os.environ, **local_servers.emulator_env(bigtable_env.endpoint)}

    killed = migrate(spec_file, run_dir, "--total-segments", "4", "--", *beam_args, env=env)
    deadline = time.monotonic() + 180
    while len(ckpt.saved_positions(str(run_dir))) < 3:  # three segments part way at once: read side by side
        assert killed.poll() is None, f"the run ended before three segments were part way:\n{killed.stdout.read()}"
        assert time.monotonic() < deadline, "three segments were not part way in time"
        time.sleep(0.02)
    os.killpg(killed.pid, signal.SIGKILL)
    killed.wait()
    done, saved = ckpt.completed_segments(str(run_dir)), ckpt.saved_positions(str(run_dir))
    assert len(done) < 4
    with local_servers.patched_environ(local_servers.FAKE_AWS_ENV):  # what a resume has left to read
        client = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1")
        left = sum(len(page.items) for segment in set(range(4)) - done
                   for page in scan_pages(client, table, segment, 4, start_key=saved.get(segment)))
    stored_before = len(read_cells(spec.target))
    assert len(items) - left <= stored_before < len(items), "a savepoint ran ahead of what Bigtable holds"

    resumed = migrate(spec_file, run_dir, "--resume", "--", *beam_args, env=env)
    output = resumed.communicate(timeout=300)[0]
    assert resumed.returncode == 0, output
    (read,) = numbers(r"read (\d+) items", output)
    assert read == left  # every segment went on from its savepoint (or its start), nothing skipped
    assert ckpt.completed_segments(str(run_dir)) == {0, 1, 2, 3} and "run OK" in output
    now_ms = json.loads((run_dir / ckpt.CHECKPOINT_FILE).read_text())["now_ms"]
    assert read_cells(spec.target) == expected_cells(spec, items, now_ms=now_ms)  # as one uninterrupted run writes


def test_a_binary_key_savepoint_round_trips_byte_for_byte_and_the_scan_goes_on_from_it(dynalite, tmp_path):
    """LastEvaluatedKey with B values (bytes, as botocore parses them) is stored as DynamoDB JSON with base64 and
    read back as the same bytes, which DynamoDB takes as ExclusiveStartKey: together the two halves are the table."""
    table = f"b{uuid.uuid4().hex[:12]}"
    items = [{"pk": {"B": bytes([i % 7, 0, 255, i])}, "sk": {"B": bytes([255 - i, 0x80, 0])}, "v": {"N": str(i)}}
             for i in range(60)]
    with local_servers.patched_environ(local_servers.FAKE_AWS_ENV):
        client = boto3.client("dynamodb", endpoint_url=dynalite.endpoint, region_name="us-east-1")
        create_table(client, table, "pk", "sk", key_type="B")
        put_items(client, table, items)
        first = next(scan_pages(client, table, limit=25))
        assert isinstance(first.last_key["pk"]["B"], bytes)
        ckpt.save_position(str(tmp_path), 3, first.last_key)
        on_disk = json.loads((tmp_path / ckpt.SEGMENTS_DIR / "3.at").read_text())["ExclusiveStartKey"]
        assert set(on_disk["pk"]) == {"B"} and isinstance(on_disk["pk"]["B"], str)  # base64 text
        back = ckpt.saved_positions(str(tmp_path))[3]
        assert back == first.last_key
        rest = [item for page in scan_pages(client, table, start_key=back) for item in page.items]
    seen = sorted((item["pk"]["B"], item["sk"]["B"]) for item in first.items + rest)
    assert seen == sorted((item["pk"]["B"], item["sk"]["B"]) for item in items)
    ckpt.mark_segment_done(str(tmp_path), 3)
    assert ckpt.saved_positions(str(tmp_path)) == {}  # a segment done needs no savepoint


def test_an_unreadable_savepoint_counts_as_none(tmp_path):
    """A savepoint that is not whole (it never is on a local disk: replaced atomically) starts its segment over."""
    (tmp_path / ckpt.SEGMENTS_DIR).mkdir()
    (tmp_path / ckpt.SEGMENTS_DIR / "2.at").write_text('{"segment": 2, "ExclusiveStartKey": {"pk": {"S"')
    ckpt.save_position(str(tmp_path), 5, {"pk": {"S": "a"}, "n": {"N": "12345678901234567890123456789012345678"}})
    assert ckpt.saved_positions(str(tmp_path)) == {
        5: {"pk": {"S": "a"}, "n": {"N": "12345678901234567890123456789012345678"}}}


def test_a_savepoint_is_private_like_the_dead_letters(tmp_path):
    """A savepoint holds the values of a key (user data): mode 0600, also when it replaces an older one."""
    import stat

    ckpt.save_position(str(tmp_path), 1, {"pk": {"S": "someone@example.com"}})
    ckpt.save_position(str(tmp_path), 1, {"pk": {"S": "someone-else@example.com"}})
    saved = tmp_path / ckpt.SEGMENTS_DIR / "1.at"
    assert stat.S_IMODE(saved.stat().st_mode) == 0o600
    assert ckpt.saved_positions(str(tmp_path)) == {1: {"pk": {"S": "someone-else@example.com"}}}


class _StoredWhenSeen(beam.DoFn):
    """Downstream of the writer: for each savepoint, whether every row of the pages before it is in Bigtable now."""

    def __init__(self, target: TargetSpec, pages: list[list[bytes]]) -> None:
        self._target, self._pages = target, pages

    def process(self, element):
        if isinstance(element, SegmentAt):
            stored = set(read_cells(self._target))
            upto = int(element.key["sk"]["S"])
            yield ("at", upto, all(key in stored for page in self._pages[: upto + 1] for key in page))
        elif isinstance(element, SegmentDone):
            yield ("done", element.segment, len(read_cells(self._target)))


def test_the_writer_passes_a_savepoint_on_only_once_the_pages_before_it_are_stored(bigtable_env):
    """Pages of rows, each followed by its savepoint, then the segment's end: each savepoint comes out of the writer
    after its page's rows are stored (and in order), the end after every row."""
    target = TargetSpec.model_validate({"table": f"w{uuid.uuid4().hex[:12]}", "families": {"d": None}})
    ensure_table(target)
    pages = [[f"p{page}-r{row:03d}".encode() for row in range(150)] for page in range(5)]
    stream = []
    for number, keys in enumerate(pages):
        stream.append(Batch([(MappedRow(key, (Cell("d", b"q", 1000, b"v" * 100),), "e"), {}) for key in keys]))
        stream.append(SegmentAt(0, {"sk": {"S": str(number)}}))
    stream.append(SegmentDone(0))
    with new_pipeline() as p:
        out = (p | beam.Create([stream]) | beam.FlatMap(lambda elements: elements)
               | WriteToBigtable(target) | beam.ParDo(_StoredWhenSeen(target, pages)))
        assert_that(out, equal_to([("at", n, True) for n in range(5)] + [("done", 0, 750)]))


class _MarkerStoredWhenSeen(beam.DoFn):
    """Downstream of the writer: for each barrier, whether the rows it stands for (``needs[marker]``) are in Bigtable
    now."""

    def __init__(self, target: TargetSpec, needs: dict[tuple, list[bytes]]) -> None:
        self._target, self._needs = target, needs

    def process(self, element):
        if isinstance(element, (SegmentAt, SegmentDone)):
            name = (("at", element.segment, int(element.key["sk"]["S"])) if isinstance(element, SegmentAt)
                    else ("done", element.segment))
            stored = set(read_cells(self._target))
            yield name, all(key in stored for key in self._needs[name])


def _page(keys: list[bytes]) -> Batch:
    return Batch([(MappedRow(key, (Cell("d", b"q", 1000, b"v" * 100),), "e"), {}) for key in keys])


def test_each_segments_done_marker_comes_out_after_its_rows_are_stored_with_segments_interleaved(bigtable_env):
    """Segments' pages mixed as a migration reads them (four at once), each page followed by its savepoint or, the
    last, by the segment's done marker: each marker comes out of the writer once every row before it is stored (its
    batcher is closed behind it, the next page taken meanwhile), in the order they came in."""
    target = TargetSpec.model_validate({"table": f"w{uuid.uuid4().hex[:12]}", "families": {"d": None}})
    ensure_table(target)
    stream, needs, seen = [], {}, []
    order = [(0, 0), (1, 0), (0, 1), (2, 0), (1, 1), (2, 1), (3, 0), (0, 2)]  # (segment, page); the last ends it
    last = {segment: max(page for s, page in order if s == segment) for segment, _ in order}
    for segment, page in order:
        keys = [f"s{segment}-p{page}-r{row:03d}".encode() for row in range(120)]
        seen += keys
        stream.append(_page(keys))
        marker = SegmentDone(segment) if page == last[segment] else SegmentAt(segment, {"sk": {"S": str(page)}})
        stream.append(marker)
        needs[("done", segment) if page == last[segment] else ("at", segment, page)] = list(seen)
    with new_pipeline() as p:
        out = (p | beam.Create([stream]) | beam.FlatMap(lambda elements: elements)
               | WriteToBigtable(target) | beam.ParDo(_MarkerStoredWhenSeen(target, needs)))
        assert_that(out, equal_to([(name, True) for name in needs]))
    assert len(read_cells(target)) == len(seen)


def test_the_writer_takes_the_next_page_while_a_done_markers_rows_are_written(bigtable_env, monkeypatch):
    """A segment's done marker does not hold the next page up: its batcher closes in the background (held here until
    the next page has been appended), and the marker comes out at the next barrier, after its rows are stored."""
    import threading

    from ddb2bt.pipelines.bigtable import sink

    target = TargetSpec.model_validate({"table": f"w{uuid.uuid4().hex[:12]}", "families": {"d": None}})
    ensure_table(target)
    appended, waited_out = threading.Event(), []
    close = sink.TableBatchers.close

    def held_close(self):
        if not appended.is_set():  # the first close, the done marker's: until the next page is in
            waited_out.append(not appended.wait(20))
        return close(self)

    monkeypatch.setattr(sink.TableBatchers, "close", held_close)
    writer = sink._WriteFn(sink.Destination.from_target(target), sink.FlowControl())
    writer.setup()
    try:
        writer.start_bundle()
        first, second = [b"a%03d" % n for n in range(50)], [b"b%03d" % n for n in range(50)]
        assert list(writer.process(_page(first))) == []
        assert list(writer.process(SegmentDone(0))) == []  # held: its rows are being written
        assert list(writer.process(_page(second))) == []
        appended.set()
        out = list(writer.process(SegmentDone(1)))
        assert out == [SegmentDone(0)] and set(first) <= set(read_cells(target))
        assert [value.value for value in writer.finish_bundle()] == [SegmentDone(1)]
        assert set(read_cells(target)) == set(first + second)
        assert waited_out == [False], "the writer waited for the done marker's writes before taking the next page"
    finally:
        writer.teardown()


def test_the_rows_closing_behind_a_done_marker_count_toward_max_pending_entries(bigtable_env):
    """An export file's rows closing behind its done marker are held for dead letters too: once they and the next
    file's reach ``max_pending_entries`` the writer first waits for them (the marker comes out), so it never holds
    more items than that, as with one batcher at a time."""
    from ddb2bt.pipelines.bigtable import sink

    target = TargetSpec.model_validate({"table": f"w{uuid.uuid4().hex[:12]}", "families": {"d": None}})
    ensure_table(target)
    writer = sink._WriteFn(sink.Destination.from_target(target), sink.FlowControl(max_pending_entries=100))
    writer.setup()
    try:
        writer.start_bundle()
        assert list(writer.process(_page([b"a%03d" % n for n in range(60)]))) == []
        assert list(writer.process(SegmentDone(0))) == []
        assert list(writer.process(_page([b"b%03d" % n for n in range(30)]))) == []  # 90 held: under the limit
        assert list(writer.process(_page([b"c%03d" % n for n in range(30)]))) == [SegmentDone(0)]  # 120: settled
        assert len(writer._pending) == 60 and writer._closing is None
        assert [value.value for value in writer.finish_bundle()] == []
        assert len(read_cells(target)) == 120
    finally:
        writer.teardown()


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["multi_processing", "multi_threading"])
def test_a_writer_torn_down_under_a_running_bundle_never_marks_rows_it_did_not_store(bigtable_env, tmp_path, mode):
    """Worker processes (or threads), one bundle failing (as a stopped run's does) while another goes on: Beam's SDK
    harness tears down the steps of the bundle still in flight, from its own thread, and that bundle then sends rows
    and its segment's done marker to the writer. The writer used to close its Bigtable client there, so the rows failed
    ("Channel closed"), were taken for refusals (dead letters) and the done marker went on over them: a resume
    skipped the segment and said "run OK" with rows missing. Now no marker passes over a row not stored and no dead
    letter is written, and a resume of what is not marked leaves the table cell for cell as one run writes it."""
    target = TargetSpec.model_validate({"table": f"w{uuid.uuid4().hex[:12]}", "families": {"d": None}})
    ensure_table(target)
    rows = [(MappedRow(f"r{row:04d}".encode(), (Cell("d", b"q", 1000, b"v" * 50),), "e"), {"n": row})
            for row in range(300)]
    expected = {row.row_key: [(c.family, c.qualifier, c.timestamp_micros, c.value) for c in row.cells]
                for row, _item in rows}
    run_dir, signals, dead_letter = tmp_path / "run", tmp_path / "signals", tmp_path / "run" / "dead_letters.jsonl"
    signals.mkdir()
    options = PipelineOptions([f"--direct_running_mode={mode}", "--direct_num_workers=2"])
    p = new_pipeline(options)
    written = (p | beam.Create([FAILS, WRITES]) | beam.ParDo(StageThenWait(str(signals), rows, segment=1))
               | WriteToBigtable(target))
    _ = written | "Persist" >> beam.ParDo(_PersistFn(str(dead_letter), str(run_dir)))
    _ = written | "Note" >> beam.ParDo(NoteTeardown(str(signals)))
    with pytest.raises(Exception, match="stop requested"):
        p.run().wait_until_finish()
    assert (signals / WAITED).exists(), "the writer was not torn down under the running bundle: nothing was tested"

    stored = read_cells(target)
    done = ckpt.completed_segments(str(run_dir))
    letters = [line for part in run_dir.glob("dead_letters.jsonl.parts/*") for line in part.read_text().splitlines()]
    assert 1 not in done or len(stored) == len(rows), f"segment 1 marked done with {len(stored)} of {len(rows)} rows"
    assert letters == [], f"rows taken for refused: {letters[:2]}"

    if 1 not in done:  # what --resume does: the segment again, whole
        with new_pipeline() as again:
            _ = (again | beam.Create([Batch(rows), SegmentDone(1)]) | WriteToBigtable(target)
                 | "Persist" >> beam.ParDo(_PersistFn(str(dead_letter), str(run_dir))))
    assert ckpt.completed_segments(str(run_dir)) == {1}
    assert read_cells(target) == expected


def test_a_checkpoint_is_replaced_whole_or_not_at_all(tmp_path, monkeypatch):
    """checkpoint.json was written in place: a kill or a full disk while it was written left an empty or partial file,
    and a run folder that could not be resumed (h/faults13 read it empty once). It is written beside and renamed."""
    import builtins

    start = ckpt.Checkpoint.start(str(tmp_path / "run"), "h" * 64, 4, "T", resume=False, now_ms=123)
    path = tmp_path / "run" / ckpt.CHECKPOINT_FILE
    before = path.read_bytes()
    real_open = builtins.open

    class Full:
        def __init__(self, handle):
            self.handle = handle

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.handle.close()

        def write(self, data):
            self.handle.write(data[:7])
            raise OSError(28, "No space left on device")

    def filling(file, mode="r", *args, **kwargs):
        handle = real_open(file, mode, *args, **kwargs)
        return Full(handle) if "w" in mode and str(file).startswith(str(path)) else handle

    monkeypatch.setattr(builtins, "open", filling)
    with pytest.raises(OSError):
        ckpt._write(str(path), b'{"spec_hash": "other"}')
    monkeypatch.undo()
    assert path.read_bytes() == before and sorted(os.listdir(path.parent)) == [ckpt.CHECKPOINT_FILE]
    assert ckpt.Checkpoint.start(str(tmp_path / "run"), "h" * 64, 4, "T", resume=True).now_ms == start.now_ms == 123
