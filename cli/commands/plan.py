"""`ddb2bt migrate-plan`: a dry run over a sample, with a read-only look at the Bigtable target.

It writes nothing to Bigtable and reads only a sample of the source; `--out` saves what was reviewed for
`migrate --plan`. (`ddb2bt report` renders the same plan: cli/commands/report.py.)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from ...app.options import RunOptions
from ..options import OutputFormat, Sample, SpecArg, check_output, run_options
from .report import DEFAULT_SAMPLE


@run_options("aws", "google")
def migrate_plan(
    spec: SpecArg,
    sample: Sample = DEFAULT_SAMPLE,
    format: Annotated[OutputFormat, typer.Option("--format", help="text (tables) or json (the plan object with the "
                                                 "target's diff under `target`, full values).")] = OutputFormat.text,
    strict: Annotated[bool, typer.Option("--strict", help="Exit 1 on warnings too (a target not read, or one that "
                                         "already holds rows), not only errors.")] = False,
    out: Annotated[Optional[Path], typer.Option("--out", help="Also write the reviewed plan here, for `ddb2bt migrate "
                                                "SPEC --plan FILE`, which runs only if spec, source and target are "
                                                "still what this plan saw.", show_default=False)] = None,
    price: Annotated[Optional[list[str]], typer.Option("--price", metavar="NAME=VALUE", help="A price in US dollars "
                     "for the cost estimate instead of the assumed list price (repeatable): read_request_units_per_"
                     "million, export_per_gb, node_hour, storage_gb_month.", show_default=False)] = None,
    load_reads: Annotated[Optional[float], typer.Option("--load-reads", metavar="N", min=0, help="Rows/s the table "
                          "serves now (reads), to size the Bigtable nodes for today's load (default: the table's "
                          "consumed capacity in CloudWatch over the last 7 days, when it can be read).",
                          show_default=False)] = None,
    load_writes: Annotated[Optional[float], typer.Option("--load-writes", metavar="N", min=0, help="Rows/s the table "
                           "takes now (writes), as --load-reads.", show_default=False)] = None,
    *,
    options: RunOptions,
) -> None:
    """Dry run: map a sample with the spec, read the Bigtable target (read-only) and show what migrate would do.

    First the target's diff (+ created, ! refused, ~ worth knowing), then rows, findings and estimates. Writes nothing
    to Bigtable. A target that cannot be read (no names, no emulator, no credentials) is said in one line and is a
    warning. Exit 0 when clean, 1 when the plan has errors or migrate would refuse the target (with --strict, on
    warnings too), 2 for a bad spec.

    Example: ddb2bt migrate-plan videos.yaml --sample 1000 --out plan.json
    """
    from ...app.costs import plan_costs
    from ...app.plan import plan_against_target
    from ...mappers.analysis.costs import cost_lines, parse_prices
    from ..progress import say, spinner

    check_output(out, "--out")
    prices = parse_prices(price or [])
    with spinner() as step:
        result = plan_against_target(spec, sample, options, step=step, where=say)
        if load_reads is None and load_writes is None:
            step("reading the table's consumed capacity from CloudWatch…")
        costs = plan_costs(result.plan, spec, options, prices, reads_per_second=load_reads,
                           writes_per_second=load_writes)
    if format is OutputFormat.json:
        typer.echo(json.dumps({**result.to_json(), "costs": costs.model_dump(mode="json")}, indent=2))
    else:
        from rich.console import Console

        from ..plan_text import render_text

        console = Console()
        render_text(result.plan, console, result.target)
        for line in cost_lines(costs):
            console.print(line, markup=False, highlight=False, soft_wrap=True)
    if out is not None:
        result.reviewed.to_file(out, str(spec), result.to_json())
        say(f"Wrote {out}" + ("" if result.reviewed.ok else " (the plan has errors: `migrate --plan` will refuse it)"))
    if result.has_errors or (strict and result.has_warnings):
        raise typer.Exit(1)

