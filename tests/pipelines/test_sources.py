"""read_items: the dry run's sample and validate's full read, from an S3 export and from a live table."""

import os

import boto3
from apache_beam.io.filesystems import FileSystems
from tests.aws_mock import mock_aws

from ddb2bt.mappers.spec import SourceSpec
from ddb2bt.pipelines.sources import read_items
from tests.pipelines.export_fixtures import fingerprint, make_items, write_export


def test_samples_and_reads_an_s3_export_without_a_pipeline(tmp_path, monkeypatch):
    monkeypatch.setattr(FileSystems, "_pipeline_options", None)  # no options left over from another test
    items = make_items(40, padding=10)
    write_export(tmp_path / "bucket", items, files=3, prefix="exports/daily")
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="bkt")
        for folder, _, names in os.walk(tmp_path / "bucket"):
            for name in names:
                full = os.path.join(folder, name)
                s3.upload_file(full, "bkt", os.path.relpath(full, tmp_path / "bucket"))
        source = SourceSpec(export={"path": "s3://bkt/exports/daily"})
        sample = read_items(source, 5)
        everything = read_items(source)
    assert len(sample) == 5
    assert sorted(map(fingerprint, everything)) == sorted(map(fingerprint, items))


def test_samples_a_live_table_a_few_pages_at_most():
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(
            TableName="T",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        for index in range(30):
            client.put_item(TableName="T", Item={"pk": {"S": f"k{index:02d}"}, "n": {"N": "12345678901234567890123456789012345678"}})
        source = SourceSpec(table="T", region="us-east-1")
        sample, everything = read_items(source, 7), read_items(source)
    assert len(sample) == 7 and len(everything) == 30
    assert {item["n"]["N"] for item in everything} == {"12345678901234567890123456789012345678"}
