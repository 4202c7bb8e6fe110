"""Issue 25 item 8: what the migration costs and what the target needs, on known inputs, with the prices it assumed."""

from __future__ import annotations

import pytest

from ddb2bt.mappers.analysis.costs import Prices, cost_lines, estimate_costs, parse_prices
from ddb2bt.mappers.errors import UsageError
from ddb2bt.mappers.analysis.estimates import Estimates

GIB = 1024**3


def estimates(**changes) -> Estimates:
    """A 100 GiB table of 100 million items: 26,214,400 read units for an eventually consistent scan (4 KiB per unit,
    half a unit each), 150 GiB in Bigtable, 4 nodes to write it in 5 h."""
    known = dict(items=100_000_000, items_from="DescribeTable", average_item_bytes=1073.7, table_bytes=100 * GIB,
                 table_bytes_from="DescribeTable", scan_read_units=100 * GIB / 4096 / 2, read_units_per_second=1000.0,
                 scan_seconds=26_214.4, target_rows=100_000_000, target_writes=100_000_000, target_cells=500_000_000,
                 target_bytes=150 * GIB, target_write_hours=5.0, suggested_nodes=4, node_basis="write rows/s",
                 assumptions=())  # fmt: skip
    return Estimates(**{**known, **changes})


def test_a_scan_backfill_and_storage_at_the_assumed_prices():
    costs = estimate_costs(estimates(), Prices(), from_export=False, provisioned=False)
    assert costs.source == "scan" and costs.source_units == 13_107_200
    assert costs.source_dollars == pytest.approx(13_107_200 / 1e6 * 0.125)  # $1.64
    assert costs.backfill_hours == 8  # the scan: 26,214 s at 1,000 read units/s, longer than the 5 h window
    assert costs.backfill_dollars == pytest.approx(4 * 8 * 0.65)  # $20.80
    assert costs.storage_gb == 150 and costs.storage_dollars_month == pytest.approx(150 * 0.17)  # $25.50
    assert costs.serving_nodes is None and "--load-reads" in costs.serving_basis
    text = "\n".join(cost_lines(costs))
    assert "source, the backfill's scan: 13,107,200 read request units at $0.125 per million = $1.64" in text
    assert ("target, the backfill: 4 nodes × 8 h at $0.65/node-hour (the scan at its read budget: ~7.3 h, in whole "
            "node-hours) = $20.80") in text
    assert "target, storage: 150.00 GB at $0.17/GB-month = $25.50/month" in text
    assert "SSD node, 1 KB rows, ~10,000 reads/s or ~10,000 writes/s, 5 TB of storage per node" in text


def test_an_export_backfill_and_todays_load_with_prices_the_user_gives():
    prices = parse_prices(["export_per_gb=0.11", "node_hour=0.70"])
    costs = estimate_costs(estimates(scan_read_units=0, read_units_per_second=None, scan_seconds=None), prices,
                           from_export=True, provisioned=True, reads_per_second=25_000, writes_per_second=4_000)
    assert costs.source == "export" and costs.source_dollars == pytest.approx(100 * 0.11)
    assert costs.serving_nodes == 3  # 2.5 + 0.4 node-loads, rounded up
    assert costs.serving_dollars_month == pytest.approx(3 * 730 * 0.70)  # $1,533.00
    assert costs.prices.node_hour == 0.70 and costs.prices.storage_gb_month == 0.17  # the others stay assumed
    text = "\n".join(cost_lines(costs))
    assert "100.00 GB exported at $0.11/GB = $11.00" in text
    assert "3 nodes (25,000 reads/s and 4,000 writes/s at ~10,000 and ~10,000 per node; at least 1 for storage) = " \
           "$1,533.00/month at $0.7/node-hour" in text
    assert "capacity it already pays for" not in text  # an export consumes no read capacity


def test_storage_sets_the_floor_of_serving_nodes():
    costs = estimate_costs(estimates(target_bytes=12 * 1024**4), Prices(), from_export=False, provisioned=True,
                           reads_per_second=10)
    assert costs.serving_nodes == 3  # 12 TB at 5 TB per SSD node
    assert any("capacity it already pays for" in note for note in costs.notes)


@pytest.mark.parametrize("pair", ["node_hour", "nodes=1", "node_hour=abc", "node_hour=-1", "node_hour=nan"])
def test_a_bad_price_is_one_line_naming_it(pair):
    with pytest.raises(UsageError, match="--price"):
        parse_prices([pair])


def test_todays_load_from_cloudwatchs_busiest_period_or_why_there_is_none():
    from ddb2bt.mappers.analysis.costs import MeasuredLoad

    measured = MeasuredLoad(table="t", days=7, period_seconds=300, read_units_average=2_000, read_units_peak=10_000,
                            write_units_average=500, write_units_peak=8_000, datapoints=4032)
    costs = estimate_costs(estimates(), Prices(), from_export=False, provisioned=False, measured=measured)
    # 1,073.7 B items: one read unit reads two (eventually consistent), a write takes two write units (1 KB each):
    # 20,000 reads/s + 4,000 writes/s at ~10,000 a node = 2.4 node-loads, so 3 nodes
    assert costs.load_from == "cloudwatch" and costs.serving_nodes == 3
    assert costs.serving_basis.startswith("20,000 reads/s and 4,000 writes/s (CloudWatch, table t, last 7 days: "
                                          "2,000.0 read units/s on average, 10,000.0 in the busiest 5 minutes")
    missing = estimate_costs(estimates(), Prices(), from_export=False, provisioned=False, unmeasured="CloudWatch "
                             "refused GetMetricStatistics")
    assert missing.load_from == "none" and missing.serving_nodes is None
    assert "no load given and CloudWatch refused GetMetricStatistics: pass --load-reads" in "\n".join(cost_lines(missing))


def test_the_backfill_pays_the_node_hours_it_takes_not_the_planning_window():
    """A small table's backfill takes minutes: one node-hour (Bigtable bills whole ones), not the 5 h window the
    nodes were sized for; an export's hours are its writes' at the suggested nodes."""
    tiny = estimate_costs(estimates(items=9, table_bytes=4_000, scan_read_units=2, scan_seconds=0.0005, target_rows=2,
                                    target_writes=9, target_cells=40, target_bytes=6_000, suggested_nodes=1),
                          Prices(), from_export=False, provisioned=False)
    assert (tiny.backfill_hours, tiny.backfill_dollars) == (1, pytest.approx(0.65))
    assert "the writes at 1 node: ~0.0 h" in tiny.backfill_hours_basis
    export = estimate_costs(estimates(scan_read_units=0, read_units_per_second=None, scan_seconds=None), Prices(),
                            from_export=True, provisioned=False)
    assert export.backfill_hours == 2  # 150 GiB at 4 x 10 MiB/s: 3,840 s, in whole hours
    assert "the writes at 4 nodes: ~1.1 h" in export.backfill_hours_basis
