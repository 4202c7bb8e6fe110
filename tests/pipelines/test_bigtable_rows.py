"""A ReadRows answer's rows read from its bytes (`chunks.response_rows`, compiled in `_rows.c`): the same rows as
protobuf's parse and the Python merge, over responses protobuf itself serialised (the client's `ReadRowsResponse`)
in every layout a server may use, and None (the Python functions answer, with their errors) for anything else."""

from __future__ import annotations

import pytest
from google.cloud.bigtable.data.exceptions import InvalidChunk
from google.protobuf.message import DecodeError
from hypothesis import given, strategies as st

from ddb2bt.mappers.results import Cell
from ddb2bt.pipelines.bigtable import chunks
from tests.pipelines.bigtable_chunks import (QUIRKS, RAW, SETTINGS, WIRE, chunk_fields, laid_out, responses, rows,
                                             serialised)


def compiled():
    if chunks._compiled_rows is None:
        pytest.skip("_rows.c not built: the Python function serves (see the test below)")
    return chunks._compiled_rows


def test_the_compiled_module_is_built_wherever_a_c_compiler_is():
    """pyproject.toml builds pipelines/bigtable/_rows.c (optional); with a compiler here, a missing module would leave
    every test below on the Python function alone."""
    from tests.compiled import require_built

    require_built(chunks._compiled_rows, "pipelines/bigtable/_rows.c")


def python_answer(data: bytes) -> dict | type[Exception]:
    try:
        return chunks._parsed_response_rows(data)
    except (DecodeError, InvalidChunk) as err:
        return type(err)


def assert_same_rows(found: dict, expected: dict) -> None:
    assert found == expected
    assert list(found) == list(expected)  # the same order of rows, too
    for key, cells in found.items():
        assert type(key) is bytes and type(cells) is list
        for cell in cells:
            assert type(cell) is Cell
            assert [type(field) for field in cell] == [str, bytes, int, bytes]


def assert_agrees(data: bytes) -> dict | None:
    """The compiled answer is None or the Python one, and None wherever Python raises; ``response_rows`` is Python's."""
    answer = compiled()(data, Cell)
    python = python_answer(data)
    if answer is not None:
        assert isinstance(python, dict), f"the compiled reader answered where Python raises {python}"
        assert_same_rows(answer, python)
    if isinstance(python, dict):
        assert_same_rows(chunks.response_rows(data), python)
    else:
        with pytest.raises(python):
            chunks.response_rows(data)
    return answer


# -- rows, laid out as chunks the way a server may lay them out ---------------------------------------------------

@SETTINGS
@given(data=st.data(), found=rows)
def test_rows_in_any_server_layout_are_read_as_protobuf_and_the_merge_read_them(data, found):
    """Every well-formed answer is read by the compiled module itself (never left to Python), its rows those of
    protobuf's parse and the Python merge, and the rows that were laid out."""
    blob = serialised(data, laid_out(data, found))
    answer = assert_agrees(blob)
    assert answer is not None, "a well-formed answer was left to Python"
    assert_same_rows(answer, dict(found))


def client_merge(pieces: list[bytes]) -> dict[bytes, list[Cell]]:
    """The data client's own merge of the responses' chunks (``merge_rows`` of its ReadRows operation, what its
    ``read_rows`` yields rows from), its cells as ours (labels left out, as we leave them)."""
    from google.cloud.bigtable.data._sync_autogen._read_rows import _ReadRowsOperation

    class Operation:  # what merge_rows reads of its operation: its metric
        class _operation_metric:  # noqa: N801 - the attribute's name
            active_attempt = None

            @staticmethod
            def end_with_success() -> None:
                pass

    chunks_in_order = (chunk for piece in pieces for chunk in RAW.FromString(piece).chunks)
    return {row.row_key: [Cell(c.family, c.qualifier, c.timestamp_micros, c.value) for c in row.cells]
            for row in _ReadRowsOperation.merge_rows(Operation(), chunks_in_order)}


@SETTINGS
@given(data=st.data(), found=rows)
def test_rows_are_those_the_data_clients_own_merge_reads(data, found):
    """The client's merge (google-cloud-bigtable's, which its read_rows and our retries before used) is a third
    reading of the same answer: rows with empty values, empty qualifiers, many families, labels, values over several
    chunks, rows taken back by reset_row, fields left out where they do not change, the rows split over responses
    anywhere (a row's chunks in several) with last_scanned_row_key and unknown fields among them. Its rows are the
    compiled reader's, the Python merge's, and the range reader's in any grouping (a row open across groups)."""
    found = sorted(dict(found).items())  # the client's merge wants a row once, and its keys in order
    pieces = responses(data, laid_out(data, found))
    expected = client_merge(pieces)
    assert expected == dict(found)
    assert_same_rows(compiled()(b"".join(pieces), Cell), expected)
    assert_same_rows(chunks._parsed_response_rows(b"".join(pieces)), expected)
    groups, at = [], 0
    while at < len(pieces):
        size = data.draw(st.integers(1, 4))
        groups.append(b"".join(pieces[at:at + size]))
        at += size
    assert list(chunks.range_rows(groups)) == list(expected.items())


@SETTINGS
@given(data=st.data(), chunk_dicts=st.lists(chunk_fields, max_size=10))
def test_any_chunk_sequence_gives_the_merges_rows_or_is_left_to_it(data, chunk_dicts):
    """Chunks in any order (a chunk with no row key, a new key inside a row, values announced and never ended, resets
    anywhere, a commit inside a value, a negative value_size): where the Python merge raises the compiled module
    answers None, and wherever it answers the compiled module answers too (nothing here is left to Python by choice:
    protobuf wrote each field once)."""
    for chunk in chunk_dicts:
        if chunk.get("reset_row") and chunk.get("commit_row"):
            del chunk["commit_row"]  # a oneof: protobuf keeps one of them
    blob = serialised(data, chunk_dicts)
    answer = assert_agrees(blob)
    assert (answer is None) == (not isinstance(python_answer(blob), dict))


@pytest.mark.parametrize("chunk_dicts", QUIRKS.values(), ids=QUIRKS.keys())
def test_the_merges_own_rules_are_followed(chunk_dicts):
    message = RAW()
    for fields in chunk_dicts:
        made = message.chunks.add(**{k: v for k, v in fields.items() if k not in ("family_name", "qualifier")})
        if "family_name" in fields:
            made.family_name.value = fields["family_name"]
        if "qualifier" in fields:
            made.qualifier.value = fields["qualifier"]
    blob = message.SerializeToString()
    answer = assert_agrees(blob)
    assert (answer is None) == (not isinstance(python_answer(blob), dict))


@SETTINGS
@given(data=st.data(), found=rows.filter(bool), edits=st.lists(st.tuples(st.integers(0, 10_000),
                                                                        st.sampled_from(["set", "cut", "insert"]),
                                                                        st.binary(min_size=1, max_size=6)),
                                                              min_size=1, max_size=3))
def test_damaged_bytes_give_protobufs_rows_or_errors(data, found, edits):
    """Bytes changed, cut or inserted anywhere in a well-formed answer: a different answer that protobuf parses is
    read as it reads it; what protobuf refuses (or the merge) is left to them."""
    blob = bytearray(serialised(data, laid_out(data, found), unknown=False))
    for where, how, what in edits:
        at = where % (len(blob) + 1)
        if how == "set" and at < len(blob):
            blob[at] = what[0]
        elif how == "cut":
            del blob[at:at + len(what)]
        else:
            blob[at:at] = what
    assert_agrees(bytes(blob))


@pytest.mark.parametrize("blob", WIRE)
def test_hand_written_oddities_are_left_to_protobuf(blob):
    assert compiled()(blob, Cell) is None
    assert_agrees(blob)


def test_a_cell_type_with_more_than_a_tuples_fields_is_refused():
    class Wider(tuple):  # an instance dict
        pass

    with pytest.raises(TypeError):
        compiled()(b"", Wider)
    with pytest.raises(TypeError):
        compiled()(b"", list)
    assert compiled()(bytearray(b""), Cell) is None  # bytes only: Python reads the rest
    assert compiled()(b"", Cell) == {}
