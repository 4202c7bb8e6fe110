"""The DynamoDB low-level client and what the migration needs to know about the source table.

Items are read with the *low-level* client so they stay in wire format (``{"N": "1.50"}``): the
resource API would deserialize numbers and lose the exact text. Settings are a small frozen
dataclass rather than a client, because Beam pickles DoFns and a boto3 client is neither
picklable nor thread-safe to share across processes; each worker builds its own in ``setup``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from collections.abc import Iterable
from typing import Any, Literal

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

log = logging.getLogger(__name__)

RetryMode = Literal["adaptive", "standard", "legacy"]


@dataclass(frozen=True)
class ClientSettings:
    """Everything needed to build a DynamoDB client on a worker; never holds credentials.

    Credentials come from the usual AWS chain (env, profile, instance role) on each worker, so
    nothing secret is pickled into the pipeline graph or written to logs.
    """

    region: str | None = None
    endpoint_url: str | None = None
    profile: str | None = None
    retry_mode: RetryMode = "adaptive"
    """adaptive adds client-side rate limiting on throttles, which suits a long bulk scan."""
    max_attempts: int = 10
    """Attempts per request inside botocore, the first one included (``total_max_attempts``: botocore's
    own ``max_attempts`` key counts retries only), before our page-level retry takes over."""
    max_pool_connections: int = 16
    connect_timeout: float = 10.0
    read_timeout: float = 60.0

    @classmethod
    def from_source(cls, source: Any, **overrides: Any) -> ClientSettings:
        """Settings from a ``SourceSpec`` (or anything with region/endpoint_url/profile attributes)."""
        values = {name: getattr(source, name, None) for name in ("region", "endpoint_url", "profile")}
        values.update(overrides)
        return cls(**values)


def make_client(settings: ClientSettings) -> Any:
    """A low-level ``dynamodb`` client with botocore's retry mode configured."""
    config = Config(
        retries={"mode": settings.retry_mode, "total_max_attempts": settings.max_attempts},
        max_pool_connections=settings.max_pool_connections,
        connect_timeout=settings.connect_timeout,
        read_timeout=settings.read_timeout,
    )
    session = boto3.session.Session(profile_name=settings.profile, region_name=settings.region)
    log.debug(
        "DynamoDB client: region=%s endpoint=%s profile=%s retries=%s/%d",
        session.region_name, settings.endpoint_url, settings.profile, settings.retry_mode, settings.max_attempts,
    )
    return session.client("dynamodb", endpoint_url=settings.endpoint_url, config=config)


@dataclass(frozen=True)
class IndexInfo:
    name: str
    partition_key: str
    sort_key: str | None
    projection: str
    """ALL, KEYS_ONLY or INCLUDE."""


@dataclass(frozen=True)
class TableInfo:
    """DescribeTable (+ DescribeTimeToLive) boiled down to what planning and reports use."""

    table: str
    partition_key: str
    sort_key: str | None
    item_count: int
    """Approximate: DynamoDB refreshes it about every six hours."""
    size_bytes: int
    """Approximate, like item_count; drives the segment count."""
    billing_mode: Literal["PROVISIONED", "PAY_PER_REQUEST"]
    read_capacity: int | None
    """Provisioned RCU, or None for on-demand tables (which publish no capacity)."""
    global_indexes: tuple[IndexInfo, ...] = ()
    local_indexes: tuple[IndexInfo, ...] = ()
    stream_view_type: str | None = None
    """Set when a stream is enabled (NEW_IMAGE, NEW_AND_OLD_IMAGES, ...)."""
    ttl_attribute: str | None = None
    ttl_status: str | None = None
    """ENABLED, DISABLED, ENABLING, DISABLING, or None when the server cannot say."""
    attribute_types: dict[str, str] = field(default_factory=dict)
    """Declared key attribute types (S, N, B) from AttributeDefinitions."""

    def capacity_rcu(self, on_demand_rcu: int) -> float:
        """The read capacity a scan budget is a fraction of: provisioned RCU, or the stated on-demand assumption."""
        return float(self.read_capacity) if self.read_capacity else float(on_demand_rcu)


def _keys(schema: list[dict[str, str]]) -> tuple[str, str | None]:
    by_type = {entry["KeyType"]: entry["AttributeName"] for entry in schema}
    return by_type["HASH"], by_type.get("RANGE")


def _indexes(descriptions: list[dict[str, Any]] | None) -> tuple[IndexInfo, ...]:
    found = []
    for index in descriptions or ():
        partition_key, sort_key = _keys(index["KeySchema"])
        projection = index.get("Projection", {}).get("ProjectionType", "ALL")
        found.append(IndexInfo(index["IndexName"], partition_key, sort_key, projection))
    return tuple(found)


def _time_to_live(client: Any, table: str) -> tuple[str | None, str | None]:
    """TTL attribute and status; (None, None) when the server does not implement the call (dynalite)."""
    try:
        description = client.describe_time_to_live(TableName=table).get("TimeToLiveDescription", {})
    except ClientError as err:
        log.info("DescribeTimeToLive unavailable for %s (%s); TTL unknown", table, err.response["Error"].get("Code"))
        return None, None
    return description.get("AttributeName"), description.get("TimeToLiveStatus")


def describe_source(client: Any, table: str) -> TableInfo:
    """Describe the table; raises ``botocore.exceptions.ClientError`` (e.g. ResourceNotFoundException) as is."""
    description = client.describe_table(TableName=table)["Table"]
    partition_key, sort_key = _keys(description["KeySchema"])
    billing = description.get("BillingModeSummary", {}).get("BillingMode", "PROVISIONED")
    rcu = description.get("ProvisionedThroughput", {}).get("ReadCapacityUnits") or None
    if billing == "PAY_PER_REQUEST":
        rcu = None
    stream = description.get("StreamSpecification") or {}
    ttl_attribute, ttl_status = _time_to_live(client, table)
    return TableInfo(
        table=table,
        partition_key=partition_key,
        sort_key=sort_key,
        item_count=int(description.get("ItemCount", 0)),
        size_bytes=int(description.get("TableSizeBytes", 0)),
        billing_mode="PAY_PER_REQUEST" if rcu is None else "PROVISIONED",
        read_capacity=rcu,
        global_indexes=_indexes(description.get("GlobalSecondaryIndexes")),
        local_indexes=_indexes(description.get("LocalSecondaryIndexes")),
        stream_view_type=stream.get("StreamViewType") if stream.get("StreamEnabled") else None,
        ttl_attribute=ttl_attribute,
        ttl_status=ttl_status,
        attribute_types={d["AttributeName"]: d["AttributeType"] for d in description.get("AttributeDefinitions", ())},
    )


def create_table(client: Any, table: str, partition_key: str, sort_key: str | None = None, key_type: str = "S") -> None:
    """An on-demand table with string (or `key_type`) keys, returned once ACTIVE: for demos, tests and benchmarks.

    Waits because a strict server (dynalite, DynamoDB itself) answers ResourceNotFound until the table is ACTIVE.
    """
    keys = [(partition_key, "HASH")] + ([(sort_key, "RANGE")] if sort_key else [])
    client.create_table(
        TableName=table,
        BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": name, "KeyType": kind} for name, kind in keys],
        AttributeDefinitions=[{"AttributeName": name, "AttributeType": key_type} for name, _ in keys],
    )
    client.get_waiter("table_exists").wait(TableName=table, WaiterConfig={"Delay": 0.1, "MaxAttempts": 300})


def put_items(client: Any, table: str, items: Iterable[dict]) -> int:
    """BatchWriteItem in batches of 25, sending unprocessed items again until none are left; the count written."""
    written, batch = 0, []
    for item in items:
        batch.append({"PutRequest": {"Item": item}})
        if len(batch) == 25:
            written += _write_batch(client, table, batch)
            batch = []
    return written + (_write_batch(client, table, batch) if batch else 0)


def _write_batch(client: Any, table: str, requests: list[dict]) -> int:
    count = len(requests)
    while requests:
        requests = client.batch_write_item(RequestItems={table: requests}).get("UnprocessedItems", {}).get(table, [])
    return count
