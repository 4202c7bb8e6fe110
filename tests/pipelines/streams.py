"""DynamoDB tables with streams, a workload on them, a backfill and a fresh migration to compare with: what the
cutover tests share."""

import boto3
import random
from .cells import read_cells
from .cutover_workload import make_spec, random_item
from .cutover_workload import random_keys
from .export_fixtures import write_export
from ddb2bt.app.migrate import migrate
from ddb2bt.app.options import RunOptions
from ddb2bt.mappers.spec import MappingSpec
from ddb2bt.pipelines.stream_tail import to_change


def create_streamed_table(endpoint: str, name: str) -> object:
    client = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1")
    client.create_table(TableName=name, BillingMode="PAY_PER_REQUEST",
                        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
                        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                              {"AttributeName": "sk", "AttributeType": "S"}],
                        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"})
    return client


def workload(client, name: str, rng: random.Random, steps: int, posts: int = 6) -> None:
    """Puts (new items, changed timestamps and entities), attribute removals and deletes."""
    for _ in range(steps):
        pk, sk = random_keys(rng, posts)
        key = {"pk": {"S": pk}, "sk": {"S": sk}}
        roll = rng.random()
        if roll < 0.2:
            client.delete_item(TableName=name, Key=key)
        elif roll < 0.35 and sk == "post":
            if "Item" in client.get_item(TableName=name, Key=key):
                client.update_item(TableName=name, Key=key, UpdateExpression="REMOVE A, B")
        else:
            client.put_item(TableName=name, Item=random_item(rng, pk, sk))


def table_items(client, name: str) -> list[dict]:
    return [item for page in client.get_paginator("scan").paginate(TableName=name) for item in page["Items"]]


def backfill(moto_server, name: str, run_dir: str, rng: random.Random):
    client = create_streamed_table(moto_server.endpoint, name)
    workload(client, name, rng, 40)
    spec = make_spec(name, endpoint_url=moto_server.endpoint)
    result = migrate(spec, RunOptions(run_dir=run_dir, total_segments=2))
    assert result.counters["items_read"] > 0
    return client, spec


def fresh_migration(spec, tmp_path, items: list[dict]) -> dict:
    """Migrate the final table (exported) into a new Bigtable table with the same spec; its cells."""
    data = spec.model_dump(mode="json", by_alias=True)
    data["target"]["table"] = spec.target.table + "f"
    data["source"].update(table=None, export={"path": write_export(tmp_path / "final", items, files=1)})
    fresh = MappingSpec.model_validate(data)
    result = migrate(fresh, RunOptions(run_dir=str(tmp_path / "fresh")))
    assert result.ok, result.problems
    return read_cells(fresh.target)


def stream_changes(endpoint: str, name: str) -> list:
    """Every record of the table's stream, as changes, in order (one shard on moto)."""
    client = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1")
    streams = boto3.client("dynamodbstreams", endpoint_url=endpoint, region_name="us-east-1")
    arn = client.describe_table(TableName=name)["Table"]["LatestStreamArn"]
    changes = []
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard["ShardId"],
                                              ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        while iterator:
            page = streams.get_records(ShardIterator=iterator, Limit=1000)
            changes += [to_change(record) for record in page["Records"]]
            if not page["Records"]:
                break
            iterator = page.get("NextShardIterator")
    return changes
