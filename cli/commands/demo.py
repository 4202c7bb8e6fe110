"""`ddb2bt demo`: the three worked examples end to end on local servers (see :mod:`ddb2bt.app.demo`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def command(
    out: Annotated[Path, typer.Option("--out", help="Folder for specs, reports and dead letters (a folder per "
                                      "example; a re-run replaces those, nothing else).")] = Path("out/demo"),
) -> None:
    """Run the three worked examples end to end on local servers (moto + Bigtable emulator).

    Example: ddb2bt demo
    """
    from ...app.demo import run_demo
    from ..report import write_report

    outcomes = run_demo(out, typer.echo, write_report)
    typer.echo(f"\nServers stopped. Reports: {out}/<example>/report.html (and report.md); specs and dead letters are "
               "there too.")
    failed = [outcome.name for outcome in outcomes if not outcome.ok]
    if failed:
        typer.echo(f"Something did not add up for: {', '.join(failed)}", err=True)
        raise typer.Exit(1)
    typer.echo("Next: `ddb2bt init --list` to start your own spec, or `ddb2bt infer --table YOUR_TABLE`. "
               "The venv's ddb2bt is .venv/bin/ddb2bt (or `source .venv/bin/activate`).")
