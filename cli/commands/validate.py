"""`ddb2bt validate`: map the source again and compare with what Bigtable holds, cell by cell."""

from __future__ import annotations

from typing import Annotated

import typer

from ...app.options import RunOptions
from ..options import Sample, SpecArg, run_options

SHOWN = 20


@run_options("aws", "google")
def command(
    spec: SpecArg,
    sample: Sample = 1000,
    full: Annotated[bool, typer.Option("--full", help="Compare every item and every row (a full scan of both sides).")] = False,
    *,
    options: RunOptions,
) -> None:
    """Check the target against the source: missing rows, missing, extra or different cells. Exit 1 on any difference."""
    from ...app.validate import validate
    from ..progress import spinner

    with spinner() as step:
        result = validate(spec, sample, full, options, step=step)
    if result.spec.migration_time is None:
        typer.echo("note: the spec sets no migration_time, so cells without a time of their own carry the run's time "
                   "and will show as differences; set migration_time before migrating to validate them.", err=True)
    outcome = result.comparison
    typer.echo(f"compared with {result.target}", err=True)
    typer.echo(f"{'all' if full else 'sampled'} {result.items} items ({result.not_mapped} not mapped: skipped or dead "
               f"letters): {outcome.rows_found}/{outcome.rows_expected} rows found, "
               f"{outcome.cells_matched}/{outcome.cells_expected} cells match")
    if outcome.ok:
        typer.echo("OK: Bigtable holds exactly what the spec maps these items to.")
        return
    counts = ", ".join(f"{n} {kind.replace('_', ' ')}" for kind, n in sorted(outcome.counts().items()))
    typer.echo(f"DIFFERENT: {counts}")
    for difference in outcome.differences[:SHOWN]:
        typer.echo(f"  {difference.describe()}")
    if len(outcome.differences) > SHOWN:
        typer.echo(f"  … and {len(outcome.differences) - SHOWN} more")
    raise typer.Exit(1)
