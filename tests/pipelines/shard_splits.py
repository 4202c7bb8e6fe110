"""A stream whose shard splits, served by a loopback proxy in front of moto: what the shard tests share."""

import boto3
import random
from ddb2bt.pipelines.cutover.workload import make_spec
from .streams import create_streamed_table, workload
from contextlib import contextmanager
from ddb2bt.app.migrate import migrate
from ddb2bt.app.options import RunOptions
from ddb2bt.pipelines.local.proxy import ShardSplitProxy, serving


PARENT, CHILD = ShardSplitProxy.PARENT, ShardSplitProxy.CHILD


def last_sequence(endpoint: str, name: str) -> int:
    """The sequence number of the stream's newest record, read from moto directly."""
    dynamodb = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1")
    streams = boto3.client("dynamodbstreams", endpoint_url=endpoint, region_name="us-east-1")
    arn = dynamodb.describe_table(TableName=name)["Table"]["LatestStreamArn"]
    (shard,) = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]
    iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard["ShardId"],
                                          ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    last = 0
    while records := (page := streams.get_records(ShardIterator=iterator))["Records"]:
        last, iterator = int(records[-1]["dynamodb"]["SequenceNumber"]), page["NextShardIterator"]
    return last


@contextmanager
def proxied_backfill(moto_server, name: str, tmp_path, rng: random.Random, **proxy_options):
    """A streamed table with a backfill (through the proxy, as every call after it): (client, spec, run dir, proxy)."""
    proxy = ShardSplitProxy(moto_server.host, moto_server.port, **proxy_options)
    with serving(proxy) as port:
        client = create_streamed_table(moto_server.endpoint, name)
        workload(client, name, rng, 30)
        spec = make_spec(name, endpoint_url=f"http://127.0.0.1:{port}")
        run_dir = str(tmp_path / "run")
        assert migrate(spec, RunOptions(run_dir=run_dir, total_segments=2)).ok
        yield client, spec, run_dir, proxy
