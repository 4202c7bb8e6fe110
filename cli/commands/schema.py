"""`ddb2bt schema`: print the JSON Schema of the spec, for editors and CI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer


def command(
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Write to this file instead of stdout.")] = None,
) -> None:
    """Print the JSON Schema of the mapping spec (point `$schema` at it for editor completion)."""
    from ...mappers.spec import MappingSpec

    text = json.dumps(MappingSpec.model_json_schema(by_alias=True), indent=2) + "\n"
    if output is None:
        typer.echo(text, nl=False)
    else:
        output.write_text(text, encoding="utf-8")
        typer.echo(f"Wrote {output}", err=True)
