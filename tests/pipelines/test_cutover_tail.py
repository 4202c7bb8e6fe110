"""The stream tail against moto_server's DynamoDB Streams and the Bigtable emulator: scan backfill → live changes →
tail → Bigtable equals a fresh migration of the final table; redelivery, an expired iterator, retention refused."""

from __future__ import annotations

import json
import random
import shlex
import time

import pytest

from ddb2bt.app.cutover import tail
from ddb2bt.app.options import RunOptions
from ddb2bt.pipelines.dynamodb import stream as dynamodb_stream
from ddb2bt.pipelines.dynamodb.client import ClientSettings
from ddb2bt.pipelines.dynamodb.stream import StreamRetentionError

from .cells import expected_cells, read_cells
from .stream_wire import wire_error
from .streams import backfill, table_items, workload


def test_tail_applies_live_changes_and_a_redelivery_changes_nothing(bigtable_env, moto_server, unique_name, tmp_path):
    rng = random.Random(11)
    run_dir = str(tmp_path / "run")
    client, spec = backfill(moto_server, unique_name, run_dir, rng)
    workload(client, unique_name, rng, 150)
    result = tail(spec, RunOptions(run_dir=run_dir), until_idle_s=0.5, poll_s=0.1)
    assert result.ok, result.problems
    c = result.counters
    assert c["changes_read"] >= 150 and c["cells_deleted"] > 0
    want = expected_cells(spec, table_items(client, unique_name))
    assert read_cells(spec.target) == want

    # Everything delivered again from the stream's start (a lost checkpoint): same cells.
    state = json.loads((tmp_path / "run" / "tail.json").read_text())
    for shard in state["shards"].values():
        shard.update(sequence=None, done=False)
    (tmp_path / "run" / "tail.json").write_text(json.dumps(state))
    again = tail(spec, RunOptions(run_dir=run_dir), until_idle_s=0.5, poll_s=0.1)
    assert again.ok and again.counters["changes_read"] >= c["changes_read"]
    assert read_cells(spec.target) == want

    # More live changes, picked up from the saved positions.
    workload(client, unique_name, rng, 40)
    tail(spec, RunOptions(run_dir=run_dir), until_idle_s=0.5, poll_s=0.1)
    assert read_cells(spec.target) == expected_cells(spec, table_items(client, unique_name))


class ExpiringOnce:
    """The real streams client, except that the first GetRecords answers ExpiredIteratorException (as the wire
    carries it, parsed by botocore)."""

    def __init__(self, client) -> None:
        self._client, self.expired = client, 0

    def __getattr__(self, name):
        return getattr(self._client, name)

    def get_records(self, **kwargs):
        if not self.expired:
            self.expired += 1
            raise wire_error("GetRecords", "ExpiredIteratorException", "Iterator expired")
        return self._client.get_records(**kwargs)


def test_expired_iterator_is_renewed_and_retention_gaps_are_refused(bigtable_env, moto_server, unique_name, tmp_path,
                                                                    monkeypatch):
    rng = random.Random(5)
    run_dir = str(tmp_path / "run")
    client, spec = backfill(moto_server, unique_name, run_dir, rng)
    workload(client, unique_name, rng, 30)
    made = []
    real = dynamodb_stream.make_streams_client

    def expiring(settings: ClientSettings):
        made.append(ExpiringOnce(real(settings)))
        return made[-1]

    monkeypatch.setattr(dynamodb_stream, "make_streams_client", expiring)
    result = tail(spec, RunOptions(run_dir=run_dir), until_idle_s=0.3, poll_s=0.1)
    assert made[0].expired == 1 and result.ok
    assert read_cells(spec.target) == expected_cells(spec, table_items(client, unique_name))

    # A timeline ending more than 24 hours ago: the stream cannot hold it.
    timeline = json.loads((tmp_path / "run" / "cutover.json").read_text())
    timeline["applied_to_us"] = int(time.time() * 1e6) - 25 * 3_600_000_000
    (tmp_path / "run" / "cutover.json").write_text(json.dumps(timeline))
    (tmp_path / "run" / "tail.json").unlink()
    with pytest.raises(StreamRetentionError, match="24-hour retention.*catch-up"):
        tail(spec, RunOptions(run_dir=run_dir), until_idle_s=0.3)


class Trimmed:
    """The real streams client, except that ``call`` answers TrimmedDataAccessException (moto never trims)."""

    def __init__(self, client, call: str) -> None:
        self._client, self._call, self.raised = client, call, 0
        self._operation = "".join(part.title() for part in call.split("_"))

    def __getattr__(self, name):
        if name != self._call:
            return getattr(self._client, name)

        def trimmed(**kwargs):
            self.raised += 1
            raise wire_error(self._operation, "TrimmedDataAccessException", "Attempted to access data that has been "
                             "trimmed")

        return trimmed


def test_positions_past_the_retention_are_refused_and_point_to_catch_up(bigtable_env, moto_server, unique_name,
                                                                        tmp_path, monkeypatch):
    rng = random.Random(7)
    run_dir = str(tmp_path / "run")
    client, spec = backfill(moto_server, unique_name, run_dir, rng)
    workload(client, unique_name, rng, 20)
    assert tail(spec, RunOptions(run_dir=run_dir), until_idle_s=0.3, poll_s=0.1).ok
    state_file = tmp_path / "run" / "tail.json"
    saved = state_file.read_text()
    workload(client, unique_name, rng, 20)
    real = dynamodb_stream.make_streams_client

    for call in ("get_shard_iterator", "get_records"):  # the saved position, or the records after it, trimmed
        made = []
        monkeypatch.setattr(dynamodb_stream, "make_streams_client",
                            lambda settings, call=call: made.append(Trimmed(real(settings), call)) or made[-1])
        with pytest.raises(StreamRetentionError, match="retention.*catch-up"):
            tail(spec, RunOptions(run_dir=run_dir), until_idle_s=0.3, poll_s=0.1)
        assert made[0].raised == 1 and state_file.read_text() == saved  # nothing applied past the gap is recorded
    monkeypatch.setattr(dynamodb_stream, "make_streams_client", real)

    # The checkpoint holds an unfinished shard that DescribeStream no longer lists: its records are gone.
    state = json.loads(saved)
    state["shards"]["shardId-00000001541620000000-0ld5hard"] = {"sequence": "1100000000017454423001", "done": False,
                                                                "parent": None}
    state_file.write_text(json.dumps(state))
    with pytest.raises(StreamRetentionError, match="no longer in the stream.*catch-up"):
        tail(spec, RunOptions(run_dir=run_dir), until_idle_s=0.3, poll_s=0.1)
    # Finished before it expired: nothing was lost, the tail goes on and converges.
    state["shards"]["shardId-00000001541620000000-0ld5hard"]["done"] = True
    state_file.write_text(json.dumps(state))
    assert tail(spec, RunOptions(run_dir=run_dir), until_idle_s=0.3, poll_s=0.1).ok
    assert read_cells(spec.target) == expected_cells(spec, table_items(client, unique_name))
    assert list(json.loads(state_file.read_text())["shards"]) == list(json.loads(saved)["shards"])  # forgotten


def test_a_kept_shard_iterator_serves_only_the_position_it_follows(moto_server, unique_name):
    """A reader of the stream that asks for another position than where its last turn stopped (cutover-status lists a
    shard from its last check, then counts from the tail's position) reads from that position, not from the kept
    iterator."""
    from ddb2bt.pipelines.cutover.workload import create_streamed_table

    client = create_streamed_table(moto_server.endpoint, unique_name)
    for n in range(12):
        client.put_item(TableName=unique_name, Item={"pk": {"S": f"p{n}"}, "sk": {"S": "post"}})
    source = dynamodb_stream.StreamChanges(unique_name, client,
                                           dynamodb_stream.make_streams_client(ClientSettings(
                                               endpoint_url=moto_server.endpoint, region="us-east-1")),
                                           page_limit=5)
    shard = source.pieces()[0].id
    first = [change for page in source.pages(shard, None) for change in page.changes]
    assert len(first) == 12 and source.iterators[shard][0] == first[-1].sequence  # kept after the last record
    again = [change for page in source.pages(shard, first[3].sequence) for change in page.changes]
    assert [change.sequence for change in again] == [change.sequence for change in first[4:]]
    assert [change for page in source.pages(shard, first[-1].sequence) for change in page.changes] == []


def test_ctrl_c_stops_the_tail_with_what_it_applied_and_how_to_go_on(bigtable_env, moto_server, unique_name, tmp_path,
                                                                     monkeypatch):
    """Ctrl-C is how a tail is stopped (README): the CLI says what it applied, where it is saved and the command that
    goes on, and exits 130 (typer turns a KeyboardInterrupt into a silent exit 130 when the use case lets it out)."""
    from typer.testing import CliRunner

    from ddb2bt.cli.main import app
    from ddb2bt.pipelines.cutover import tail as stream_tail

    rng = random.Random(12)
    run_dir = str(tmp_path / "run")
    client, spec = backfill(moto_server, unique_name, run_dir, rng)
    workload(client, unique_name, rng, 30)
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps(spec.model_dump(mode="json", by_alias=True)))

    def ctrl_c(seconds: float) -> None:  # the user presses Ctrl-C while the tail waits for more changes
        raise KeyboardInterrupt

    monkeypatch.setattr(stream_tail.time, "sleep", ctrl_c)
    result = CliRunner().invoke(app, ["tail", str(spec_path), "--run-dir", run_dir])
    assert result.exit_code == 130, result.output
    assert f"tail {spec_path} --run-dir {run_dir}: following the table's stream into Bigtable; it stops at Ctrl-C" \
        in result.output  # said at once: a tail runs silently for as long as the cutover takes
    assert "tail stopped after" in result.output and "changes:" in result.output
    assert f"error: tail stopped by Ctrl-C; what it applied is saved in {run_dir}/tail.json" in result.output
    assert f"ddb2bt tail {spec_path} --run-dir {run_dir}" in result.output
    state = stream_tail.load_state(run_dir)
    assert state is not None and state.counters["changes_read"] >= 30
    assert stream_tail.stopped_since(run_dir, state)  # recorded as stopped: cutover-status does not wait for it
    timeline = json.loads((tmp_path / "run" / "cutover.json").read_text())
    assert timeline["tail_started_us"] and "tail_changes" not in timeline  # the stream: as earlier versions wrote it
    assert read_cells(spec.target) == expected_cells(spec, table_items(client, unique_name))


def test_a_stream_disabled_since_is_named_as_such(moto_server, unique_name):
    """DescribeTable keeps a disabled stream's LatestStreamArn and drops its StreamSpecification: the tail and
    cutover-status say the stream is no longer enabled (not that its view is None)."""
    from ddb2bt.mappers.errors import UsageError
    from ddb2bt.pipelines.cutover.workload import create_streamed_table

    client = create_streamed_table(moto_server.endpoint, unique_name)
    client.update_table(TableName=unique_name, StreamSpecification={"StreamEnabled": False})
    source = dynamodb_stream.StreamChanges(unique_name, client, dynamodb_stream.make_streams_client(ClientSettings(
        endpoint_url=moto_server.endpoint, region="us-east-1")))
    with pytest.raises(UsageError, match=f"the stream of {unique_name} .* is no longer enabled; enable a stream"):
        source.window()


def test_the_tails_checkpoint_holds_keys_so_it_is_private(tmp_path):
    """tail.json keeps the keys of the items changed last (user data, like the savepoints): mode 0600, also when it
    replaces a file that was readable by others; so are the other timeline files written the same way."""
    import stat

    from ddb2bt.pipelines.cutover import tail as stream_tail
    from ddb2bt.pipelines.cutover.timeline import write_json

    state = stream_tail.TailState("arn:stream", 1, recent=[{"pk": {"S": "alice@example.com"}}])
    (tmp_path / "tail.json").write_text("{}")
    (tmp_path / "tail.json").chmod(0o644)
    stream_tail.save_state(str(tmp_path), state)
    assert stat.S_IMODE((tmp_path / "tail.json").stat().st_mode) == 0o600
    assert stream_tail.load_state(str(tmp_path)).recent == state.recent
    write_json(str(tmp_path / "status.json"), {"checked": {}})
    assert stat.S_IMODE((tmp_path / "status.json").stat().st_mode) == 0o600


class GoneAfter:
    """The real streams client, until ``pages`` GetRecords have been answered: then the stream's endpoint is gone
    (botocore's EndpointConnectionError, as a dead or unreachable server gives)."""

    def __init__(self, client, pages: int) -> None:
        self._client, self._left = client, pages

    def __getattr__(self, name):
        return getattr(self._client, name)

    def get_records(self, **kwargs):
        from botocore.exceptions import EndpointConnectionError

        if self._left <= 0:
            raise EndpointConnectionError(endpoint_url="http://127.0.0.1:9")
        self._left -= 1
        return self._client.get_records(**kwargs)


def test_a_stream_gone_mid_tail_says_what_was_applied_then_one_line_with_the_command(bigtable_env, moto_server,
                                                                                     unique_name, tmp_path,
                                                                                     monkeypatch):
    """A service dying under the tail ends it as it ends a migration: what it applied (the tail's counts), then one
    `error:` line naming the failure, where the progress is saved and the command that goes on, exit 3. It printed
    the error alone: no word of what was applied, nor how to go on."""
    from typer.testing import CliRunner

    from ddb2bt.cli.main import app

    rng = random.Random(13)
    run_dir = str(tmp_path / "run")
    client, spec = backfill(moto_server, unique_name, run_dir, rng)
    workload(client, unique_name, rng, 30)
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps(spec.model_dump(mode="json", by_alias=True)))
    real = dynamodb_stream.make_streams_client
    monkeypatch.setattr(dynamodb_stream, "make_streams_client", lambda settings: GoneAfter(real(settings), 1))
    # an option given is given again in the command that goes on (it left out --endpoint-url: another endpoint)
    result = CliRunner().invoke(app, ["tail", str(spec_path), "--run-dir", run_dir, "--endpoint-url",
                                      moto_server.endpoint, "--until-idle", "0.5", "--poll-seconds", "0.1"])
    assert result.exit_code == 3, result.output
    assert any(line.startswith("tail stopped after ") and " changes: " in line
               for line in result.stdout.splitlines()), result.output
    lines = result.stderr.splitlines()
    assert lines[-1].startswith('error: Could not connect to the endpoint URL: "http://127.0.0.1:9"'), lines[-1]
    assert lines[-1].endswith(f"; what the tail applied is saved in {run_dir}/tail.json: once it is back, go on "
                              f"with: ddb2bt tail {spec_path} --endpoint-url {moto_server.endpoint} --run-dir "
                              f"{run_dir} --until-idle=0.5 --poll-seconds=0.1"), lines[-1]
    assert [line for line in lines if line.startswith("error:")] == [lines[-1]]
    # the line goes on: run as printed (its own flags too: it stops when idle), the tail ends where a fresh run would
    monkeypatch.setattr(dynamodb_stream, "make_streams_client", real)
    command = shlex.split(lines[-1].split("go on with: ", 1)[1])
    again = CliRunner().invoke(app, command[1:])
    assert again.exit_code == 0, again.output
    assert read_cells(spec.target) == expected_cells(spec, table_items(client, unique_name))
