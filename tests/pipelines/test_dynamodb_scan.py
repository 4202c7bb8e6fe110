"""Parallel scan: segment math, read budget, retries that never lose a page, and complete Beam scans.

Unit tests run against moto in-process; the multi-page test also runs against the real local
servers (dynalite pages at 1 MB and validates strictly, which is the point).
"""

from __future__ import annotations

import itertools
import math
import pickle
import threading
import time
from typing import Any

import apache_beam as beam
import boto3
import pytest
from apache_beam.testing.util import assert_that, equal_to
from botocore.exceptions import ClientError
from hypothesis import given
from hypothesis import strategies as st
from tests.aws_mock import mock_aws

from ddb2bt.mappers.spec import SourceSpec
from ddb2bt.mappers.analysis.plan import SourceDescription
from ddb2bt.pipelines.run.batches import Batch, SegmentAt, SegmentDone
from ddb2bt.pipelines.dynamodb.client import ClientSettings, describe_source, make_client
from ddb2bt.pipelines.run.local_runner import new_pipeline
from ddb2bt.pipelines.dynamodb.scan import (
    GIB,
    ReadBudget,
    RetryPolicy,
    ScanDynamoDB,
    ScanFailedError,
    choose_total_segments,
    estimate_rcu,
    sample_items,
    scan_pages,
    scan_segment,
)
from tests.pipelines.export_fixtures import counter_totals, exactly, fingerprint, item_key, make_items

REGION = "us-east-1"
NO_WAIT = RetryPolicy(max_attempts=5, base_delay=0.0, max_delay=0.0)


def create_table(client, name, items=(), **extra):
    client.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                              {"AttributeName": "sk", "AttributeType": "N"}],
        **(extra or {"BillingMode": "PAY_PER_REQUEST"}),
    )
    client.get_waiter("table_exists").wait(TableName=name, WaiterConfig={"Delay": 0.2})
    for start in range(0, len(items), 25):
        requests = [{"PutRequest": {"Item": item}} for item in items[start:start + 25]]
        while requests:
            unprocessed = client.batch_write_item(RequestItems={name: requests}).get("UnprocessedItems", {})
            requests = unprocessed.get(name, [])


@pytest.fixture
def moto_client():
    with mock_aws():
        yield boto3.client("dynamodb", region_name=REGION)


# --------------------------------------------------------------------------- segment math


MIB = 1 << 20


@pytest.mark.parametrize(
    ("size", "expected"),
    [(1, 1), (4 * MIB, 1), (4 * MIB + 1, 2), (12 * MIB, 3), (50 * MIB, 8), (GIB, 8), (8 * GIB, 8),
     (10 * GIB, 10), (5000 * GIB, 1000)],
)
def test_a_table_of_more_than_a_few_pages_gets_a_few_segments_then_one_per_gib(size, expected):
    assert choose_total_segments(size) == expected


def test_a_size_dynamodb_does_not_know_yet_gets_the_small_table_split():
    """DescribeTable reports 0 bytes for hours after a load: the table may be big, so it is split (an empty one pays
    a request per segment)."""
    assert choose_total_segments(0) == 8


def test_requested_segments_win_up_to_dynamodb_limit():
    assert choose_total_segments(50 * GIB, 4) == 4
    assert choose_total_segments(0, 5000) == 5000
    for bad in (0, -1, 1_000_001):
        with pytest.raises(ValueError):
            choose_total_segments(GIB, bad)
    with pytest.raises(ValueError):
        choose_total_segments(-1)


@given(st.integers(min_value=1, max_value=1 << 50), st.integers(min_value=1, max_value=1 << 50))
def test_segments_are_bounded_and_monotonic(a, b):
    small, large = sorted((a, b))
    assert 1 <= choose_total_segments(small) <= choose_total_segments(large) <= 1000


# --------------------------------------------------------------------------- read budget


def test_rcu_estimate_rounds_up_to_4kb_and_halves_for_eventual_reads():
    assert estimate_rcu(4096, consistent_read=True) == 1
    assert estimate_rcu(4097, consistent_read=True) == 2
    assert estimate_rcu(4097, consistent_read=False) == 1
    assert estimate_rcu(1 << 20, consistent_read=False) == 128
    assert estimate_rcu(0, consistent_read=False) == 0.5


def test_per_segment_rate_is_budget_share_of_capacity():
    assert ReadBudget.per_segment_rate(1000, 0.5, 4) == 125
    with pytest.raises(ValueError):
        ReadBudget.per_segment_rate(1000, 0, 4)
    with pytest.raises(ValueError):
        ReadBudget.per_segment_rate(1000, 0.5, 0)


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def test_budget_lets_a_page_through_then_waits_off_the_debt():
    clock = FakeClock()
    budget = ReadBudget(10, burst=10, clock=clock, sleep=clock.sleep)
    assert budget.wait() == 0
    budget.spend(30)  # a page costing three seconds' worth
    assert budget.delay() == pytest.approx(2.0)
    clock.now += 1.5
    assert budget.delay() == pytest.approx(0.5)
    clock.now += 0.5
    assert budget.delay() == 0


def test_budget_holds_the_long_run_rate():
    clock = FakeClock()
    budget = ReadBudget(64, clock=clock, sleep=clock.sleep)
    for _ in range(100):
        budget.wait()
        budget.spend(128)  # a 1 MB eventually consistent page
    consumed = 100 * 128
    assert consumed / clock.now == pytest.approx(64, rel=0.02)


# --------------------------------------------------------------------------- plain iterators (moto in-process)


def test_scan_spends_no_more_than_its_budget(moto_client):
    create_table(moto_client, "t", make_items(30, padding=10))
    clock = FakeClock()
    pages = list(scan_pages(moto_client, "t", limit=3, budget=ReadBudget(2, burst=2, clock=clock, sleep=clock.sleep)))
    spent = sum(page.consumed_rcu for page in pages)
    assert len(pages) >= 10 and clock.now == pytest.approx((spent - pages[-1].consumed_rcu - 2) / 2)


def test_no_page_costs_more_than_the_budget_allows_the_first_included(dynalite):
    """Each request is sized (Limit) from what the pages so far cost per item, the first a one-item probe: a
    1 MB first page of every segment went through unpaced (8 segments, 1,024 RCU under a 50 RCU/s budget).
    dynalite reports ConsumedCapacity as DynamoDB computes it (moto reports 1 per request)."""
    client = boto3.client("dynamodb", endpoint_url=dynalite.endpoint, region_name=REGION)
    create_table(client, "budgeted", make_items(60, padding=20_000))  # ~20 KB items: 2.5 RCU each, ~125 per 1 MB
    clock = FakeClock()
    pages = list(scan_pages(client, "budgeted", budget=ReadBudget(10, burst=10, clock=clock, sleep=clock.sleep)))
    per_item = max(page.consumed_rcu / page.scanned_count for page in pages if page.scanned_count)
    assert pages[0].scanned_count == 1
    assert all(page.consumed_rcu <= 10 + per_item for page in pages), [page.consumed_rcu for page in pages]
    assert sum(page.scanned_count for page in pages) == 60
    spent = sum(page.consumed_rcu for page in pages)
    assert clock.now == pytest.approx((spent - pages[-1].consumed_rcu - 10) / 10)  # held to 10 RCU/s throughout


def test_segments_are_dealt_into_one_lane_per_call_and_counted_as_read_at_once():
    from ddb2bt.pipelines.run.options import SEGMENTS_PER_CALL, lanes, segments_at_once

    assert SEGMENTS_PER_CALL == 4
    assert lanes(list(range(8)), 1) == [tuple(range(8))]  # in_memory: one call reads them all, 4 at a time
    assert lanes([0, 2, 3, 5, 6], 2) == [(0, 3, 6), (2, 5)]  # completed segments left out before dealing
    assert lanes(list(range(3)), 8) == [(0,), (1,), (2,)]  # a runner that spreads segments: one per lane
    assert lanes([], 1) == []
    # what the CLI reports as "N segments at once" and the budget is split by
    assert [segments_at_once(1, n) for n in (1, 2, 4, 8, 100)] == [1, 2, 4, 4, 4]
    assert segments_at_once(2, 8) == 8 and segments_at_once(2, 3) == 3 and segments_at_once(8, 8) == 8
    assert segments_at_once(1, 0) == 1  # nothing left to read: never a division by zero


def test_scan_budget_defaults_to_a_share_of_the_table_capacity(moto_client):
    create_table(moto_client, "t", ProvisionedThroughput={"ReadCapacityUnits": 300, "WriteCapacityUnits": 5})
    source = SourceSpec(table="t", region=REGION, read_budget=0.2)
    assert ScanDynamoDB(source, 4).rcu_per_segment() == pytest.approx(15)  # DescribeTable: 0.2 * 300 / 4
    # two calls at once, each reading both segments of its lane at once: still 4 segments read at once
    assert ScanDynamoDB(source, 4, segments_in_flight=2).rcu_per_segment() == pytest.approx(15)
    # one call at a time (in_memory) reads SEGMENTS_PER_CALL of its 8 segments at once: the budget is split 4 ways
    assert ScanDynamoDB(source, 8, segments_in_flight=1).rcu_per_segment() == pytest.approx(0.2 * 300 / 4)
    # a resumed run with one segment left reads one at once: it may have the whole budget
    assert ScanDynamoDB(source, 8, completed_segments={0, 1, 2, 3, 4, 5, 6}, segments_in_flight=1).rcu_per_segment() == pytest.approx(60)
    on_demand = SourceDescription(table="t", partition_key="pk", sort_key="sk", billing_mode="PAY_PER_REQUEST")
    assert ScanDynamoDB(source, 8, table_info=on_demand).rcu_per_segment() == pytest.approx(0.2 * 4000 / 8)
    assert ScanDynamoDB(source, 4, rcu_per_segment=12.5).rcu_per_segment() == 12.5
    assert ScanDynamoDB(source, 4, rcu_per_segment=math.inf).rcu_per_segment() is None


def test_pages_follow_last_evaluated_key_to_the_end_exactly(moto_client):
    items = make_items(53, padding=10)
    create_table(moto_client, "t", items)
    pages = list(scan_pages(moto_client, "t", limit=7))
    assert len(pages) >= 8 and pages[-1].last_key is None
    assert all(page.consumed_rcu > 0 for page in pages)
    read = [item for page in pages for item in page.items]
    assert sorted(read, key=item_key) == sorted(items, key=item_key)  # wire format, exact, bytes stay bytes


def test_segments_partition_the_table(moto_client):
    items = make_items(200, padding=10)
    create_table(moto_client, "t", items)
    keys = [{item_key(i) for i in scan_segment(moto_client, "t", segment, 4, limit=9)} for segment in range(4)]
    assert sum(len(k) for k in keys) == 200
    assert set().union(*keys) == {item_key(i) for i in items}
    with pytest.raises(ValueError):
        next(scan_pages(moto_client, "t", 4, 4))


def test_sample_items_takes_a_few_items_quickly(moto_client):
    create_table(moto_client, "t", make_items(30, padding=10))
    assert len(sample_items(moto_client, "t", 5)) == 5
    assert len(sample_items(moto_client, "t", 100)) == 30
    assert sample_items(moto_client, "t", 0) == []


class FlakyClient:
    """Wraps a real client; the listed scan calls fail with the given error code first."""

    def __init__(self, client, failures):
        self._client, self._failures, self.calls = client, dict(failures), 0

    def scan(self, **request):
        self.calls += 1
        code = self._failures.get(self.calls)
        if code:
            raise ClientError({"Error": {"Code": code, "Message": "injected"}}, "Scan")
        return self._client.scan(**request)


def test_throttled_pages_are_retried_and_nothing_is_lost(moto_client):
    items = make_items(40, padding=10)
    create_table(moto_client, "t", items)
    codes = ["ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded",
             "InternalServerError"]
    flaky = FlakyClient(moto_client, {n: code for n, code in zip((1, 2, 4, 5, 9), itertools.cycle(codes))})
    slept = []
    pages = list(scan_pages(flaky, "t", limit=6, retry=NO_WAIT, sleep=slept.append))
    read = [item for page in pages for item in page.items]
    assert sorted(read, key=item_key) == sorted(items, key=item_key)
    assert sum(page.retries for page in pages) == 5 == len(slept)


@pytest.mark.parametrize("error", ["ReadTimeoutError", "ConnectionClosedError", "EndpointConnectionError"])
def test_a_page_cut_by_the_connection_is_retried(moto_client, error):
    """botocore's connection errors carry ``response = None`` (not absent): the retry must still count and retry."""
    from botocore import exceptions

    items = make_items(12, padding=10)
    create_table(moto_client, "t", items)

    class Cut:
        calls = 0

        def scan(self, **request):
            Cut.calls += 1
            if Cut.calls in (1, 3):
                raise getattr(exceptions, error)(endpoint_url="http://127.0.0.1:9/")
            return moto_client.scan(**request)

    slept = []
    pages = list(scan_pages(Cut(), "t", limit=5, retry=NO_WAIT, sleep=slept.append))
    assert sorted((item for page in pages for item in page.items), key=item_key) == sorted(items, key=item_key)
    assert sum(page.retries for page in pages) == 2 == len(slept)


def test_a_page_that_keeps_failing_fails_the_scan_loudly(moto_client):
    create_table(moto_client, "t", make_items(10, padding=10))
    flaky = FlakyClient(moto_client, {n: "ProvisionedThroughputExceededException" for n in range(2, 100)})
    pages = scan_pages(flaky, "t", 0, 1, limit=3, retry=NO_WAIT, sleep=lambda _: None)
    first = next(pages)
    with pytest.raises(ScanFailedError) as failure:
        next(pages)
    assert failure.value.attempts == NO_WAIT.max_attempts
    assert failure.value.start_key == first.last_key


def test_errors_that_waiting_cannot_fix_are_raised_at_once(moto_client):
    flaky = FlakyClient(moto_client, {1: "ValidationException"})
    with pytest.raises(ClientError, match="ValidationException"):
        next(scan_pages(flaky, "t", retry=NO_WAIT, sleep=lambda _: pytest.fail("should not retry")))
    assert flaky.calls == 1


# --------------------------------------------------------------------------- client and describe


def test_client_uses_the_configured_retry_mode():
    with mock_aws():
        client = make_client(ClientSettings(region=REGION, retry_mode="standard", max_attempts=7))
        assert client.meta.config.retries == {"mode": "standard", "total_max_attempts": 7}
        assert client.meta.region_name == REGION


def test_describe_provisioned_table_with_indexes_stream_and_ttl(moto_client):
    create_table(
        moto_client, "t",
        ProvisionedThroughput={"ReadCapacityUnits": 300, "WriteCapacityUnits": 5},
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
        GlobalSecondaryIndexes=[{"IndexName": "by_sk", "KeySchema": [{"AttributeName": "sk", "KeyType": "HASH"}],
                                 "Projection": {"ProjectionType": "KEYS_ONLY"},
                                 "ProvisionedThroughput": {"ReadCapacityUnits": 1, "WriteCapacityUnits": 1}}],
    )
    moto_client.update_time_to_live(TableName="t", TimeToLiveSpecification={"Enabled": True, "AttributeName": "exp"})
    info = describe_source(moto_client, "t")
    assert (info.partition_key, info.sort_key, info.billing_mode) == ("pk", "sk", "PROVISIONED")
    assert info.read_capacity == 300
    assert info.capacity_rcu(4000) == 300
    assert [(i.name, i.partition_key, i.projection) for i in info.global_indexes] == [("by_sk", "sk", "KEYS_ONLY")]
    assert info.stream_view_type == "NEW_AND_OLD_IMAGES"
    assert (info.ttl_attribute, info.ttl_status) == ("exp", "ENABLED")
    assert info.key_types == {"pk": "S", "sk": "N"}


def test_describe_on_demand_table_and_a_server_without_ttl(moto_client):
    create_table(moto_client, "t")

    class NoTtl:
        def describe_table(self, **kw):
            return moto_client.describe_table(**kw)

        def describe_time_to_live(self, **kw):
            raise ClientError({"Error": {"Code": "UnknownOperationException", "Message": ""}}, "DescribeTimeToLive")

    info = describe_source(NoTtl(), "t")
    assert (info.billing_mode, info.read_capacity, info.capacity_rcu(4000)) == ("PAY_PER_REQUEST", None, 4000)
    assert (info.ttl_attribute, info.ttl_status) == (None, None)


def test_describe_asks_the_time_to_live_together_with_the_table(moto_client, caplog):
    """DescribeTable and DescribeTimeToLive are in flight together (one round trip before a run, not two); the
    table's own error is raised as it is, and a missing table says nothing about its TTL."""
    create_table(moto_client, "t")
    both = threading.Barrier(2, timeout=5)  # each call waits for the other: they must be under way together

    class Together:
        def describe_table(self, **kw):
            both.wait()
            return moto_client.describe_table(**kw)

        def describe_time_to_live(self, **kw):
            both.wait()
            return moto_client.describe_time_to_live(**kw)

    info = describe_source(Together(), "t")
    assert info.partition_key == "pk"

    class Missing:
        def describe_table(self, **kw):
            raise ClientError({"Error": {"Code": "ResourceNotFoundException", "Message": "gone"}}, "DescribeTable")

        def describe_time_to_live(self, **kw):
            raise ClientError({"Error": {"Code": "ResourceNotFoundException", "Message": "gone"}}, "DescribeTimeToLive")

    caplog.set_level("INFO", logger="ddb2bt.pipelines.dynamodb.client")
    with pytest.raises(ClientError) as raised:
        describe_source(Missing(), "t")
    assert raised.value.operation_name == "DescribeTable"
    assert "DescribeTimeToLive" not in caplog.text


def test_a_given_description_spares_the_read_rate_its_describe_table_and_its_client(moto_client):
    """With the run's description (made while it was prepared) the scan's setup asks nothing and makes no client
    for it; without, one DescribeTable through a client made then."""
    from ddb2bt.pipelines.dynamodb.scan import BudgetPlan

    create_table(moto_client, "t", ProvisionedThroughput={"ReadCapacityUnits": 300, "WriteCapacityUnits": 5})
    made: list[int] = []

    def connect():
        made.append(1)
        return moto_client

    info = describe_source(moto_client, "t")
    assert BudgetPlan(None, 0.5, 4000, 3, info).resolve(connect, "t") == 300 * 0.5 / 3
    assert made == []
    assert BudgetPlan(None, 0.5, 4000, 3).resolve(connect, "t") == 300 * 0.5 / 3
    assert made == [1]
    assert BudgetPlan(math.inf).resolve(connect, "t") is None and made == [1]


# --------------------------------------------------------------------------- Beam


def run_scan(source, items, total_segments, completed=frozenset(), **options):
    pipeline = new_pipeline()
    out = pipeline | ScanDynamoDB(source, total_segments, completed_segments=completed, **options)
    batches = out | beam.Filter(lambda element: not isinstance(element, SegmentDone))
    done = out | beam.Filter(lambda element: isinstance(element, SegmentDone)) | beam.Map(lambda d: d.segment)
    assert_that(batches | beam.FlatMap(lambda batch: batch) | beam.Map(fingerprint), exactly(items))
    assert_that(done, equal_to(sorted(set(range(total_segments)) - set(completed))), label="Done")
    result = pipeline.run()
    result.wait_until_finish()
    return counter_totals(result)


def test_beam_scan_in_process_many_pages_and_resume():
    with mock_aws():
        client = boto3.client("dynamodb", region_name=REGION)
        items = make_items(400, padding=50)
        create_table(client, "t", items)
        source = SourceSpec(table="t", region=REGION)
        counters = run_scan(source, items, 4, page_limit=25, rcu_per_segment=1e6)
        assert counters["items_read"] == 400 and counters["scan_pages"] >= 16 and counters["consumed_rcu"] > 0
        rest = [i for s in (1, 3) for i in scan_segment(client, "t", s, 4)]
        assert 0 < len(rest) < 400
        run_scan(source, rest, 4, completed={0, 2})


def test_a_segment_is_its_pages_as_batches_then_its_done_marker():
    from ddb2bt.pipelines.dynamodb.scan import BudgetPlan, _ScanSegmentFn

    with mock_aws():
        client = boto3.client("dynamodb", region_name=REGION)
        items = make_items(120, padding=20)
        create_table(client, "t", items)
        fn = _ScanSegmentFn(ClientSettings(region=REGION), "t", 2, False, BudgetPlan(math.inf), RetryPolicy(), 25)
        fn.setup()
        out = list(fn.process((1,)))
        expected = sorted(map(fingerprint, scan_segment(client, "t", 1, 2)))
    assert out[-1] == SegmentDone(1) and not any(isinstance(element, SegmentDone) for element in out[:-1])
    assert all(type(batch) is Batch and 0 < len(batch) <= 25 for batch in out[:-1])
    assert sorted(map(fingerprint, (i for batch in out[:-1] for i in batch))) == expected


def test_interleaved_segments_each_have_their_done_marker_right_behind_their_last_page():
    """Read at once and interleaved, a segment is still marked done as soon as its last page is out (the page with
    no LastEvaluatedKey), not once its reader's end has queued behind the other segments' pages."""
    from ddb2bt.pipelines.dynamodb.scan import BudgetPlan, _ScanSegmentFn

    with mock_aws():
        client = boto3.client("dynamodb", region_name=REGION)
        create_table(client, "t", make_items(120, padding=20))
        fn = _ScanSegmentFn(ClientSettings(region=REGION), "t", 3, False, BudgetPlan(math.inf), RetryPolicy(), 10,
                            savepoints=True, interleave=True)
        fn.setup()
        out = list(fn.process((0, 1, 2)))
        expected = sorted(fingerprint(i) for s in range(3) for i in scan_segment(client, "t", s, 3))
    assert sorted(fingerprint(i) for batch in out if type(batch) is Batch for i in batch) == expected
    for segment in range(3):
        assert out.count(SegmentDone(segment)) == 1
        done = out.index(SegmentDone(segment))
        before = out[done - 1]  # its last page's batch (or, an empty last page, the savepoint of the one before)
        assert type(before) is Batch or (type(before) is SegmentAt and before.segment == segment), out
        assert not any(type(e) is SegmentAt and e.segment == segment for e in out[done:])


def test_transform_pickles_settings_not_clients_and_builds_offline():
    transform = ScanDynamoDB(SourceSpec(table="t", endpoint_url="http://127.0.0.1:9"), 3)
    assert pickle.loads(pickle.dumps(transform))._settings.endpoint_url == "http://127.0.0.1:9"
    out = new_pipeline() | transform  # nothing listens on port 9: expand must not call out
    assert isinstance(out, beam.PCollection)
    with pytest.raises(ValueError):
        ScanDynamoDB(SourceSpec(export={"path": "/x"}), 3)


@pytest.mark.servers
@pytest.mark.parametrize("server", ["dynalite", "moto_server"])
def test_beam_scan_of_a_multi_megabyte_table_is_complete_and_exact(server, request, unique_name):
    endpoint = request.getfixturevalue(server).endpoint
    client = boto3.client("dynamodb", region_name=REGION, endpoint_url=endpoint)
    items = make_items(3000, padding=2000)  # ~6.6 MB: each of the 4 segments spans two 1 MB pages
    create_table(client, unique_name, items)
    # The reference is a plain boto3 paginated scan: servers normalise numbers ("2.50" -> "2.5") as DynamoDB does.
    reference = [i for page in client.get_paginator("scan").paginate(TableName=unique_name) for i in page["Items"]]
    assert sorted(map(item_key, reference)) == sorted(map(item_key, items))
    source = SourceSpec(table=unique_name, region=REGION, endpoint_url=endpoint)
    counters = run_scan(source, reference, 4)
    assert counters["items_read"] == 3000
    if server == "dynalite":  # real 1 MB pages
        assert counters["scan_pages"] > 4


def _counted_pages(segment: int, pages: int, fetched: dict[int, int], gate: threading.Event | None = None):
    for n in range(pages):
        if gate is not None and segment != 0:
            assert gate.wait(5)
        fetched[segment] = fetched.get(segment, 0) + 1
        yield f"{segment}.{n}"


def test_read_segments_reads_several_segments_at_once_each_page_in_order():
    from ddb2bt.pipelines.dynamodb.scan import read_segments

    fetched: dict[int, int] = {}
    started = threading.Barrier(3, timeout=5)  # three segments' first requests in flight together

    def open_pages(segment: int, _sleep):
        started.wait()
        return _counted_pages(segment, 3, fetched)

    got = list(read_segments(open_pages, (0, 1, 2), at_once=3))
    for segment in (0, 1, 2):
        mine = [page for s, page in got if s == segment]
        assert mine == [f"{segment}.0", f"{segment}.1", f"{segment}.2", None]  # in order, then its end
    assert len(got) == 12


def test_read_segments_holds_at_most_a_page_ahead_per_reader_and_at_once_readers():
    from ddb2bt.pipelines.dynamodb.scan import read_segments

    fetched: dict[int, int] = {}
    segments = tuple(range(6))
    reading = read_segments(lambda s, _: _counted_pages(s, 50, fetched), segments, at_once=2, ahead=1)
    taken = 0
    for segment, page in reading:
        taken += page is not None
        time.sleep(0.002)  # the caller works; readers would run far ahead if nothing held them
        # at most 2 segments being read; each reader fetches its next page only once its last one was taken
        in_flight = sum(fetched.values()) - taken
        assert in_flight <= 2, (fetched, taken)
        assert sum(1 for s, n in fetched.items() if 0 < n < 50) <= 2
    assert taken == 300


def test_read_segments_in_order_gives_segment_after_segment_while_the_next_are_read_ahead():
    from ddb2bt.pipelines.dynamodb.scan import read_segments

    fetched: dict[int, int] = {}
    got = []
    for segment, page in read_segments(lambda s, _: _counted_pages(s, 4, fetched), (3, 1, 2), at_once=2,
                                       interleave=False):
        if segment == 3 and page == "3.0":  # still on the first segment: the second is already being read
            deadline = time.monotonic() + 5
            while not fetched.get(1) and time.monotonic() < deadline:
                time.sleep(0.01)
            assert fetched.get(1)
        got.append((segment, page))
    assert got == [(s, f"{s}.{n}" if n < 4 else None) for s in (3, 1, 2) for n in range(5)]


def test_read_segments_raises_a_readers_error_and_stops_the_others_when_left_early():
    from ddb2bt.pipelines.dynamodb.scan import read_segments

    def failing(segment: int, _sleep):
        yield f"{segment}.0"
        if segment == 1:
            raise ScanFailedError("t", 1, 2, 3, None, RuntimeError("boom"))
        yield f"{segment}.1"

    got = []
    with pytest.raises(ScanFailedError):
        for entry in read_segments(failing, (0, 1), interleave=False):
            got.append(entry)
    assert got == [(0, "0.0"), (0, "0.1"), (0, None), (1, "1.0")]  # nothing of segment 1 past its last good page

    fetched: dict[int, int] = {}
    reading = read_segments(lambda s, _: _counted_pages(s, 10_000, fetched), (0, 1, 2, 3))
    next(reading)
    before = time.monotonic()
    reading.close()  # every reader stops after the page it is handing over
    assert time.monotonic() - before < 2
    settled = dict(fetched)
    time.sleep(0.3)
    assert fetched == settled and sum(settled.values()) <= 4 + 1


def _paged(segment: int, pages: int, fetched: list, last_taken: dict[int, threading.Event]):
    """``pages`` pages of ``segment``, its last one marked (as a Scan page without LastEvaluatedKey); each fetch
    recorded with whether the caller had taken the previous segment's last page by then."""
    for n in range(pages):
        fetched.append((segment, n, last_taken[segment - 1].is_set() if segment - 1 in last_taken else None))
        yield (segment, n, n == pages - 1)


def _first_pages_after_last_taken(last: Any) -> list[bool | None]:
    """For segments 1-3 of a lane read one at a time, whether the caller had taken the segment before's last page
    when their first page was fetched; the caller works 0.1 s on every page."""
    from ddb2bt.pipelines.dynamodb.scan import read_segments

    fetched: list = []
    last_taken = {segment: threading.Event() for segment in range(4)}
    got = []
    for segment, page in read_segments(lambda s, _: _paged(s, 2, fetched, last_taken), (0, 1, 2, 3), at_once=1,
                                       last=last):
        if page is not None and page[2]:
            last_taken[segment].set()
        got.append((segment, page))
        time.sleep(0.1)  # the caller works on the page (a reader holds at most one page beyond it)
    assert got == [(s, p) for s in range(4) for p in ((s, 0, False), (s, 1, True), None)]  # in order, nothing lost
    return [taken for segment, n, taken in fetched if n == 0 and segment > 0]


def test_a_reader_goes_on_to_its_next_segment_without_waiting_for_its_last_page_to_be_taken():
    """With ``last``, a segment's reader queues its end right behind its last page and starts the lane's next
    segment while the caller is still on the pages before (a segment's start overlaps the work on them); without,
    the next segment's first request waits until the caller has taken the last page. Each segment's pages still
    come in order, each followed by its end, and nothing is lost."""
    assert _first_pages_after_last_taken(lambda page: page[2]) == [False, False, False]
    assert _first_pages_after_last_taken(None) == [True, True, True]


def test_segments_ended_early_hold_at_most_a_page_each_beyond_the_readers_pages():
    """Memory: with ``last``, at most ``at_once × (ahead + 1)`` pages are fetched and not taken, however short the
    segments (one page each: every reader ends at once and goes on); taken segment after segment (a caller that
    waits for one segment's end), a reader with no early end left waits as before instead of blocking it."""
    from ddb2bt.pipelines.dynamodb.scan import read_segments

    for interleave in (True, False):
        fetched: dict[int, int] = {}

        def one_page(segment: int, _sleep):
            for n in range(1 if segment % 3 else 3):  # mostly one-page segments, some of three
                fetched[segment] = fetched.get(segment, 0) + 1
                yield (segment, n, n == (0 if segment % 3 else 2))

        taken, got = 0, []
        for segment, page in read_segments(one_page, tuple(range(40)), at_once=3, ahead=1, interleave=interleave,
                                           last=lambda page: page[2]):
            taken += page is not None
            got.append((segment, page))
            time.sleep(0.002)  # readers would run far ahead if nothing held them
            assert sum(fetched.values()) - taken <= 3 * 2, (interleave, fetched, taken)
        assert taken == sum(3 if s % 3 == 0 else 1 for s in range(40))
        for segment in range(40):
            mine = [page for s, page in got if s == segment]
            assert mine[-1] is None and [page[1] for page in mine[:-1]] == list(range(len(mine) - 1))
        if not interleave:
            assert [s for s, page in got if page is None] == list(range(40))


def test_one_segment_failing_stops_a_reader_retrying_another_at_its_next_wait():
    """A segment's ScanFailedError ends the read at once: a reader in another segment's retry backoff (botocore
    failing over and over) stops at its next wait instead of retrying until its own deadline."""
    from ddb2bt.pipelines.dynamodb.scan import read_segments

    waits: list[float] = []

    def open_pages(segment: int, sleep):
        if segment == 0:
            time.sleep(0.3)  # segment 1 is retrying by now
            raise ScanFailedError("t", 0, 2, 3, None, RuntimeError("gone"))
        while True:  # a page failing for ever: backoff after backoff
            waits.append(time.monotonic())
            sleep(5.0)
        yield  # a generator, as scan_pages is

    started = time.monotonic()
    with pytest.raises(ScanFailedError):
        list(read_segments(open_pages, (0, 1)))
    assert time.monotonic() - started < 3  # not the 5 s backoff, nor a retry deadline
    assert len(waits) == 1


def test_the_read_rate_asks_describe_table_alone(moto_client):
    """A worker's setup resolves its read rate from the table's capacity: one DescribeTable, no DescribeTimeToLive
    (a round trip before the first page that the rate does not need)."""
    from ddb2bt.pipelines.dynamodb.scan import BudgetPlan

    create_table(moto_client, "t", ProvisionedThroughput={"ReadCapacityUnits": 300, "WriteCapacityUnits": 5})
    calls: list[str] = []
    moto_client.meta.events.register("before-call.dynamodb.*", lambda model, **_: calls.append(model.name))
    assert BudgetPlan(None, 0.5, 4000, 3).resolve(moto_client, "t") == 300 * 0.5 / 3
    assert calls == ["DescribeTable"]


def test_the_retries_jitter_leaves_the_global_random_generator_alone():
    """The jitter of a Scan's and a DynamoDB write's retries draws from their own generators: the global one is the
    application's, and hypothesis warns when another thread moves it while a strategy draws (as it did, now and then,
    in this suite)."""
    import random

    from ddb2bt.pipelines.dynamodb import sink

    before = random.getstate()
    delays = [RetryPolicy().backoff(attempt) for attempt in range(6)]
    backoff = sink._Backoff(60.0, "BatchWriteItem")
    backoff.wait("throttled")  # sleeps up to 0.1 s
    assert random.getstate() == before
    assert all(0 <= delay <= RetryPolicy().max_delay for delay in delays) and len(set(delays)) > 1
