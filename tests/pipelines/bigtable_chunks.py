"""ReadRows answers for the tests of the compiled reader (`_rows.c`): rows laid out as chunks the way a server may lay
them out, serialised by protobuf itself (the client's `ReadRowsResponse`), arbitrary chunk sequences, the Python
merge's own rules and hand-written wire oddities (tests/pipelines/test_bigtable_rows.py, test_bigtable_range_rows.py)."""

from __future__ import annotations

from google.cloud.bigtable_v2.types import ReadRowsResponse
from hypothesis import HealthCheck, settings, strategies as st

from ddb2bt.mappers.results import Cell

SETTINGS = settings(max_examples=300, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
RAW = ReadRowsResponse.pb()
CHUNK = ReadRowsResponse.CellChunk.pb()

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
    return b"".join(responses(data, chunk_dicts, unknown))


def responses(data: st.DataObject, chunk_dicts: list[dict], unknown: bool = True) -> list[bytes]:
    """`serialised`'s responses, one by one."""
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
    return pieces


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
