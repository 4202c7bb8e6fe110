"""The source table as DynamoDB describes it: key schema, indexes, capacity, TTL and stream state.

The one place DescribeTable and DescribeTimeToLive responses are read (plain data, no client),
so the scan, the plan and infer agree on key names and TTL state. Scan workers import this
module, not the plan.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class IndexDescription(_Frozen):
    name: str
    kind: str
    """GSI or LSI."""
    partition_key: str
    sort_key: str | None = None
    projection: str = "ALL"
    """ALL, KEYS_ONLY or INCLUDE."""
    projected_attributes: tuple[str, ...] = ()


class SourceDescription(_Frozen):
    """What the plan needs from DescribeTable and DescribeTimeToLive (counts are ~6 hours stale)."""

    table: str
    partition_key: str
    sort_key: str | None = None
    item_count: int = 0
    size_bytes: int = 0
    read_capacity: int | None = None
    """Provisioned RCU; None for on-demand tables, which publish none."""
    billing_mode: str = "PROVISIONED"
    global_indexes: tuple[IndexDescription, ...] = ()
    local_indexes: tuple[IndexDescription, ...] = ()
    ttl_attribute: str | None = None
    ttl_status: str | None = None
    stream_enabled: bool = False
    stream_view_type: str | None = None
    key_types: dict[str, str] = {}
    """Declared key attribute types (S, N, B) from AttributeDefinitions."""

    def capacity_rcu(self, on_demand_rcu: int) -> float:
        """The read capacity a scan budget is a fraction of: provisioned RCU, or the stated on-demand assumption."""
        return float(self.read_capacity) if self.read_capacity else float(on_demand_rcu)

    @property
    def ttl_active(self) -> str | None:
        """The TTL attribute when TTL is (being) enabled, else None."""
        return self.ttl_attribute if self.ttl_status in (None, "ENABLED", "ENABLING") else None

    @classmethod
    def from_describe_table(cls, response: dict, ttl: dict | None = None) -> SourceDescription:
        """From boto3's raw DescribeTable response (or its `Table`) and DescribeTimeToLive response."""
        table = response.get("Table", response)
        partition_key, sort_key = key_schema(table["KeySchema"])
        billing = (table.get("BillingModeSummary") or {}).get("BillingMode", "PROVISIONED")
        rcu = (table.get("ProvisionedThroughput") or {}).get("ReadCapacityUnits") or None
        stream = table.get("StreamSpecification") or {}
        ttl_description = (ttl or {}).get("TimeToLiveDescription", ttl or {})
        return cls(
            table=table["TableName"],
            partition_key=partition_key,
            sort_key=sort_key,
            item_count=int(table.get("ItemCount", 0)),
            size_bytes=int(table.get("TableSizeBytes", 0)),
            read_capacity=None if billing == "PAY_PER_REQUEST" else rcu,
            billing_mode=billing,
            global_indexes=_indexes(table.get("GlobalSecondaryIndexes"), "GSI"),
            local_indexes=_indexes(table.get("LocalSecondaryIndexes"), "LSI"),
            ttl_attribute=ttl_description.get("AttributeName"),
            ttl_status=ttl_description.get("TimeToLiveStatus"),
            stream_enabled=bool(stream.get("StreamEnabled")),
            stream_view_type=stream.get("StreamViewType") if stream.get("StreamEnabled") else None,
            key_types={d["AttributeName"]: d["AttributeType"] for d in table.get("AttributeDefinitions", ())},
        )


def key_schema(schema: list[dict]) -> tuple[str, str | None]:
    """(partition key, sort key or None) from a KeySchema list."""
    by_type = {entry["KeyType"]: entry["AttributeName"] for entry in schema}
    return by_type["HASH"], by_type.get("RANGE")


def _indexes(descriptions: list[dict] | None, kind: str) -> tuple[IndexDescription, ...]:
    found = []
    for index in descriptions or ():
        partition_key, sort_key = key_schema(index["KeySchema"])
        projection = index.get("Projection") or {}
        found.append(IndexDescription(
            name=index["IndexName"], kind=kind, partition_key=partition_key, sort_key=sort_key,
            projection=projection.get("ProjectionType", "ALL"),
            projected_attributes=tuple(projection.get("NonKeyAttributes", ())),
        ))  # fmt: skip
    return tuple(found)
