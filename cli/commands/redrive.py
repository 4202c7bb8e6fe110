"""`ddb2bt redrive`: run a run's dead letters through the (fixed) spec again, with a reconciliation of its own."""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from ...app.options import RunOptions
from ...mappers.units import plural
from ..errors import report
from ..options import OutputFormat, check_run_dir, run_options
from .migrate import reason_lines


@run_options("google", "writer")
def command(
    run_dir: Annotated[str, typer.Argument(help="The run folder (it holds dead_letters.jsonl) or a dead-letter file.",
                                           show_default=False)],
    spec: Annotated[Optional[Path], typer.Argument(help="The fixed spec (default: the one a redrive folder keeps).",
                                                   show_default=False)] = None,
    new_run_dir: Annotated[Optional[str], typer.Option(
        "--run-dir", help="Folder of this redrive (default runs/<table>-redrive-<UTC time>).",
        show_default=False)] = None,
    dead_letter: Annotated[Optional[str], typer.Option(
        "--dead-letter", help="This redrive's dead-letter file, for what still fails (default <run "
        "dir>/dead_letters.jsonl). It holds whole items, i.e. user data.", show_default=False)] = None,
    format: Annotated[OutputFormat, typer.Option("--format", help="text, or json (the whole result).")] = OutputFormat.text,
    *,
    options: RunOptions,
) -> None:
    """Re-drive a run's dead letters through the (fixed) spec: map, write to Bigtable, reconcile. Exit 1 if the counts
    do not add up.

    The redrive is a run of its own: its folder, its dead letters (what still fails), its reconciliation. Lines that
    hold no item (an export's count mismatch) cannot be re-driven: they are listed.

    Change dead letters (RUN_DIR/tail.dead_letters.jsonl, RUN_DIR/catch-up-*.dead_letters.jsonl) are re-applied as
    changes, in stream order, where they are still the item's latest state (stop `ddb2bt tail` first); the fixed
    spec becomes the cutover's spec, and `cutover-status` no longer counts the letters resolved.

    Example: ddb2bt redrive runs/videos-20240101T000000Z videos.yaml
    """
    from ...app.redrive import redrive

    check_run_dir(new_run_dir)
    options = replace(options, run_dir=new_run_dir, dead_letter=dead_letter)
    try:
        result = redrive(run_dir, spec, options, started=lambda what: typer.echo(f"redrive {run_dir} {what}", err=True))
    except Exception as error:  # a service gone part way: the one line, and the command that redrives again
        from ...mappers.errors import ServiceError
        from ...pipelines.run.service_errors import as_ddb2bt_error

        failure = as_ddb2bt_error(error)
        if not isinstance(failure, ServiceError):
            raise
        # into a new folder: this one may hold part of its dead letters, which a new redrive refuses to mix in
        again = options.go_on("redrive", run_dir, None, without=("dead_letter",),
                              positional=(str(spec),) if spec is not None else ())
        report(failure.exit_code, [f"{failure.one_line()}; once it is back, redrive again (every letter is written "
                                   f"again, harmlessly, into a new run folder): {again}"])
    changes = not hasattr(result, "items_by_stage")
    if format is OutputFormat.json:
        typer.echo(json.dumps({**asdict(result), "ok": result.ok, "kind": "changes" if changes else "items"},
                              indent=2, sort_keys=True))
    elif getattr(result, "nothing", False):
        typer.echo(f"nothing to redrive: {result.source} holds no dead letter (no run folder made)")
        for line in not_redriven(result):
            typer.echo(line, err=True)
        for problem in result.problems:
            typer.echo(f"PROBLEM: {problem}")
    else:
        for line in [] if changes else notes(result):
            typer.echo(line, err=True)
        for line in render_changes(result) if changes else render(result):
            typer.echo(line)
    if not result.ok:
        raise typer.Exit(1)


def notes(result: Any) -> list[str]:
    """What the file held and which time cells get: context, for stderr."""
    stages = ", ".join(f"{n} {stage}" for stage, n in sorted(result.items_by_stage.items())) or "none"
    lines = [f"wrote to {result.target}", f"{result.source}: {sum(result.items_by_stage.values())} items ({stages})",
             *not_redriven(result)]
    if result.migration_time:
        lines.append(f"cells without a time of their own carry the spec's migration_time ({result.migration_time})")
    elif result.inherited_now:
        lines.append(f"cells without a time of their own carry the original run's time ({result.now_ms} ms)")
    return lines


def not_redriven(result: Any) -> list[str]:
    """The lines that hold no item, if any: they cannot be re-driven."""
    if not result.not_redriven:
        return []
    return [f"{len(result.not_redriven)} lines hold no item and cannot be re-driven (fix the source and migrate again):",
            *(f"  {reason}" for reason in result.not_redriven)]


def render(result: Any) -> list[str]:
    c = result.counters
    lines = [
        f"read {plural(c['items_read'], 'item')}: {c['rows_written']:,} written ({plural(c['cells_written'], 'cell')}, "
        f"{plural(c['bytes_written'], 'byte')}), {c['dead_lettered']:,} dead-lettered, {c['skipped']:,} skipped",
    ]
    if result.reread:  # a cutover's backfill letters: the images they hold may be stale
        lines.append(f"each item read again from DynamoDB and written as it is now: {c['changed_since']:,} changed since "
                     f"the backfill read it, {c['deleted_since']:,} deleted since (its cells deleted, not written back)")
    lines += reason_lines(result.reasons)
    lines.append(f"still failing: {result.dead_letter} ({plural(result.dead_letter_lines, 'line')}; holds user data)")
    lines += [f"PROBLEM: {problem}" for problem in result.problems]
    lines.append(f"redrive {'OK' if result.ok else 'FAILED'}; run folder: {result.run_dir}")
    return lines


def render_changes(result: Any) -> list[str]:
    lines = [f"{result.source}: {result.letters} change dead letters of {result.items} items",
             f"re-applied {result.applied} changes ({result.cells_set} cells set, {result.cells_deleted} deleted), "
             f"{result.superseded} superseded by a later change of their item (already in Bigtable or next in the "
             f"stream), {result.skipped} skipped by the spec, {result.still_failing} still failing",
             f"still failing: {result.dead_letter} ({result.still_failing} changes; holds user data)"]
    lines += [f"{len(result.not_redriven)} lines hold no change and stay unresolved:"] if result.not_redriven else []
    lines += [f"  {reason}" for reason in result.not_redriven]
    if result.spec_recorded:
        lines.append("the cutover now applies this spec (saved in its cutover.json): start `ddb2bt tail` with it")
    lines += [f"PROBLEM: {problem}" for problem in result.problems]
    lines.append(f"redrive {'OK' if result.ok else 'FAILED'}; run folder: {result.run_dir}")
    return lines
