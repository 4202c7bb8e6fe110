"""Our own MutateRows call (pipelines/bigtable/mutate.py) against the client's own batcher, through the emulator:
the same request (parsed), the same cells, the same refusals, the same retries after a lost answer or a cut
connection, answers read raw as through proto-plus, a written batch freed without the cyclic collector
(raw_answers.py), and the client's private API it builds on still there."""

from __future__ import annotations

import inspect
import itertools

import pytest
from google.api_core import exceptions as core
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ddb2bt.mappers.results import Cell, MappedRow
from ddb2bt.mappers.spec import TargetSpec
from ddb2bt.pipelines.bigtable.entries import to_mutation_entry
from ddb2bt.pipelines.bigtable.mutate import Pools
from ddb2bt.pipelines.bigtable.sink import FlowControl, close_batcher, ensure_table, open_batcher
from ddb2bt.pipelines.local.proxy import serving

from .bigtable_faults import CutLargeRequest, LostResponse
from .cells import read_cells

pytestmark = pytest.mark.servers

COUNTERS = frozenset({"c"})
FAMILIES = {"f": None, "g": None, "c": {"aggregate": "sum"}}


def client_batcher(table, flow: FlowControl):
    """The client's own batcher with the same limits: what open_batcher must behave like."""
    return table.mutations_batcher(
        flush_limit_mutation_count=flow.flush_limit_mutation_count, flush_limit_bytes=flow.flush_limit_bytes,
        flow_control_max_mutation_count=flow.flow_control_max_mutation_count,
        flow_control_max_bytes=flow.flow_control_max_bytes, batch_operation_timeout=flow.operation_timeout,
        batch_attempt_timeout=flow.attempt_timeout)


def lent(pools: Pools):
    """open_batcher with its thread pools lent by ``pools``, as the writer opens each page's batcher."""
    return lambda table, flow: open_batcher(table, flow, pools)


def write(batcher, entries) -> list[tuple[bytes, str]]:
    """Append, close; each failed entry's row key and its cause's type, sorted."""
    for entry in entries:
        batcher.append(entry)
    return sorted((error.entry.row_key, type(error.__cause__).__name__) for error in close_batcher(batcher))


class Recorded:
    """A call that records the requests it sends."""

    def __init__(self, call) -> None:
        self.call, self.requests = call, []

    def __call__(self, request, **kwargs):
        self.requests.append(request)
        return self.call(request, **kwargs)


def key_part():
    return st.binary(min_size=1, max_size=12)


cells = st.one_of(
    st.tuples(st.sampled_from(["f", "g"]), st.binary(max_size=10), st.integers(0, 2**40).map(lambda ms: ms * 1000),
              st.binary(max_size=300)),
    st.tuples(st.just("c"), st.binary(min_size=1, max_size=6), st.integers(0, 2**40).map(lambda ms: ms * 1000),
              st.integers(-(2**63), 2**63 - 1).map(lambda n: n.to_bytes(8, "big", signed=True))),
)
rows = st.lists(st.tuples(key_part(), st.lists(cells, min_size=1, max_size=6)), min_size=1, max_size=40)
examples = itertools.count()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(generated=rows)
def test_the_same_request_and_the_same_cells_as_the_clients_batcher(bigtable_env, unique_name, generated):
    """Generated rows (plain cells and counters, any bytes) written by the client's batcher into one table and by
    ours into another: our request is the client's request (parsed), and the two tables hold the same cells."""
    from google.cloud.bigtable.data import BigtableDataClient
    from google.cloud.bigtable_v2.types import bigtable as types_pb

    tag = b"%d/" % next(examples)  # one table per test; each example's rows of their own
    theirs, ours = (TargetSpec(table=f"{unique_name}{side}", families=FAMILIES) for side in "ab")
    for target in (theirs, ours):
        ensure_table(target)
    mapped = [MappedRow(tag + key, tuple(Cell(*cell) for cell in found), "thing") for key, found in generated]
    flow = FlowControl(flush_limit_mutation_count=50)  # several requests
    with BigtableDataClient(project=theirs.project) as client:
        assert write(client_batcher(client.get_table(theirs.instance, theirs.table), flow),
                     [to_mutation_entry(row, COUNTERS) for row in mapped]) == []
        batcher = open_batcher(client.get_table(ours.instance, ours.table, app_profile_id="a-profile"), flow)
        recorded = batcher._mutate_rows = Recorded(batcher._mutate_rows)
        entries = [to_mutation_entry(row, COUNTERS) for row in mapped]
        assert write(batcher, entries) == []
    sent = [types_pb.MutateRowsRequest.pb().FromString(request) for request in recorded.requests]
    # every entry sent once, each request a run of them in order; the batcher sends its requests from several
    # threads, so the requests themselves may go out in any order
    expected = [entry._to_pb()._pb.SerializeToString() for entry in entries]
    runs = [[entry.SerializeToString() for entry in request.entries] for request in sent]
    assert sorted(record for run in runs for record in run) == sorted(expected)
    assert runs and all(any(expected[i:i + len(run)] == run for i in range(len(expected))) for run in runs)
    name = f"projects/{ours.project}/instances/{ours.instance}/tables/{ours.table}"
    assert {(request.table_name, request.app_profile_id) for request in sent} == {(name, "a-profile")}
    mine = {key: found for key, found in read_cells(ours).items() if key.startswith(tag)}
    assert mine == {key: found for key, found in read_cells(theirs).items() if key.startswith(tag)}
    assert set(mine) == {row.row_key for row in mapped}


def refused_rows(tag: bytes) -> list:
    good = [MappedRow(tag + b"%03d" % i, (Cell("f", b"q", 1000 * (i + 1), b"v%d" % i), Cell("g", b"x", 2000, b"")),
                      "thing") for i in range(30)]
    refused = [MappedRow(tag + b"-family", (Cell("nope", b"q", 1000, b"v"),), "thing"),
               MappedRow(tag + b"-ts", (Cell("f", b"q", 1001, b"v"),), "thing")]  # whole milliseconds only
    return [to_mutation_entry(row) for row in good + refused]


def test_an_answer_reads_the_same_raw_as_through_proto_plus():
    """What the client's operation reads of each answer (index, status code, message, details) and the error it
    makes of it are the same from the raw message as from its proto-plus wrapper."""
    from google.cloud.bigtable_v2.types import bigtable as types_pb

    detail = any_pb2.Any()
    detail.Pack(error_details_pb2.ErrorInfo(reason="FAMILY_NOT_FOUND", domain="bigtable.googleapis.com"))
    wrapped = types_pb.MutateRowsResponse(entries=[
        {"index": 0, "status": status_pb2.Status(code=0)},
        {"index": 7, "status": status_pb2.Status(code=5, message="family nope not found", details=[detail])},
        {"index": 2, "status": status_pb2.Status(code=14, message="unavailable")},
    ])
    raw = types_pb.MutateRowsResponse.pb().FromString(types_pb.MutateRowsResponse.serialize(wrapped))
    assert len(raw.entries) == len(wrapped.entries) == 3
    for ours, theirs in zip(raw.entries, wrapped.entries):
        assert (ours.index, ours.status.code, ours.status.message) == (theirs.index, theirs.status.code,
                                                                       theirs.status.message)
        assert list(ours.status.details) == list(theirs.status.details)
        mine = core.from_grpc_status(ours.status.code, ours.status.message, details=ours.status.details)
        client = core.from_grpc_status(theirs.status.code, theirs.status.message, details=theirs.status.details)
        assert (type(mine), str(mine), mine.reason, list(mine.details)) == (
            type(client), str(client), client.reason, list(client.details))


def test_a_written_batch_is_freed_without_the_cyclic_collector(bigtable_env, unique_name):
    """The client's MutateRows operation held itself in a cycle, and with it every entry of its batch until the
    collector ran: through open_batcher, once the batcher is closed, the entries are gone with the collector off."""
    import gc
    import weakref

    from google.cloud.bigtable.data import BigtableDataClient

    target = TargetSpec(table=unique_name, families={"f": None, "g": None})
    ensure_table(target)
    flow = FlowControl(flush_limit_mutation_count=10)
    gc.collect()
    gc.disable()
    try:
        with BigtableDataClient(project=target.project) as client:
            table = client.get_table(target.instance, target.table)
            entries = refused_rows(b"a")[:30]
            alive = [weakref.ref(entry) for entry in entries]
            assert write(open_batcher(table, flow), entries) == []
            del entries
            assert [ref for ref in alive if ref() is not None] == []
            assert len(read_cells(target)) == 30
    finally:
        gc.enable()


def test_refusals_have_the_clients_causes_word_for_word(bigtable_env, unique_name):
    from google.cloud.bigtable.data import BigtableDataClient

    target = TargetSpec(table=unique_name, families={"f": None, "g": None})
    ensure_table(target)
    flow = FlowControl(flush_limit_mutation_count=10)
    outcomes = []
    pools = Pools()
    with BigtableDataClient(project=target.project) as client:
        table = client.get_table(target.instance, target.table)
        for tag, open_ in ((b"a", client_batcher), (b"b", open_batcher), (b"c", lent(pools)), (b"d", lent(pools))):
            batcher = open_(table, flow)
            for entry in refused_rows(tag):
                batcher.append(entry)
            outcomes.append(sorted((error.entry.row_key[1:], type(error.__cause__).__name__, str(error.__cause__),
                                    error.index) for error in close_batcher(batcher)))
    pools.shutdown()
    assert outcomes[0] == outcomes[1] == outcomes[2] == outcomes[3]  # the last one on the pools the third gave back
    assert [outcome[0] for outcome in outcomes[1]] == [b"-family", b"-ts"]
    assert "nope" in outcomes[1][0][2]  # the emulator says why


def test_after_a_lost_answer_the_same_entries_are_retried_as_by_the_clients_batcher(bigtable_env, unique_name):
    """A request applied and its answer lost: the idempotent entries are sent again, an entry that is not (a
    server-side timestamp) fails with the transport's error, exactly as with the client's own batcher."""
    from google.cloud.bigtable.data import BigtableDataClient, RowMutationEntry, SetCell

    target = TargetSpec(table=unique_name, families={"f": None, "g": None})
    ensure_table(target)
    outcomes = []
    with BigtableDataClient(project=target.project) as client:
        table = client.get_table(target.instance, target.table)
        real = client._gapic_client.mutate_rows
        pools = Pools()
        for tag, open_ in ((b"a", client_batcher), (b"b", open_batcher), (b"c", lent(pools))):
            batcher = open_(table, FlowControl())
            if open_ is client_batcher:
                lost = client._gapic_client.mutate_rows = LostResponse(real)  # what the client's operation calls
            else:
                lost = batcher._mutate_rows = LostResponse(batcher._mutate_rows)  # what ours calls
            entries = refused_rows(tag)[:30] + [RowMutationEntry(tag + b"-now", [SetCell("f", b"q", b"v", -1)])]
            errors = write(batcher, entries)
            outcomes.append(([(key[1:], kind) for key, kind in errors], lost.calls))
            client._gapic_client.mutate_rows = real
        pools.shutdown()
    assert outcomes[0] == outcomes[1] == outcomes[2]
    assert outcomes[1] == ([(b"-now", "ServiceUnavailable")], 2)
    cells = read_cells(target)
    for tag in b"bc":
        assert {key[1:]: found for key, found in cells.items() if key[0] == tag and key[1:] != b"-now"} == {
            key[1:]: found for key, found in cells.items() if key[:1] == b"a" and key != b"a-now"}
    assert len(cells) == 93  # the lost request was applied: the non-idempotent entry too, once (at the server's time)
    assert len(cells[b"a-now"]) == len(cells[b"b-now"]) == len(cells[b"c-now"]) == 1


def test_a_connection_cut_under_a_request_is_retried_as_by_the_clients_batcher(bigtable_env, unique_name,
                                                                               monkeypatch):
    """A loopback proxy between the data client and the emulator cuts the connection while the first large
    request goes through it (before the request is whole, so Bigtable applies none of it): the idempotent entries
    are sent again on a new connection and written, the one that is not fails with UNAVAILABLE, as with the
    client's own batcher; every cell is there afterwards."""
    from google.cloud.bigtable.data import BigtableDataClient, RowMutationEntry, SetCell

    target = TargetSpec(table=unique_name, families={"f": None, "g": None})
    ensure_table(target)
    host, port = bigtable_env.endpoint.rsplit(":", 1)
    outcomes = []
    for tag, open_ in ((b"a", client_batcher), (b"b", open_batcher)):
        proxy = CutLargeRequest(host, int(port), after=8192)
        with serving(proxy) as proxy_port:
            monkeypatch.setenv("BIGTABLE_EMULATOR_HOST", f"127.0.0.1:{proxy_port}")
            with BigtableDataClient(project=target.project) as client:
                table = client.get_table(target.instance, target.table)
                big = [MappedRow(tag + b"%03d" % i, (Cell("f", b"q", 1000, b"v" * 1000),), "thing") for i in range(30)]
                entries = [to_mutation_entry(row) for row in big]
                entries.append(RowMutationEntry(tag + b"-now", [SetCell("f", b"q", b"v", -1)]))
                outcomes.append([(key[1:], kind) for key, kind in write(open_(table, FlowControl()), entries)])
        assert proxy.cuts == 1
    monkeypatch.setenv("BIGTABLE_EMULATOR_HOST", bigtable_env.endpoint)
    assert outcomes[0] == outcomes[1] == [(b"-now", "ServiceUnavailable")]
    cells = read_cells(target)
    assert sorted(cells) == sorted(b"%s%03d" % (tag, i) for tag in (b"a", b"b") for i in range(30))
    assert all(found == [("f", b"q", 1000, b"v" * 1000)] for found in cells.values())


def test_writes_go_on_after_the_client_replaces_its_channel(bigtable_env, unique_name):
    """The client replaces its channel every 35 to 45 minutes and closes the old one: our call follows it (a stub
    kept on the old channel would fail from then on)."""
    from google.cloud.bigtable.data import BigtableDataClient

    target = TargetSpec(table=unique_name, families={"f": None, "g": None})
    ensure_table(target)
    with BigtableDataClient(project=target.project) as client:
        table = client.get_table(target.instance, target.table)
        batcher = open_batcher(table, FlowControl())
        assert write(batcher, refused_rows(b"a")[:5]) == []
        channel = client.transport.grpc_channel  # what the client's _manage_channel does
        old = channel.swap_channel(channel.create_channel())
        client._invalidate_channel_stubs()
        old.close()
        batcher = open_batcher(table, FlowControl())
        assert write(batcher, refused_rows(b"b")[:5]) == []
    assert len(read_cells(target)) == 10


def test_the_clients_private_api_we_build_on_is_there(bigtable_env, unique_name):
    """What mutate.py relies on in google-cloud-bigtable (pinned in pyproject.toml): the batcher's step that runs
    one batch and the attributes it reads, the operation's constructor and the state its attempts share."""
    from google.cloud.bigtable.data import BigtableDataClient, MutationsBatcher
    from google.cloud.bigtable.data._cross_sync import CrossSync

    from ddb2bt.pipelines.bigtable.mutate import batcher_class, client_layout_fits, operation_class

    operation = CrossSync._Sync_Impl._MutateRowsOperation
    assert list(inspect.signature(MutationsBatcher._execute_mutate_rows).parameters) == ["self", "batch", "metric"]
    assert list(inspect.signature(operation.__init__).parameters) == [
        "self", "gapic_client", "target", "mutation_entries", "operation_timeout", "attempt_timeout", "metric",
        "retryable_exceptions"]
    assert client_layout_fits()  # the pinned versions: our batcher, not the client's own
    assert batcher_class() is not MutationsBatcher and issubclass(batcher_class(), MutationsBatcher)
    assert issubclass(operation_class(), operation)
    with BigtableDataClient(project="p") as client:
        table = client.get_table("i", unique_name)
        batcher = open_batcher(table, FlowControl())
        for name in ("_target", "_operation_timeout", "_attempt_timeout", "_retryable_errors", "_flow_control"):
            assert hasattr(batcher, name), name
        ours = operation_class()(table, [], batcher._mutate_rows, operation_timeout=5.0, attempt_timeout=1.0,
                                 metric=client._metrics.create_operation(_bulk_type()),
                                 retryable_exceptions=())
        assert (ours.mutations, ours.remaining_indices, ours.errors) == ([], [], {})
        assert next(ours.timeout_generator) == 1.0 and callable(ours._handle_entry_error)
        batcher.close()


def _bulk_type():
    from google.cloud.bigtable.data._metrics import OperationType

    return OperationType.BULK_MUTATE_ROWS


def test_a_client_of_another_layout_writes_through_its_own_batcher(bigtable_env, unique_name, monkeypatch):
    """Where the installed client's private layout is not the one mutate.py replaces parts of, the writer uses the
    client's own batcher and operation: slower, the same cells and refusals."""
    from google.cloud.bigtable.data import BigtableDataClient, MutationsBatcher

    from ddb2bt.pipelines.bigtable import mutate

    target = TargetSpec(table=unique_name, families={"f": None, "g": None})
    ensure_table(target)
    monkeypatch.setattr(mutate, "client_layout_fits", lambda: False)
    mutate.batcher_class.cache_clear()
    try:
        with BigtableDataClient(project=target.project) as client:
            batcher = open_batcher(client.get_table(target.instance, target.table), FlowControl())
            assert type(batcher) is MutationsBatcher
            assert [key for key, _kind in write(batcher, refused_rows(b"a"))] == [b"a-family", b"a-ts"]
    finally:
        mutate.batcher_class.cache_clear()
    assert len(read_cells(target)) == 30


def test_our_append_stages_and_flushes_as_the_clients_own(bigtable_env, unique_name, monkeypatch):
    """The batcher's own append for our entries (no ABC check, the entry's count and kept size read directly):
    after every entry the same staged count and bytes as the client's append, a flush at the same entries (count
    limit, byte limit), an entry not yet sized sized, another entry (the client's RowMutationEntry) through the
    client's own path, a closed batcher refusing as the client's does; and, where an instance lacks what the client's
    append reads and sets, the client's own append."""
    from google.cloud.bigtable.data import BigtableDataClient, MutationsBatcher, RowMutationEntry, SetCell

    from ddb2bt.pipelines.bigtable import mutate
    from ddb2bt.pipelines.bigtable.entries import entry_maker

    sized = entry_maker()
    rows = [MappedRow(b"r%d" % i, tuple(Cell("f", b"q%d" % j, 1000, b"v" * (40 * i % 300)) for j in range(1 + i % 7)),
                      "e") for i in range(60)]
    entries = [sized(row) if i % 3 else to_mutation_entry(row) for i, row in enumerate(rows)]  # a third unsized
    entries[5] = RowMutationEntry(b"theirs", [SetCell("f", b"q", b"v", 1000)])

    def staged(batcher) -> list:
        flushes: list = []

        def flush():
            flushes.append(len(batcher._staged_entries))
            batcher._staged_entries, batcher._staged_count, batcher._staged_bytes = [], 0, 0

        batcher._schedule_flush = flush
        after = []
        for entry in entries:
            batcher.append(entry)
            after.append((batcher._staged_count, batcher._staged_bytes, len(flushes)))
        return [after, flushes]

    with BigtableDataClient(project="p") as client:
        table = client.get_table("i", unique_name)
        for limits in ({"flush_limit_mutation_count": 23}, {"flush_limit_bytes": 2000}):
            ours = batcher_class_for_test()(table, flush_interval=None, **limits)
            theirs = MutationsBatcher(table, flush_interval=None, **limits)
            assert type(ours).append is not MutationsBatcher.append
            assert staged(ours) == staged(theirs) and staged(ours)[1]  # it flushed, at the same entries
            for batcher in (ours, theirs):
                batcher._staged_entries = []
                batcher.close()
                with pytest.raises(RuntimeError, match="closed"):
                    batcher.append(entries[1])
        assert all(entry._size >= 0 for entry in entries if entry is not entries[5])

        monkeypatch.setattr(mutate, "STAGING", (*mutate.STAGING, "_staged_other"))  # a client keeping other state
        older = batcher_class_for_test()(table, flush_interval=None)
        assert older.append.func is MutationsBatcher.append
        older.append(entries[1])
        assert older._staged_entries == [entries[1]]
        older._staged_entries = []
        older.close()


def batcher_class_for_test():
    from ddb2bt.pipelines.bigtable.mutate import batcher_class

    return batcher_class()


def pool_threads(ending_after: set | None = None) -> set:
    """The pool threads alive; with ``ending_after``, once every other one has had 5 s to end (a client's own pool
    is shut down without waiting: its thread ends soon after; an idle pool that was not shut down keeps its threads
    waiting for work)."""
    import threading

    for thread in threading.enumerate():
        if ending_after is not None and thread.name.startswith("ThreadPoolExecutor") and thread not in ending_after:
            thread.join(timeout=5)
    return {thread for thread in threading.enumerate() if thread.name.startswith("ThreadPoolExecutor")}


def test_lent_pools_are_reused_across_batchers_and_shut_down_at_the_end(bigtable_env, unique_name, monkeypatch):
    """Batchers opened one after another (two open at once, as the writer's page closing behind the next) on one
    Pools: each writes every row and reports every refusal as alone, its requests all ended when its close returns
    (the cells are there), the threads started do not grow with the batchers (the client's own start theirs each
    time), a close that raises gives its pools back too, and after shutdown none of their threads is left."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from google.cloud.bigtable.data import BigtableDataClient

    target = TargetSpec(table=unique_name, families={"f": None, "g": None})
    ensure_table(target)
    before = pool_threads()
    started: list[str] = []
    start = threading.Thread.start

    def counted(thread):
        started.append(thread.name)
        start(thread)

    monkeypatch.setattr(threading.Thread, "start", counted)

    def pages(pools: Pools | None, count: int) -> list:
        outcomes = []
        with BigtableDataClient(project=target.project) as client, ThreadPoolExecutor(1, "page-close") as closer:
            table = client.get_table(target.instance, target.table)
            closing = None
            for page in range(count):
                batcher = open_batcher(table, FlowControl(flush_limit_mutation_count=10), pools)
                for entry in refused_rows(b"%s%02d/" % (b"x" if pools is None else b"y", page)):
                    batcher.append(entry)
                if closing is not None:
                    outcomes.append(closing.result())
                closing = closer.submit(write, batcher, [])
            outcomes.append(closing.result())
        return outcomes

    pools = Pools()
    mine = pages(pools, 20)
    lent_threads = [name for name in started if name.startswith("ThreadPoolExecutor")]
    started.clear()
    theirs = pages(None, 20)
    own_threads = [name for name in started if name.startswith("ThreadPoolExecutor")]
    untagged = [[[(key[4:], kind) for key, kind in outcome] for outcome in outcomes] for outcomes in (mine, theirs)]
    assert untagged[0] == untagged[1]
    assert [[key for key, _kind in outcome] for outcome in untagged[0]] == [[b"-family", b"-ts"]] * 20
    cells = read_cells(target)
    assert len(cells) == 2 * 20 * 30
    assert len(own_threads) >= 2 * 20  # each of the client's batchers started a flush thread and a request thread
    assert len(lent_threads) <= 2 * (4 + 8)  # two pairs at most (two batchers open at once), whatever the pages
    assert pool_threads() - before  # the pools' threads wait for the next batcher
    pools.shutdown()
    assert pool_threads(before) - before == set()


def test_a_lent_batchers_close_waits_for_a_flush_its_timer_was_scheduling(bigtable_env, unique_name):
    """The batcher's timer took the staged entries to flush just as the batcher is closed: close returns only once
    that flush has been sent and answered (the client's close waited for it by shutting its flush pool down), so
    every cell is in Bigtable when it returns."""
    import threading
    import time

    from google.cloud.bigtable.data import BigtableDataClient

    target = TargetSpec(table=unique_name, families={"f": None, "g": None})
    ensure_table(target)
    before = pool_threads()
    in_timer = threading.Event()

    class Slow:
        """The flush pool, slow to take the timer's flush (between taking the entries and submitting them)."""

        def __init__(self, pool) -> None:
            self.pool = pool

        def submit(self, *args, **kwargs):
            if threading.current_thread() is not threading.main_thread():
                in_timer.set()
                time.sleep(0.5)
            return self.pool.submit(*args, **kwargs)

    pools = Pools()
    with BigtableDataClient(project=target.project) as client:
        table = client.get_table(target.instance, target.table)
        batcher = batcher_class_for_test()(table, pools, flush_interval=0.05)
        batcher._sync_flush_executor = Slow(batcher._sync_flush_executor)
        for entry in refused_rows(b"a")[:30]:
            batcher.append(entry)
        assert in_timer.wait(10)
        batcher.close()
        assert len(read_cells(target)) == 30
    pools.shutdown()
    assert pool_threads(before) - before == set()
