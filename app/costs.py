"""What the migration costs and what the target needs, for `migrate-plan` and the report: the plan's estimates, the
prices, and today's load — the rates the user gave, else the table's consumed capacity in CloudWatch, else none (and
why). The arithmetic is :mod:`ddb2bt.mappers.analysis.costs`; CloudWatch is read by :mod:`ddb2bt.pipelines.dynamodb.cloudwatch`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from .context import load_spec
from .options import RunOptions

if TYPE_CHECKING:
    from ..mappers.analysis.costs import Costs, MeasuredLoad, Prices
    from ..mappers.analysis.plan import MigrationPlan
    from ..mappers.spec import MappingSpec


def plan_costs(plan: MigrationPlan, spec: MappingSpec | str | Path, options: RunOptions = RunOptions(),
               prices: Prices | None = None, *, reads_per_second: float | None = None,
               writes_per_second: float | None = None) -> Costs:
    """The cost and size estimate of ``plan``; CloudWatch is asked only when no rate is given."""
    from ..mappers.analysis.costs import Prices, estimate_costs

    measured: MeasuredLoad | None = None
    unmeasured = None
    if reads_per_second is None and writes_per_second is None:
        measured, unmeasured = measure_load(spec, options)
    source = plan.source
    return estimate_costs(plan.estimates, prices or Prices(), from_export=plan.estimates.read_units_per_second is None,
                          provisioned=source is not None and source.billing_mode == "PROVISIONED",
                          reads_per_second=reads_per_second, writes_per_second=writes_per_second,
                          measured=measured, unmeasured=unmeasured)


def measure_load(spec: MappingSpec | str | Path, options: RunOptions = RunOptions()
                 ) -> tuple[MeasuredLoad | None, str | None]:
    """(CloudWatch's figures for the spec's table, None) or (None, why there are none)."""
    from ..pipelines.dynamodb.cloudwatch import LoadUnavailable, consumed_capacity

    source = load_spec(spec, options, writes=False).source
    if not source.table:
        return None, "the spec names no table whose load CloudWatch could give (it reads an export)"
    try:
        return consumed_capacity(source.table, region=source.region, endpoint_url=source.endpoint_url,
                                 profile=source.profile, role_arn=source.role_arn), None
    except LoadUnavailable as err:
        return None, str(err)
