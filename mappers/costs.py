"""What the migration costs and what the target needs, from the plan's estimates and prices the user can change.

Prices are list prices assumed for one region each (they differ by region, commitment and over time): every figure
says which prices it used, and `migrate-plan --price NAME=VALUE` replaces any of them. The per-node figures are
Bigtable's published planning numbers (SSD, 1 KB rows); a load test decides production sizing.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict

from .errors import UsageError
from .estimates import SSD_BYTES_PER_NODE, WRITE_ROWS_PER_NODE_S, Estimates

HOURS_PER_MONTH = 730
READ_ROWS_PER_NODE_S = 10_000
PER_NODE_SOURCE = ("Bigtable performance guide (cloud.google.com/bigtable/docs/performance): SSD node, 1 KB rows, "
                   f"~{READ_ROWS_PER_NODE_S:,} reads/s or ~{WRITE_ROWS_PER_NODE_S:,} writes/s, "
                   f"{SSD_BYTES_PER_NODE // 1024**4} TB of storage per node")


class Prices(BaseModel):
    """US dollars; change any with `--price NAME=VALUE`."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    read_request_units_per_million: float = 0.125
    """DynamoDB on-demand read request units, per million (us-east-1)."""
    export_per_gb: float = 0.10
    """DynamoDB export to S3, per GB of table (us-east-1)."""
    node_hour: float = 0.65
    """Bigtable node, per hour (us-central1)."""
    storage_gb_month: float = 0.17
    """Bigtable SSD storage, per GB and month (us-central1)."""


PRICE_SOURCES = {
    "read_request_units_per_million": "aws.amazon.com/dynamodb/pricing/on-demand (us-east-1)",
    "export_per_gb": "aws.amazon.com/dynamodb/pricing (export to S3, us-east-1)",
    "node_hour": "cloud.google.com/bigtable/pricing (us-central1)",
    "storage_gb_month": "cloud.google.com/bigtable/pricing (SSD, us-central1)",
}


def parse_prices(pairs: list[str]) -> Prices:
    """`--price node_hour=0.70` (repeatable) over the defaults; a UsageError names a bad one and the known names."""
    given: dict[str, float] = {}
    for pair in pairs:
        name, equals, value = pair.partition("=")
        if not equals or name not in Prices.model_fields:
            raise UsageError(f"--price {pair}: expected NAME=VALUE", f"NAME is one of {', '.join(Prices.model_fields)}")
        try:
            given[name] = float(value)
        except ValueError:
            raise UsageError(f"--price {pair}: {value!r} is not a number", "give US dollars, e.g. 0.65") from None
        if not math.isfinite(given[name]) or given[name] < 0:
            raise UsageError(f"--price {pair}: a price is a number of dollars, 0 or more", "e.g. --price node_hour=0.65")
    return Prices(**given)


class Costs(BaseModel):
    model_config = ConfigDict(frozen=True)
    source: str
    """How the backfill reads: scan or export."""
    source_units: float
    """Read request units the scan consumes, or GB the export reads."""
    source_dollars: float
    backfill_nodes: int
    backfill_hours: float
    backfill_dollars: float
    """Bigtable nodes for the backfill's write rate, for its hours."""
    storage_gb: float
    storage_dollars_month: float
    serving_nodes: int | None
    """Nodes for the table's current load (``reads_per_second``/``writes_per_second``); None when not given."""
    serving_basis: str
    serving_dollars_month: float | None
    prices: Prices
    price_sources: dict[str, str]
    per_node: str
    notes: tuple[str, ...]


def estimate_costs(e: Estimates, prices: Prices, *, from_export: bool, provisioned: bool,
                   reads_per_second: float | None = None, writes_per_second: float | None = None) -> Costs:
    """The backfill's source and target cost, storage, and the nodes the table's current load needs."""
    gb = e.table_bytes / 1024**3
    if from_export:
        source, units, dollars = "export", gb, gb * prices.export_per_gb
    else:
        source, units = "scan", e.scan_read_units
        dollars = units / 1e6 * prices.read_request_units_per_million
    storage_gb = e.target_bytes / 1024**3
    storage_nodes = max(1, math.ceil(e.target_bytes / SSD_BYTES_PER_NODE))
    serving_nodes, basis, serving = None, "no load given: pass --load-reads and --load-writes (rows/s the table " \
        "serves now, e.g. from CloudWatch's ConsumedReadCapacityUnits and ConsumedWriteCapacityUnits)", None
    if reads_per_second is not None or writes_per_second is not None:
        reads, writes = reads_per_second or 0.0, writes_per_second or 0.0
        load = reads / READ_ROWS_PER_NODE_S + writes / WRITE_ROWS_PER_NODE_S
        serving_nodes = max(storage_nodes, math.ceil(load), 1)
        basis = (f"{reads:,.0f} reads/s and {writes:,.0f} writes/s at ~{READ_ROWS_PER_NODE_S:,} and "
                 f"~{WRITE_ROWS_PER_NODE_S:,} per node; at least {storage_nodes} for storage")
        serving = serving_nodes * HOURS_PER_MONTH * prices.node_hour
    notes = ["A scan of a provisioned table uses capacity it already pays for: the dollars are what these read "
             "units cost on demand."] if provisioned and not from_export else []
    notes.append("List prices of one region each, before discounts, taxes and free tiers; Bigtable bills whole "
                 "node-hours and a cluster keeps at least 1 node.")
    return Costs(
        source=source, source_units=units, source_dollars=dollars, backfill_nodes=e.suggested_nodes,
        backfill_hours=e.target_write_hours, backfill_dollars=e.suggested_nodes * e.target_write_hours * prices.node_hour,
        storage_gb=storage_gb, storage_dollars_month=storage_gb * prices.storage_gb_month, serving_nodes=serving_nodes,
        serving_basis=basis, serving_dollars_month=serving, prices=prices, price_sources=PRICE_SOURCES,
        per_node=PER_NODE_SOURCE, notes=tuple(notes),
    )  # fmt: skip


def cost_lines(c: Costs) -> list[str]:
    """The costs as plain lines, each with what it assumed."""
    p = c.prices
    if c.source == "export":
        source = f"{c.source_units:,.2f} GB exported at ${p.export_per_gb:g}/GB = {_dollars(c.source_dollars)}"
    else:
        source = (f"{c.source_units:,.0f} read request units at ${p.read_request_units_per_million:g} per million = "
                  f"{_dollars(c.source_dollars)}")
    serving = (f"{c.serving_nodes} node{'s' * (c.serving_nodes != 1)} ({c.serving_basis}) = "
               f"{_dollars(c.serving_dollars_month or 0)}/month at ${p.node_hour:g}/node-hour"
               if c.serving_nodes is not None else c.serving_basis)
    return [
        "cost (list prices assumed; change with --price NAME=VALUE):",
        f"  source, the backfill's {c.source}: {source}",
        f"  target, the backfill: {c.backfill_nodes} node{'s' * (c.backfill_nodes != 1)} × {c.backfill_hours:g} h at "
        f"${p.node_hour:g}/node-hour = {_dollars(c.backfill_dollars)}",
        f"  target, storage: {c.storage_gb:,.2f} GB at ${p.storage_gb_month:g}/GB-month = "
        f"{_dollars(c.storage_dollars_month)}/month",
        f"  target, today's load: {serving}",
        f"  per node: {c.per_node}",
        *(f"  note: {note}" for note in c.notes),
    ]


def _dollars(amount: float) -> str:
    return f"${amount:,.2f}" if amount >= 0.01 or amount == 0 else f"${amount:.4f}"
