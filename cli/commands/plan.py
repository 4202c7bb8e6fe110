"""`ddb2bt migrate-plan` and `ddb2bt report`: one plan (a dry run over a sample), two renderings.

Neither writes to Bigtable; both read only a sample of the source.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ...app.options import RunOptions
from ..options import OutputFormat, Sample, SpecArg, run_options

DEFAULT_SAMPLE = 1000
REPORT_KINDS = {"html": "html", "htm": "html", "md": "md", "markdown": "md"}


@run_options("aws", "google")
def migrate_plan(
    spec: SpecArg,
    sample: Sample = DEFAULT_SAMPLE,
    format: Annotated[OutputFormat, typer.Option("--format", help="text (tables) or json (the plan object).")] = OutputFormat.text,
    strict: Annotated[bool, typer.Option("--strict", help="Exit 1 on warnings too, not only errors.")] = False,
    *,
    options: RunOptions,
) -> None:
    """Dry run: map a sample with the spec and show rows, findings and estimates. Writes nothing.

    Exit 0 when clean, 1 when the plan has errors (with --strict, warnings too), 2 for a bad spec.
    """
    plan = _plan(spec, sample, options)
    if format is OutputFormat.json:
        typer.echo(plan.model_dump_json(indent=2))
    else:
        from rich.console import Console

        from ..plan_text import render_text

        render_text(plan, Console())
    if plan.has_errors or (strict and plan.has_warnings):
        raise typer.Exit(1)


@run_options("aws", "google")
def report(
    spec: SpecArg,
    output: Annotated[Path, typer.Option("--output", "-o", help="report.html or report.md (the extension picks the format).", show_default=False)],
    sample: Sample = DEFAULT_SAMPLE,
    *,
    options: RunOptions,
) -> None:
    """Write the schema translation report (HTML or Markdown) for the spec over a sample."""
    if output.suffix.lower().lstrip(".") not in REPORT_KINDS:
        raise typer.BadParameter(f"{output} must end in .html or .md", param_hint="--output")
    write_report(_plan(spec, sample, options), output)
    typer.echo(f"Wrote {output}", err=True)


def _plan(spec: Path, sample: int, options: RunOptions):
    from ...app.plan import plan
    from ..progress import spinner

    with spinner() as step:
        return plan(spec, sample, options, step=step)


def write_report(plan, output: Path) -> None:
    """The report for ``plan`` as HTML or Markdown, by ``output``'s suffix."""
    from .. import report as renderers

    kind = REPORT_KINDS[output.suffix.lower().lstrip(".")]
    text = renderers.render_html(plan) if kind == "html" else renderers.render_markdown(plan)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text, encoding="utf-8")
