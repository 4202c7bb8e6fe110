"""`ddb2bt migrate`: run the Beam pipeline (DirectRunner here, Dataflow at scale) and reconcile it.

ddb2bt's options are listed by `--help`; every other option must be one of Beam's
(`--runner DataflowRunner --region us-central1 --temp_location gs://... --setup_file pyproject.toml`)
and goes to Beam unchanged. Anything neither knows is a usage error.
"""

from __future__ import annotations

import typer

from ...app.options import RunOptions
from ..options import SpecArg, run_options


@run_options("run", "aws", "google", "writer")
def command(ctx: typer.Context, spec: SpecArg, *, options: RunOptions) -> None:
    """Migrate the table: scan (or read the export), map, write to Bigtable, reconcile. Exit 1 if the counts do not add up.

    Beam options (--runner, --region, --temp_location, --setup_file, --direct_running_mode, --dry_run, ...) may
    follow; see docs/DATAFLOW.md.
    """
    from ...app import migrate as use_case
    from ..progress import run_with_segment_progress

    say = _stderr
    prepared = use_case.prepare(spec, options)
    say(f"migrate {prepared.source} → {prepared.target}")
    say(f"runner {prepared.runner}{' (dry run: nothing is read or written)' if prepared.dry_run else ''}; "
        f"run folder {prepared.run_dir}" + (f"; {prepared.total_segments} scan segment{'s' * (prepared.total_segments != 1)}"
           if prepared.scanning else ""))
    for assumption in prepared.assumptions:
        say(f"assumed: {assumption}")
    if prepared.dry_run or not prepared.direct:
        result = use_case.execute(prepared)
    else:
        label = f"{prepared.source} → {prepared.spec.target.table}"
        result = run_with_segment_progress(label, prepared.run_dir, lambda: use_case.execute(prepared))
    for line in render(result, str(spec)):
        typer.echo(line)
    if result.finished and not result.ok:
        raise typer.Exit(1)


def render(result, spec_path: str) -> list[str]:
    """The run's outcome as lines of text: counters, dead letters, problems, the job, what to do next."""
    p = result.prepared
    if result.state == "DRY_RUN":
        lines = [f"dry run: built {len(result.stages)} stages: {', '.join(result.stages)}"]
        lines.append(f"would stage: {result.staged_package or 'nothing (workers need ddb2bt: pass --setup_file pyproject.toml)'}")
        return lines
    lines = []
    if result.job_id:
        lines.append(f"job {result.job_id}: {result.console_url}")
    if not result.finished:
        lines.append(f"submitted; the job runs on without this command (state {result.state}). Dead letters will be in "
                     f"{p.dead_letter}; resume after a failure with: {result.resume_command(spec_path)}")
        return lines
    c = result.counters
    lines += [
        f"read {c['items_read']} items: {c['rows_written']} written ({c['cells_written']} cells, {c['bytes_written']} "
        f"bytes), {c['dead_lettered']} dead-lettered, {c['skipped']} skipped",
        f"dead letters: {p.dead_letter} ({result.dead_letter_lines} lines; holds user data)",
    ]
    lines += [f"PROBLEM: {problem}" for problem in result.problems]
    lines.append("run OK" if result.ok else "run FAILED")
    if p.scanning:
        lines.append(f"run folder: {p.run_dir} (resume with: {result.resume_command(spec_path)})")
    return lines


def _stderr(text: str) -> None:
    typer.echo(text, err=True)
