"""The table's consumed capacity from CloudWatch (AWS/DynamoDB ConsumedReadCapacityUnits, ConsumedWriteCapacityUnits),
for sizing the Bigtable nodes that serve today's load.

GetMetricStatistics's ``Sum`` over a period divided by the period's seconds is the units consumed per second in it
(AWS: "DynamoDB metrics and dimensions"); the average is the window's whole sum over its seconds, the peak the busiest
period's. One call returns at most 1,440 datapoints, so a window of 5-minute periods is asked for in parts of 5 days.
The client follows the project's endpoint rule (:func:`.aws.aws_client`): a local DynamoDB's CloudWatch is the same
local server. Anything that keeps the figures away (no permission, no data, no such service) is
:class:`LoadUnavailable`, whose message says why: a cost figure never fails a plan.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from ...mappers.analysis.costs import CLOUDWATCH_DAYS, CLOUDWATCH_PERIOD_S, MeasuredLoad
from .aws import aws_client

log = logging.getLogger(__name__)

NAMESPACE = "AWS/DynamoDB"
METRICS = ("ConsumedReadCapacityUnits", "ConsumedWriteCapacityUnits")
MAX_DATAPOINTS = 1440


class LoadUnavailable(Exception):
    """CloudWatch gave no figures for the table; the message says why, for the plan to show."""


def consumed_capacity(table: str, *, region: str | None = None, endpoint_url: str | None = None,
                      profile: str | None = None, role_arn: str | None = None, days: float = CLOUDWATCH_DAYS,
                      period_s: int = CLOUDWATCH_PERIOD_S, now: dt.datetime | None = None) -> MeasuredLoad:
    """The table's consumed read and write units per second over the last ``days``: average and busiest period."""
    from botocore.config import Config
    from botocore.exceptions import BotoCoreError, ClientError

    end = now or dt.datetime.now(dt.timezone.utc)
    start = end - dt.timedelta(days=days)
    try:
        client = aws_client("cloudwatch", endpoint_url=endpoint_url, region=region, profile=profile,
                            role_arn=role_arn, config=Config(connect_timeout=3, read_timeout=10,
                                                             retries={"total_max_attempts": 2}))
        sums = {metric: _sums(client, table, metric, start, end, period_s) for metric in METRICS}
    except ClientError as err:
        error = err.response.get("Error", {})
        code = error.get("Code") or "an error"
        if code in ("AccessDenied", "AccessDeniedException", "UnauthorizedOperation"):
            raise LoadUnavailable("CloudWatch refused GetMetricStatistics (give the plan's role "
                                  "cloudwatch:GetMetricStatistics)") from None
        raise LoadUnavailable(f"CloudWatch answered {code}") from None
    except BotoCoreError as err:
        raise LoadUnavailable(f"CloudWatch could not be read ({type(err).__name__})") from None
    except Exception as err:  # noqa: BLE001 - e.g. a local server without CloudWatch sends what botocore cannot parse
        log.debug("CloudWatch unreadable", exc_info=True)
        raise LoadUnavailable(f"CloudWatch could not be read ({type(err).__name__})") from None
    reads, writes = sums[METRICS[0]], sums[METRICS[1]]
    if not reads and not writes:
        raise LoadUnavailable(f"CloudWatch holds no consumed capacity of table {table} in the last {days:g} days")
    seconds = (end - start).total_seconds()
    return MeasuredLoad(table=table, days=days, period_seconds=period_s,
                        read_units_average=sum(reads) / seconds, read_units_peak=max(reads, default=0.0) / period_s,
                        write_units_average=sum(writes) / seconds, write_units_peak=max(writes, default=0.0) / period_s,
                        datapoints=len(reads) + len(writes))


def _sums(client: Any, table: str, metric: str, start: dt.datetime, end: dt.datetime, period_s: int) -> list[float]:
    """Each period's Sum of ``metric`` for the table in [start, end), asked for in parts of at most 1,440 periods."""
    sums: list[float] = []
    step = dt.timedelta(seconds=period_s * MAX_DATAPOINTS)
    part = start
    while part < end:
        upto = min(part + step, end)
        answer = client.get_metric_statistics(Namespace=NAMESPACE, MetricName=metric,
                                              Dimensions=[{"Name": "TableName", "Value": table}], StartTime=part,
                                              EndTime=upto, Period=period_s, Statistics=["Sum"])
        sums += [float(point["Sum"]) for point in answer.get("Datapoints", []) if "Sum" in point]
        part = upto
    return sums
