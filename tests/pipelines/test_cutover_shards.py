"""The tail's shard lineage rule on realistic DescribeStream shard lists (splits, closed parents, expired
ancestors, children listed while their parent is open), and its reading of stream records. Pure: no servers."""

from __future__ import annotations

from datetime import datetime, timezone

from ddb2bt.pipelines.stream_tail import ShardState, plan_shards, to_change

PARENT = "shardId-00000001700000000000-a1b2c3d4"
LEFT = "shardId-00000001700014400000-e5f6a7b8"
RIGHT = "shardId-00000001700014400001-c9d0e1f2"
GRANDCHILD = "shardId-00000001700028800000-0a1b2c3d"
EXPIRED = "shardId-00000001699985600000-deadbeef"


def shard(shard_id: str, parent: str | None, start: str, end: str | None = None) -> dict:
    """One entry of DescribeStream's Shards, as AWS writes it (no ParentShardId for a root, no end while open)."""
    entry: dict = {"ShardId": shard_id, "SequenceNumberRange": {"StartingSequenceNumber": start}}
    if parent is not None:
        entry["ParentShardId"] = parent
    if end is not None:
        entry["SequenceNumberRange"]["EndingSequenceNumber"] = end
    return entry


SPLIT = [  # a closed parent split in two open children (the listing order AWS gives is not promised: children first)
    shard(LEFT, PARENT, "200000000000000000001"),
    shard(RIGHT, PARENT, "200000000000000000002"),
    shard(PARENT, None, "100000000000000000001", "100000000000000000999"),
]


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
    open_parent = [shard(PARENT, None, "100000000000000000001"), *SPLIT[:2]]  # no EndingSequenceNumber yet
    plan = plan_shards(open_parent, {PARENT: ShardState(sequence="100000000000000000042")})
    assert plan.ready == [PARENT] and plan.waiting == [LEFT, RIGHT]


def test_a_parent_whose_own_parent_expired_is_read_and_its_lineage_follows_in_order():
    listed = [shard(GRANDCHILD, LEFT, "300000000000000000001"),
              shard(LEFT, PARENT, "200000000000000000001", "200000000000000000900"),
              shard(PARENT, EXPIRED, "100000000000000000001", "100000000000000000999")]
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


def test_a_ttl_deletion_record_is_flagged_and_a_user_delete_is_not():
    record = {"eventName": "REMOVE", "userIdentity": {"type": "Service", "principalId": "dynamodb.amazonaws.com"},
              "dynamodb": {"Keys": {"pk": {"S": "a"}}, "OldImage": {"pk": {"S": "a"}, "n": {"N": "1"}},
                           "ApproximateCreationDateTime": datetime(2026, 11, 22, 12, 0, 1, tzinfo=timezone.utc),
                           "SequenceNumber": "100000000000000000007"}}
    change = to_change(record)
    assert change.ttl and change.kind == "REMOVE" and change.new is None
    assert change.time_us == 1_795_348_801_000_000 and change.sequence == "100000000000000000007"
    user = dict(record, userIdentity=None)
    assert not to_change(user).ttl
    assert not to_change(dict(record, userIdentity={"type": "Service", "principalId": "other.amazonaws.com"})).ttl
