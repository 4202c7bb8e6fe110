"""`ddb2bt schema`: print the JSON Schema of the spec, for editors and CI."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer


def command(
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Write to this file instead of stdout.")] = None,
) -> None:
    """Print the JSON Schema of the mapping spec (point `$schema` at it for editor completion).

    Example: ddb2bt schema > ddb2bt.schema.json
    """
    from ...mappers.schema import json_schema_text

    text = json_schema_text()
    if output is None or str(output) == "-":  # -: stdout, as `report -o -` (it wrote a file named '-')
        typer.echo(text, nl=False)
    else:
        from ..options import check_output

        check_output(output, "--output")  # a folder, or a path under a file: one line naming the flag, nothing made
        output.parent.mkdir(parents=True, exist_ok=True)  # as init, infer, report and migrate-plan --out do
        output.write_text(text, encoding="utf-8")
        typer.echo(f"Wrote {output}", err=True)
