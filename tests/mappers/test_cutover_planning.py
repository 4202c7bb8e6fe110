"""migrate-plan's estimates warn when the scan backfill outlasts DynamoDB Streams' 24-hour retention."""

from __future__ import annotations

from ddb2bt.mappers.compiler import compile_spec
from ddb2bt.mappers.analysis.estimates import STREAM_RETENTION_S, estimate
from ddb2bt.mappers.loader import load_spec
from ddb2bt.mappers.analysis.sample import analyse_sample

from tests.golden import seed_items, template_path

NOW_MS = 1_700_000_000_000


def test_a_scan_longer_than_the_stream_retention_is_warned_about():
    spec = load_spec(template_path("product_catalog"))
    items = seed_items("product_catalog")
    sample = analyse_sample(items, [compile_spec(spec, NOW_MS).map_item(i) for i in items])
    common = dict(provisioned_rcu=None, on_demand_rcu=4000, read_budget=0.5)
    short = estimate(sample, item_count=1_000_000, size_bytes=10**9, **common)  # 1 GB: minutes
    assert not short.exceeds_stream_retention and not any("WARNING" in a for a in short.assumptions)
    long = estimate(sample, item_count=10**9, size_bytes=10**13, **common)  # 10 TB at 2,000 RCU/s: days
    assert long.scan_seconds > STREAM_RETENTION_S and long.exceeds_stream_retention
    (warning,) = [a for a in long.assumptions if a.startswith("WARNING")]
    assert "24-hour retention" in warning and "full export" in warning and "incremental exports" in warning
    export = estimate(sample, item_count=10**9, size_bytes=10**13, from_export=True, **common)
    assert not export.exceeds_stream_retention  # an export backfill reads no capacity: catch up with exports
