"""`ddb2bt migrate`: run the Beam pipeline (DirectRunner here, Dataflow at scale) and reconcile it.

Anything after `--` goes to Beam unchanged (`-- --project p --region r --temp_location gs://...`).
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from .. import inputs
from ..progress import run_with_segment_progress
from ..options import EndpointUrl, Profile, Region, SpecArg


class Runner(str, Enum):
    direct = "DirectRunner"
    dataflow = "DataflowRunner"


def command(
    ctx: typer.Context,
    spec: SpecArg,
    runner: Annotated[Runner, typer.Option("--runner", help="Beam runner.")] = Runner.direct,
    run_dir: Annotated[Optional[str], typer.Option("--run-dir", help="Checkpoint and dead-letter folder (default runs/<table>-<time>).")] = None,
    dead_letter: Annotated[Optional[str], typer.Option("--dead-letter", help="Dead-letter file (local, gs://, s3://); it holds whole items.")] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Continue the run in --run-dir, skipping completed scan segments.")] = False,
    total_segments: Annotated[Optional[int], typer.Option("--total-segments", min=1, help="Parallel scan segments (overrides the spec).")] = None,
    sample: Annotated[Optional[int], typer.Option("--sample", min=1, help="Migrate only the first N items (a trial run).")] = None,
    endpoint_url: EndpointUrl = None,
    region: Region = None,
    profile: Profile = None,
) -> None:
    """Migrate the table: scan (or read the export), map, write to Bigtable, reconcile. Exit 1 if the counts do not add up."""
    from ...pipelines.options import default_run_dir
    from ...pipelines.pipeline import run_migration

    mapping = inputs.load(spec, endpoint_url, region, profile)
    beam_args = [f"--runner={runner.value}", *ctx.args]
    run_dir = run_dir or default_run_dir(mapping.target.table)
    label = f"{mapping.source.table or 'export'} → {mapping.target.table}"
    result = run_with_segment_progress(
        label, run_dir,
        lambda: run_migration(
            mapping, run_dir=run_dir, dead_letter=dead_letter, resume=resume, total_segments=total_segments,
            sample=sample, pipeline_args=beam_args,
        ),
    )
    typer.echo(result.report())
    if result.run_dir:
        typer.echo(f"run folder: {Path(result.run_dir)} (resume with --resume --run-dir {result.run_dir})")
    if not result.ok:
        raise typer.Exit(1)

