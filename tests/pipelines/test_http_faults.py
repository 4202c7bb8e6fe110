"""DynamoDB answering 500/503 (its own JSON, or a load balancer's HTML) and answers damaged on the way (bytes replaced,
the JSON still valid, only the body's CRC32 shows it): retried with backoff where AWS says retry, a clear stop
otherwise, and never a wrongly parsed page in Bigtable. Bigtable is checked cell by cell."""

from __future__ import annotations

import time

import pytest

from ddb2bt.mappers.errors import ServiceError
from ddb2bt.pipelines.dynamodb.client import ClientSettings, make_client
from ddb2bt.pipelines.dynamodb.scan import RetryPolicy, ScanFailedError, scan_client, scan_pages
from ddb2bt.pipelines.local import servers as local_servers
from ddb2bt.pipelines.local.proxy import HttpFaultProxy, http_answer, serving
from ddb2bt.pipelines.run.service_errors import as_ddb2bt_error

from .cells import expected_cells, read_cells
from .tables import run_through

BUSY_HTML = http_answer(b"503 Service Unavailable", b"<html><body>503 Service Temporarily Unavailable</body></html>",
                        b"text/html")
"""A load balancer's 503 in front of DynamoDB: no JSON, no ``__type``: botocore's error code is ``503``."""

DAMAGE = (b'"i00', b'"j00')
"""One sort key's text changed on the way (``i0001`` read as ``j0001``): the JSON stays valid."""


@pytest.mark.parametrize("fault", [
    {"fail": 5},
    {"fail": 5, "failure": BUSY_HTML},
    {"corrupt": 7, "corruption": DAMAGE},
], ids=["json-500", "html-503", "damaged"])
def test_5xx_and_damaged_scan_answers_are_retried_and_nothing_wrong_is_written(bigtable_env, small_source, tmp_path,
                                                                                fault):
    """More faults than botocore's own attempts (3 for the scan): the scan's retries take over, whatever the body says.
    A 503 without DynamoDB's JSON (a load balancer's) stopped the run at once; an answer whose x-amz-crc32 did not
    match after botocore's last attempt was returned as a success: `j0001` was written in place of `i0001`."""
    server, spec, items = small_source
    proxy = HttpFaultProxy(server.host, server.port, **fault)
    counters = run_through(proxy, spec, tmp_path)
    made = fault.get("fail", 0) + fault.get("corrupt", 0)
    assert proxy.failed + proxy.corrupted == made
    assert counters["items_read"] == counters["rows_written"] == len(items)
    assert counters["scan_retries"] >= made
    assert read_cells(spec.target) == expected_cells(spec, items)


def test_a_source_answering_503_to_every_scan_fails_within_the_deadline(small_source):
    server, spec, _items = small_source
    proxy = HttpFaultProxy(server.host, server.port, fail=10**9, failure=BUSY_HTML)
    with serving(proxy) as port, local_servers.patched_environ(local_servers.FAKE_AWS_ENV):
        retry = RetryPolicy(deadline=5, max_delay=0.5, botocore_attempts=2)
        client = scan_client(ClientSettings(region="us-east-1", endpoint_url=f"http://127.0.0.1:{port}"), retry)
        started = time.monotonic()
        with pytest.raises(ScanFailedError) as failure:
            next(scan_pages(client, spec.source.table, retry=retry))
    assert time.monotonic() - started < 20 and proxy.failed > 2  # retried by botocore and by the scan, then stopped
    assert "503" in str(failure.value) and "--resume" in str(failure.value)


@pytest.mark.parametrize("operation, call", [
    ("DescribeTable", lambda client, table: client.describe_table(TableName=table)),
    ("BatchGetItem", lambda client, table: client.batch_get_item(
        RequestItems={table: {"Keys": [{"pk": {"S": "p1"}, "sk": {"S": "i0001"}}]}})),
])
def test_other_answers_damaged_past_botocores_retries_are_an_error_not_a_result(small_source, operation, call):
    server, spec, _items = small_source
    corruption = (b'"pk"', b'"qk"') if operation == "DescribeTable" else DAMAGE
    proxy = HttpFaultProxy(server.host, server.port, operation=operation, corrupt=10**9, corruption=corruption)
    with serving(proxy) as port, local_servers.patched_environ(local_servers.FAKE_AWS_ENV):
        client = make_client(ClientSettings(region="us-east-1", endpoint_url=f"http://127.0.0.1:{port}",
                                            max_attempts=2))
        with pytest.raises(Exception) as failure:
            call(client, spec.source.table)
    assert proxy.corrupted == 2
    error = as_ddb2bt_error(failure.value)
    assert isinstance(error, ServiceError), failure.value
    assert f"DynamoDB's answer to {operation}" in str(error) and "x-amz-crc32" in str(error), error
