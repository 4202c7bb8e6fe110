"""`ddb2bt report`: the schema translation report (HTML or Markdown) for a spec over a sample; `-o -` prints Markdown."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ...app.options import RunOptions
from ..options import Sample, SpecArg, check_output, run_options

DEFAULT_SAMPLE = 1000
STDOUT = Path("-")


@run_options("aws", "google")
def command(
    spec: SpecArg,
    output: Annotated[Path, typer.Option("--output", "-o", help="report.html or report.md (the extension picks the "
                                         "format); - writes Markdown to stdout.", show_default=False)],
    sample: Sample = DEFAULT_SAMPLE,
    *,
    options: RunOptions,
) -> None:
    """Write the schema translation report (HTML or Markdown) for the spec over a sample. Reads only a sample.

    Example: ddb2bt report videos.yaml -o report.html
    """
    from ...app.costs import plan_costs
    from ...app.plan import plan
    from .. import report as renderers
    from ..progress import spinner

    if output != STDOUT and output.suffix.lower().lstrip(".") not in renderers.KINDS:
        raise typer.BadParameter(f"{output} must end in .html or .md (or be - for Markdown on stdout)",
                                 param_hint="--output")
    check_output(None if output == STDOUT else output, "--output")
    with spinner() as step:
        the_plan = plan(spec, sample, options, step=step)
        step("reading the table's consumed capacity from CloudWatch…")
        costs = plan_costs(the_plan, spec, options)
    if output == STDOUT:
        typer.echo(renderers.render(the_plan, "md", costs), nl=False)
        return
    renderers.write_report(the_plan, output, costs)
    typer.echo(f"Wrote {output}", err=True)
