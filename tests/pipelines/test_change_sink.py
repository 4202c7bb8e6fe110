"""The change writer's entries are byte for byte what the client's own DeleteRangeFromColumn/SetCell entries send."""

from __future__ import annotations

from google.cloud.bigtable.data import DeleteRangeFromColumn, RowMutationEntry, SetCell

from ddb2bt.mappers.changes import CellDelete, RowChange
from ddb2bt.mappers.results import Cell
from ddb2bt.pipelines.cutover.change_sink import row_entries


def test_entries_are_the_clients_bytes():
    row = RowChange(b"row#1", (CellDelete("d", b"gone", 5_000), CellDelete("c", b"\x00\xff", 7_000)),
                    (Cell("d", b"kept", 9_000, b"v"), Cell("x", b"", 0, b"")))
    (entry,) = row_entries(row)
    expected = RowMutationEntry(b"row#1", [DeleteRangeFromColumn("d", b"gone", 5_000, 6_000),
                                           DeleteRangeFromColumn("c", b"\x00\xff", 7_000, 8_000),
                                           SetCell("d", b"kept", b"v", 9_000), SetCell("x", b"", b"", 0)])
    assert entry.size() == expected._to_pb()._pb.ByteSize()
    assert entry._to_pb()._pb.SerializeToString() == expected._to_pb()._pb.SerializeToString()
    assert len(entry.mutations) == 4 and entry.is_idempotent()
    assert [type(m) for m in entry.mutations] == [DeleteRangeFromColumn, DeleteRangeFromColumn, SetCell, SetCell]
