"""Exports in Amazon Ion (ExportFormat ION): read into exactly the items and changes their DYNAMODB_JSON twin holds.

The Developer Guide's own Ion example reads as its own DynamoDB JSON example; any item amazon.ion writes reads back
exactly (38-digit numbers, binary, sets, NULL, nested); the documented bucket exported as Ion back-fills and catches
up to the same cells as its JSON original (emulator); an Ion value DynamoDB never writes is refused with file, line
and attribute."""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import shutil
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddb2bt.app.cutover import catch_up
from ddb2bt.app.migrate import migrate
from ddb2bt.app.options import RunOptions
from ddb2bt.mappers.numbers import canonical_text
from ddb2bt.pipelines.dynamodb import ion_lines
from ddb2bt.pipelines.dynamodb.export import ExportError, iter_export_items, read_manifest, verify_export
from ddb2bt.pipelines.dynamodb.incremental_export import read_incremental_manifest

from .cells import expected_cells, read_cells
from .documented_exports import DATA, DOCUMENTED, EXPORTS, FULL, INC1, INC2, final_state, posts_spec
from .ion_exports import as_ion_bucket, ion_line
from .roundtrip_cases import KEY_TEXT, any_value, scalar

DOCUMENTED_ION = DATA / "documented_ion"

# The same item as the guide shows it in DynamoDB JSON (S3DataExport.Output.html, "DynamoDB JSON").
GUIDE_JSON_ITEM = {
    "Authors": {"SS": ["Author1", "Author2"]}, "Dimensions": {"S": "8.5 x 11.0 x 1.5"},
    "ISBN": {"S": "333-3333333333"}, "Id": {"N": "103"}, "InPublication": {"BOOL": False},
    "PageCount": {"N": "600"}, "Price": {"N": "2000"}, "ProductCategory": {"S": "Book"},
    "Title": {"S": "Book 103 Title"},
}  # fmt: skip


def test_the_guides_ion_example_reads_as_the_guides_dynamodb_json_example():
    manifest = verify_export(str(DOCUMENTED_ION))  # checksums and counts as for a JSON export
    assert manifest.output_format == "ION" and manifest.item_count == 1
    assert list(iter_export_items(str(DOCUMENTED_ION))) == [GUIDE_JSON_ITEM]


def wire(value: dict) -> dict:
    """An AttributeValue as an export's JSON line holds it: B as base64 text, N as DynamoDB's canonical text."""
    (tag, inner), = value.items()
    if tag == "N":
        return {"N": canonical_text(Decimal(inner))}
    if tag == "NS":
        return {"NS": [canonical_text(Decimal(n)) for n in inner]}
    if tag == "B":
        return {"B": base64.b64encode(inner).decode()}
    if tag == "BS":
        return {"BS": [base64.b64encode(b).decode() for b in inner]}
    if tag == "L":
        return {"L": [wire(v) for v in inner]}
    if tag == "M":
        return {"M": {k: wire(v) for k, v in inner.items()}}
    return value


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(KEY_TEXT, any_value(scalar()), min_size=1, max_size=6))
def test_any_item_amazon_ion_writes_reads_back_exactly(item):
    expected = {name: wire(value) for name, value in item.items()}
    line = ion_line({"Item": expected})
    assert ion_lines.is_ion(line.encode())
    assert ion_lines.loads(line.encode()) == {"Item": expected}


@pytest.mark.servers
def test_the_documented_bucket_in_ion_backfills_and_catches_up_to_the_json_buckets_cells(bigtable_env, unique_name,
                                                                                        tmp_path):
    bucket = as_ion_bucket(DOCUMENTED, tmp_path / "bucket")
    assert read_incremental_manifest(str(bucket / EXPORTS / INC1)).files[0].path.endswith(".ion.gz")
    spec = posts_spec(unique_name, str(bucket / EXPORTS / FULL))
    options = RunOptions(run_dir=str(tmp_path / "run"))
    assert migrate(spec, options).counters["items_read"] == 5
    for export in (INC1, INC2):
        result = catch_up(spec, str(bucket / EXPORTS / export), options)
        assert result.ok, result.problems
    assert read_cells(spec.target) == expected_cells(spec, final_state())


def write_ion_export(tmp_path: Path, lines: list[str]) -> Path:
    """The guide's Ion export with its data file replaced (checksums updated: only the content is wrong)."""
    folder = tmp_path / "export"
    shutil.copytree(DOCUMENTED_ION, folder)
    export_dir = folder / "AWSDynamoDB" / "01234567890123-a1b2c3d4"
    files_path = export_dir / "manifest-files.json"
    entry = json.loads(files_path.read_text())
    data = gzip.compress("".join(line + "\n" for line in lines).encode(), mtime=0)
    (export_dir / entry["dataFileS3Key"].split("01234567890123-a1b2c3d4/", 1)[1]).write_bytes(data)
    entry.update(itemCount=len(lines), md5Checksum=base64.b64encode(hashlib.md5(data).digest()).decode())
    files_path.write_text(json.dumps(entry) + "\n")
    summary_path = export_dir / "manifest-summary.json"
    summary_path.write_text(json.dumps({**json.loads(summary_path.read_text()), "itemCount": len(lines)}))
    return folder


GOOD = '$ion_1_0 {Item:{Id:1.,Title:"ok"}}'


@pytest.mark.parametrize(("line", "message"), [
    ('$ion_1_0 {Item:{Id:2.,Price:1.5e0}}', "Item.Price is an Ion float"),
    ('$ion_1_0 {Item:{Id:2.,At:2020-01-01T}}', "Item.At is an Ion timestamp"),
    ('$ion_1_0 {Item:{Id:2.,Tags:$dynamodb_XS::["a"]}}', r"Item.Tags is annotated \$dynamodb_XS"),
    ('$ion_1_0 {Item:{Id:2.,Tags:$dynamodb_NS::["a"]}}', r"Item.Tags\[0\] is S in a NS set"),
    ('$ion_1_0 {Item:{Id:2.,N:1' + "1" * 38 + '.}}', "more than 38 significant digits"),
    ('$ion_1_0 {Item:{Id:2.,Title:"unterminated}}', "not Ion text"),
    ('$ion_1_0 [1, 2]', "not a struct"),
])  # fmt: skip
def test_an_ion_value_dynamodb_never_writes_is_refused_with_file_line_and_attribute(tmp_path, line, message):
    folder = write_ion_export(tmp_path, [GOOD, line])
    with pytest.raises(ExportError, match=rf"bafybeiczss3yxay3o4abnabbb\.ion\.gz line 2 is not an export item: .*{message}"):
        list(iter_export_items(str(folder)))


def test_typed_nulls_are_null_and_integers_are_numbers(tmp_path):
    folder = write_ion_export(tmp_path, ['$ion_1_0 {Item:{Id:7,Gone:null.string,Note:null}}'])
    assert list(iter_export_items(str(folder))) == [{"Id": {"N": "7"}, "Gone": {"NULL": True}, "Note": {"NULL": True}}]


def test_a_format_dynamodb_does_not_write_is_refused_naming_the_summary(tmp_path):
    folder = write_ion_export(tmp_path, [GOOD])
    summary_path = folder / "AWSDynamoDB" / "01234567890123-a1b2c3d4" / "manifest-summary.json"
    summary_path.write_text(json.dumps({**json.loads(summary_path.read_text()), "outputFormat": "PARQUET"}))
    with pytest.raises(ExportError, match="manifest-summary.json: outputFormat 'PARQUET' is not a DynamoDB export"):
        read_manifest(str(folder))


def test_an_item_with_values_up_to_dynamodbs_400_kb_reads_back_exactly():
    """DynamoDB items reach 400 KB, a string, a binary or an attribute name taking most of it: amazon.ion's C reader
    refused each past a few KB ("not Ion text: IERR_BUFFER_TOO_SMALL", IERR_LOOKAHEAD_OVERFLOW, IERR_TOKEN_TOO_LONG)
    with its default text buffer; an ION export of such a table could not be read."""
    item = {"pk": {"S": "p" * 2048}, "text": {"S": "é" * 190_000}, "blob": {"B": bytes(range(256)) * 1000},
            "k" * 65_535: {"S": "a long name"}, "set": {"SS": ["s" * 100_000, "t"]}}
    line = ion_line({"Item": {name: wire(value) for name, value in item.items()}})
    assert len(line) > 390_000
    assert ion_lines.loads(line.encode()) == {"Item": {name: wire(value) for name, value in item.items()}}
