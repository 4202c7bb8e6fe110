"""A ReadRows answer's rows read from its bytes (`chunks.response_rows`, compiled in `_rows.c`): the same rows as
protobuf's parse and the Python merge, over responses protobuf itself serialised (the client's `ReadRowsResponse`)
in every layout a server may use, and None (the Python functions answer, with their errors) for anything else."""

from __future__ import annotations

import pytest
from google.cloud.bigtable.data.exceptions import InvalidChunk
from google.cloud.bigtable_v2.types import ReadRowsResponse
from google.protobuf.message import DecodeError
from hypothesis import HealthCheck, given, settings, strategies as st

from ddb2bt.mappers.results import Cell
from ddb2bt.pipelines.bigtable import chunks

SETTINGS = settings(max_examples=300, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
RAW = ReadRowsResponse.pb()
CHUNK = ReadRowsResponse.CellChunk.pb()


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

families = st.one_of(st.sampled_from(["c", "f", "x"]), st.text(st.characters(blacklist_categories=["Cs"]),
                                                                 min_size=1, max_size=8))
qualifiers = st.one_of(st.sampled_from([b"", b"n", b"status"]), st.binary(max_size=20))
stamps = st.one_of(st.sampled_from([0, 1000, 1_704_067_200_000_000]), st.integers(-(1 << 63), (1 << 63) - 1))
values = st.one_of(st.binary(max_size=40), st.integers(100, 3000).map(lambda n: b"v" * n))
cells = st.builds(Cell, families, qualifiers, stamps, values)
rows = st.lists(st.tuples(st.binary(min_size=1, max_size=12), st.lists(cells, min_size=1, max_size=8)),
                max_size=8)
UNKNOWN = [b"\x50\x07", b"\x59" + bytes(8), b"\x62\x03abc", b"\x6d" + bytes(4), b"\xa8\x1f\x01",  # fields 10-13, 501
           b"\xfa\xff\xff\xff\x0f\x00"]  # field 536870911, the largest


def laid_out(data: st.DataObject, found: list[tuple[bytes, list[Cell]]]) -> list[dict]:
    """Chunks of ``found``'s rows as the protocol allows: a row key on a row's first chunk (or on each, as the
    emulator's), a family and qualifier left out where they do not change (or always sent), a value over several
    chunks announced by value_size, labels, a row taken back by reset_row and sent again, commit_row on the last."""
    out: list[dict] = []
    every_field = data.draw(st.booleans(), "every field in every chunk")
    for row_key, row_cells in found:
        if data.draw(st.integers(0, 5)) == 0:  # a start the server takes back
            out.append({"row_key": row_key, "family_name": "gone", "qualifier": b"q", "value": b"x"})
            if data.draw(st.booleans()):
                out.append({"value": b"half", "value_size": 9})
            out.append({"reset_row": True})
        family = qualifier = None
        for index, cell in enumerate(row_cells):
            chunk: dict = {"timestamp_micros": cell.timestamp_micros}
            if index == 0 or every_field:
                chunk["row_key"] = row_key
            if every_field or index == 0 or (cell.family, cell.qualifier) != (family, qualifier):
                chunk["qualifier"] = cell.qualifier
                if every_field or index == 0 or cell.family != family:
                    chunk["family_name"] = cell.family
            family, qualifier = cell.family, cell.qualifier
            if data.draw(st.integers(0, 7)) == 0:
                chunk["labels"] = data.draw(st.lists(st.text(st.characters(blacklist_categories=["Cs"]), max_size=5),
                                                     min_size=1, max_size=2))
            value = cell.value
            pieces = data.draw(st.integers(1, 4)) if value else 1
            cuts = sorted(data.draw(st.lists(st.integers(0, len(value)), min_size=pieces - 1, max_size=pieces - 1)))
            parts = [value[a:b] for a, b in zip([0, *cuts], [*cuts, len(value)])]
            for number, part in enumerate(parts):
                piece = chunk if number == 0 else {}
                piece["value"] = part
                if number < len(parts) - 1:
                    piece["value_size"] = len(value)
                out.append(piece)
        out[-1]["commit_row"] = True
    return out


def serialised(data: st.DataObject, chunk_dicts: list[dict], unknown: bool = True) -> bytes:
    """The chunks in responses (split anywhere, even inside a row or a value), each serialised by protobuf; some
    with last_scanned_row_key, some chunks with fields protobuf does not know (kept as unknown fields)."""
    pieces: list[bytes] = []
    at = 0
    while at < len(chunk_dicts) or not pieces:
        size = data.draw(st.integers(1, 6))
        message = RAW()
        for chunk in chunk_dicts[at:at + size]:
            made = CHUNK(**{k: v for k, v in chunk.items() if k not in ("family_name", "qualifier")})
            if "family_name" in chunk:
                made.family_name.value = chunk["family_name"]
            if "qualifier" in chunk:
                made.qualifier.value = chunk["qualifier"]
            if unknown and data.draw(st.integers(0, 9)) == 0:
                made.MergeFromString(data.draw(st.sampled_from(UNKNOWN)))
            message.chunks.append(made)
        if data.draw(st.integers(0, 4)) == 0:
            message.last_scanned_row_key = data.draw(st.binary(max_size=6))
        if unknown and data.draw(st.integers(0, 9)) == 0:
            message.MergeFromString(data.draw(st.sampled_from(UNKNOWN)))
        pieces.append(message.SerializeToString())
        at += size
    return b"".join(pieces)


@SETTINGS
@given(data=st.data(), found=rows)
def test_rows_in_any_server_layout_are_read_as_protobuf_and_the_merge_read_them(data, found):
    """Every well-formed answer is read by the compiled module itself (never left to Python), its rows those of
    protobuf's parse and the Python merge, and the rows that were laid out."""
    blob = serialised(data, laid_out(data, found))
    answer = assert_agrees(blob)
    assert answer is not None, "a well-formed answer was left to Python"
    assert_same_rows(answer, dict(found))


chunk_fields = st.fixed_dictionaries({}, optional={
    "row_key": st.sampled_from([b"", b"a", b"a", b"b"]),
    "family_name": st.sampled_from(["", "f", "g"]),
    "qualifier": st.sampled_from([b"", b"q", b"r"]),
    "timestamp_micros": st.sampled_from([0, 1000, -1]),
    "labels": st.lists(st.sampled_from(["", "l"]), max_size=2),
    "value": st.sampled_from([b"", b"1", b"22"]),
    "value_size": st.sampled_from([0, 3, -1]),
    "reset_row": st.booleans(),
    "commit_row": st.booleans(),
}).map(lambda chunk: {"row_key": b"a", **chunk} if len(chunk) % 3 == 0 else chunk)  # a row key more often than not


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


def cell(**fields) -> dict:
    return {"family_name": "f", "qualifier": b"q", "timestamp_micros": 1000, **fields}


QUIRKS = {  # the Python merge's rules where the protocol says little; the compiled module follows them
    "a negative value_size ends nothing": [cell(row_key=b"a", value=b"1", value_size=-1, commit_row=True)],
    "a commit inside a value is passed over": [cell(row_key=b"a", value=b"1", value_size=3),
                                               {"value": b"2", "value_size": 3, "commit_row": True},
                                               {"value": b"3", "commit_row": True}],
    "a continuation's column and row key count, its timestamp not": [
        cell(row_key=b"a", value=b"1", value_size=2),
        {"row_key": b"a", "family_name": "g", "qualifier": b"r", "timestamp_micros": 5, "value": b"2",
         "commit_row": True}],
    "the family and qualifier carry over to the next row and past a reset": [
        cell(row_key=b"a", value=b"1", commit_row=True), {"row_key": b"b", "value": b"2"},
        {"reset_row": True}, {"row_key": b"b", "timestamp_micros": 7, "value": b"3", "commit_row": True}],
    "a reset inside a value drops it": [cell(row_key=b"a", value=b"1", value_size=5), {"reset_row": True},
                                        cell(row_key=b"a", value=b"2", commit_row=True)],
    "a qualifier with an empty family keeps the family": [cell(row_key=b"a", value=b"1"),
                                                         {"family_name": "", "qualifier": b"r", "value": b"2",
                                                          "commit_row": True}],
    "the row key again inside its row": [cell(row_key=b"a", value=b"1"), cell(row_key=b"a", value=b"2",
                                                                             commit_row=True)],
    "a row again: the last one": [cell(row_key=b"a", value=b"1", commit_row=True),
                                  cell(row_key=b"a", value=b"2", commit_row=True)],
    "a reset with nothing to reset": [{"reset_row": True}, cell(row_key=b"a", value=b"1", commit_row=True)],
    "a new row key inside a row": [cell(row_key=b"a", value=b"1"), cell(row_key=b"b", value=b"2", commit_row=True)],
    "a new row key inside a row's first value": [cell(row_key=b"a", value=b"1", value_size=2),
                                     {"row_key": b"b", "value": b"2", "commit_row": True}],
    "no row key": [cell(value=b"1", commit_row=True)],
    "the end inside a value": [cell(row_key=b"a", value=b"1", value_size=2)],
    "the end inside a row": [cell(row_key=b"a", value=b"1")],
}


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


def field(number: int, payload: bytes | int, wire: int | None = None) -> bytes:
    """A field as protobuf writes it: a length-delimited one for bytes, a varint for an int (or ``wire``'s type)."""
    def varint(n: int) -> bytes:
        out = bytearray()
        while n >= 0x80:
            out.append(n & 0x7F | 0x80)
            n >>= 7
        return bytes([*out, n])

    if isinstance(payload, int):
        return varint(number << 3 | (0 if wire is None else wire)) + varint(payload & (1 << 64) - 1)
    return varint(number << 3 | (2 if wire is None else wire)) + varint(len(payload)) + payload


def chunk(*fields: bytes) -> bytes:
    return field(1, b"".join(fields))


KEY, COMMIT = field(1, b"a"), field(9, 1)
WIRE = [  # hand-written fields: what protobuf refuses, or reads by a rule the compiled module leaves to it
    chunk(KEY, KEY, field(3, b""), COMMIT),  # a row key twice in one chunk (protobuf keeps the last)
    chunk(KEY, field(2, field(1, b"f")), field(2, b""), field(3, b""), COMMIT),  # a family twice (merged)
    chunk(KEY, field(3, field(1, b"q") + field(1, b"r")), COMMIT),  # a qualifier's value twice
    chunk(KEY, field(3, b""), field(8, 0), COMMIT),  # reset_row and commit_row
    chunk(KEY, field(2, field(1, b"\xff")), field(3, b""), COMMIT),  # a family that is not UTF-8
    chunk(KEY, field(2, field(1, b"\xff")), COMMIT),  # the same in a chunk whose family the merge never reads
    chunk(KEY, field(2, field(1, b"\xed\xa0\x80")), field(3, b""), COMMIT),  # a surrogate in UTF-8's form
    chunk(KEY, field(3, b""), field(5, b"\xc3"), COMMIT),  # a label that is not UTF-8
    chunk(field(1, 7, wire=0), field(3, b""), COMMIT),  # a row key with a varint's wire type
    chunk(KEY, field(3, b""), field(6, 5, wire=0), COMMIT),  # a value so
    chunk(KEY, field(3, b""), b"\x53\x54", COMMIT),  # a group (field 10)
    chunk(b"\x00\x01", KEY, field(3, b""), COMMIT),  # field number 0
    chunk(KEY, field(3, b""), COMMIT) + field(3, b""),  # request_stats
    chunk(KEY, field(3, b""), b"\x20" + b"\xff" * 9 + b"\x7f", COMMIT),  # a varint beyond 64 bits
    chunk(KEY, field(3, b""), b"\x20" + b"\xff" * 10 + b"\x01", COMMIT),  # a varint of eleven bytes
    chunk(KEY, field(3, b""), b"\x80\x80\x80\x80\x80\x08\x00", COMMIT),  # a tag of six bytes
    field(1, b"\x0a\x05ab"),  # a field's length beyond its message
    chunk(KEY, field(3, b""), COMMIT)[:-1],  # cut inside a tag's value
    chunk(KEY, field(3, b""), COMMIT) + b"\x0c",  # an end-group tag at the top
]


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
