"""Catch-up from export folders laid out as AWS writes them (tests/data/aws_exports/documented: incremental data in
the shared AWSDynamoDB/data/ folder, keys relative to the prefix), locally and from s3:// on moto_server; an export
of another table, and an export holding one malformed record, refused before anything is written."""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import os
import shutil
from pathlib import Path

import boto3
import pytest
from apache_beam.io.filesystems import FileSystems
from typer.testing import CliRunner

from ddb2bt.app.cutover import catch_up
from ddb2bt.app.migrate import migrate
from ddb2bt.app.options import RunOptions
from ddb2bt.cli.main import app
from ddb2bt.mappers.spec import MappingSpec
from ddb2bt.pipelines.dynamodb.export import ExportError

from .cells import expected_cells, read_cells
from .documented_exports import DOCUMENTED, EXPORTS, FULL, INC1, INC2, final_state, posts_spec

def test_documented_exports_backfill_and_catch_up_to_a_fresh_migration_of_the_final_table(bigtable_env, unique_name,
                                                                                           tmp_path):
    spec = posts_spec(unique_name, str(DOCUMENTED / EXPORTS / FULL))
    options = RunOptions(run_dir=str(tmp_path / "run"))
    assert migrate(spec, options).counters["items_read"] == 5
    first = catch_up(spec, str(DOCUMENTED / EXPORTS / INC1), options)
    assert first.ok, first.problems
    assert (first.counters["changes_read"], first.counters["changes_applied"]) == (4, 4)
    second = catch_up(spec, str(DOCUMENTED / EXPORTS / INC2), options)
    assert second.ok, second.problems
    assert second.counters["changes_read"] == 5 and second.counters["cells_deleted"] > 0
    assert read_cells(spec.target) == expected_cells(spec, final_state())


def test_the_same_from_s3_on_moto_server(bigtable_env, moto_server, unique_name, tmp_path, monkeypatch):
    monkeypatch.setattr(FileSystems, "_pipeline_options", None)  # restored after the test
    s3 = boto3.client("s3", endpoint_url=moto_server.endpoint, region_name="us-east-1")
    bucket = f"exports-{unique_name}"
    s3.create_bucket(Bucket=bucket)
    for folder, _, names in os.walk(DOCUMENTED):
        for name in names:
            full = os.path.join(folder, name)
            s3.upload_file(full, bucket, os.path.relpath(full, DOCUMENTED))  # the bucket as AWS left it
    prefix = f"s3://{bucket}/ddb/posts"
    spec = posts_spec(unique_name, f"{prefix}/AWSDynamoDB/{FULL}")
    options = RunOptions(run_dir=str(tmp_path / "run"), beam_args=(
        f"--s3_endpoint_url={moto_server.endpoint}", "--s3_region_name=us-east-1"))
    assert migrate(spec, options).counters["items_read"] == 5
    for export in (INC1, INC2):
        result = catch_up(spec, f"{prefix}/AWSDynamoDB/{export}", options)
        assert result.ok, result.problems
    assert read_cells(spec.target) == expected_cells(spec, final_state())


@pytest.fixture
def caught_up_once(bigtable_env, unique_name, tmp_path):
    """A copy of the documented bucket, back-filled and caught up with the first incremental export."""
    bucket = shutil.copytree(DOCUMENTED, tmp_path / "bucket")
    spec = posts_spec(unique_name, str(bucket / EXPORTS / FULL))
    options = RunOptions(run_dir=str(tmp_path / "run"))
    assert migrate(spec, options).ok
    assert catch_up(spec, str(bucket / EXPORTS / INC1), options).ok
    return spec, options, bucket


def snapshot(spec: MappingSpec, run_dir: str) -> tuple[dict, bytes]:
    return read_cells(spec.target), (Path(run_dir) / "cutover.json").read_bytes()


def rewrite_data_file(export_dir: Path, index: int, lines: list[str]) -> None:
    """Replace one data file of an export and its manifest line's checksums (so only the content is wrong)."""
    manifest_path = export_dir / "manifest-files.json"
    entries = [json.loads(line) for line in manifest_path.read_text().splitlines()]
    path = export_dir.parent / entries[index]["dataFileS3Key"].split("AWSDynamoDB/", 1)[1]
    data = gzip.compress("".join(line + "\n" for line in lines).encode(), mtime=0)
    path.write_bytes(data)
    digest = hashlib.md5(data)
    entries[index].update(md5Checksum=base64.b64encode(digest.digest()).decode(), itemCount=len(lines),
                          etag=hashlib.md5(digest.digest()).hexdigest() + "-1")
    manifest_path.write_text("".join(json.dumps(entry, separators=(",", ":")) + "\n" for entry in entries))


MALFORMED = {
    "unknown type tag": (lambda r: r["NewImage"].update(Title={"Oops": {"X": "1"}}),
                         "NewImage.Title: unknown DynamoDB type 'Oops'"),
    "missing Keys": (lambda r: r.pop("Keys"), "Keys is missing"),
    "unreadable timestamp": (lambda r: r["Metadata"].update(WriteTimestampMicros={"N": "1714570200.5"}),
                             "Metadata.WriteTimestampMicros is"),
    "missing timestamp": (lambda r: r.pop("Metadata"), "Metadata.WriteTimestampMicros is null"),
    "image key differs": (lambda r: r["NewImage"].update(sk={"S": "c#3"}), "NewImage.sk differs from Keys.sk"),
}


@pytest.mark.parametrize("kind", list(MALFORMED))
def test_one_malformed_record_refuses_the_whole_export_and_nothing_is_written(caught_up_once, kind):
    """QA: a record whose NewImage held an unknown type tag deleted the item's old cells, dead-lettered its new
    image, exited 0 and advanced the timeline. Now the export is refused before anything is written, and the
    corrected export applies afterwards."""
    spec, options, bucket = caught_up_once
    export_dir = bucket / EXPORTS / INC2
    data_file = bucket / EXPORTS / "data" / "mf3ocl2xwq7evb5mdp2ctv3bgu.json.gz"
    good = gzip.decompress(data_file.read_bytes()).decode().splitlines()
    bad = [json.loads(line) for line in good]
    change, message = MALFORMED[kind]
    change(bad[3])  # line 4 of 5: the three lines before it are valid changes
    rewrite_data_file(export_dir, 0, [json.dumps(record) for record in bad])
    before = snapshot(spec, options.run_dir)

    with pytest.raises(ExportError, match="nothing was written") as refused:
        catch_up(spec, str(export_dir), options)
    assert f"{data_file} line 4 is not a change record: {message}" in str(refused.value)
    assert snapshot(spec, options.run_dir) == before  # every cell, and the timeline file byte for byte
    assert not list(Path(options.run_dir).glob(f"catch-up-{INC2}*"))

    if kind == "unknown type tag":  # the CLI: exit 2, one line naming file, line and field
        spec_file = bucket.parent / "spec.json"
        spec_file.write_text(json.dumps(spec.model_dump(mode="json", by_alias=True)))
        result = CliRunner().invoke(app, ["catch-up", str(spec_file), "--run-dir", options.run_dir,
                                          "--export", str(export_dir)])
        assert result.exit_code == 2, result.output
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and "line 4" in lines[0] and "NewImage.Title" in lines[0], result.output
        assert snapshot(spec, options.run_dir) == before

    rewrite_data_file(export_dir, 0, good)  # the export as AWS wrote it: it applies, and the target converges
    assert catch_up(spec, str(export_dir), options).ok
    assert read_cells(spec.target) == expected_cells(spec, final_state())


def edit_summary(export_dir: Path, **changes) -> None:
    path = export_dir / "manifest-summary.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}, separators=(",", ":")))


@pytest.mark.parametrize("changes, message", [
    ({"tableArn": "arn:aws:dynamodb:us-east-1:123456789012:table/orders"},
     r"export 01714572000000-c3d4e5f6 is of table orders \(arn:aws:dynamodb:us-east-1:123456789012:table/orders, "
     r"tableId 2f0b7c3e-5b1a-4c7e-9d3f-8a6e1c2b4d50\), but this cutover's backfill is of table posts \(.*\); apply "
     r"an export of the source table instead \(ExportTableToPointInTime of arn:aws:dynamodb:us-east-1:123456789012:"
     r"table/posts, ExportFromTime 2024-05-01T13:00:00.000Z\)"),
    ({"tableId": "99999999-0000-0000-0000-000000000000"},  # the table deleted and re-created under its name
     r"is of table posts \(.*tableId 99999999-0000-0000-0000-000000000000\), but this cutover's backfill is of table "
     r"posts \(.*tableId 2f0b7c3e-5b1a-4c7e-9d3f-8a6e1c2b4d50\)"),
    ({"tableArn": None}, "names no tableArn"),
])
def test_an_export_of_another_table_is_refused_before_anything_is_written(caught_up_once, changes, message):
    """QA: an export of table B applied to table A's timeline gave "6 changes: 6 applied", exit 0."""
    spec, options, bucket = caught_up_once
    export_dir = bucket / EXPORTS / INC2
    edit_summary(export_dir, **changes)
    before = snapshot(spec, options.run_dir)
    with pytest.raises(ExportError, match=message):
        catch_up(spec, str(export_dir), options)
    assert snapshot(spec, options.run_dir) == before


def test_the_spec_source_table_is_checked_when_the_backfill_recorded_none(caught_up_once):
    """A timeline saved before the table was recorded: the spec's source.table and its full export still decide."""
    spec, options, bucket = caught_up_once
    timeline_path = Path(options.run_dir) / "cutover.json"
    timeline = json.loads(timeline_path.read_text())
    assert timeline["table"] == {"arn": "arn:aws:dynamodb:us-east-1:123456789012:table/posts",
                                 "table_id": "2f0b7c3e-5b1a-4c7e-9d3f-8a6e1c2b4d50"}
    timeline_path.write_text(json.dumps({key: value for key, value in timeline.items() if key != "table"}))
    export_dir = bucket / EXPORTS / INC2
    edit_summary(export_dir, tableArn="arn:aws:dynamodb:us-east-1:123456789012:table/orders")
    with pytest.raises(ExportError, match="but this cutover's backfill is of table posts"):
        catch_up(spec, str(export_dir), options)  # read from the spec's source.export


def test_the_table_is_named_before_the_window(caught_up_once):
    """Another table's export is refused for what it is, not for a window that means nothing for this timeline."""
    spec, options, bucket = caught_up_once
    export_dir = bucket / EXPORTS / INC1  # this window is already applied
    edit_summary(export_dir, tableArn="arn:aws:dynamodb:us-east-1:123456789012:table/orders")
    with pytest.raises(ExportError, match="is of table orders"):
        catch_up(spec, str(export_dir), options)
