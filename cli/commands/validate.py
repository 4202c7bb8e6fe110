"""`ddb2bt validate`: map the source again and compare with what Bigtable holds, cell by cell."""

from __future__ import annotations

import time
from typing import Annotated

import typer

from .. import inputs
from ..progress import working
from ..options import EndpointUrl, Profile, Region, Sample, SpecArg

SHOWN = 20


def check(mapping, sample: int, full: bool):
    """(items, map results, Comparison) for a loaded spec: the whole of validate but the printing."""
    from ...mappers.compiler import compile_spec
    from ...mappers.validate import compare, expected_rows
    from ...pipelines.bigtable_read import read_cells

    if mapping.source.export is None and mapping.source.partition_key is None:
        source = inputs.source_description(mapping)
        mapping = mapping.with_keys(source.partition_key, source.sort_key)
    with working("reading the source…"):
        items = inputs.read_all(mapping) if full else inputs.read_sample(mapping, sample)
    with working(f"mapping {len(items)} items and reading their rows from Bigtable…"):
        results = list(compile_spec(mapping).map_items(items))
        expected = expected_rows(results)
        actual = dict(read_cells(mapping.target, None if full else list(expected)))
    return items, results, compare(expected, actual, mapping.target.families, full=full, now_us=int(time.time() * 1_000_000))


def command(
    spec: SpecArg,
    sample: Sample = 1000,
    full: Annotated[bool, typer.Option("--full", help="Compare every item and every row (a full scan of both sides).")] = False,
    endpoint_url: EndpointUrl = None,
    region: Region = None,
    profile: Profile = None,
) -> None:
    """Check the target against the source: missing rows, missing, extra or different cells. Exit 1 on any difference."""
    mapping = inputs.load(spec, endpoint_url, region, profile)
    if mapping.migration_time is None:
        typer.echo("note: the spec sets no migration_time, so cells without a time of their own carry the run's time "
                   "and will show as differences; set migration_time before migrating to validate them.", err=True)
    items, results, outcome = check(mapping, sample, full)
    skipped = len(items) - sum(1 for r in results if type(r).__name__ == "MappedRow")
    typer.echo(f"{'all' if full else 'sampled'} {len(items)} items ({skipped} not mapped: skipped or dead letters): "
               f"{outcome.rows_found}/{outcome.rows_expected} rows found, "
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
