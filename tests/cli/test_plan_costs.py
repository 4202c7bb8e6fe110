"""migrate-plan's cost and size estimate, in text and JSON, with the prices it assumed and the ones given."""

from __future__ import annotations

import json

from ddb2bt.templates import catalog


def test_costs_in_text_and_json(invoke, seeded_moto):
    spec = catalog.resources.files("ddb2bt.templates") / "videos.yaml"
    text = invoke("migrate-plan", spec)
    assert "cost (list prices assumed; change with --price NAME=VALUE):" in text.stdout, text.output
    assert "at $0.65/node-hour" in text.stdout and "pass --load-reads and --load-writes" in text.stdout

    given = invoke("migrate-plan", spec, "--format", "json", "--price", "node_hour=2", "--load-reads", "30000",
                   "--load-writes", "0")
    costs = json.loads(given.stdout)["costs"]
    assert costs["prices"]["node_hour"] == 2 and costs["prices"]["storage_gb_month"] == 0.17
    assert costs["backfill_dollars"] == costs["backfill_nodes"] * costs["backfill_hours"] * 2
    assert costs["serving_nodes"] == 3 and costs["serving_dollars_month"] == 3 * 730 * 2
    assert costs["price_sources"]["node_hour"].startswith("cloud.google.com/bigtable/pricing")

    bad = invoke("migrate-plan", spec, "--price", "nodes=1")
    assert bad.exit_code == 2 and "--price nodes=1: expected NAME=VALUE" in bad.stderr
