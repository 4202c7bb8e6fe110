"""The export reader's block-at-a-time path gives what reading line by line gives: the same items, the same line
sizes, the same batches, and for a bad line the same error after the same items.

The reference here is the reader as it was (every line of the file, blank ones skipped, each parsed and handed to
``parse``, a refused line an ExportError naming its number), written out independently of the reader's code."""

from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path
from typing import Any, Callable

import pytest
from hypothesis import given, settings, strategies as st

import ddb2bt.pipelines.dynamodb.export as export
from ddb2bt.pipelines.dynamodb import ion_lines, wire_json
from ddb2bt.pipelines.run.batches import BATCH_ITEMS

AWS_EXPORTS = Path(__file__).resolve().parents[1] / "data" / "aws_exports"
DATA_FILES = sorted(str(path) for path in AWS_EXPORTS.rglob("*.gz"))


def test_the_real_export_files_hold_records():
    assert sum(bool(line_by_line(path, lambda record: record, "a record")[0]) for path in DATA_FILES) >= 5


def line_by_line(path: str, parse: Callable[[Any], Any], what: str) -> tuple[list[tuple[int, Any]], str | None]:
    """What the reader gave before blocks were parsed whole: ``(line bytes, record)`` pairs, and the error after
    them (None if the file reads through)."""
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
            detail = f"no field {err}" if isinstance(err, KeyError) else str(err) or repr(err)
            return out, f"{path} line {number} is not {what}: {detail}"
        out.append((len(line) + 1, parsed))
    return out, None


def block_reader(path: str, parse: Callable[[Any], Any], what: str) -> tuple[list[tuple[int, Any]], str | None]:
    out: list[tuple[int, Any]] = []
    try:
        for pair in export.sized_records(path, parse, what):
            out.append(pair)
    except export.ExportError as err:
        return out, str(err).split("\n")[0]
    return out, None


def batches_of(path: str, parse: Callable[[Any], Any]) -> list[tuple[int, list[Any]]]:
    return [(batch.nbytes, list(batch)) for batch in export.chunk_batches(export.record_chunks(path, parse, "x"))]


@pytest.mark.parametrize("path", DATA_FILES, ids=lambda path: Path(path).name)
@pytest.mark.parametrize("block_bytes", [None, 64, 1000])
def test_real_export_files_read_the_same_by_blocks_and_line_by_line(path, block_bytes, monkeypatch):
    """tests/data/aws_exports' data files (full and incremental, DYNAMODB_JSON and ION), whole records and (for full
    exports) items, at the reader's block size and at small ones that cut blocks mid-file."""
    if block_bytes:
        monkeypatch.setattr(export, "BLOCK_BYTES", block_bytes)
    assert DATA_FILES, "no export data files found under tests/data/aws_exports"
    whole = line_by_line(path, lambda record: record, "a record")
    assert whole[1] is None  # an empty partition's file is empty
    assert block_reader(path, lambda record: record, "a record") == whole
    incremental = "/AWSDynamoDB/data/" in path
    items = line_by_line(path, export.ITEM, export.AN_ITEM)
    assert block_reader(path, export.ITEM, export.AN_ITEM) == items
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
def test_generated_lines_read_the_same_by_blocks_and_line_by_line(tmp_path_factory, lines, trailing_newline,
                                                                  block_bytes, what):
    """Good lines, blank lines and every kind of bad line, at block sizes that put them anywhere in a block: the
    block reader gives the items the line-by-line reader gives, then the same error naming the same line."""
    path = str(tmp_path_factory.mktemp("export") / "part.json.gz")
    Path(path).write_bytes(gzip.compress(b"\n".join(lines) + (b"\n" if trailing_newline else b"")))
    parse, text = (export.ITEM, export.AN_ITEM) if what == "item" else ((lambda record: record), "a record")
    saved = export.BLOCK_BYTES
    export.BLOCK_BYTES = block_bytes or saved
    try:
        got = block_reader(path, parse, text)
    finally:
        export.BLOCK_BYTES = saved
    expected = line_by_line(path, parse, text)
    assert got == expected
    assert [(type(item), item) for _, item in got[0]] == [(type(item), item) for _, item in expected[0]]


@pytest.mark.parametrize("block_bytes", [None, 5_000, 77_777])
def test_batches_are_the_line_by_line_batches(tmp_path, monkeypatch, block_bytes):
    """Blocks cut into batches of BATCH_ITEMS across block boundaries: the same batches, each with the bytes of its
    own lines, as batching the records one by one."""
    if block_bytes:
        monkeypatch.setattr(export, "BLOCK_BYTES", block_bytes)
    path = str(tmp_path / "part.json.gz")
    lines = [_item_line(number) for number in range(2 * BATCH_ITEMS + 321)]
    lines[7] = b""  # a blank line: its block is read line by line
    Path(path).write_bytes(gzip.compress(b"\n".join(lines) + b"\n"))
    expected = [(batch.nbytes, list(batch)) for batch in export.file_batches(line_by_line(path, export.ITEM, "x")[0])]
    assert [len(items) for _, items in expected] == [BATCH_ITEMS, BATCH_ITEMS, 320]
    assert batches_of(path, export.ITEM) == expected


class _Broken(Exception):
    pass


def _blocks(count: int, fail_at: int | None):
    for number in range(count):
        if number == fail_at:
            raise _Broken(f"at {number}")
        yield b"block %d" % number


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 12), st.none() | st.integers(0, 12), st.integers(1, 3))
def test_read_ahead_gives_the_blocks_then_the_error_in_order(count, fail_at, depth):
    """The reading thread's blocks come in order, and what it raises comes after the blocks before it."""
    expected = [b"block %d" % number for number in range(count if fail_at is None else min(count, fail_at))]
    got = []
    if fail_at is not None and fail_at < count:
        with pytest.raises(_Broken, match=f"at {fail_at}"):
            for block in export.read_ahead(_blocks(count, fail_at), depth):
                got.append(block)
    else:
        got = list(export.read_ahead(_blocks(count, fail_at), depth))
    assert got == expected


def _read_ahead_threads() -> list:
    import threading

    return [thread for thread in threading.enumerate() if thread.name == "export-read-ahead"]


def test_a_reader_stopped_early_stops_its_thread(tmp_path, monkeypatch):
    """A sample reads a few items and stops: the reading thread, blocked on a full queue, ends with the generator,
    before the file is closed."""
    monkeypatch.setattr(export, "BLOCK_BYTES", 100)
    path = str(tmp_path / "part.json.gz")
    Path(path).write_bytes(gzip.compress(b"\n".join(_item_line(number) for number in range(500)) + b"\n"))
    items = export.iter_file_items(path)
    assert [next(items)["pk"] for _ in range(3)] == [{"S": "k0"}, {"S": "k1"}, {"S": "k2"}]
    assert _read_ahead_threads()
    items.close()
    assert not _read_ahead_threads()


@pytest.mark.parametrize("damage, message", [(lambda data: data[:len(data) // 2], "cut short"),
                                             (lambda data: data[:-8] + b"\0" * 8, "not valid gzip")])
def test_a_damaged_file_gives_its_items_before_the_damage_then_the_error(tmp_path, monkeypatch, damage, message):
    """Gzip errors raised in the reading thread reach the reader as before: the blocks before the damage are read,
    then the ExportError naming the file."""
    monkeypatch.setattr(export, "BLOCK_BYTES", 1000)
    path = str(tmp_path / "part.json.gz")
    Path(path).write_bytes(damage(gzip.compress(b"\n".join(_item_line(n) for n in range(3000)) + b"\n")))
    got = []
    with pytest.raises(export.ExportError, match=message):
        for _, item in export.sized_records(path, export.ITEM, export.AN_ITEM):
            got.append(item["pk"]["S"])
    assert got and got == [f"k{n}" for n in range(len(got))]
    assert not _read_ahead_threads()
