"""`ddb2bt init`: write a commented starter spec from one of the shipped templates."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from ...templates import catalog
from ..options import check_output


def _names() -> str:
    return ", ".join(catalog.TEMPLATES)


def command(
    template: Annotated[Optional[str], typer.Option("--template", "-t", help=f"Template name: {_names()}.")] = None,
    output: Annotated[Path, typer.Option("--output", "-o", help="Where to write the spec; - prints it.")] = Path("spec.yaml"),
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file.")] = False,
    list_: Annotated[bool, typer.Option("--list", help="List the templates and exit.")] = False,
) -> None:
    """Write a commented starter spec from a template (see --list).

    Example: ddb2bt init --template single-table -o videos.yaml
    """
    if list_:
        width = max(len(name) for name in catalog.TEMPLATES)
        for entry in catalog.TEMPLATES.values():
            typer.echo(f"{entry.name:<{width}}  {entry.description}")
        return
    if template is None:
        raise typer.BadParameter(f"choose a template with --template ({_names()}), or see --list", param_hint="--template")
    text = catalog.starter_spec(template)
    if str(output) == "-":  # stdout, as `report -o -` (it wrote a file named '-')
        typer.echo(text, nl=False)
        return
    check_output(output, "--output")  # a folder, or a path under a file: one line naming the flag, nothing made
    if output.exists() and not force:
        raise FileExistsError(f"{output} already exists; pass --force to overwrite it or -o to write elsewhere")
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text, encoding="utf-8")
    typer.echo(f"Wrote {output} ({template}). Next: edit source.table and target, then `ddb2bt migrate-plan {output}`.",
               err=True)  # like every command: data on stdout, messages on stderr
