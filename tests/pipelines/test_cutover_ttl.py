"""TTL deletes in the stream, as AWS emits them, through botocore's own client: applied and counted.

moto_server never expires items, so the TTL process is played by hand: items are deleted in moto, and
TtlDeleteProxy gives their REMOVE records the ``userIdentity`` AWS's TTL process puts on its own
(``{"PrincipalId": "dynamodb.amazonaws.com", "Type": "Service"}``, the GetRecords member names). The tail
reads the stream through the proxy with a real botocore client (HTTP, checksums, the JSON parser), so the
record reaches ``to_change`` exactly as boto3 returns it.
"""

from __future__ import annotations

import random

from ddb2bt.app.cutover import tail
from ddb2bt.app.migrate import migrate
from ddb2bt.app.options import RunOptions
from ddb2bt.pipelines.local.proxy import TtlDeleteProxy, serving

from .cells import expected_cells, read_cells
from ddb2bt.pipelines.cutover.workload import make_spec, random_item
from .streams import create_streamed_table, table_items


def test_a_ttl_delete_from_the_stream_is_applied_and_counted(bigtable_env, moto_server, unique_name, tmp_path):
    rng = random.Random(31)
    client = create_streamed_table(moto_server.endpoint, unique_name)
    posts = [random_item(rng, f"p{number}", "post") for number in range(6)]
    for item in posts:
        item.update(kind={"S": "post"}, Title={"S": f"title of {item['pk']['S']}"})  # each maps: cells to lose
        client.put_item(TableName=unique_name, Item=item)
    proxy = TtlDeleteProxy(moto_server.host, moto_server.port)
    with serving(proxy) as port:
        spec = make_spec(unique_name, endpoint_url=f"http://127.0.0.1:{port}")
        run_dir = str(tmp_path / "run")
        assert migrate(spec, RunOptions(run_dir=run_dir, total_segments=1)).ok
        rows = read_cells(spec.target)
        assert set(rows) == {b"p0", b"p1", b"p2", b"p3", b"p4", b"p5"}

        expired = [{"pk": post["pk"], "sk": post["sk"]} for post in posts[:2]]
        proxy.ttl_keys = expired
        for key in expired:  # what the TTL process does once the items' expiry time has passed
            client.delete_item(TableName=unique_name, Key=key)
        client.delete_item(TableName=unique_name, Key={"pk": posts[2]["pk"], "sk": posts[2]["sk"]})  # a user's
        result = tail(spec, RunOptions(run_dir=run_dir), until_idle_s=0.5, poll_s=0.1)

    assert result.ok, result.problems
    assert proxy.marked == 2
    # The puts just before the backfill may be read again (the tail starts a margin before the timeline's end)
    assert result.counters["ttl_deletes"] == 2 and result.counters["changes_applied"] >= 3, result.counters
    after = read_cells(spec.target)
    assert not {b"p0", b"p1", b"p2"} & set(after)  # the expired items' cells are gone, the user-deleted one's too
    assert after == expected_cells(spec, table_items(client, unique_name))
    assert set(after) == {b"p3", b"p4", b"p5"}
