"""The rollback's range reads (`chunks.read_range`) against the Bigtable emulator: raw responses parsed in groups,
and a stream cut midway read on from the last row."""

from __future__ import annotations

import pytest

from ddb2bt.mappers.results import Cell
from ddb2bt.pipelines.bigtable import chunks

pytestmark = pytest.mark.servers


def _table(name: str, rows: dict[bytes, list[tuple[str, bytes, int, bytes]]]) -> None:
    from google.cloud.bigtable import Client, column_family
    from google.cloud.bigtable.data import BigtableDataClient, RowMutationEntry, SetCell

    Client(project="reads", admin=True).instance("reads").table(name).create(
        column_families={"c": column_family.MaxVersionsGCRule(3), "d": column_family.MaxVersionsGCRule(1)})
    with BigtableDataClient(project="reads") as client:
        client.get_table("reads", name).bulk_mutate_rows([
            RowMutationEntry(key, [SetCell(family, qualifier, value, micros) for family, qualifier, micros, value in cells])
            for key, cells in rows.items()])


def _read(name: str, key_range: tuple[bytes, bytes] = (b"", b""), after: bytes | None = None,
          ) -> list[tuple[bytes, list[Cell]]]:
    from google.cloud.bigtable.data import BigtableDataClient

    with BigtableDataClient(project="reads") as client:
        return list(chunks.read_range(client, client.get_table("reads", name), key_range, after))


def _expected(name: str) -> list[tuple[bytes, list[Cell]]]:
    """The rows as the data client's own reader gives them."""
    from google.cloud.bigtable.data import BigtableDataClient, ReadRowsQuery

    with BigtableDataClient(project="reads") as client:
        return [(row.row_key, [Cell(c.family, c.qualifier, c.timestamp_micros, c.value) for c in row.cells])
                for row in client.get_table("reads", name).read_rows(ReadRowsQuery())]


def test_a_range_is_read_in_groups_of_responses(bigtable_env, unique_name, monkeypatch):
    """Rows of several families, versions and a 300 KB value (sent in several chunks), parsed three responses at a
    time: the same rows and cells as the data client's own reader, from a key on too."""
    big = bytes(range(256)) * 1200
    rows = {f"r{n:03d}".encode(): [("c", b"q", 2000, f"v{n}".encode()), ("c", b"q", 1000, b"older"),
                                   ("d", b"", 1000, b""), ("d", "é".encode(), 1000, big if n == 7 else b"x")]
            for n in range(40)}
    _table(unique_name, rows)
    monkeypatch.setattr(chunks, "JOINED_RESPONSES", 3)
    expected = _expected(unique_name)
    got = _read(unique_name)
    assert got == expected and len(got) == 40
    assert Cell("d", "é".encode(), 1000, big) in dict(got)[b"r007"]
    assert _read(unique_name, (b"r010", b"r020"), after=b"r014") == [(k, c) for k, c in expected if b"r014" < k < b"r020"]


def test_a_stream_cut_midway_is_read_on_after_the_last_row(bigtable_env, bigtable_emulator, unique_name, monkeypatch):
    """The connection drops in the middle of the answer (a real TCP cut, through a loopback proxy): the range is asked
    again from after the last complete row, and every row comes once, in key order."""
    from ddb2bt.pipelines.local.proxy import CutProxy, serving

    rows = {f"r{n:04d}".encode(): [("c", b"v", 1000, f"r{n:04d}".encode() * 500)] for n in range(600)}
    _table(unique_name, rows)
    host, port = bigtable_emulator.endpoint.rsplit(":", 1)
    proxy = CutProxy(host, int(port), after=1 << 20)  # rows of 2.5 KB: the cut falls after about 400 of them
    with serving(proxy) as proxy_port:
        monkeypatch.setenv("BIGTABLE_EMULATOR_HOST", f"127.0.0.1:{proxy_port}")
        got = _read(unique_name)
    assert proxy.cuts == 1
    assert [key for key, _ in got] == sorted(rows)
    assert all(cells == [Cell("c", b"v", 1000, key * 500)] for key, cells in got)


def test_an_answer_that_ends_inside_a_row_is_refused(bigtable_env, unique_name, monkeypatch):
    """A stream that ends (without an error) in the middle of a row is not read as a shorter row."""
    from google.cloud.bigtable.data.exceptions import InvalidChunk
    from google.cloud.bigtable_v2.types import ReadRowsResponse

    _table(unique_name, {b"a": [("c", b"q", 1000, b"1")]})
    whole = ReadRowsResponse(chunks=[ReadRowsResponse.CellChunk(row_key=b"a", family_name="c", qualifier=b"q",
                                                                timestamp_micros=1000, value=b"1", commit_row=True)])
    open_row = ReadRowsResponse(chunks=[ReadRowsResponse.CellChunk(row_key=b"b", family_name="c", qualifier=b"q",
                                                                   value=b"2")])
    answers = [ReadRowsResponse.serialize(whole), ReadRowsResponse.serialize(open_row)]
    monkeypatch.setattr(chunks, "raw_read_rows", lambda client: lambda request, **_: iter(answers))
    got = []
    with pytest.raises(InvalidChunk, match="inside a row"):
        from google.cloud.bigtable.data import BigtableDataClient

        with BigtableDataClient(project="reads") as client:
            for row in chunks.read_range(client, client.get_table("reads", unique_name), (b"", b"")):
                got.append(row)
    assert got == [(b"a", [Cell("c", b"q", 1000, b"1")])]


def test_a_range_read_for_longer_than_the_operation_timeout_goes_on_while_rows_come(bigtable_env, unique_name,
                                                                                     monkeypatch):
    """A rollback held back by --wcu reads a tablet for longer than the table's read timeout (600 s by default):
    each attempt ends at the attempt timeout and the range is asked again from the last row; the timeout counts the
    time without a row. Before, the range failed with DEADLINE_EXCEEDED once the whole read passed it, at every
    resume. Here: timeouts of 1.5 s (operation) and 0.3 s (attempt), a consumer taking ~4 s."""
    import time

    from google.cloud.bigtable.data import BigtableDataClient

    rows = {f"r{n:05d}".encode(): [("c", b"v", 1000, f"r{n:05d}".encode() * 400)] for n in range(4000)}  # 24 MB
    _table(unique_name, rows)
    monkeypatch.setattr(chunks, "JOINED_RESPONSES", 20)
    got = []
    began = time.monotonic()
    with BigtableDataClient(project="reads") as client:
        table = client.get_table("reads", unique_name, default_read_rows_operation_timeout=1.5,
                                 default_read_rows_attempt_timeout=0.3)
        for row_key, cells in chunks.read_range(client, table, (b"", b"")):
            got.append(row_key)
            if len(got) % 100 == 0:
                time.sleep(0.1)
    assert time.monotonic() - began > 3.0  # the read outlived the operation timeout twice over
    assert got == sorted(rows)
