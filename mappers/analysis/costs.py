"""What the migration costs and what the target needs, from the plan's estimates and prices the user can change.

Prices are list prices assumed for one region each (they differ by region, commitment and over time): every figure
says which prices it used, and `migrate-plan --price NAME=VALUE` replaces any of them. The per-node figures are
Bigtable's published planning numbers (SSD, 1 KB rows); a load test decides production sizing.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict

from ..errors import UsageError
from .estimates import READ_UNIT_BYTES, SSD_BYTES_PER_NODE, WRITE_BYTES_PER_NODE_S, WRITE_ROWS_PER_NODE_S, Estimates

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


WRITE_UNIT_BYTES = 1024
CLOUDWATCH_DAYS = 7
CLOUDWATCH_PERIOD_S = 300


class MeasuredLoad(BaseModel):
    """The table's consumed capacity as CloudWatch recorded it (AWS/DynamoDB ConsumedReadCapacityUnits and
    ConsumedWriteCapacityUnits, the table's own, indexes apart): per second, averaged over the whole window and over
    its busiest period."""

    model_config = ConfigDict(frozen=True)
    table: str
    days: float
    period_seconds: int
    read_units_average: float
    read_units_peak: float
    write_units_average: float
    write_units_peak: float
    datapoints: int


def rows_from_units(load: MeasuredLoad, average_item_bytes: float) -> tuple[float, float]:
    """(reads/s, writes/s) of items at the busiest period: a read unit reads up to two items of 4 KB (eventually
    consistent; a strongly consistent read takes a whole unit, so this is the most rows the units could be), a write
    unit writes one of 1 KB; bigger items take more units each."""
    item = max(average_item_bytes, 1.0)
    reads = load.read_units_peak * 2 / math.ceil(item / READ_UNIT_BYTES)
    writes = load.write_units_peak / math.ceil(item / WRITE_UNIT_BYTES)
    return reads, writes


def measured_text(load: MeasuredLoad) -> str:
    return (f"CloudWatch, table {load.table}, last {load.days:g} days: {load.read_units_average:,.1f} read units/s on "
            f"average, {load.read_units_peak:,.1f} in the busiest {load.period_seconds // 60} minutes; "
            f"{load.write_units_average:,.1f} write units/s on average, {load.write_units_peak:,.1f} at the busiest")


NO_LOAD = ("pass --load-reads and --load-writes (rows/s the table serves now, e.g. from CloudWatch's "
           "ConsumedReadCapacityUnits and ConsumedWriteCapacityUnits)")


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
    """Bigtable nodes for the backfill's write rate, for the whole node-hours it keeps them (:func:`backfill_hours`)."""
    backfill_hours_basis: str = ""
    """What sets those hours: the writes at that many nodes, or the scan at its read budget."""
    storage_gb: float
    storage_dollars_month: float
    serving_nodes: int | None
    """Nodes for the table's current load (``reads_per_second``/``writes_per_second``, or CloudWatch's); None when
    neither was there."""
    serving_basis: str
    load_from: str = "none"
    """Where today's load came from: ``given`` (--load-reads/--load-writes), ``cloudwatch``, or ``none``."""
    measured: MeasuredLoad | None = None
    """CloudWatch's figures, when they were read."""
    serving_dollars_month: float | None
    prices: Prices
    price_sources: dict[str, str]
    per_node: str
    notes: tuple[str, ...]


def estimate_costs(e: Estimates, prices: Prices, *, from_export: bool, provisioned: bool,
                   reads_per_second: float | None = None, writes_per_second: float | None = None,
                   measured: MeasuredLoad | None = None, unmeasured: str | None = None) -> Costs:
    """The backfill's source and target cost, storage, and the nodes the table's current load needs: the rates given,
    else ``measured`` (CloudWatch's busiest period, in items of the sample's average size), else none, saying why
    (``unmeasured``: why CloudWatch gave nothing)."""
    gb = e.table_bytes / 1024**3
    if from_export:
        source, units, dollars = "export", gb, gb * prices.export_per_gb
    else:
        source, units = "scan", e.scan_read_units
        dollars = units / 1e6 * prices.read_request_units_per_million
    storage_gb = e.target_bytes / 1024**3
    storage_nodes = max(1, math.ceil(e.target_bytes / SSD_BYTES_PER_NODE))
    serving_nodes, serving = None, None
    basis = f"no load given{f' and {unmeasured}' if unmeasured else ''}: {NO_LOAD}"
    given = reads_per_second is not None or writes_per_second is not None
    load_from = "given" if given else "cloudwatch" if measured is not None else "none"
    if given or measured is not None:
        if given:
            reads, writes, where = reads_per_second or 0.0, writes_per_second or 0.0, ""
        else:
            assert measured is not None
            reads, writes = rows_from_units(measured, e.average_item_bytes)
            where = (f" ({measured_text(measured)}; as items of the sample's average {e.average_item_bytes:,.0f} B, "
                     "a read unit counted as two eventually consistent reads)")
        load = reads / READ_ROWS_PER_NODE_S + writes / WRITE_ROWS_PER_NODE_S
        serving_nodes = max(storage_nodes, math.ceil(load), 1)
        basis = (f"{reads:,.0f} reads/s and {writes:,.0f} writes/s{where} at ~{READ_ROWS_PER_NODE_S:,} and "
                 f"~{WRITE_ROWS_PER_NODE_S:,} per node; at least {storage_nodes} for storage")
        serving = serving_nodes * HOURS_PER_MONTH * prices.node_hour
    notes = ["A scan of a provisioned table uses capacity it already pays for: the dollars are what these read "
             "units cost on demand."] if provisioned and not from_export else []
    notes.append("List prices of one region each, before discounts, taxes and free tiers; Bigtable bills whole "
                 "node-hours and a cluster keeps at least 1 node.")
    hours, hours_basis = backfill_hours(e)
    return Costs(
        source=source, source_units=units, source_dollars=dollars, backfill_nodes=e.suggested_nodes,
        backfill_hours=hours, backfill_hours_basis=hours_basis, backfill_dollars=e.suggested_nodes * hours * prices.node_hour,
        storage_gb=storage_gb, storage_dollars_month=storage_gb * prices.storage_gb_month, serving_nodes=serving_nodes,
        serving_basis=basis, serving_dollars_month=serving, load_from=load_from, measured=measured, prices=prices, price_sources=PRICE_SOURCES,
        per_node=PER_NODE_SOURCE, notes=tuple(notes),
    )  # fmt: skip


def backfill_hours(e: Estimates) -> tuple[int, str]:
    """The whole node-hours the backfill keeps its suggested nodes, and why: the longer of its writes at those nodes
    and its scan at the read budget (an export reads at the pipeline's pace: its writes), at least one hour, as
    Bigtable bills. Not the planning window the nodes were sized for: a small table's backfill takes minutes, a big
    scan under a small budget longer than the window."""
    nodes = max(e.suggested_nodes, 1)
    write_s = max(e.target_writes / (nodes * WRITE_ROWS_PER_NODE_S), e.target_bytes / (nodes * WRITE_BYTES_PER_NODE_S))
    scan_s = e.scan_seconds or 0.0
    seconds, what = (scan_s, "the scan at its read budget") if scan_s > write_s else (write_s, f"the writes at {nodes} "
                                                                                             f"node{'s' * (nodes != 1)}")
    return max(1, math.ceil(seconds / 3600)), f"{what}: ~{seconds / 3600:.1f} h, in whole node-hours"


def cost_rows(c: Costs) -> list[tuple[str, str, str]]:
    """(what, dollars, how they were reached) for each figure: what `migrate-plan` prints and the report shows."""
    p = c.prices
    if c.source == "export":
        source = f"{c.source_units:,.2f} GB exported at ${p.export_per_gb:g}/GB"
    else:
        source = f"{c.source_units:,.0f} read request units at ${p.read_request_units_per_million:g} per million"
    nodes = f"{c.backfill_nodes} node{'s' * (c.backfill_nodes != 1)}"
    if c.serving_nodes is not None:
        serving = (f"{_dollars(c.serving_dollars_month or 0)}/month",
                   f"{c.serving_nodes} node{'s' * (c.serving_nodes != 1)} ({c.serving_basis}) at ${p.node_hour:g}/node-hour")
    else:
        serving = ("unknown", c.serving_basis)
    return [
        (f"source, the backfill's {c.source}", _dollars(c.source_dollars), source),
        ("target, the backfill", _dollars(c.backfill_dollars),
         f"{nodes} × {c.backfill_hours:g} h at ${p.node_hour:g}/node-hour"
         + (f" ({c.backfill_hours_basis})" if c.backfill_hours_basis else "")),
        ("target, storage", f"{_dollars(c.storage_dollars_month)}/month",
         f"{c.storage_gb:,.2f} GB at ${p.storage_gb_month:g}/GB-month"),
        ("target, today's load", *serving),
    ]


def cost_lines(c: Costs) -> list[str]:
    """The costs as plain lines, each with what it assumed."""
    rows = cost_rows(c)
    lines = ["cost (list prices assumed; change with --price NAME=VALUE):"]
    lines += [f"  {what}: {basis} = {dollars}" for what, dollars, basis in rows[:-1]]
    if c.serving_nodes is None:
        lines.append(f"  {rows[-1][0]}: {c.serving_basis}")
    else:  # nodes first, then the dollars
        lines.append(f"  {rows[-1][0]}: {c.serving_nodes} node{'s' * (c.serving_nodes != 1)} ({c.serving_basis}) = "
                     f"{rows[-1][1]} at ${c.prices.node_hour:g}/node-hour")
    return [*lines, f"  per node: {c.per_node}", *(f"  note: {note}" for note in c.notes)]


def _dollars(amount: float) -> str:
    return f"${amount:,.2f}" if amount >= 0.01 or amount == 0 else f"${amount:.4f}"
