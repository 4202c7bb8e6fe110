"""validate's row lookup: the raw ReadRows chunks merged into cells (split values, column changes, a reset row), and
the same rows as the Bigtable client's own reader on the emulator."""

from __future__ import annotations

import pytest
from google.cloud.bigtable.data.exceptions import InvalidChunk
from google.cloud.bigtable_v2.types import ReadRowsResponse

from ddb2bt.mappers.results import Cell
from ddb2bt.pipelines.bigtable.chunks import merge_chunks


def response(*chunks: dict) -> ReadRowsResponse:
    return ReadRowsResponse(chunks=[ReadRowsResponse.CellChunk(**chunk) for chunk in chunks])


def test_chunks_become_rows_of_cells():
    stream = [
        response({"row_key": b"a", "family_name": "f", "qualifier": b"q1", "timestamp_micros": 2000, "value": b"1"},
                 {"qualifier": b"", "timestamp_micros": 1000, "value": b"empty qualifier"},
                 {"family_name": "g", "qualifier": b"q", "timestamp_micros": 1000, "value": b"ab", "value_size": 5}),
        response({"value": b"cd", "value_size": 5}, {"value": b"e", "commit_row": True}),  # a value in three chunks
        response({"row_key": b"b", "family_name": "f", "qualifier": b"x", "timestamp_micros": 1000, "value": b"gone"},
                 {"reset_row": True},  # the server takes the row back and sends it again
                 {"row_key": b"b", "family_name": "f", "qualifier": b"x", "timestamp_micros": 3000, "value": b"2",
                  "commit_row": True}),
    ]
    assert list(merge_chunks(stream)) == [
        (b"a", [Cell("f", b"q1", 2000, b"1"), Cell("f", b"", 1000, b"empty qualifier"), Cell("g", b"q", 1000, b"abcde")]),
        (b"b", [Cell("f", b"x", 3000, b"2")]),
    ]


def test_a_stream_that_ends_inside_a_row_is_refused():
    with pytest.raises(InvalidChunk):
        list(merge_chunks([response({"row_key": b"a", "family_name": "f", "qualifier": b"q", "value": b"1"})]))


@pytest.mark.servers
def test_the_lookup_reads_what_the_client_reads(bigtable_env, unique_name):
    """Rows of many cells, a value of 300 KB (sent in several chunks) and absent keys, against the client's reader."""
    import os

    from google.cloud.bigtable import Client, column_family
    from google.cloud.bigtable.data import ReadRowsQuery, RowMutationEntry, SetCell

    from ddb2bt.pipelines.bigtable.read import RowLookup
    from ddb2bt.pipelines.bigtable.sink import Destination

    project, instance = "lookup-project", "lookup"
    Client(project=project, admin=True).instance(instance).table(unique_name).create(
        column_families={"c": column_family.MaxVersionsGCRule(3), "x": None})
    destination = Destination(project, instance, unique_name)
    keys = [f"r{n:04d}".encode() for n in range(1200)]  # more than one request's 1,000 keys
    big = os.urandom(300_000)
    with RowLookup(destination) as lookup:
        lookup.table.bulk_mutate_rows([RowMutationEntry(key, [
            SetCell("c", f"q{j}".encode(), key * j, 1000 * (j + 1)) for j in range(6)] + (
            [SetCell("x", b"", big, 5000), SetCell("c", b"q1", b"older", 1000)] if key == b"r0007" else []))
            for key in keys])
        asked = [*keys[::-1], b"absent", b"r9999"]
        found = lookup.rows(asked)
        expected = {row.row_key: [Cell(c.family, c.qualifier, c.timestamp_micros, c.value) for c in row.cells]
                    for row in lookup.table.read_rows(ReadRowsQuery(row_keys=keys))}
    assert found == expected and len(found) == len(keys)
    assert Cell("x", b"", 5000, big) in found[b"r0007"] and Cell("c", b"q1", 1000, b"older") in found[b"r0007"]


@pytest.mark.servers
def test_a_stream_cut_midway_is_read_again_from_the_last_row(bigtable_env, bigtable_emulator, unique_name,
                                                             monkeypatch):
    """The connection to Bigtable drops in the middle of a ReadRows answer (a real TCP cut, through a loopback
    proxy): the lookup asks again for the keys after the last complete row and returns every row once."""
    from google.cloud.bigtable import Client, column_family
    from google.cloud.bigtable.data import RowMutationEntry, SetCell

    from ddb2bt.pipelines.bigtable.read import RowLookup
    from ddb2bt.pipelines.bigtable.sink import Destination
    from ddb2bt.pipelines.local.proxy import CutProxy, serving

    project, instance = "lookup-project", "lookup"
    Client(project=project, admin=True).instance(instance).table(unique_name).create(
        column_families={"c": column_family.MaxVersionsGCRule(1)})
    destination = Destination(project, instance, unique_name)
    keys = [f"r{n:04d}".encode() for n in range(600)]
    with RowLookup(destination) as lookup:
        lookup.table.bulk_mutate_rows([RowMutationEntry(key, [SetCell("c", b"v", key * 500, 1000)]) for key in keys])
    host, port = bigtable_emulator.endpoint.rsplit(":", 1)
    proxy = CutProxy(host, int(port), after=1 << 20)  # rows of 2.5 KB: the cut falls after about 400 of them
    with serving(proxy) as proxy_port:
        monkeypatch.setenv("BIGTABLE_EMULATOR_HOST", f"127.0.0.1:{proxy_port}")
        with RowLookup(destination) as lookup:
            found = lookup.rows(keys)
    assert proxy.cuts == 1
    assert sorted(found) == keys and all(cells == [Cell("c", b"v", 1000, key * 500)] for key, cells in found.items())


def test_a_single_threaded_call_is_made_inside_the_data_clients_own_channel(bigtable_env):
    """The touch point (grpc's private flag, on the real data client's channel wrappers): a ``single_threaded`` call
    is grpc's single-threaded unary-stream call, every other call made on the channel afterwards its default one."""
    from google.cloud.bigtable.data import BigtableDataClient

    from ddb2bt.pipelines.bigtable.calls import SERVICE, unary_stream

    with BigtableDataClient(project="lookup") as client:
        channel = client._gapic_client._transport.grpc_channel
        single = unary_stream(channel, SERVICE + "ReadRows", None, None, single_threaded=True)
        after = unary_stream(channel, SERVICE + "ReadRows", None, None)
    assert type(single).__name__ == "_SingleThreadedUnaryStreamMultiCallable"
    assert type(after).__name__ != type(single).__name__
