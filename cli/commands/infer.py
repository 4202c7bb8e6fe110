"""`ddb2bt infer`: draft a spec from a live table (DescribeTable + a sample), with comments."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from ...app.options import RunOptions
from ...mappers.errors import UsageError
from ..options import OutputFormat, check_output, run_options


@run_options("aws")
def command(
    table: Annotated[str, typer.Option("--table", help="DynamoDB table to describe and sample.", show_default=False)],
    sample: Annotated[int, typer.Option("--sample", min=1, help="How many items to sample.")] = 500,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Write the draft here instead of stdout (-: stdout).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing output file.")] = False,
    format: Annotated[OutputFormat, typer.Option("--format", help="text (the draft as commented YAML) or json (the "
                                                 "draft as data, its YAML, the sample size and any problem; stdout "
                                                 "either way, messages on stderr).")] = OutputFormat.text,
    *,
    options: RunOptions,
) -> None:
    """Draft a commented mapping spec from DescribeTable and a sample of the table's items.

    Example: ddb2bt infer --table Videos -o videos.yaml
    """
    from ...app.infer import infer
    from ..progress import spinner

    if output is not None and str(output) == "-":  # stdout, as `report -o -` (it wrote a file named '-')
        output = None
    check_output(output, "--output")
    if output is not None and output.exists() and not force:
        raise UsageError(f"{output} already exists", "pass --force to overwrite it or -o to write elsewhere")
    with spinner() as step:
        result = infer(table, sample, options, step=step)
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(result.text, encoding="utf-8")
        typer.echo(f"Wrote {output} from {result.sampled} sampled items. Next: review it, then "
                   f"`ddb2bt migrate-plan {output}`.", err=True)
    if format is OutputFormat.json:
        typer.echo(json.dumps({"table": table, "sampled": result.sampled, "problem": result.problem,
                               "output": str(output) if output is not None else None, "spec": result.draft.spec,
                               "yaml": result.text}, indent=2, default=str))
    elif output is None:
        typer.echo(result.text, nl=False)
    if result.problem:  # a draft is still worth reading; say what to fix
        typer.echo(f"warning: the draft needs edits before it loads: {result.problem}", err=True)
