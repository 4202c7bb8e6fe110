"""The export reader (ISA-L's gzip reader, a block of lines at a time, orjson where it gives json's value) gives what
the plainest reading gives: the same items, the same line sizes, the same batches, for a bad line the same error after
the same items, and for damaged gzip data the same kind of error.

The reference here is written out independently of the reader's code: the whole file inflated by the standard
library's gzip, every line (blank ones skipped) parsed by ``json``'s exact loader (``wire_json.loads``) or the Ion
reader and handed to ``parse``, a refused line an ExportError naming its number."""

from __future__ import annotations

import base64
import gzip
import json
import zlib
from pathlib import Path
from typing import Any, Callable

import pytest
from hypothesis import given, settings, strategies as st

import ddb2bt.pipelines.dynamodb.export as export
from ddb2bt.pipelines.dynamodb import ion_lines, wire_json
from ddb2bt.pipelines.run.batches import BATCH_ITEMS

ITEM, AN_ITEM = (lambda record: record["Item"]), "an export item"
AWS_EXPORTS = Path(__file__).resolve().parents[1] / "data" / "aws_exports"
DATA_FILES = sorted(str(path) for path in AWS_EXPORTS.rglob("*.gz"))


def test_the_real_export_files_hold_records():
    assert sum(bool(line_by_line(path, lambda record: record, "a record")[0]) for path in DATA_FILES) >= 5


def line_by_line(path: str, parse: Callable[[Any], Any], what: str) -> tuple[list[tuple[int, Any]], str | None]:
    """The plainest reading: ``(line bytes, record)`` pairs, and the error after them (None if the file reads
    through)."""
    data = Path(path).read_bytes()
    lines = (gzip.decompress(data) if path.endswith(".gz") else data).split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    out = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        loads = ion_lines.loads if ion_lines.is_ion(line) else wire_json.loads
        try:
            parsed = parse(loads(line))
        except (ValueError, KeyError, TypeError) as err:
            return out, f"{path} line {number} is not {what}: {export.line_detail(err)}"  # the reader's words
        out.append((len(line) + 1, parsed))
    return out, None


def export_reader(path: str, parse: Callable[[Any], Any], what: str) -> tuple[list[tuple[int, Any]], str | None]:
    out: list[tuple[int, Any]] = []
    try:
        for pair in export.sized_records(path, parse, what):
            out.append(pair)
    except export.ExportError as err:  # the problem, without the advice a line error adds (ExportLineError.HINT)
        return out, getattr(err, "message", str(err)).split("\n")[0]
    return out, None


def batches_of(path: str, parse: Callable[[Any], Any]) -> list[tuple[int, list[Any]]]:
    return [(batch.nbytes, list(batch)) for batch in export.file_batches(export.sized_records(path, parse, "x"))]


@pytest.mark.parametrize("path", DATA_FILES, ids=lambda path: Path(path).name)
@pytest.mark.parametrize("block_bytes", [None, 64, 1000])
def test_real_export_files_read_as_the_plain_reading_reads_them(path, block_bytes, monkeypatch, reader):
    """tests/data/aws_exports' data files (full and incremental, DYNAMODB_JSON and ION), whole records and (for full
    exports) items, at the reader's block size and at small ones that cut blocks mid-file."""
    if block_bytes:
        monkeypatch.setattr(export, "BLOCK_BYTES", block_bytes)
    assert DATA_FILES, "no export data files found under tests/data/aws_exports"
    whole = line_by_line(path, lambda record: record, "a record")
    assert whole[1] is None  # an empty partition's file is empty
    assert export_reader(path, lambda record: record, "a record") == whole
    incremental = "/AWSDynamoDB/data/" in path
    items = line_by_line(path, ITEM, AN_ITEM)
    assert export_reader(path, ITEM, AN_ITEM) == items
    # an incremental export's records have no Item: the first is named
    assert (items[1] is not None) == (incremental and bool(whole[0]))
    if not incremental:
        assert all("Item" not in item for _, item in items[0])  # the wrapper is gone, the item's attributes stay


def _item_line(number: int) -> bytes:
    item = {"pk": {"S": f"k{number}"}, "n": {"N": "1234567890123456789012345678901234.5678"},
            "b": {"B": base64.b64encode(bytes([number % 256, 0, 255])).decode()}, "big": {"N": "-1e-130"}}
    return json.dumps({"Item": item}, separators=(",", ":")).encode()


LINES = st.one_of(
    st.integers(0, 10**6).map(_item_line),
    st.sampled_from([
        b"", b"   ", b"\r", b"\t ",  # blank: skipped
        b'{"Item": {"pk": {"S": "\\u00e9 caf\\u00e9"}}}',
        b'{"Item": {"pk": {"S": "a"}, "n": 123456789012345678901234567890}}',  # a bare big int: exact, via json
        b'{"Item": {"pk": {"N": 1.5}}}',
        b'{"NotAnItem": 1}',  # no Item
        b'[1, 2]',  # a list: no Item
        b'"text"',
        b'{"Item": {"pk": {"S": "a"}}',  # cut short
        b'{"Item": {"pk": {"S": "a"}, "x": Infinity}}',  # json reads Infinity, orjson refuses
        b'\xff\xfe{"Item": {}}',  # not UTF-8
        b'{"Item": {"pk": {"S": "\\ud800"}}}',  # a lone surrogate: json keeps it
        b'  {"Item": {"pk": {"S": "spaced"}}}  ',
    ]),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(LINES, max_size=30), st.booleans(), st.sampled_from([None, 1, 40, 300]),
       st.sampled_from(["item", "record"]))
def test_generated_lines_read_as_the_plain_reading_reads_them(tmp_path_factory, lines, trailing_newline,
                                                                  block_bytes, what):
    """Good lines, blank lines and every kind of bad line, at block sizes that put them anywhere in a block: the
    export reader gives the items the plain reading gives, then the same error naming the same line."""
    path = str(tmp_path_factory.mktemp("export") / "part.json.gz")
    Path(path).write_bytes(gzip.compress(b"\n".join(lines) + (b"\n" if trailing_newline else b"")))
    parse, text = (ITEM, AN_ITEM) if what == "item" else ((lambda record: record), "a record")
    saved = export.BLOCK_BYTES
    export.BLOCK_BYTES = block_bytes or saved
    try:
        got = export_reader(path, parse, text)
    finally:
        export.BLOCK_BYTES = saved
    expected = line_by_line(path, parse, text)
    assert got == expected
    assert [(type(item), item) for _, item in got[0]] == [(type(item), item) for _, item in expected[0]]


@pytest.mark.parametrize("block_bytes", [None, 5_000, 77_777])
def test_batches_are_the_plain_readings_batches(tmp_path, monkeypatch, block_bytes, reader):
    """Blocks of lines cut into batches of BATCH_ITEMS across block boundaries: the same batches, each with the
    bytes of its own lines, as batching the plain reading's records."""
    if block_bytes:
        monkeypatch.setattr(export, "BLOCK_BYTES", block_bytes)
    path = str(tmp_path / "part.json.gz")
    lines = [_item_line(number) for number in range(2 * BATCH_ITEMS + 321)]
    lines[7] = b""  # a blank line: no item, no bytes
    Path(path).write_bytes(gzip.compress(b"\n".join(lines) + b"\n"))
    expected = [(batch.nbytes, list(batch)) for batch in export.file_batches(line_by_line(path, ITEM, "x")[0])]
    assert [len(items) for _, items in expected] == [BATCH_ITEMS, BATCH_ITEMS, 320]
    assert batches_of(path, ITEM) == expected


@pytest.fixture(params=["isal", "standard library"])
def reader(request, monkeypatch):
    """Both gzip readers the export reader may use: ISA-L's (a dependency) and the standard library's (its fallback)."""
    if request.param == "standard library":
        monkeypatch.setattr(export, "GzipReader", gzip.GzipFile)
        monkeypatch.setattr(export, "BAD_GZIP", (gzip.BadGzipFile, zlib.error))
    else:
        assert export.GzipReader.__module__ == "isal.igzip"
    return request.param


def _damaged_body(data: bytes) -> bytes:
    return data[:20] + b"\xff" * 50 + data[70:]


@pytest.mark.parametrize("damage, message", [
    (lambda data: data[:len(data) // 2], "is cut short"),  # EOFError
    (lambda data: data[:-8] + b"\0" * 8, "is not valid gzip data: CRC check failed"),  # BadGzipFile
    (_damaged_body, "is not valid gzip data"),  # zlib.error, isal's IsalError
    (lambda data: data[10:], "is not valid gzip data: Not a gzipped file"),
])
def test_a_damaged_file_gives_its_items_before_the_damage_then_the_error(tmp_path, monkeypatch, reader, damage,
                                                                         message):
    """Damaged gzip data is named as such with either reader: the items before the damage are read (in order, none
    invented), then the ExportError naming the file and what is wrong."""
    monkeypatch.setattr(export, "BLOCK_BYTES", 1000)
    path = str(tmp_path / "part.json.gz")
    Path(path).write_bytes(damage(gzip.compress(b"\n".join(_item_line(n) for n in range(3000)) + b"\n")))
    got = []
    with pytest.raises(export.ExportError, match=message) as raised:
        for _, item in export.sized_records(path, ITEM, AN_ITEM):
            got.append(item["pk"]["S"])
    assert path in str(raised.value)
    assert got == [f"k{n}" for n in range(len(got))]


def test_both_readers_read_the_real_exports_alike(monkeypatch):
    """The standard library's reader, the fallback, gives the same records as ISA-L's on every real data file."""
    isal_read = [list(export.sized_records(path, lambda record: record, "a record")) for path in DATA_FILES]
    monkeypatch.setattr(export, "GzipReader", gzip.GzipFile)
    assert [list(export.sized_records(path, lambda record: record, "a record")) for path in DATA_FILES] == isal_read


@pytest.mark.parametrize("compressed", [True, False])
def test_the_first_lines_check_reads_a_small_part_of_each_file_under_the_read_buffer(tmp_path, monkeypatch, compressed):
    """verify_export reads each data file's first lines before a run. Through Beam's 16 MiB read buffer (s3://, gs://)
    that was one 16 MiB request per file; the check reads the unbuffered stream beneath it, in 64 KiB blocks."""
    import io
    import os

    from apache_beam.io.filesystems import FileSystems

    lines = b"".join(json.dumps({"Item": {"pk": {"S": f"p{i}"}, "v": {"S": os.urandom(300).hex()}}}).encode() + b"\n"
                     for i in range(20_000))  # ~12 MB of lines
    path = tmp_path / ("f.json.gz" if compressed else "f.json")
    path.write_bytes(gzip.compress(lines, 1) if compressed else lines)
    read: list[int] = []

    class Counting(io.FileIO):
        def readinto(self, buffer):  # what the file system is asked for, either way
            got = super().readinto(buffer)
            read.append(got or 0)
            return got

        def read(self, size=-1):
            got = super().read(size)
            read.append(len(got or b""))
            return got

    def opened(name, *args, **kwargs):
        return io.BufferedReader(Counting(name, "rb"), buffer_size=16 << 20)

    monkeypatch.setattr(FileSystems, "open", staticmethod(opened))
    export.check_lines_start(export.ExportFile(str(path), path.name, 20_000, None, None))
    assert 0 < sum(read) <= 512 << 10, sum(read)

    path.write_bytes(gzip.compress(b'{"Items": 1}\n' + lines, 1) if compressed else b'{"Items": 1}\n' + lines)
    with pytest.raises(export.ExportError, match="line 1 is not an export item"):
        export.check_lines_start(export.ExportFile(str(path), path.name, 20_001, None, None))
