"""migrate-plan sizes the nodes for today's load from the table's consumed capacity in CloudWatch when no rate is
given: metrics put into moto_server's CloudWatch by the test, read back through GetMetricStatistics (botocore's own
parser), average and busiest 5 minutes; no data, no CloudWatch, no server: said, and the plan falls back."""

from __future__ import annotations

import datetime as dt
import json

import boto3
import pytest
from typer.testing import CliRunner

from ddb2bt.cli.main import app
from ddb2bt.mappers.analysis.costs import MeasuredLoad, rows_from_units
from ddb2bt.pipelines.dynamodb.cloudwatch import LoadUnavailable, consumed_capacity
from ddb2bt.pipelines.dynamodb.client import create_table, put_items

NOW = dt.datetime.now(dt.timezone.utc)
READ_SUMS = (4_500_000.0, 300_000.0, 30_000.0)  # per 5-minute period: the busiest is 15,000 read units/s
WRITE_SUMS = (1_500_000.0, 60_000.0)  # 5,000 write units/s at the busiest


def put_metrics(endpoint: str, table: str) -> None:
    cloudwatch = boto3.client("cloudwatch", endpoint_url=endpoint, region_name="us-east-1")
    for metric, sums in (("ConsumedReadCapacityUnits", READ_SUMS), ("ConsumedWriteCapacityUnits", WRITE_SUMS)):
        cloudwatch.put_metric_data(Namespace="AWS/DynamoDB", MetricData=[
            {"MetricName": metric, "Dimensions": [{"Name": "TableName", "Value": table}],
             "Timestamp": NOW - dt.timedelta(hours=hours + 1), "Value": value, "Unit": "Count"}
            for hours, value in enumerate(sums)])


def test_consumed_capacity_average_and_busiest_period(moto_server, unique_name):
    put_metrics(moto_server.endpoint, unique_name)
    load = consumed_capacity(unique_name, region="us-east-1", endpoint_url=moto_server.endpoint, now=NOW)
    window = 7 * 86_400
    assert load.read_units_peak == 15_000 and load.write_units_peak == 5_000
    assert load.read_units_average == pytest.approx(sum(READ_SUMS) / window)
    assert load.write_units_average == pytest.approx(sum(WRITE_SUMS) / window)
    assert load.datapoints == 5 and load.days == 7 and load.period_seconds == 300

    with pytest.raises(LoadUnavailable, match=f"no consumed capacity of table {unique_name}x in the last 7 days"):
        consumed_capacity(unique_name + "x", region="us-east-1", endpoint_url=moto_server.endpoint, now=NOW)
    with pytest.raises(LoadUnavailable, match="CloudWatch could not be read"):  # nothing listens there
        consumed_capacity(unique_name, region="us-east-1", endpoint_url="http://127.0.0.1:9")


def test_a_server_without_cloudwatch_is_said_not_raised(dynalite, unique_name):
    with pytest.raises(LoadUnavailable, match="CloudWatch"):
        consumed_capacity(unique_name, region="us-east-1", endpoint_url=dynalite.endpoint)


def spec_file(tmp_path, endpoint: str, table: str) -> str:
    path = tmp_path / "spec.json"
    path.write_text(json.dumps({
        "source": {"table": table, "endpoint_url": endpoint, "region": "us-east-1", "partition_key": "pk",
                   "sort_key": "sk"},
        "target": {"table": table, "families": {"x": {"max_versions": 1}}},
        "migration_time": "2024-01-01T00:00:00Z",
        "entities": [{"name": "item", "row_key": "{pk}#{sk}", "rest": {"family": "x", "encoding": "ddb_json"}}]}))
    return str(path)


def test_migrate_plan_sizes_todays_load_from_cloudwatch(moto_server, unique_name, tmp_path):
    client = boto3.client("dynamodb", endpoint_url=moto_server.endpoint, region_name="us-east-1")
    create_table(client, unique_name, "pk", "sk")
    put_items(client, unique_name, [{"pk": {"S": f"u{i}"}, "sk": {"S": "a"}, "v": {"N": str(i)}} for i in range(20)])
    put_metrics(moto_server.endpoint, unique_name)
    spec = spec_file(tmp_path, moto_server.endpoint, unique_name)

    done = CliRunner().invoke(app, ["migrate-plan", spec, "--format", "json"])
    costs = json.loads(done.stdout)["costs"]
    assert costs["load_from"] == "cloudwatch" and costs["measured"]["read_units_peak"] == 15_000
    # items under 1 KB: a read unit is two eventually consistent reads, a write unit one write:
    # 30,000 reads/s at ~10,000 a node and 5,000 writes/s at ~10,000 a node: 3.5, so 4 nodes
    assert costs["serving_nodes"] == 4 and costs["serving_dollars_month"] == pytest.approx(4 * 730 * 0.65)
    assert "30,000 reads/s and 5,000 writes/s (CloudWatch, table" in costs["serving_basis"]

    text = CliRunner().invoke(app, ["migrate-plan", spec])
    assert f"target, today's load: 4 nodes (30,000 reads/s and 5,000 writes/s (CloudWatch, table {unique_name}, " \
           "last 7 days: " in text.stdout, text.stdout
    assert "15,000.0 in the busiest 5 minutes" in text.stdout

    page = tmp_path / "report.html"
    assert CliRunner().invoke(app, ["report", spec, "-o", str(page)]).exit_code == 0
    html = page.read_text()
    assert '<h2 id="costs">Cost and size</h2>' in html and 'href="#costs"' in html  # a section in the contents
    assert "<td>Target, today&#x27;s load</td><td>$1,898.00/month</td><td>4 nodes (30,000 reads/s and 5,000 writes/s " \
           "(CloudWatch, table" in html
    assert "node_hour $0.65 (cloud.google.com/bigtable/pricing (us-central1))" in html
    markdown = CliRunner().invoke(app, ["report", spec, "-o", "-"]).stdout
    assert "## Cost and size" in markdown and "| Target, today's load | $1,898.00/month | 4 nodes (" in markdown

    given = json.loads(CliRunner().invoke(app, ["migrate-plan", spec, "--format", "json", "--load-reads", "0",
                                                "--load-writes", "0"]).stdout)["costs"]
    assert given["load_from"] == "given" and given["measured"] is None and given["serving_nodes"] == 1


def test_migrate_plan_without_cloudwatch_data_says_so_and_falls_back(moto_server, unique_name, tmp_path):
    client = boto3.client("dynamodb", endpoint_url=moto_server.endpoint, region_name="us-east-1")
    create_table(client, unique_name, "pk", "sk")
    put_items(client, unique_name, [{"pk": {"S": "u"}, "sk": {"S": "a"}}])
    done = CliRunner().invoke(app, ["migrate-plan", spec_file(tmp_path, moto_server.endpoint, unique_name)])
    assert (f"target, today's load: no load given and CloudWatch holds no consumed capacity of table {unique_name} "
            "in the last 7 days: pass --load-reads and --load-writes") in done.stdout, done.stdout


def test_rows_from_units_on_known_inputs():
    load = MeasuredLoad(table="t", days=7, period_seconds=300, read_units_average=1, read_units_peak=100,
                        write_units_average=1, write_units_peak=100, datapoints=2)
    assert rows_from_units(load, 900) == (200, 100)  # under 1 KB: 2 reads a read unit, 1 write a write unit
    assert rows_from_units(load, 5000) == (100, 20)  # 5,000 B: 2 read units a read (÷ 2 × 2), 5 write units a write


def test_no_permission_is_said_with_the_permission_to_give():
    """CloudWatch's answer to a caller without cloudwatch:GetMetricStatistics (403, ``__type`` and ``message``) in the
    protocol botocore's client speaks to it (AWS JSON 1.0 with this botocore), parsed by botocore's own parser."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    client = boto3.client("cloudwatch", region_name="us-east-1", endpoint_url="http://127.0.0.1:9")
    assert client.meta.service_model.resolved_protocol == "json"  # the answer below is in that protocol
    body = json.dumps({"__type": "AccessDenied", "message": "User: arn:aws:iam::123456789012:user/planner is not "
                       "authorized to perform: cloudwatch:GetMetricStatistics"}).encode()

    class Refuse(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's name
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(403)
            for name, value in (("Content-Type", "application/x-amz-json-1.0"), ("x-amzn-RequestId", "refused"),
                                ("Content-Length", str(len(body)))):
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Refuse)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with pytest.raises(LoadUnavailable, match=r"CloudWatch refused GetMetricStatistics \(give the plan's role "
                                                  r"cloudwatch:GetMetricStatistics\)"):
            consumed_capacity("t", region="us-east-1", endpoint_url=f"http://127.0.0.1:{server.server_port}")
    finally:
        server.shutdown()
