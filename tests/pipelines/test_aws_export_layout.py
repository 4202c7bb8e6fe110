"""Export folders as AWS writes them (tests/data/aws_exports/README.md): a real full export's manifests, and a full
plus two incremental exports following the documented layout; our fixture writers must produce the same shapes."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
from pathlib import Path

import pytest

from ddb2bt.mappers.errors import UsageError
from ddb2bt.pipelines.dynamodb.export import ExportError, file_problem, iter_export_items, read_manifest, verify_export
from ddb2bt.pipelines.dynamodb.incremental_export import check_export, read_incremental_manifest

from .export_fixtures import make_items, write_export
from ddb2bt.pipelines.dynamodb.export_writer import write_incremental_export

DATA = Path(__file__).resolve().parents[1] / "data" / "aws_exports"
REAL = DATA / "livros_por_ler" / "AWSDynamoDB" / "01668227450456-b6733290"
DOCUMENTED = DATA / "documented" / "ddb" / "posts" / "AWSDynamoDB"
FULL, INC1, INC2 = "01714564800000-a1b2c3d4", "01714568400000-b2c3d4e5", "01714572000000-c3d4e5f6"
BASE64_MD5 = re.compile(r"[A-Za-z0-9+/]{22}==")
ETAG = re.compile(r"[0-9a-f]{32}(-[0-9]+)?")


def b64md5(data: bytes) -> str:
    return base64.b64encode(hashlib.md5(data).digest()).decode()


def test_a_real_full_export_manifest_resolves_its_keys_where_aws_wrote_the_files():
    manifest = read_manifest(str(REAL))
    assert (manifest.export_id, manifest.item_count, manifest.export_time) == (
        "01668227450456-b6733290", 6, "2022-11-12T04:30:50.456Z")
    assert manifest.table is not None and manifest.table.name == "livros_por_ler"
    assert manifest.table.table_id == "659732b0-5ce6-4e60-a804-f224014bdef3"
    (data_file,) = manifest.files
    assert data_file.key == "AWSDynamoDB/01668227450456-b6733290/data/enpvklgbwq7gta42yshirxd6ea.json.gz"
    assert data_file.path == str(REAL / "data" / "enpvklgbwq7gta42yshirxd6ea.json.gz")
    assert (data_file.md5, data_file.etag) == ("EV+2HwdmZ3AyD9j+Yxd+Mg==", "a88f6b426e940985d4ef97076c8f40f6-1")
    # the repository did not publish the data file: named, with the folder it belongs in
    with pytest.raises(ExportError, match=r"01668227450456-b6733290/data/enpvklgbwq7gta42yshirxd6ea\.json\.gz is missing"):
        verify_export(str(REAL))
    # the .md5 files are the base64 MD5s of the manifests: these are the bytes AWS wrote
    for name in ("manifest-summary", "manifest-files"):
        assert (REAL / f"{name}.md5").read_text() == b64md5((REAL / f"{name}.json").read_bytes())


def test_our_fixture_writers_produce_the_shapes_aws_writes(tmp_path):
    real_summary = json.loads((REAL / "manifest-summary.json").read_text())
    real_line = json.loads((REAL / "manifest-files.json").read_text().splitlines()[0])
    full = Path(write_export(tmp_path / "full", make_items(7, padding=1), files=3))
    incremental = Path(write_incremental_export(tmp_path / "inc", [], 1_714_564_800_000_000, 1_714_568_400_000_000,
                                                files=2, prefix="ddb/posts"))
    for folder in (full, incremental):
        text = (folder / "manifest-summary.json").read_text()
        summary = json.loads(text)
        assert text == json.dumps(summary, separators=(",", ":"))  # compact, no trailing newline
        # AWS's fields in AWS's order (an incremental export has its window instead of an exportTime)
        expected = [key for key in real_summary if folder == full or key != "exportTime"]
        assert [key for key in summary if key in real_summary] == expected, folder
        for name in ("manifest-summary", "manifest-files"):
            assert (folder / f"{name}.md5").read_text() == b64md5((folder / f"{name}.json").read_bytes())
        text = (folder / "manifest-files.json").read_text()
        assert text.endswith("\n")
        lines = [json.loads(line) for line in text.splitlines()]
        for line in lines:
            assert list(line) == list(real_line) and BASE64_MD5.fullmatch(line["md5Checksum"])
            assert ETAG.fullmatch(line["etag"]) and (line["itemCount"] == 0) == (not line["etag"].endswith("-1"))
        assert any(line["itemCount"] == 0 for line in lines) == (folder == incremental)  # empty files, as AWS's
    files = [json.loads(line) for line in (incremental / "manifest-files.json").read_text().splitlines()]
    assert all(re.fullmatch(r"AWSDynamoDB/data/[0-9a-f]{26}\.json\.gz", f["dataFileS3Key"]) for f in files)
    assert all((tmp_path / "inc" / "ddb" / "posts" / f["dataFileS3Key"]).is_file() for f in files)
    assert json.loads((incremental / "manifest-summary.json").read_text())["manifestFilesS3Key"] == \
        f"ddb/posts/AWSDynamoDB/{incremental.name}/manifest-files.json"


def test_the_documented_full_export_is_intact_and_reads_every_item_empty_files_included():
    manifest = verify_export(str(DOCUMENTED / FULL))  # base64 md5s, multipart etags, an empty file
    assert [f.item_count for f in manifest.files] == [3, 2, 0] and os.path.getsize(manifest.files[2].path) == 0
    assert all(f.key.startswith(f"ddb/posts/AWSDynamoDB/{FULL}/data/") for f in manifest.files)
    items = list(iter_export_items(str(DOCUMENTED / FULL)))
    assert len(items) == manifest.item_count == 5
    assert items[0]["Bins"] == {"BS": ["AQ==", "AoA="]} and items[0]["Nothing"] == {"NULL": True}


@pytest.mark.parametrize("export_id, counts", [(INC1, [3, 1, 0]), (INC2, [5, 0])])
def test_an_incremental_export_reads_its_data_from_the_shared_folder(export_id, counts):
    manifest = read_incremental_manifest(str(DOCUMENTED / export_id))
    assert manifest.table is not None and manifest.table.name == "posts"
    assert [f.item_count for f in manifest.files] == counts
    for data_file in manifest.files:
        assert data_file.key.startswith("AWSDynamoDB/data/")
        assert data_file.path == str(DOCUMENTED / "data" / data_file.key.rsplit("/", 1)[1])
        assert file_problem(data_file) is None
    assert check_export(manifest, ("pk", "sk")) == sum(counts)


def test_an_incremental_export_as_a_change_source_refuses_a_gap_and_another_sources_checkpoint():
    """The change source's check (as the tail calls it): the export must hold the changes from ``from_us`` on, and a
    checkpoint must be of this export."""
    from ddb2bt.pipelines.dynamodb.incremental_export import IncrementalExportChanges

    source = IncrementalExportChanges(str(DOCUMENTED / INC2))
    start = source.window().from_us
    assert start is not None
    source.check(("pk", "sk"), from_us=start, resuming=INC2)  # its own start, its own checkpoint
    with pytest.raises(ExportError, match="the changes between are in no export"):
        source.check(("pk", "sk"), from_us=start - 1)
    with pytest.raises(ExportError, match=f"the checkpoint was made of {INC1}, not of export {INC2}"):
        source.check(("pk", "sk"), resuming=INC1)
    with pytest.raises(UsageError, match="AWSDynamoDB/data/gone.json.gz is no longer in"):  # a piece it does not list
        list(source.pages("AWSDynamoDB/data/gone.json.gz", None))


def test_an_incremental_export_copied_without_the_shared_data_folder_says_what_to_copy(tmp_path):
    copy = shutil.copytree(DOCUMENTED / INC1, tmp_path / "AWSDynamoDB" / INC1)
    manifest = read_incremental_manifest(str(copy))
    problem = file_problem(manifest.files[0])
    assert problem is not None and f"{tmp_path}/AWSDynamoDB/data/" in problem and "copy that folder too" in problem
    # a copy that keeps the layout (the shared folder beside the export folders) works, whatever the folders above
    shutil.copytree(DOCUMENTED / "data", tmp_path / "AWSDynamoDB" / "data")
    assert all(file_problem(f) is None for f in read_incremental_manifest(str(copy)).files)


@pytest.mark.parametrize("root", ["/copies/ddb/posts", "s3://bucket/ddb/posts", "gs://bucket/ddb/posts"])
@pytest.mark.parametrize("key, where", [
    ("AWSDynamoDB/data/x.json.gz", "AWSDynamoDB/data/x.json.gz"),  # an incremental export's, relative to the prefix
    ("ddb/posts/AWSDynamoDB/data/x.json.gz", "AWSDynamoDB/data/x.json.gz"),  # the same with the prefix
    (f"ddb/posts/AWSDynamoDB/{INC1}/manifest-files.json", f"AWSDynamoDB/{INC1}/manifest-files.json"),
    (f"ddb/posts/AWSDynamoDB/{FULL}/data/y.json.gz", f"AWSDynamoDB/{INC1}/data/y.json.gz"),  # a renamed copy
    (f"AWSDynamoDB/{INC1}/data/y.json.gz", f"AWSDynamoDB/{INC1}/data/y.json.gz"),  # no prefix (s3Prefix null)
])
def test_keys_resolve_the_same_way_on_every_file_system(root, key, where):
    from ddb2bt.pipelines.dynamodb.export import resolve_key

    summary = {"exportArn": f"arn:aws:dynamodb:us-east-1:123456789012:table/posts/export/{FULL}",
               "s3Prefix": "ddb/posts"}
    # the folder of a copy keeps the export's own id in its name, or is renamed (here: INC1 holds export FULL)
    export_dir = f"{root}/AWSDynamoDB/{INC1}"
    assert resolve_key(export_dir, key, summary) == f"{root}/{where}"


def test_a_key_outside_AWSDynamoDB_is_refused():
    from ddb2bt.pipelines.dynamodb.export import resolve_key

    with pytest.raises(ExportError, match="not inside AWSDynamoDB/"):
        resolve_key("/x/AWSDynamoDB/id", "elsewhere/data/x.json.gz", {})


@pytest.mark.parametrize("md5", ["xyz", "AAAA", 5])
@pytest.mark.parametrize("export_id", [FULL, INC1])
def test_a_manifest_md5_that_is_no_base64_md5_names_its_line(tmp_path, export_id, md5):
    """A manifest line's md5Checksum that is not an MD5 in base64 (AWS writes 24 characters): one line naming the
    manifest, the line and the value (it was decoded only when the file was checked: 'unexpected Error: Incorrect
    padding (a bug)'), for a full and an incremental export alike."""
    copy = tmp_path / "AWSDynamoDB"
    shutil.copytree(DOCUMENTED, copy)
    manifest = copy / export_id / "manifest-files.json"
    lines = manifest.read_text().splitlines()
    entry = json.loads(lines[1])
    entry["md5Checksum"] = md5
    manifest.write_text("\n".join([lines[0], json.dumps(entry), *lines[2:]]) + "\n")
    read = verify_export if export_id == FULL else read_incremental_manifest
    with pytest.raises(ExportError) as refused:
        read(str(copy / export_id))
    assert str(refused.value) == (
        f"{manifest} line 2 is not a manifest entry: md5Checksum {md5!r} is not an MD5 in base64 (DynamoDB writes 24 "
        "characters, e.g. 'yLVNWUe57fGz0jA1eDTzTg=='); copy the export's manifest-files.json again as DynamoDB wrote it")


@pytest.mark.parametrize(("field", "value", "message"), [
    ("exportTime", "yesterday", "exportTime 'yesterday' is not an ISO-8601 time (DynamoDB writes e.g. "
                                "'2024-05-01T12:00:00.000Z')"),
    ("itemCount", "many", "itemCount 'many' is not a whole number"),
    ("itemCount", "5", "itemCount '5' is not a whole number"),  # text: DynamoDB writes a number (was read as 5)
    ("itemCount", 2.5, "itemCount 2.5 is not a whole number"),  # was cut to 2
    ("itemCount", True, "itemCount True is not a whole number"),  # was read as 1
    ("itemCount", -1, "itemCount -1 is not a whole number"),
    ("manifestFilesS3Key", 5, "manifestFilesS3Key 5 is not text, as DynamoDB writes it"),  # was 'a bug'
    ("tableArn", ["x"], "tableArn ['x'] is not text, as DynamoDB writes it"),  # was "of table ['x'] (['x'])"
    ("exportTime", 5, "exportTime 5 is not text, as DynamoDB writes it"),
])
def test_a_full_export_summary_field_that_is_no_value_of_its_kind_names_it(tmp_path, field, value, message):
    """A summary's exportTime that is no time (migrate ran, then the catch-up's timeline died on it: 'unexpected
    ValueError (a bug)') or an itemCount that is no number ('a bug' at once): one line naming the file and field."""
    copy = tmp_path / "AWSDynamoDB"
    shutil.copytree(DOCUMENTED, copy)
    summary_path = copy / FULL / "manifest-summary.json"
    summary = json.loads(summary_path.read_text())
    summary[field] = value
    summary_path.write_text(json.dumps(summary))
    with pytest.raises(ExportError) as refused:
        verify_export(str(copy / FULL))
    assert str(refused.value) == (f"{copy / FULL}/manifest-summary.json: {message}; copy the export's "
                                  "manifest-summary.json again as DynamoDB wrote it")


@pytest.mark.parametrize("value", ["many", "5", 2.5, False])  # text, a fraction, a boolean: were read as 5, 2, 0
def test_an_incremental_export_summary_item_count_that_is_no_number_names_it(tmp_path, value):
    """An incremental export's itemCount that is no number: one line naming the file and field ('a bug' before)."""
    copy = tmp_path / "AWSDynamoDB"
    shutil.copytree(DOCUMENTED, copy)
    summary_path = copy / INC1 / "manifest-summary.json"
    summary = json.loads(summary_path.read_text())
    summary["itemCount"] = value
    summary_path.write_text(json.dumps(summary))
    with pytest.raises(ExportError) as refused:
        read_incremental_manifest(str(copy / INC1))
    assert str(refused.value) == (f"{copy / INC1}/manifest-summary.json: itemCount {value!r} is not a whole number; "
                                  "copy the export's manifest-summary.json again as DynamoDB wrote it")


@pytest.mark.parametrize(("change", "problem"), [
    ({"dataFileS3Key": 5}, "dataFileS3Key 5 is not an object key"),
    ({"itemCount": -1}, "itemCount -1 is not a whole number of items"),
    ({"itemCount": 2.5}, "itemCount 2.5 is not a whole number of items"),
    ({"itemCount": True}, "itemCount True is not a whole number of items"),
    ({"etag": 5, "md5Checksum": None}, "etag 5 is not an ETag"),
    ({"dataFileS3Key": "again"}, "dataFileS3Key {key!r} is listed again (line 1 lists it)"),
])
def test_a_manifest_entry_whose_values_are_not_what_dynamodb_writes_names_its_line(tmp_path, change, problem):
    """Values DynamoDB never writes in manifest-files.json: a key or ETag of another type ('unexpected
    AttributeError/TypeError (a bug)'), a count below zero or with a fraction (read as int(2.5) = 2, the run then
    failed on a count mismatch), a file listed twice (read twice: 10 items of a 5-item export, then a mismatch)."""
    copy = tmp_path / "AWSDynamoDB"
    shutil.copytree(DOCUMENTED, copy)
    manifest = copy / FULL / "manifest-files.json"
    lines = manifest.read_text().splitlines()
    entry = {**json.loads(lines[1]), **change}
    if change.get("dataFileS3Key") == "again":
        entry["dataFileS3Key"] = key = json.loads(lines[0])["dataFileS3Key"]
        problem = problem.format(key=key)
    manifest.write_text("\n".join([lines[0], json.dumps(entry), *lines[2:]]) + "\n")
    with pytest.raises(ExportError) as refused:
        verify_export(str(copy / FULL))
    assert str(refused.value) == (f"{manifest} line 2 is not a manifest entry: {problem}; copy the export's "
                                  "manifest-files.json again as DynamoDB wrote it")


@pytest.mark.parametrize("inside", ["manifest-summary.json", "manifest-files.json", "_started", "data",
                                    "data/7ybkxlyfqu3ahcqgh2jbwp5vxe.json.gz"])
def test_a_path_to_a_file_or_the_data_folder_of_an_export_finds_its_export(inside):
    """A newcomer points source.export.path (or catch-up's --export) at the manifest-summary.json an S3 console
    shows, or at a file or the data folder beside it: it was refused as "no manifest-summary.json in
    .../manifest-summary.json"; the export folder holding them is meant, and read."""
    from ddb2bt.pipelines.dynamodb.export import find_export_dir

    assert find_export_dir(str(DOCUMENTED / FULL / inside)) == str(DOCUMENTED / FULL)
    assert read_manifest(str(DOCUMENTED / FULL / inside)).export_id == FULL
    if inside == "manifest-summary.json":
        assert read_incremental_manifest(str(DOCUMENTED / INC1 / inside)).export_id == INC1


def test_a_path_with_no_export_near_says_which_folder_to_give(tmp_path):
    from ddb2bt.pipelines.dynamodb.export import find_export_dir

    with pytest.raises(ExportError) as refused:
        find_export_dir(str(tmp_path))
    assert str(refused.value) == (f"no manifest-summary.json in {tmp_path} or in one export folder below it; give the "
                                  "export's folder, [prefix/]AWSDynamoDB/<exportId> (the one holding "
                                  "manifest-summary.json)")


def test_a_prefix_holding_a_full_and_incremental_exports_names_each_by_kind():
    """AWS keeps a table's full and incremental exports side by side under one prefix (the documented bucket): given
    the prefix, the refusal says which folder is which, not only their ids."""
    prefix = DOCUMENTED.parent
    for read in (read_manifest, read_incremental_manifest):
        with pytest.raises(ExportError) as caught:
            read(str(prefix))
        assert str(caught.value) == (
            f"{prefix} holds 3 exports; give one of: "
            f"{DOCUMENTED / FULL} (full export at 2024-05-01T12:00:00.000Z), "
            f"{DOCUMENTED / INC1} (incremental export 2024-05-01T12:00:00.000Z .. 2024-05-01T13:00:00.000Z), "
            f"{DOCUMENTED / INC2} (incremental export 2024-05-01T13:00:00.000Z .. 2024-05-01T14:00:00.000Z); "
            "a full export (FULL_EXPORT) is source.export.path; incremental ones go to `ddb2bt catch-up --export`, "
            "one after another")
