"""Hotspots in the sampled key distribution, and what the migration will cost in reads, time and nodes.

Everything here is an estimate from a sample and DescribeTable's approximate counts (DynamoDB
refreshes them about every six hours). The assumptions are returned with the numbers so that the
plan and the report can print them next to each other: a capacity figure without its basis is
not something to size a cluster on.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from typing import Literal

from pydantic import BaseModel, ConfigDict, computed_field

from .sample import Sample, readable_bytes

MIN_ROWS_FOR_SKEW = 20
"""Below this many sampled writes a prefix share says nothing; no hotspot is flagged."""
SKEW_MAX_SHARE = 0.5
"""Flag a prefix that takes at least half the writes ..."""
SKEW_FACTOR = 3.0
"""... and at least three times its fair share (1 / number of prefixes)."""
TOP_PREFIXES = 20

# Google's published per-node guidance (SSD, 1 KB rows): up to 14,000 rows/s of writes. We plan
# at ~70% of that, and ~10 MB/s, because bulk loads with wide rows rarely reach the best case.
WRITE_ROWS_PER_NODE_S = 10_000
WRITE_BYTES_PER_NODE_S = 10 * 1024 * 1024
SSD_BYTES_PER_NODE = 5 * 1024**4
READ_UNIT_BYTES = 4096


def read_units(nbytes: float, consistent_read: bool) -> float:
    """DynamoDB's read-unit rule: one unit per 4 KB read, rounded up; half of that for an eventually consistent
    read. The one statement of it (estimates, the ETA, a Scan page whose capacity the server did not report)."""
    return math.ceil(nbytes / READ_UNIT_BYTES) * (1.0 if consistent_read else 0.5)


class PrefixShare(BaseModel):
    model_config = ConfigDict(frozen=True)
    prefix: str
    rows: int
    share: float


class HotspotReport(BaseModel):
    """How sampled writes spread over key prefixes; one prefix far above its fair share is a hot tablet."""

    model_config = ConfigDict(frozen=True)
    dimension: str
    """What a prefix is here: the first key segment that varies, or the first byte after the common prefix."""
    common_prefix: str
    """Bytes every sampled key starts with (skipped: they say nothing about spread)."""
    rows: int
    distinct_prefixes: int
    shares: tuple[PrefixShare, ...]
    """The largest prefixes, biggest first (at most 20)."""
    max_share: float
    fair_share: float
    gini: float
    """0 = perfectly even, towards 1 = everything under one prefix."""
    flagged: bool
    finding: str


def gini(counts: list[int]) -> float:
    """Gini coefficient of non-negative counts (0 even, (n-1)/n when one holds everything)."""
    if not counts or sum(counts) == 0:
        return 0.0
    ordered = sorted(counts)
    n, total = len(ordered), sum(ordered)
    weighted = sum(rank * value for rank, value in enumerate(ordered, start=1))
    return (2 * weighted) / (n * total) - (n + 1) / n


def _segment_prefixes(keys: list[bytes], delimiter: bytes) -> tuple[bytes, list[bytes]]:
    split = [key.split(delimiter) for key in keys]
    depth = max(len(parts) for parts in split)
    for position in range(depth):
        values = {tuple(parts[: position + 1]) for parts in split}
        if len(values) > 1:
            common = delimiter.join(split[0][:position]) + (delimiter if position else b"")
            return common, [delimiter.join(parts[: position + 1]) for parts in split]
    return keys[0], list(keys)


def _byte_prefixes(keys: list[bytes], width: int) -> tuple[bytes, list[bytes]]:
    common: bytes = os.path.commonprefix(keys) or b""
    return common, [key[: len(common) + width] for key in keys]


def prefix_skew(keys: list[bytes], *, delimiter: str | None = "#", byte_width: int = 1) -> HotspotReport:
    """Share of writes per prefix: per first varying segment (with a delimiter) or per next byte(s)."""
    if delimiter:
        dimension = f"first varying key segment (split on {delimiter!r})"
        common, prefixes = _segment_prefixes(keys, delimiter.encode()) if keys else (b"", [])
    else:
        dimension = f"first {byte_width} byte(s) after the common prefix"
        common, prefixes = _byte_prefixes(keys, byte_width) if keys else (b"", [])
    counts = Counter(prefixes)
    total, distinct = len(keys), len(counts)
    top = counts.most_common(TOP_PREFIXES)
    max_share = top[0][1] / total if top else 0.0
    fair = 1 / distinct if distinct else 0.0
    flagged = total >= MIN_ROWS_FOR_SKEW and distinct >= 2 and max_share >= SKEW_MAX_SHARE and max_share >= SKEW_FACTOR * fair
    if flagged:
        finding = (
            f"prefix {readable_bytes(top[0][0])!r} takes {max_share:.0%} of the sampled writes "
            f"(fair share {fair:.0%} over {distinct} prefixes): its tablet will be hot during the load and after. "
            "Put a higher-cardinality value first in the row key, or salt it (row_key.salt_buckets)."
        )
    elif total < MIN_ROWS_FOR_SKEW:
        finding = f"only {total} sampled writes; sample at least {MIN_ROWS_FOR_SKEW} to judge the spread"
    else:
        finding = f"largest prefix takes {max_share:.0%} of {total} writes over {distinct} prefixes"
    return HotspotReport(
        dimension=dimension,
        common_prefix=readable_bytes(common),
        rows=total,
        distinct_prefixes=distinct,
        shares=tuple(PrefixShare(prefix=readable_bytes(p), rows=n, share=n / total) for p, n in top),
        max_share=max_share,
        fair_share=fair,
        gini=gini(list(counts.values())),
        flagged=flagged,
        finding=finding,
    )


def hotspot_reports(sample: Sample, delimiter: str = "#") -> tuple[HotspotReport, ...]:
    """Both views of the written keys (one entry per mapped item: that is the write load)."""
    keys = [row.row_key for row in sample.mapped]
    if not keys:
        return ()
    return (prefix_skew(keys, delimiter=delimiter), prefix_skew(keys, delimiter=None))


# --------------------------------------------------------------------------- capacity and time


STREAM_RETENTION_S = 24 * 3600
"""DynamoDB Streams keep records 24 hours: a scan backfill longer than that cannot be followed by the tail."""


class Estimates(BaseModel):
    """Read cost of the scan, its duration at the read budget, the target's size, and a node count."""

    model_config = ConfigDict(frozen=True)
    items: int
    items_from: Literal["DescribeTable", "sample"]
    average_item_bytes: float
    table_bytes: int
    table_bytes_from: Literal["DescribeTable", "sample"] = "sample"
    """DescribeTable's size, or the sample's average item x items (DescribeTable reports 0, or no table)."""
    lower_bound: bool = False
    """DescribeTable reports 0 items while the sample found some (its counts lag up to about six hours behind a load):
    the table's count is unknown, and ``items`` (the sample) and every figure derived from it (size, read units, scan
    time, target rows, cells, bytes, nodes) are lower bounds."""
    scan_read_units: float
    """Read capacity units the whole scan consumes (0 when reading an export)."""
    read_units_per_second: float | None
    """Budget x the table's RCU (provisioned, or the on-demand assumption); None when reading an export."""
    scan_seconds: float | None
    target_rows: int
    """Distinct Bigtable rows, extrapolated from the sample's rows per item."""
    target_writes: int
    """Mutation entries (one per mapped item)."""
    target_cells: int
    target_bytes: int
    target_write_hours: float
    suggested_nodes: int
    node_basis: str
    """Which constraint set the node count: write rows/s, write bytes/s or storage."""
    assumptions: tuple[str, ...]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def exceeds_stream_retention(self) -> bool:
        """The scan outlasts the stream's retention: plan a full-export backfill and incremental-export catch-up."""
        return self.scan_seconds is not None and self.scan_seconds > STREAM_RETENTION_S

    @property
    def stream_retention_warning(self) -> str | None:
        """What to do when the scan outlasts the stream's retention (the plan's finding and its text say it)."""
        return retention_warning(self.scan_seconds) if self.exceeds_stream_retention else None


def retention_warning(scan_seconds: float | None) -> str:
    """Why a scan of ``scan_seconds`` cannot be followed by the stream tail, and what to do instead."""
    return (f"the scan backfill takes ~{(scan_seconds or 0) / 3600:.0f} h at this read budget, longer than DynamoDB "
            "Streams' 24-hour retention: the stream tail could not start after it. Back-fill from a full export and "
            "catch up with incremental exports (`ddb2bt catch-up`, docs/CUTOVER.md), or raise the read budget")


def estimate(
    sample: Sample,
    *,
    item_count: int | None,
    size_bytes: int | None,
    provisioned_rcu: int | None,
    on_demand_rcu: int,
    read_budget: float,
    consistent_read: bool = False,
    from_export: bool = False,
    target_write_hours: float = 4.0,
) -> Estimates:
    """Extrapolate the sample to the whole table; `item_count`/`size_bytes` come from DescribeTable when known.

    ``item_count`` 0 (DescribeTable was asked and reports none) with a sample that found items: the count is unknown,
    and the figures are the sample's own, lower bounds (``lower_bound``); None: no table was described (an export)."""
    sampled = len(sample.items) or 1
    lower_bound = item_count == 0 and bool(sample.items) and not from_export
    items = item_count if item_count else len(sample.items)
    average = (size_bytes / items) if (size_bytes and items) else (sum(sample.item_sizes) / sampled)
    table_bytes = size_bytes if size_bytes else round(average * items)
    factor = items / sampled
    assumptions = [
        "DynamoDB's ItemCount and TableSizeBytes are refreshed about every six hours: approximate."
        if item_count
        else (f"The table's item count is unknown: DescribeTable reports 0 (its counts are refreshed about every six "
              f"hours, so a freshly loaded table shows 0). The table holds at least the {len(sample.items):,} sampled "
              "items, and every figure here is a lower bound.")
        if lower_bound
        else "No DescribeTable numbers: the sample is taken to be the whole table.",
        f"Target figures extrapolate the {len(sample.items)}-item sample linearly; rows shared by many items "
        "(single-table designs) make the distinct-row figure a lower bound.",
    ]
    if from_export:
        units, rate, seconds = 0.0, None, None
        assumptions.append("Reading an S3 export consumes no read capacity.")
    else:
        units = read_units(table_bytes, consistent_read)
        capacity = provisioned_rcu or on_demand_rcu
        rate = read_budget * capacity
        seconds = units / rate if rate else None
        if seconds is not None and seconds > STREAM_RETENTION_S:
            assumptions.append(f"WARNING: {retention_warning(seconds)}.")
        assumptions.append(
            f"A scan reads 4 KB per read unit, {'strongly' if consistent_read else 'eventually'} consistent "
            f"({'full' if consistent_read else 'half'} a unit each); budget {read_budget:.0%} of "
            + (f"{provisioned_rcu} provisioned RCU." if provisioned_rcu else f"an assumed {on_demand_rcu} RCU (on-demand).")
        )
    mapped = sample.mapped
    writes = round(len(mapped) * factor)
    cells = round(sum(len(row.cells) for row in mapped) * factor)
    target_bytes = round(sum(sample.row_sizes.values()) * factor)
    seconds_allowed = max(target_write_hours, 1 / 60) * 3600
    needs = {
        f"write rows/s (~{WRITE_ROWS_PER_NODE_S:,} per node)": writes / (seconds_allowed * WRITE_ROWS_PER_NODE_S),
        f"write bytes/s (~{WRITE_BYTES_PER_NODE_S // 1024**2} MB/s per node)": target_bytes / (seconds_allowed * WRITE_BYTES_PER_NODE_S),
        "storage (5 TB per SSD node)": target_bytes / SSD_BYTES_PER_NODE,
    }
    basis, need = max(needs.items(), key=lambda pair: pair[1])
    assumptions.append(
        "Node count is an estimate for SSD clusters from Google's published guidance (up to ~14,000 rows/s of "
        f"1 KB writes per node); planned at {WRITE_ROWS_PER_NODE_S:,} rows/s or "
        f"{WRITE_BYTES_PER_NODE_S // 1024**2} MB/s per node to finish in {target_write_hours:g} h. "
        "Load-test before sizing production; scale down after the load."
    )
    return Estimates(
        items=items,
        items_from="DescribeTable" if item_count else "sample",
        average_item_bytes=average,
        table_bytes=table_bytes,
        table_bytes_from="DescribeTable" if size_bytes else "sample",
        lower_bound=lower_bound,
        scan_read_units=units,
        read_units_per_second=rate,
        scan_seconds=seconds,
        target_rows=round(len(sample.row_sizes) * factor),
        target_writes=writes,
        target_cells=cells,
        target_bytes=target_bytes,
        target_write_hours=target_write_hours,
        suggested_nodes=max(1, math.ceil(need)),
        node_basis=basis,
        assumptions=tuple(assumptions),
    )
