"""Sources and sinks behind one interface: every kind implements it, and a source added with one registration is read
by the real use cases (migrate, its resume, validate, the samples) with no other change."""

from __future__ import annotations

import base64
import inspect
import json
from pathlib import Path
from typing import Any, Iterator

import apache_beam as beam
import boto3
import pytest
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics
from apache_beam.testing.util import assert_that, equal_to

from ddb2bt.app.migrate import migrate
from ddb2bt.app.options import RunOptions
from ddb2bt.app.validate import validate
from ddb2bt.mappers.decode import comparable
from ddb2bt.mappers.errors import UsageError
from ddb2bt.mappers.spec import MappingSpec
from ddb2bt.pipelines.bigtable.rows import RowSource
from ddb2bt.pipelines.cutover.change_sink import ChangeSink
from ddb2bt.pipelines.dynamodb.client import ClientSettings, create_table
from ddb2bt.pipelines.run.batches import Batch, SegmentDone
from ddb2bt.pipelines.run.checkpoint import completed_segments
from ddb2bt.pipelines.run.metrics import NAMESPACE
from ddb2bt.pipelines.sink import Sink
from ddb2bt.pipelines.dynamodb.sink import DynamoDBSink
from ddb2bt.pipelines.sinks import BigtableSink
from ddb2bt.pipelines.source import ItemsSource, Source, SourceRead
from ddb2bt.pipelines.sources import KINDS, read_items, register, source_for, unregister
from ddb2bt.pipelines.run.local_runner import new_pipeline
from tests.pipelines.cells import expected_cells, read_cells

PIECES = 3


def _read_piece(piece: tuple[str, int], mark_done: bool) -> Iterator[Any]:
    path, number = piece
    with FileSystems.open(path) as handle:
        lines = handle.read().decode("utf-8").splitlines()
    items = [json.loads(line) for index, line in enumerate(lines) if line.strip() and index % PIECES == number]
    Metrics.counter(NAMESPACE, "items_read").inc(len(items))
    yield Batch(items)
    if mark_done:
        yield SegmentDone(number)


class JsonLinesSource(Source):
    """Items in DynamoDB's wire format, one JSON object a line, read in PIECES pieces (every PIECES-th line)."""

    kind = "json lines"
    pieces_name = "line sets"

    def __init__(self, spec: Any) -> None:
        self.spec, self.path = spec, spec.export.path

    def name(self) -> str:
        return self.path

    def check(self, pipeline_options: Any = None) -> int:
        if not Path(self.path).is_file():
            raise UsageError(f"no file at {self.path}", "give a JSON-lines file")
        return PIECES

    def expected_items(self, description: Any, total: int, done: frozenset[int],
                       pipeline_options: Any = None) -> tuple[int | None, str]:
        lines = Path(self.path).read_text(encoding="utf-8").splitlines()
        return sum(1 for index, _ in enumerate(lines) if index % PIECES not in done), "the file"

    def read(self, p: Any, *, total_segments: int = 1, completed: frozenset[int] = frozenset(),
             mark_done: bool = False, segments_in_flight: int | None = None,
             start_keys: dict[int, dict[str, Any]] | None = None, progress_dir: str | None = None,
             count_read: bool = True) -> SourceRead:
        pieces = [(self.path, number) for number in range(total_segments) if number not in completed]
        return SourceRead(p | "Pieces" >> beam.Create(pieces) | "Spread" >> beam.Reshuffle()
                          | "ReadLines" >> beam.FlatMap(_read_piece, mark_done).with_output_types(Batch))

    def items(self, limit: int | None = None) -> list[dict]:
        lines = Path(self.path).read_text(encoding="utf-8").splitlines()[:limit]
        return [json.loads(line) for line in lines if line.strip()]


@pytest.fixture
def json_lines_source():
    registration = register(JsonLinesSource, lambda source: bool(source.export and source.export.path.endswith(".jsonl")))
    yield JsonLinesSource
    unregister(registration)


def _signature(method: Any) -> list[tuple[str, Any]]:
    """The parameters a caller of the interface can pass; an implementation may add keyword-only ones with
    defaults (the change sink's ``tally``), which no caller of the interface has to know."""
    return [(p.name, p.kind) for p in inspect.signature(method).parameters.values()
            if p.kind is not inspect.Parameter.KEYWORD_ONLY or p.default is inspect.Parameter.empty]


def test_every_source_and_sink_implements_its_interface(json_lines_source):
    kinds = [*KINDS]
    assert JsonLinesSource in kinds  # one registration lists it with the built-in kinds
    assert {kind.kind for kind in kinds} >= {"scan", "export", "dead letters", "items", "json lines", "bigtable rows"}
    assert len({kind.kind for kind in kinds}) == len(kinds), "two kinds share a name"
    for kind in kinds:
        assert issubclass(kind, Source) and not inspect.isabstract(kind), f"{kind.__name__} leaves methods out"
        for name in ("read", "expected_items", "check", "items", "random_sample"):
            assert _signature(getattr(kind, name)) == _signature(getattr(Source, name)), f"{kind.__name__}.{name}"
    for sink in (BigtableSink, ChangeSink, DynamoDBSink):
        assert issubclass(sink, Sink) and not inspect.isabstract(sink), f"{sink.__name__} leaves methods out"
        assert _signature(sink.write) == _signature(Sink.write)
    assert isinstance(source_for(MappingSpec.model_validate(_spec("t", "/x/items.jsonl"))), JsonLinesSource)


def test_without_its_registration_a_spec_goes_to_the_built_in_sources():
    spec = MappingSpec.model_validate(_spec("t", "/x/items.jsonl"))
    assert source_for(spec).kind == "export"
    assert source_for(spec.model_copy(update={"source": spec.source.model_copy(update={"export": None})})).kind == "scan"


def _spec(table: str, path: str) -> dict:
    return {
        "source": {"table": table, "partition_key": "pk", "sort_key": "sk", "export": {"path": path}},
        "target": {"table": table, "families": {"d": None}},
        "entities": [{"name": "thing", "row_key": "{pk}#{sk}", "rest": {"family": "d"}}],
    }


def _items(n: int) -> list[dict]:
    return [{"pk": {"S": f"p{i % 7}"}, "sk": {"S": f"s{i:03d}"}, "n": {"N": str(10**30 + i)}, "b": {"B": "AAE="}}
            for i in range(n)]


def test_a_registered_source_is_migrated_resumed_validated_and_sampled(json_lines_source, bigtable_env, unique_name,
                                                                      tmp_path):
    items = _items(40)
    path = tmp_path / "items.jsonl"
    path.write_text("".join(json.dumps(item) + "\n" for item in items), encoding="utf-8")
    spec = MappingSpec.model_validate(_spec(unique_name, str(path)))
    run_dir = str(tmp_path / "run")

    assert read_items(spec.source, 5) == items[:5]  # migrate-plan's sample: the same registry

    result = migrate(spec, RunOptions(run_dir=run_dir))
    assert result.ok, result.problems
    assert result.prepared.total_segments == PIECES  # the source fixed its pieces in its check
    assert result.prepared.expected_items == 40 and result.prepared.expected_from == "the file"
    assert result.counters["items_read"] == 40 and result.counters["rows_written"] == 40
    assert completed_segments(run_dir) == frozenset(range(PIECES))  # each piece marked done once stored
    assert read_cells(spec.target) == expected_cells(spec, items, result.prepared.now_ms)

    again = migrate(spec, RunOptions(run_dir=run_dir, resume=True))  # every piece stored: nothing is read again
    assert again.ok, again.problems
    assert again.prepared.expected_items == 0 and again.counters["items_read"] == 0
    assert read_cells(spec.target) == expected_cells(spec, items, result.prepared.now_ms)

    checked = validate(spec, RunOptions(run_dir=str(tmp_path / "validate")), now_ms=result.prepared.now_ms)
    assert checked.ok, (checked.counts, checked.problems)
    assert checked.totals["items_compared"] == 40


def test_a_missing_file_is_refused_by_the_source_before_anything_is_written(json_lines_source, bigtable_env,
                                                                          unique_name, tmp_path):
    spec = MappingSpec.model_validate(_spec(unique_name, str(tmp_path / "missing.jsonl")))
    with pytest.raises(UsageError, match="no file at"):
        migrate(spec, RunOptions(run_dir=str(tmp_path / "run")))
    assert not (tmp_path / "run").exists()


def test_the_dynamodb_sink_writes_items_and_gives_back_what_dynamodb_refused(moto_server, unique_name):
    client = boto3.client("dynamodb", endpoint_url=moto_server.endpoint, region_name="us-east-1")
    create_table(client, unique_name, "pk", "sk")
    sink = DynamoDBSink(ClientSettings(region="us-east-1", endpoint_url=moto_server.endpoint), unique_name,
                        ("pk", "sk"))
    sink.prepare()
    good = _items(30)
    keyless = {"pk": {"S": "p0"}, "n": {"N": "1"}}  # no sort key: DynamoDB refuses it (ValidationException)
    pipeline = new_pipeline()
    out = sink.write(ItemsSource([*good[:20], keyless, *good[20:]]).read(pipeline).batches)
    assert_that(out | beam.Map(lambda letter: (letter.item, letter.stage)), equal_to([(keyless, "write")]))
    pipeline.run().wait_until_finish()

    found = client.scan(TableName=unique_name, ConsistentRead=True)["Items"]
    assert sorted(found, key=lambda item: item["sk"]["S"]) == [
        {**item, "b": {"B": b"\x00\x01"}} for item in good]  # boto3 decodes B; the wire held base64 "AAE="
    with pytest.raises(UsageError, match="no DynamoDB table"):
        DynamoDBSink(sink.settings, unique_name + "x", ("pk", "sk")).check()


def _canonical(items: list[dict]) -> list[dict]:
    return [{name: comparable(value) for name, value in item.items()} for item in items]


def test_bigtable_rows_are_a_source_read_in_key_ranges_from_a_committed_row_on(json_lines_source, bigtable_env,
                                                                                 unique_name, tmp_path):
    """Rollback's source: the rows migrate wrote, decoded back into the items, by piece, from a position, sampled and
    as a Beam read; a missing table is refused by its check."""
    items = _items(40)
    path = tmp_path / "items.jsonl"
    path.write_text("".join(json.dumps(item) + "\n" for item in items), encoding="utf-8")
    spec = MappingSpec.model_validate(_spec(unique_name, str(path)))
    assert migrate(spec, RunOptions(run_dir=str(tmp_path / "run"))).ok
    in_key_order = sorted(items, key=lambda item: f"{item['pk']['S']}#{item['sk']['S']}")

    with RowSource(spec) as source:
        source.check()
        pieces = source.pieces()
        assert pieces[0][0] == b"" and pieces[-1][1] == b"" and all(a[1] == b[0] for a, b in zip(pieces, pieces[1:]))
        assert _canonical(source.items()) == _canonical(in_key_order)
        assert _canonical(source.items(5)) == _canonical(in_key_order[:5])
        rows = [key for piece in pieces for key, _cells in source.rows(piece)]
        assert rows == sorted(rows) and len(rows) == 40
        position = rows[9]  # the last row committed: the read goes on just after it
        piece = next(index for index, (start, end) in enumerate(pieces) if start <= position and (not end or position < end))
        after = [key for key, _cells in source.rows(pieces[piece], position)]
        assert after == [key for key in rows if key > position and (not pieces[piece][1] or key < pieces[piece][1])]
        sample = source.random_sample(7, seed=3)
        assert len(sample) == 7 and all(item in _canonical(items) for item in _canonical(sample))

    pipeline = new_pipeline()
    # the read resumes on the key ranges it was first split into (Bigtable's samples may have moved since)
    read = RowSource(spec, key_ranges=pieces).read(pipeline, mark_done=True,
                                                   start_keys={piece: {"after": base64.b64encode(position).decode("ascii")}})
    done = read.batches | "Done" >> beam.Filter(lambda element: isinstance(element, SegmentDone))
    assert_that(done | beam.Map(lambda marker: marker.segment), equal_to(list(range(len(pieces)))), label="Done")
    got = (read.batches | beam.Filter(lambda element: isinstance(element, list)) | beam.FlatMap(_canonical)
           | beam.Map(lambda item: json.dumps(item, sort_keys=True, default=str)))
    kept = [item for item in in_key_order  # every row but those of its piece up to the position
            if not pieces[piece][0] <= f"{item['pk']['S']}#{item['sk']['S']}".encode() <= position]
    assert len(kept) < 40
    assert_that(got, equal_to([json.dumps(item, sort_keys=True, default=str) for item in _canonical(kept)]))
    pipeline.run().wait_until_finish()

    missing = spec.model_copy(update={"target": spec.target.model_copy(update={"table": unique_name + "x"})})
    with pytest.raises(UsageError):
        RowSource(missing).check()


def test_the_rollback_writes_through_the_dynamodb_sink_without_importing_beam(tmp_path):
    """The rollback's worker processes import no Beam: the sink's writer and the rollback's setup come without it."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from ddb2bt.app import rollback\n"
        "from ddb2bt.mappers.spec import MappingSpec\n"
        f"spec = MappingSpec.model_validate({_spec('t', '/x/items.jsonl')!r})\n"
        "setup = rollback._Setup(spec, 't', ('pk', 'sk'), {}, rollback.RollbackRequest(wcu=100.0), False, {}, (),\n"
        "                        processes=4)\n"
        "writer = setup.writer()\n"
        "print(type(writer).__module__, writer.budget.rate, writer.key_names, 'apache_beam' in sys.modules)\n"
    )
    env = {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x", "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_ENDPOINT_URL": "http://127.0.0.1:9", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    assert out.split() == ["ddb2bt.pipelines.dynamodb.sink", "25.0", "('pk',", "'sk')", "False"]
