"""The batcher whose MutateRows answers are read as raw protobuf does what the client's own batcher does: the same
fields read from each answer, the same entries retried, the same failures with the same causes, the same cells."""

from __future__ import annotations

import pytest
from google.api_core import exceptions as core
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2

from ddb2bt.mappers.results import Cell, MappedRow
from ddb2bt.mappers.spec import TargetSpec
from ddb2bt.pipelines.bigtable.entries import to_mutation_entry
from ddb2bt.pipelines.bigtable.sink import FlowControl, close_batcher, ensure_table, open_batcher

from .bigtable_faults import LostResponse
from .cells import read_cells


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


def _client_batcher(table, flow: FlowControl):
    """The client's own batcher with the same limits: what open_batcher must behave like."""
    return table.mutations_batcher(
        flush_limit_mutation_count=flow.flush_limit_mutation_count, flush_limit_bytes=flow.flush_limit_bytes,
        flow_control_max_mutation_count=flow.flow_control_max_mutation_count,
        flow_control_max_bytes=flow.flow_control_max_bytes, batch_operation_timeout=flow.operation_timeout,
        batch_attempt_timeout=flow.attempt_timeout)


def _write(open_, table, entries, flow: FlowControl) -> list[tuple[bytes, str, str]]:
    batcher = open_(table, flow)
    for entry in entries:
        batcher.append(entry)
    return sorted((error.entry.row_key, type(error.__cause__).__name__, str(error.__cause__))
                  for error in close_batcher(batcher))


def _rows(tag: bytes) -> list:
    good = [MappedRow(tag + b"%03d" % i, (Cell("f", b"q", 1000 * (i + 1), b"v%d" % i), Cell("g", b"x", 2000, b"")),
                      "thing") for i in range(30)]
    refused = [MappedRow(tag + b"-family", (Cell("nope", b"q", 1000, b"v"),), "thing"),
               MappedRow(tag + b"-ts", (Cell("f", b"q", 1001, b"v"),), "thing")]  # whole milliseconds only
    return [to_mutation_entry(row) for row in good + refused]


@pytest.mark.servers
def test_refusals_come_out_as_the_clients_batcher_reports_them(bigtable_env, unique_name):
    from google.cloud.bigtable.data import BigtableDataClient

    target = TargetSpec(table=unique_name, families={"f": None, "g": None})
    ensure_table(target)
    flow = FlowControl(flush_limit_mutation_count=10)  # several requests in flight
    with BigtableDataClient(project=target.project) as client:
        table = client.get_table(target.instance, target.table)
        theirs = _write(_client_batcher, table, _rows(b"a"), flow)
        ours = _write(open_batcher, table, _rows(b"b"), flow)
    assert [error[0] for error in ours] == [b"b-family", b"b-ts"]
    assert [error[1:] for error in ours] == [error[1:] for error in theirs]
    assert "nope" in ours[0][2]  # the emulator says why
    cells = read_cells(target)
    assert len(cells) == 60
    assert {key[1:]: value for key, value in cells.items() if key[:1] == b"b"} == {
        key[1:]: value for key, value in cells.items() if key[:1] == b"a"}


@pytest.mark.servers
def test_after_a_lost_answer_the_same_entries_are_retried_as_by_the_clients_batcher(bigtable_env, unique_name):
    """A request applied and its answer lost: the idempotent entries are sent again, an entry that is not (a
    server-side timestamp) fails with the transport's error, exactly as with the client's own batcher."""
    from google.cloud.bigtable.data import BigtableDataClient, RowMutationEntry, SetCell

    target = TargetSpec(table=unique_name, families={"f": None, "g": None})
    ensure_table(target)
    flow = FlowControl()
    outcomes = []
    with BigtableDataClient(project=target.project) as client:
        table = client.get_table(target.instance, target.table)
        real = client._gapic_client.mutate_rows
        for tag, open_ in ((b"a", _client_batcher), (b"b", open_batcher)):
            lost = LostResponse(real)
            client._gapic_client.mutate_rows = lost  # what the client's MutateRows operation calls
            entries = _rows(tag)[:30] + [RowMutationEntry(tag + b"-now", [SetCell("f", b"q", b"v", -1)])]
            errors = _write(open_, table, entries, flow)
            outcomes.append((lost.calls, [(key[1:], kind, text) for key, kind, text in errors]))
        client._gapic_client.mutate_rows = real
    assert outcomes[0] == outcomes[1]
    calls, errors = outcomes[1]
    assert calls == 2 and [(key, kind) for key, kind, _text in errors] == [(b"-now", "ServiceUnavailable")]
    cells = read_cells(target)
    assert {key[1:]: value for key, value in cells.items() if key[:1] == b"b" and key != b"b-now"} == {
        key[1:]: value for key, value in cells.items() if key[:1] == b"a" and key != b"a-now"}
    assert len(cells) == 62  # the lost request was applied: the non-idempotent entry too, once (at the server's time)
    assert len(cells[b"a-now"]) == len(cells[b"b-now"]) == 1


@pytest.mark.servers
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
            entries = _rows(b"a")[:30]
            alive = [weakref.ref(entry) for entry in entries]
            assert _write(open_batcher, table, entries, flow) == []
            del entries
            assert [ref for ref in alive if ref() is not None] == []
            assert len(read_cells(target)) == 30
    finally:
        gc.enable()
