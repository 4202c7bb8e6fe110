"""`ddb2bt migrate-plan` and `ddb2bt report`: one plan (a dry run over a sample), two renderings.

Neither writes to Bigtable; both read only a sample of the source.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from .. import inputs
from ..options import EndpointUrl, OutputFormat, Profile, Region, Sample, SpecArg

DEFAULT_SAMPLE = 1000


def migrate_plan(
    spec: SpecArg,
    sample: Sample = DEFAULT_SAMPLE,
    format: Annotated[OutputFormat, typer.Option("--format", help="text (tables) or json (the plan object).")] = OutputFormat.text,
    strict: Annotated[bool, typer.Option("--strict", help="Exit 1 on warnings too, not only errors.")] = False,
    endpoint_url: EndpointUrl = None,
    region: Region = None,
    profile: Profile = None,
) -> None:
    """Dry run: map a sample with the spec and show rows, findings and estimates. Writes nothing.

    Exit 0 when clean, 1 when the plan has errors (with --strict, warnings too), 2 for a bad spec.
    """
    plan = inputs.plan_for(inputs.load(spec, endpoint_url, region, profile), sample)
    if format is OutputFormat.json:
        typer.echo(plan.model_dump_json(indent=2))
    else:
        from rich.console import Console

        from ..plan_text import render_text

        render_text(plan, Console())
    if plan.has_errors or (strict and plan.has_warnings):
        raise typer.Exit(1)


class ReportFormat(str, Enum):
    html = "html"
    md = "md"


def report(
    spec: SpecArg,
    output: Annotated[Path, typer.Option("--output", "-o", help="report.html or report.md (the extension picks the format).", show_default=False)],
    sample: Sample = DEFAULT_SAMPLE,
    endpoint_url: EndpointUrl = None,
    region: Region = None,
    profile: Profile = None,
) -> None:
    """Write the schema translation report (HTML or Markdown) for the spec over a sample."""
    suffix = output.suffix.lower().lstrip(".")
    kind = {"html": ReportFormat.html, "htm": ReportFormat.html, "md": ReportFormat.md, "markdown": ReportFormat.md}.get(suffix)
    if kind is None:
        raise typer.BadParameter(f"{output} must end in .html or .md", param_hint="--output")
    plan = inputs.plan_for(inputs.load(spec, endpoint_url, region, profile), sample)
    write_report(plan, output, kind)
    typer.echo(f"Wrote {output}")


def write_report(plan, output: Path, kind: ReportFormat) -> None:
    from .. import report as renderers

    text = renderers.render_html(plan) if kind is ReportFormat.html else renderers.render_markdown(plan)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text, encoding="utf-8")
