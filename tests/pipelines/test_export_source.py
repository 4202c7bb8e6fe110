"""DynamoDB export reader: finds the export, reads every data file, and reports counts that do not add up."""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil

import apache_beam as beam
import boto3
import pytest
from hypothesis import given, settings, strategies as st
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.util import assert_that, equal_to
from tests.aws_mock import mock_aws

from ddb2bt.pipelines.run.local_runner import new_pipeline
from ddb2bt.pipelines.dynamodb.export import (
    ExportError,
    ReadDynamoDBExport,
    iter_export_items,
    iter_file_items,
    read_manifest,
)
from tests.pipelines.export_fixtures import (
    counter_totals,
    exactly,
    fingerprint,
    item_key,
    make_items,
    write_export,
)


@pytest.fixture
def items():
    return make_items(500, padding=100)


def run_export(path, expected_items, expected_mismatches=()):
    pipeline = new_pipeline()
    out = pipeline | ReadDynamoDBExport(path)
    assert_that(out["batches"] | beam.FlatMap(lambda batch: batch) | beam.Map(fingerprint), exactly(expected_items))
    assert_that(out["count_mismatch"], equal_to(list(expected_mismatches)), label="Mismatches")
    result = pipeline.run()
    result.wait_until_finish()
    return counter_totals(result)


def edit_json_lines(path, index, **changes):
    lines = open(path, encoding="utf-8").read().splitlines()
    entry = json.loads(lines[index])
    entry.update(changes)
    lines[index] = json.dumps(entry)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")
    return entry


def test_a_realistic_export_migrates_completely(tmp_path, items):
    export_dir = write_export(tmp_path, items, files=6, prefix="exports/daily")
    counters = run_export(export_dir, items)
    assert counters["items_read"] == 500 and counters["export_files_read"] == 6
    assert counters.get("export_count_mismatch", 0) == 0


def test_manifest_counts_files_and_items(tmp_path, items):
    export_dir = write_export(tmp_path, items, files=4)
    manifest = read_manifest(export_dir)
    assert manifest.item_count == manifest.files_item_count == 500
    assert len(manifest.files) == 4 and len({f.item_count for f in manifest.files}) > 1  # uneven, like real exports
    assert manifest.export_id == "01714564800000-1a2b3c4d" and manifest.output_format == "DYNAMODB_JSON"
    assert all(f.key.startswith("AWSDynamoDB/01714564800000-1a2b3c4d/data/") and os.path.exists(f.path)
               for f in manifest.files)


def test_export_is_found_from_its_folder_or_a_parent_holding_one(tmp_path, items):
    export_dir = write_export(tmp_path, items[:10], files=2, prefix="p")
    for path in (export_dir, export_dir + "/", str(tmp_path / "p"), str(tmp_path / "p" / "AWSDynamoDB")):
        assert read_manifest(path).export_dir == export_dir
    with pytest.raises(ExportError, match="no manifest-summary.json"):
        read_manifest(str(tmp_path))
    write_export(tmp_path / "p", items[:10], files=2, export_id="01714564900000-99999999")
    with pytest.raises(ExportError, match="holds 2 exports"):
        read_manifest(str(tmp_path / "p"))


def test_a_copied_and_renamed_export_folder_still_resolves_its_keys(tmp_path, items):
    export_dir = write_export(tmp_path / "original", items[:40], files=3, prefix="a/b")
    copy = shutil.copytree(export_dir, tmp_path / "copy")
    assert sorted(map(item_key, iter_export_items(str(copy)))) == sorted(map(item_key, items[:40]))


def test_items_stay_in_wire_format_with_base64_binary(tmp_path, items):
    export_dir = write_export(tmp_path, items[:3], files=1)
    first = next(iter_export_items(export_dir))
    assert first["price"] == {"N": "0.50"} and first["exact"]["N"] == "1234567890123456789012345678.9012345678"
    assert first["blob"] == {"B": "AP8A/g=="} and first["bins"] == {"BS": ["AQ==", "AoA="]}
    assert len(list(iter_export_items(export_dir, limit=2))) == 2


def test_a_tampered_file_count_is_reported(tmp_path, items):
    export_dir = write_export(tmp_path, items, files=4)
    entry = edit_json_lines(os.path.join(export_dir, "manifest-files.json"), 1)
    entry = edit_json_lines(os.path.join(export_dir, "manifest-files.json"), 1, itemCount=entry["itemCount"] + 7)
    mismatch = {"kind": "file", "file": entry["dataFileS3Key"], "expected": entry["itemCount"],
                "actual": entry["itemCount"] - 7}
    counters = run_export(export_dir, items, [mismatch])
    assert counters["export_count_mismatch"] == 1


def test_a_tampered_summary_count_is_reported(tmp_path, items):
    export_dir = write_export(tmp_path, items, files=3)
    summary_path = os.path.join(export_dir, "manifest-summary.json")
    summary = json.load(open(summary_path, encoding="utf-8"))
    summary["itemCount"] = 499
    with open(summary_path, "w", encoding="utf-8") as handle:
        json.dump(summary, handle)
    mismatch = {"kind": "total", "file": f"{export_dir}/manifest-summary.json", "expected": 499, "actual": 500}
    counters = run_export(export_dir, items, [mismatch])
    assert counters["export_count_mismatch"] == 1


def test_an_item_missing_from_a_data_file_is_reported(tmp_path, items):
    export_dir = write_export(tmp_path, items, files=2)
    data_file = read_manifest(export_dir).files[0]
    lines = gzip.decompress(open(data_file.path, "rb").read()).splitlines(keepends=True)
    with open(data_file.path, "wb") as handle:
        handle.write(gzip.compress(b"".join(lines[1:])))
    dropped = json.loads(lines[0])["Item"]
    remaining = [item for item in items if item_key(item) != item_key(dropped)]
    expected = [{"kind": "file", "file": data_file.key, "expected": data_file.item_count,
                 "actual": data_file.item_count - 1},
                {"kind": "total", "file": f"{export_dir}/manifest-summary.json", "expected": 500, "actual": 499}]
    counters = run_export(export_dir, remaining, expected)
    assert counters["export_count_mismatch"] == 2


def test_an_empty_export_reads_nothing_and_reports_nothing(tmp_path):
    export_dir = write_export(tmp_path, [], files=1)
    counters = run_export(export_dir, [])
    assert counters.get("items_read", 0) == 0


@pytest.mark.parametrize(
    ("change", "message"),
    [({"outputFormat": "CSV"}, "outputFormat 'CSV' is not a DynamoDB export format"), ({"exportType": "INCREMENTAL_EXPORT"}, r"manifest-summary.json: exportType INCREMENTAL_EXPORT holds changes, not a "
                                           r"table: give source.export.path a full export, and this one to `ddb2bt "
                                           r"catch-up` after it"),
     ({"exportType": "SNAPSHOT"}, r"manifest-summary.json: exportType 'SNAPSHOT' is not one DynamoDB writes")],
)
def test_unsupported_exports_are_refused(tmp_path, change, message):
    export_dir = write_export(tmp_path, make_items(3, padding=1), files=1)
    edit_json_lines(os.path.join(export_dir, "manifest-summary.json"), 0, **change)
    with pytest.raises(ExportError, match=message):
        read_manifest(export_dir)


@pytest.mark.parametrize("block_bytes, data, number", [
    (None, b'{"Item": {"pk": {"S": "a"}}}\n{"NotAnItem": 1}\n', 2),
    # blank lines count, and lines are numbered on across blocks (read 7 bytes at a time here)
    (7, b'{"Item": {"pk": {"S": "a"}}}\n\n{"Item": {"pk": {"S": "b"}}}\n{"NotAnItem": 1}\n', 4),
])
def test_a_corrupt_line_fails_loudly(tmp_path, monkeypatch, block_bytes, data, number):
    import ddb2bt.pipelines.dynamodb.export as export

    if block_bytes:
        monkeypatch.setattr(export, "BLOCK_BYTES", block_bytes)
    export_dir = write_export(tmp_path, make_items(3, padding=1), files=1)
    data_file = read_manifest(export_dir).files[0]
    with open(data_file.path, "wb") as handle:
        handle.write(gzip.compress(data))
    with pytest.raises(ExportError, match=f"line {number} "):
        list(iter_export_items(export_dir))


def test_reads_an_export_from_s3(tmp_path, items, monkeypatch):
    monkeypatch.setattr(FileSystems, "_pipeline_options", None)  # restored after the test
    local_root = tmp_path / "bucket"
    write_export(local_root, items[:60], files=3, prefix="exports/daily")
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="bkt")
        for folder, _, names in os.walk(local_root):
            for name in names:
                full = os.path.join(folder, name)
                s3.upload_file(full, "bkt", os.path.relpath(full, local_root))
        read = list(iter_export_items("s3://bkt/exports/daily", options=PipelineOptions()))
    assert sorted(map(fingerprint, read)) == sorted(map(fingerprint, items[:60]))


def test_a_data_file_is_read_in_batches_sized_for_beam(tmp_path):
    from ddb2bt.pipelines.run.batches import BATCH_ITEMS, Batch
    from ddb2bt.pipelines.dynamodb.export import _ReadExportFileFn

    many = make_items(2 * BATCH_ITEMS + 500, padding=10)
    manifest = read_manifest(write_export(tmp_path, many, files=1))
    out = list(_ReadExportFileFn().process((0, manifest.files[0])))
    batches = [element for element in out if type(element) is Batch]
    assert [len(batch) for batch in batches] == [BATCH_ITEMS, BATCH_ITEMS, 500]
    assert all(batch.nbytes > 100 * len(batch) for batch in batches)  # the lines' bytes, not a guess
    assert sorted(map(fingerprint, (item for batch in batches for item in batch))) == sorted(map(fingerprint, many))


def test_a_resumable_read_skips_stored_files_and_marks_only_files_that_hold_their_count(tmp_path, items):
    """Data files are a resumable run's segments: stored ones are not read again (and the export's total is checked
    against the files left), the others are followed by their SegmentDone; a file whose count differs from its
    manifest line is never marked, so a resume reads it (and reports its mismatch) again."""
    from ddb2bt.pipelines.run.batches import SegmentDone

    export_dir = write_export(tmp_path, items, files=4)
    entry = edit_json_lines(os.path.join(export_dir, "manifest-files.json"), 3)
    entry = edit_json_lines(os.path.join(export_dir, "manifest-files.json"), 3, itemCount=entry["itemCount"] + 1)
    files = read_manifest(export_dir).files
    kept = [item for number, f in enumerate(files) if number != 0 for item in iter_file_items(f.path)]
    mismatch = {"kind": "file", "file": entry["dataFileS3Key"], "expected": entry["itemCount"],
                "actual": entry["itemCount"] - 1}

    pipeline = new_pipeline()
    out = pipeline | ReadDynamoDBExport(export_dir, completed_files={0}, mark_done=True)
    assert_that(out["batches"] | beam.Filter(lambda batch: isinstance(batch, SegmentDone))
                | beam.Map(lambda done: done.segment), equal_to([1, 2]), label="Marked")
    assert_that(out["batches"] | beam.FlatMap(lambda batch: batch) | beam.Map(fingerprint),
                exactly(kept), label="Items")
    # the files left add up to the summary less the stored file: no total mismatch, only the file's own
    assert_that(out["count_mismatch"], equal_to([mismatch]), label="Mismatches")
    pipeline.run().wait_until_finish()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=12).map(lambda b: b.replace(b"\n", b"")) | st.just(b""), max_size=8),
       st.booleans(), st.integers(min_value=1, max_value=20))
def test_blocks_of_lines_hold_the_lines_the_stream_gives(lines, trailing_newline, block_size):
    """line_blocks reads a block at a time: split at newlines, its blocks give the lines that iterating the stream
    (as the reader did line by line) gives, at any block size."""
    from ddb2bt.pipelines.dynamodb.export import line_blocks

    data = b"\n".join(lines) + (b"\n" if trailing_newline and lines else b"")
    expected = [line.rstrip(b"\n") for line in io.BytesIO(data)]
    assert [line for block in line_blocks(io.BytesIO(data), block_size) for line in block.split(b"\n")] == expected



def test_a_path_where_nothing_is_says_so_before_looking_for_a_manifest(moto_server, tmp_path, monkeypatch, items):
    """A misspelt bucket, a prefix with nothing under it and a missing local folder each say what is missing (it read
    'no manifest-summary.json', which sent a user looking for a manifest); full and incremental exports alike."""
    from ddb2bt.pipelines.dynamodb.incremental_export import read_incremental_manifest

    monkeypatch.setattr(FileSystems, "_pipeline_options", None)  # restored after the test
    FileSystems.set_options(PipelineOptions([f"--s3_endpoint_url={moto_server.endpoint}", "--s3_region_name=us-east-1"]))
    s3 = boto3.client("s3", endpoint_url=moto_server.endpoint, region_name="us-east-1")
    bucket = f"exports-{os.getpid()}-{id(items):x}"[:60]
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="ddb/posts/notes.txt", Body=b"not an export")
    cases = {
        f"s3://{bucket}-missing/ddb/posts": f"S3 bucket '{bucket}-missing' does not exist",
        f"s3://{bucket}/ddb/post": None,  # a prefix of an object's key: something is there, so no manifest is said
        f"s3://{bucket}/ddb/other/": f"nothing is stored under s3://{bucket}/ddb/other: bucket '{bucket}' holds no "
                                      "object whose key starts with 'ddb/other'",
        str(tmp_path / "nowhere"): f"{tmp_path / 'nowhere'} does not exist",
    }
    for path, said in cases.items():
        for read in (read_manifest, read_incremental_manifest):
            with pytest.raises(ExportError) as caught:
                read(path)
            assert str(caught.value).startswith(said or "no manifest-summary.json"), str(caught.value)
            assert "\n" not in str(caught.value)


def beam_never_asked(monkeypatch) -> None:
    """Beam's file systems retry an unreachable store for minutes: the checks before them must answer alone."""
    def asked(*args, **kwargs):
        raise AssertionError("Beam's file systems were asked")

    monkeypatch.setattr(FileSystems, "exists", asked)
    monkeypatch.setattr(FileSystems, "match", asked)


@pytest.mark.parametrize("failure, said", [
    (__import__("socket").gaierror(-2, "Name or service not known"), "its name does not resolve"),
    (ConnectionRefusedError(111, "Connection refused"), "no connection to port 443"),
])
def test_a_gs_path_without_a_network_to_cloud_storage_is_refused_at_once(monkeypatch, failure, said):
    """A gs:// export on a machine that cannot reach Cloud Storage: one line at once (exit 3), before Beam's GCS file
    system is asked (it retried credentials, then the unresolvable name, for two minutes, and blamed
    --temp_location); full and incremental exports alike."""
    import socket

    from ddb2bt.mappers.errors import ServiceError
    from ddb2bt.pipelines.dynamodb.incremental_export import read_incremental_manifest
    from ddb2bt.pipelines.run import service_errors

    def unreachable(address, timeout=None):
        assert address == ("storage.googleapis.com", 443) and timeout
        raise failure

    for name in ("STORAGE_EMULATOR_HOST", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(service_errors, "_REACHED", [])
    monkeypatch.setattr(socket, "create_connection", unreachable)
    beam_never_asked(monkeypatch)
    for read in (read_manifest, read_incremental_manifest):
        with pytest.raises(ServiceError) as caught:
            read("gs://exports/ddb/posts/AWSDynamoDB/01714564800000-a1b2c3d4")
        assert caught.value.exit_code == 3
        assert str(caught.value).startswith("cannot read gs://exports/ddb/posts/AWSDynamoDB/01714564800000-a1b2c3d4: "
                                            f"Google Cloud Storage (storage.googleapis.com) cannot be reached from here: {said}")
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", "http://127.0.0.1:9")  # an emulator: the client's own errors
    assert service_errors.gcs_unreachable("gs://exports/x") is None
    assert service_errors.gcs_unreachable("/tmp/x") is None


def test_an_s3_export_without_aws_credentials_is_refused_at_once(monkeypatch, tmp_path):
    """No AWS credentials anywhere: one line at once (exit 3), before Beam's S3 client, which retried "Unable to locate
    credentials" for eight minutes and then said `exists() operation failed with exceptions {...}`."""
    from ddb2bt.mappers.errors import ServiceError
    from ddb2bt.pipelines.dynamodb.incremental_export import read_incremental_manifest
    from ddb2bt.pipelines.run.service_errors import s3_credentials_missing

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                 "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                 "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setattr(FileSystems, "_pipeline_options", None)  # restored after the test

    beam_never_asked(monkeypatch)
    for read in (read_manifest, read_incremental_manifest):
        with pytest.raises(ServiceError) as caught:
            read("s3://exports/ddb/posts/AWSDynamoDB/01714564800000-a1b2c3d4")
        assert caught.value.exit_code == 3
        assert str(caught.value) == ("cannot read s3://exports/ddb/posts/AWSDynamoDB/01714564800000-a1b2c3d4: no AWS "
                                     "credentials found; configure AWS credentials (environment, `aws configure`, "
                                     "--profile, or an instance role)")
    # keys given to Beam's S3 file system itself are credentials too; a local path needs none
    assert s3_credentials_missing("s3://exports/x", PipelineOptions(["--s3_access_key_id=k"])) is None
    assert s3_credentials_missing(str(tmp_path)) is None


def test_an_s3_endpoint_that_cannot_be_reached_is_said_at_once(monkeypatch):
    """S3 unreachable (a wrong AWS_ENDPOINT_URL_S3, no network): one line at once (exit 3) from one bounded request,
    before Beam's S3 client, which retried the connection error with backoff for minutes."""
    from ddb2bt.mappers.errors import ServiceError
    from ddb2bt.pipelines.dynamodb.incremental_export import read_incremental_manifest

    monkeypatch.setattr(FileSystems, "_pipeline_options", None)  # restored after the test
    FileSystems.set_options(PipelineOptions(["--s3_endpoint_url=http://127.0.0.1:9", "--s3_region_name=us-east-1"]))

    beam_never_asked(monkeypatch)
    for read in (read_manifest, read_incremental_manifest):
        with pytest.raises(ServiceError) as caught:
            read("s3://exports/ddb/posts")
        assert caught.value.exit_code == 3
        assert str(caught.value).startswith("cannot read s3://exports/ddb/posts: S3 at http://127.0.0.1:9 cannot be "
                                            "reached: Could not connect to the endpoint URL"), str(caught.value)


def test_a_gs_run_folder_without_a_network_is_refused_before_anything_starts(monkeypatch, tmp_path):
    """--run-dir (or --dead-letter) on gs:// from a machine that cannot reach Cloud Storage: one line at once, exit 3,
    nothing created, where Beam's file systems waited minutes first (the run folder is looked at before anything)."""
    import socket

    from ddb2bt.app.migrate import prepare
    from ddb2bt.app.options import RunOptions
    from ddb2bt.mappers.errors import ServiceError
    from ddb2bt.pipelines.run import service_errors

    from .documented_exports import DOCUMENTED, EXPORTS, FULL, posts_spec

    def unreachable(address, timeout=None):
        raise socket.gaierror(-2, "Name or service not known")

    for name in ("STORAGE_EMULATOR_HOST", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(service_errors, "_REACHED", [])
    monkeypatch.setattr(socket, "create_connection", unreachable)
    for name in ("exists", "match"):  # the export is local: only the gs:// paths must not reach Beam
        real = getattr(FileSystems, name)

        def local_only(path, *args, real=real, **kwargs):
            assert "gs://" not in str(path), "Beam's file systems were asked about " + str(path)
            return real(path, *args, **kwargs)

        monkeypatch.setattr(FileSystems, name, local_only)
    spec = posts_spec("posts_gs", str(DOCUMENTED / EXPORTS / FULL))
    for options in (RunOptions(run_dir="gs://runs/posts"),
                    RunOptions(run_dir=str(tmp_path / "run"), dead_letter="gs://runs/letters.jsonl")):
        with pytest.raises(ServiceError) as caught:
            prepare(spec, options)
        assert caught.value.exit_code == 3 and "gs://runs/" in str(caught.value)
        assert "cannot be reached from here" in str(caught.value)
    assert not (tmp_path / "run").exists()
