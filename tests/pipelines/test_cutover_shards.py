"""The tail's shard lineage rule on realistic DescribeStream shard lists (splits, closed parents, expired
ancestors, children listed while their parent is open), and its reading of stream records. Pure: no servers."""

from __future__ import annotations

import pytest

from ddb2bt.pipelines.cutover.tail import ShardState, plan_shards
from ddb2bt.pipelines.dynamodb.stream import to_change

from .stream_wire import TTL_IDENTITY, described_shards, example, parse, record, shard

PARENT = "shardId-00000001700000000000-a1b2c3d4"
LEFT = "shardId-00000001700014400000-e5f6a7b8"
RIGHT = "shardId-00000001700014400001-c9d0e1f2"
GRANDCHILD = "shardId-00000001700028800000-0a1b2c3d"
EXPIRED = "shardId-00000001699985600000-deadbeef"

SPLIT = described_shards([  # a closed parent split in two open children (AWS promises no listing order: children first)
    shard(LEFT, PARENT, "200000000000000000001"),
    shard(RIGHT, PARENT, "200000000000000000002"),
    shard(PARENT, None, "100000000000000000001", "100000000000000000999"),
])


def test_a_split_reads_the_parent_to_its_end_before_either_child():
    plan = plan_shards(SPLIT, {})
    assert plan.ready == [PARENT] and plan.waiting == [LEFT, RIGHT] and plan.lost == []
    half_read = {PARENT: ShardState(sequence="100000000000000000500")}
    assert plan_shards(SPLIT, half_read).ready == [PARENT]
    # Read up to its EndingSequenceNumber but GetRecords has not yet said it ended: still the parent alone.
    at_end = {PARENT: ShardState(sequence="100000000000000000999")}
    assert plan_shards(SPLIT, at_end).ready == [PARENT]
    finished = {PARENT: ShardState(sequence="100000000000000000999", done=True)}
    plan = plan_shards(SPLIT, finished)
    assert plan.ready == [LEFT, RIGHT] and plan.waiting == []


def test_children_listed_while_their_parent_is_still_open_wait():
    open_parent = described_shards([shard(PARENT, None, "100000000000000000001"),  # no EndingSequenceNumber yet
                                    shard(LEFT, PARENT, "200000000000000000001"),
                                    shard(RIGHT, PARENT, "200000000000000000002")])
    plan = plan_shards(open_parent, {PARENT: ShardState(sequence="100000000000000000042")})
    assert plan.ready == [PARENT] and plan.waiting == [LEFT, RIGHT]


def test_a_parent_whose_own_parent_expired_is_read_and_its_lineage_follows_in_order():
    listed = described_shards([shard(GRANDCHILD, LEFT, "300000000000000000001"),
                               shard(LEFT, PARENT, "200000000000000000001", "200000000000000000900"),
                               shard(PARENT, EXPIRED, "100000000000000000001", "100000000000000000999")])
    plan = plan_shards(listed, {})  # EXPIRED is past the retention: no longer listed, nothing there to wait for
    assert plan.ready == [PARENT] and plan.waiting == [LEFT, GRANDCHILD]
    done = {PARENT: ShardState(done=True, parent=EXPIRED)}
    assert plan_shards(listed, done).ready == [LEFT]
    done[LEFT] = ShardState(done=True, parent=PARENT)
    assert plan_shards(listed, done).ready == [GRANDCHILD]


def test_a_finished_parent_gone_from_the_listing_is_fine_an_unfinished_one_is_lost():
    listed = SPLIT[:2]  # the parent trimmed from the stream after 24 hours
    plan = plan_shards(listed, {PARENT: ShardState(done=True), LEFT: ShardState(sequence="200000000000000000010")})
    assert plan.ready == [LEFT, RIGHT] and plan.lost == []
    plan = plan_shards(listed, {PARENT: ShardState(sequence="100000000000000000500")})
    assert plan.lost == [PARENT]


def records(*wire: dict) -> list[dict]:
    """GetRecords' Records as boto3 returns them, from the wire records."""
    return parse("GetRecords", {"Records": list(wire), "NextShardIterator": "arn:aws:dynamodb:us-east-1:1:table/T/"
                                "stream/2026-11-22T12:00:00.000|1|AAAA"})["Records"]


REMOVED = {"Keys": {"pk": {"S": "a"}}, "old": {"pk": {"S": "a"}, "n": {"N": "1"}, "b": {"B": "AAEC"}}}


def test_a_ttl_deletion_record_as_getrecords_sends_it_is_flagged_and_a_user_delete_is_not():
    ttl, user, other = records(
        record("REMOVE", REMOVED["Keys"], old=REMOVED["old"], sequence="100000000000000000007", created=1795348801,
               identity=TTL_IDENTITY),
        record("REMOVE", REMOVED["Keys"], old=REMOVED["old"], sequence="100000000000000000008", created=1795348802),
        record("REMOVE", REMOVED["Keys"], old=REMOVED["old"], sequence="100000000000000000009", created=1795348803,
               identity={"PrincipalId": "other.amazonaws.com", "Type": "Service"}))
    assert ttl["userIdentity"] == {"Type": "Service", "PrincipalId": "dynamodb.amazonaws.com"}  # botocore's names
    change = to_change(ttl)
    assert change.ttl and change.kind == "REMOVE" and change.new is None
    assert change.old == {"pk": {"S": "a"}, "n": {"N": "1"}, "b": {"B": b"\x00\x01\x02"}}  # base64 on the wire
    assert change.time_us == 1_795_348_801_000_000 and change.sequence == "100000000000000000007"
    assert not to_change(user).ttl and not to_change(other).ttl


def test_the_ttl_identity_as_aws_ttl_page_and_lambda_events_write_it_is_flagged_too():
    (parsed,) = records(record("REMOVE", REMOVED["Keys"], old=REMOVED["old"], sequence="100000000000000000007",
                               created=1795348801))
    lambda_style = dict(parsed, userIdentity={"type": "Service", "principalId": "dynamodb.amazonaws.com"})
    assert to_change(lambda_style).ttl


@pytest.mark.parametrize("created", [1795348801, 1795348801.0, 1.795348801e9])
def test_creation_times_in_any_json_number_form_are_exact_microseconds(created):
    (parsed,) = records(record("INSERT", REMOVED["Keys"], new=REMOVED["old"], sequence="1", created=created))
    assert to_change(parsed).time_us == 1_795_348_801_000_000


def test_botocores_own_getrecords_example_reads_as_changes():
    """AWS's example answer (KEYS_ONLY, so no images; the timestamps as text): kinds, keys and times as sent."""
    changes = [to_change(parsed) for parsed in parse("GetRecords", example("GetRecords"))["Records"]]
    assert [change.kind for change in changes] == ["INSERT", "MODIFY", "REMOVE"]
    assert changes[0].keys == {"ForumName": {"S": "DynamoDB"}, "Subject": {"S": "DynamoDB Thread 3"}}
    assert [change.time_us for change in changes] == [1_464_806_460_000_000, 1_464_805_270_000_000,
                                                     1_464_806_460_000_000]
    assert [change.sequence for change in changes] == ["300000000000000499659", "400000000000000499660",
                                                      "500000000000000499661"]
    assert not any(change.ttl for change in changes)


@pytest.mark.filterwarnings("ignore:tzname PDT identified")  # the example's CreationRequestDateTime is prose
def test_botocores_own_describestream_example_plans_its_lineage_oldest_first():
    """Four shards, each the parent of the next (all but the last closed): read one at a time, in lineage order."""
    listed = parse("DescribeStream", example("DescribeStream"))["StreamDescription"]["Shards"]
    ids = [entry["ShardId"] for entry in listed]
    saved: dict[str, ShardState] = {}
    for shard_id in ids:
        plan = plan_shards(listed, saved)
        assert plan.ready == [shard_id] and plan.lost == []
        saved[shard_id] = ShardState(done=True)
    assert plan_shards(listed, saved).ready == []
