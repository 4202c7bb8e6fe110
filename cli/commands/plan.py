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
    from ...app.plan import plan_against_target
    from ..progress import say, spinner

    check_output(out, "--out")
    with spinner() as step:
        result = plan_against_target(spec, sample, options, step=step, where=say)
    if format is OutputFormat.json:
        typer.echo(json.dumps(result.to_json(), indent=2))
    else:
        from rich.console import Console

        from ..plan_text import render_text

        render_text(result.plan, Console(), result.target)
    if out is not None:
        result.reviewed.to_file(out, str(spec), result.to_json())
        say(f"Wrote {out}" + ("" if result.reviewed.ok else " (the plan has errors: `migrate --plan` will refuse it)"))
    if result.has_errors or (strict and result.has_warnings):
        raise typer.Exit(1)

