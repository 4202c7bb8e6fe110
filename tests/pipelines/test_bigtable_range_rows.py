"""A range read's rows from its groups of responses (`chunks.range_rows`, compiled in `_rows.c`'s ``range_rows``):
the same rows, in the same order, and the same end inside a row or error, as protobuf's parse of each group and the
Python merge over all of them (`chunks._merge`, the rollback's reads before), wherever a row begins and ends across
groups."""

from __future__ import annotations

import pytest
from google.cloud.bigtable.data.exceptions import InvalidChunk
from google.protobuf.message import DecodeError
from hypothesis import given, strategies as st

from ddb2bt.mappers.results import Cell
from ddb2bt.pipelines.bigtable import chunks
from tests.pipelines.bigtable_chunks import QUIRKS, RAW, SETTINGS, WIRE, chunk_fields, laid_out, responses, rows


def compiled():
    if chunks._compiled_range is None:
        pytest.skip("_rows.c not built: the Python merge serves")
    return chunks._compiled_range


def test_the_compiled_function_is_built_wherever_a_c_compiler_is():
    from tests.compiled import require_built

    require_built(chunks._compiled_range, "pipelines/bigtable/_rows.c")


def grouped(data: st.DataObject, pieces: list[bytes]) -> list[bytes]:
    """The responses joined in groups of any size, as `chunks._joined` joins them (a group is one message)."""
    groups, at = [], 0
    while at < len(pieces):
        size = data.draw(st.integers(1, 4))
        groups.append(b"".join(pieces[at:at + size]))
        at += size
    return groups


def outcome(merge, groups: list[bytes]) -> tuple[list, type[Exception] | None]:
    """The rows a merge gave before it ended, and the error it ended with."""
    out: list = []
    try:
        for row in merge(groups):
            out.append(row)
    except (DecodeError, InvalidChunk) as err:
        return out, type(err)
    return out, None


def python_merge(groups: list[bytes]):
    return chunks._merge(RAW.FromString(group) for group in groups)


def assert_same(groups: list[bytes]) -> tuple[list, type[Exception] | None]:
    expected = outcome(python_merge, groups)
    found = outcome(chunks.range_rows, groups)
    assert found == expected
    for row_key, cells in found[0]:
        assert row_key is None or type(row_key) is bytes
        assert type(cells) is list and all(type(cell) is Cell for cell in cells)
        assert all([type(field) for field in cell] == [str, bytes, int, bytes] for cell in cells)
    return found


@SETTINGS
@given(data=st.data(), found=rows)
def test_rows_split_anywhere_across_groups_are_read_as_the_merge_reads_them(data, found):
    """Rows laid out as a server may (a value over chunks, resets, labels, fields left out where they do not change,
    unknown fields), in responses split anywhere and joined in groups of any size: the Python merge's rows, read by
    the compiled function alone (never left to Python), and the rows that were laid out."""
    compiled()
    groups = grouped(data, responses(data, laid_out(data, found)))
    expected = outcome(python_merge, groups)
    original = chunks._merge
    chunks._merge = None  # type: ignore[assignment]  # any fall back to Python fails the test
    try:
        found_rows = outcome(chunks.range_rows, groups)
    finally:
        chunks._merge = original
    assert found_rows == expected
    assert found_rows == (list(found), None)


@SETTINGS
@given(data=st.data(), chunk_dicts=st.lists(chunk_fields, max_size=12))
def test_any_chunk_sequence_across_groups_gives_the_merges_rows_and_end(data, chunk_dicts):
    """Chunks in any order (no row key, new keys inside rows, values never ended, resets and commits anywhere), split
    into groups anywhere: the same rows and the same end (inside a row, or the merge's error) as the Python merge."""
    for chunk in chunk_dicts:
        if chunk.get("reset_row") and chunk.get("commit_row"):
            del chunk["commit_row"]  # a oneof: protobuf keeps one of them
    assert_same(grouped(data, responses(data, chunk_dicts)))


@SETTINGS
@given(data=st.data(), found=rows.filter(bool), cut=st.integers(0, 10_000), junk=st.binary(min_size=1, max_size=4))
def test_damaged_groups_give_the_merges_rows_and_protobufs_error(data, found, cut, junk):
    groups = grouped(data, responses(data, laid_out(data, found)))
    where = cut % len(groups)
    groups[where] = groups[where][:cut % (len(groups[where]) + 1)] + junk
    assert_same(groups)


def one_chunk_each(chunk_dicts: list[dict]) -> list[bytes]:
    pieces = []
    for fields in chunk_dicts:
        message = RAW()
        made = message.chunks.add(**{k: v for k, v in fields.items() if k not in ("family_name", "qualifier")})
        if "family_name" in fields:
            made.family_name.value = fields["family_name"]
        if "qualifier" in fields:
            made.qualifier.value = fields["qualifier"]
        pieces.append(message.SerializeToString())
    return pieces


@pytest.mark.parametrize("chunk_dicts", QUIRKS.values(), ids=QUIRKS.keys())
def test_the_merges_own_rules_hold_at_every_group_boundary(chunk_dicts):
    """The family and qualifier carried into the next row and past a reset, a value continued, a row again...: each
    chunk in a response of its own, the responses grouped in every way two groups can be."""
    pieces = one_chunk_each(chunk_dicts)
    for cut in range(len(pieces) + 1):
        assert_same([b"".join(pieces[:cut]), b"".join(pieces[cut:])] if 0 < cut < len(pieces)
                    else [b"".join(pieces)])


def test_a_row_over_many_groups_is_carried_and_then_left_to_python_past_the_limit(monkeypatch):
    """A row whose chunks come over several groups is read again in front of each next group; past JOINED_BYTES
    of such bytes the Python merge takes over from there, with the family and qualifier carried: the same rows."""
    compiled()
    head = [{"row_key": b"a", "family_name": "f", "qualifier": b"q", "timestamp_micros": 1, "value": b"1",
             "commit_row": True}]
    long_row = [{"row_key": b"b", "qualifier": b"r", "timestamp_micros": n, "value": b"x" * 50} for n in range(40)]
    tail = [{"timestamp_micros": 0, "value": b"end", "commit_row": True},
            {"row_key": b"c", "timestamp_micros": 2, "value": b"2", "commit_row": True}]
    pieces = one_chunk_each(head + long_row + tail)
    groups = [b"".join(pieces[at:at + 3]) for at in range(0, len(pieces), 3)]
    expected = assert_same(groups)
    assert [key for key, _cells in expected[0]] == [b"a", b"b", b"c"]
    assert expected[0][1][1][0] == Cell("f", b"r", 0, b"x" * 50)  # the family carried from row a
    monkeypatch.setattr(chunks, "JOINED_BYTES", 200)
    assert_same(groups)
    calls = []
    original = chunks._merge
    monkeypatch.setattr(chunks, "_merge", lambda *args: calls.append(args[1:]) or original(*args))
    assert outcome(chunks.range_rows, groups) == expected
    assert calls == [("f", b"q")], "the Python merge took over, from row b's start, with what row a carried"


@pytest.mark.parametrize("blob", WIRE)
def test_hand_written_oddities_are_left_to_protobuf_and_the_merge(blob):
    """What the compiled function leaves to protobuf (a field twice, bad UTF-8, groups, request_stats, damaged bytes),
    alone or after a group of its own: the same rows and errors as protobuf's parse and the Python merge."""
    assert compiled()(blob, Cell, "", b"") is None
    assert_same([blob])
    assert_same([RAW(chunks=[{"row_key": b"0", "value": b"v", "commit_row": True}]).SerializeToString(), blob])


def test_a_cell_type_with_more_than_a_tuples_fields_is_refused_and_odd_arguments_left_to_python():
    class Wider(tuple):  # an instance dict
        pass

    with pytest.raises(TypeError):
        compiled()(b"", Wider, "", b"")
    with pytest.raises(TypeError):
        compiled()(b"", Cell, "")
    assert compiled()(bytearray(b""), Cell, "", b"") is None
    assert compiled()(b"", Cell, b"", b"") is None
    assert compiled()(b"", Cell, "", "") is None
    assert compiled()(b"", Cell, "f", b"q") == ([], 0, "f", b"q")


def test_a_c_made_tuple_type_with_hidden_fields_is_refused_as_the_cell_type():
    """time.struct_time has tuple's sizes but frees fields past its items: made here with four items, freeing a cell
    read past them (found under ASan by review 11). Refused as a cell type, as a type with slots of its own is."""
    import os
    import time

    def field(number: int, payload: bytes) -> bytes:
        return bytes([number << 3 | 2, len(payload)]) + payload

    range_rows = compiled()
    chunk = field(1, b"a") + field(2, field(1, b"f")) + field(3, field(1, b"q")) + field(6, b"v") + bytes([9 << 3, 1])
    for kind in (time.struct_time, os.stat_result):
        with pytest.raises(TypeError, match="cell must be a tuple subclass"):
            range_rows(field(1, chunk), kind, "", b"")
    assert range_rows(field(1, chunk), Cell, "", b"") is not None
