"""`ddb2bt migrate`: say what will happen, ask, run the Beam pipeline (DirectRunner here, Dataflow at scale), reconcile.

ddb2bt's options are listed by `--help`; every other option must be one of Beam's
(`--runner DataflowRunner --region us-central1 --temp_location gs://... --setup_file pyproject.toml`)
and goes to Beam unchanged. Anything neither knows is a usage error.

Everything but the result goes to stderr: where the writes go (first), the summary, the question,
the progress. The result (the reconciliation, or `--format json`) goes to stdout.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from ...app.options import RunOptions
from ...mappers.errors import Interrupted, ServiceError, UsageError
from ...mappers.units import plural
from ..errors import ctrl_c_says, report
from ..options import OutputFormat, run_options

if TYPE_CHECKING:
    from ...app.migrate import MigrateResult, PreparedRun


@run_options("run", "aws", "google", "writer")
def command(
    ctx: typer.Context,
    spec: Annotated[Optional[Path], typer.Argument(help="The mapping spec (YAML or JSON); with --plan, the plan's own "
                                                   "by default.", show_default=False)] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Start without asking (needed when stdin is not a "
                                      "terminal).")] = False,
    plan: Annotated[Optional[Path], typer.Option("--plan", help="A plan saved by `ddb2bt migrate-plan SPEC --out "
                                                 "FILE`: run only if spec, source and target are still what it saw "
                                                 "(else exit 2 naming what changed); no question asked.",
                                                 show_default=False)] = None,
    format: Annotated[OutputFormat, typer.Option("--format", help="text or json (the result object on stdout; "
                                                 "everything else stays on stderr).")] = OutputFormat.text,
    *,
    options: RunOptions,
) -> None:
    """Migrate the table: scan (or read the export), map, write to Bigtable, reconcile. Exit 1 if the counts do not add up.

    Says first where it writes and what it will do (target changes, segments, read budget, items to read), then asks
    (--yes skips; without a terminal --yes is required). Ctrl-C stops after the batch in flight and prints the resume
    command (exit 130); a second Ctrl-C quits at once. `--resume` alone continues the latest run of this spec under
    runs/. Beam options (--runner, --region, --temp_location, --setup_file, --direct_running_mode, --dry_run, ...)
    may follow and go to Beam unchanged; see docs/DATAFLOW.md.

    Example: ddb2bt migrate videos.yaml --plan plan.json
    """
    with ctrl_c_says("interrupted before the migration started: nothing was written (no table, family or checkpoint "
                     "made; the source was only read)", lambda: f"run it again: {_again(spec, plan, yes, format, options)}"):
        spec, prepared, reviewed = _before_start(ctx, spec, plan, yes, options)
    from ...app import migrate as use_case

    extra = ("--yes",) if yes else ()
    if prepared.dry_run or not prepared.direct:
        result = use_case.execute(prepared)
    else:
        result = _run_here(prepared, str(spec), extra, reviewed.estimated_items if reviewed else None)
    if format is OutputFormat.json:
        typer.echo(json.dumps(as_json(result, str(spec), extra), indent=2))
    else:
        for line in render(result, str(spec), extra):
            typer.echo(line)
    if result.interrupted:
        raise Interrupted(result.problems[0], f"resume with: {result.resume_command(str(spec), extra)}"
                          if prepared.resumable else "run it again")
    if result.error is not None:  # after the reconciliation: the one line, and how to go on
        report(result.error.exit_code, [failure_line(result, str(spec), extra)])
    if result.finished and not result.ok:
        raise typer.Exit(1)


def _before_start(ctx: typer.Context, spec: Path | None, plan: Path | None, yes: bool,
                  options: RunOptions) -> tuple[Path, PreparedRun, Any]:
    """Everything before the run, which writes nothing: the plan's spec, the checks, what it will do, the question."""
    from ...app import migrate as use_case
    from ...app import review
    from ..progress import quiet_workers, say

    if not (ctx.obj or {}).get("debug"):
        quiet_workers()
    reviewed = review.Reviewed.from_file(plan) if plan is not None else None  # a bad file fails before any reading
    if spec is None:  # the plan says which spec it reviewed; check() still refuses it if it changed since
        if reviewed is None or plan is None:
            raise UsageError("missing the SPEC argument", "`ddb2bt migrate SPEC` (or `--plan FILE` saved by "
                             "`ddb2bt migrate-plan SPEC --out FILE`)")
        spec = reviewed.spec_path(plan)
        say(f"spec {spec} (the one the plan in {plan} reviewed)")
    prepared = use_case.prepare(spec, options, where=say)
    for line in summary(prepared):
        say(line)
    if reviewed is not None and plan is not None and not prepared.dry_run:
        review.check(reviewed, review.reviewed(prepared.spec, prepared.source_description, prepared.target_diff), plan)
        say(f"the plan in {plan} is still what was reviewed")
    elif not prepared.dry_run and not yes:
        _confirm()
    return spec, prepared, reviewed


def _again(spec: Path | None, plan: Path | None, yes: bool, format: OutputFormat, options: RunOptions) -> str:
    """The command as it was given (its options as ddb2bt reads them), to run again."""
    extra = [*(["--plan", str(plan)] * (spec is not None and plan is not None)), *(["--yes"] * yes),
             *(["--format", "json"] * (format is OutputFormat.json))]
    if spec is None:  # `ddb2bt migrate --plan FILE`: the plan names the spec
        return options.go_on("migrate", "--plan", options.run_dir, *extra, positional=(str(plan),),
                             resume=options.resume)
    return options.go_on("migrate", spec, options.run_dir, *extra, resume=options.resume)


def _confirm() -> None:
    if not sys.stdin.isatty():
        raise UsageError("migrate asks before it writes, and stdin is not a terminal",
                         "pass --yes to start without asking (or --plan FILE saved by `ddb2bt migrate-plan --out`)")
    if not typer.confirm("Start the migration?", default=False, err=True):
        typer.echo("not started: nothing was written", err=True)
        raise typer.Exit(1)


def _run_here(prepared: PreparedRun, spec_path: str, extra: tuple[str, ...], estimated: int | None) -> MigrateResult:
    """A local run with live progress on stderr; Ctrl-C stops it at the next batch."""
    from ...app import migrate as use_case
    from ...app.runs import segments_done, worker_log
    from ..progress import LiveRun, run_live

    def segments() -> tuple[int, int] | None:
        return (segments_done(prepared.run_dir), prepared.total_segments) if prepared.scanning else None

    def quit_line() -> str:
        return f"resume with: {use_case.MigrateResult(prepared, 'INTERRUPTED').resume_command(spec_path, extra)}"

    return run_live(LiveRun(
        label=f"{prepared.source} → {prepared.spec.target.table}",
        run=lambda: use_case.execute(prepared),
        totals=lambda: use_case.live_totals(prepared),
        segments=segments,
        stop=lambda: use_case.request_stop(prepared),
        expected=prepared.expected_items if prepared.expected_items is not None else estimated,
        on_force_quit=quit_line if prepared.resumable else None,
        worker_log=worker_log(prepared),
        abandon=lambda stopped, why: use_case.abandon(prepared, stopped, why),
    ))


def summary(p: PreparedRun) -> list[str]:
    """What the run will do, before it starts (stderr): runner, folder, segments, resume, source, read budget, target."""
    from ...app.runs import read_pace, worker_log
    from ...mappers.units import human_duration, human_size
    from ..plan_text import target_lines

    unit = "scan segment" if p.scanning else "export data file"
    counted = p.scanning or (p.resumable and not p.dry_run)  # a dry run does not read an export's manifest
    segments = f"; {p.total_segments} {unit}{'s' * (p.total_segments != 1)}" if counted else ""
    lines = [f"runner {p.runner}{' (dry run: nothing is read or written)' if p.dry_run else ''}; "
             f"run folder {p.run_dir}{segments}"]
    if p.found_run_dir:
        lines.append(f"resuming the latest run of this spec under runs/: {p.run_dir}")
    if p.options.resume and p.resumable and not p.dry_run:
        part_way = (f"; {p.segments_part_way} go on from their savepoint (the pages before it are stored)"
                    if p.segments_part_way else "")
        lines.append(f"resume: {p.segments_done} of {p.total_segments} "
                     f"{'segments' if p.scanning else 'export data files'} already stored; the rest are read{part_way}")
    lines += [f"assumed: {assumption}" for assumption in p.assumptions]
    source = p.source_description
    if p.expected_items is not None:
        size = f", {human_size(source.size_bytes)} in the table" if source is not None and source.size_bytes else ""
        lines.append(f"source: {p.expected_items:,} items to read (from {p.expected_from}){size}")
    elif source is not None:
        lines.append("source: item count unknown (DescribeTable reports 0; it refreshes about every six hours)")
    pace = read_pace(p)
    if pace is not None:
        basis = "provisioned" if pace.provisioned else "on-demand: the assumed source.on_demand_rcu"
        at_once = f"{pace.segments_in_flight} segment{'s' * (pace.segments_in_flight != 1)} at once"
        lines.append(f"read budget: {pace.budget:.0%} of {pace.capacity_rcu:,.0f} RCU ({basis}) = {pace.rate:,.0f} "
                     f"RCU/s: {pace.per_segment:,.0f} per segment, {at_once}"
                     + (f"; the scan takes at least {human_duration(pace.scan_seconds)} at that pace"
                        if pace.scan_seconds is not None else ""))
    log = worker_log(p)
    if log is not None:
        lines.append(f"worker processes write their own output to {log}")
    if p.target_diff is not None:
        lines += target_lines(p.target_diff, header=False)
    return lines


def render(result: MigrateResult, spec_path: str, extra: tuple[str, ...] = ()) -> list[str]:
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
    early = result.ended_early
    lines.append(f"read {plural(c['items_read'], 'item')}{' so far' if early else ''}: {c['rows_written']:,} written "
                 f"({'' if result.cells_exact else 'at most '}{plural(c['cells_written'], 'cell')}, "
                 f"{plural(c['bytes_written'], 'byte')}), "
                 f"{c['dead_lettered']} dead-lettered, "
                 f"{c['skipped']} skipped")
    unstored = c["items_read"] - c["rows_written"] - c["dead_lettered"] - c["skipped"]
    if early and unstored > 0:
        lines.append(f"{unstored} items read were not stored when the run ended ("
                     + ("--resume reads them again)" if p.resumable else "run it again)"))
    lines += reason_lines(result.reasons)
    if p.scanning and not early and "scan_pages" in c:
        lines.append(f"scan: {plural(c.get('scan_pages', 0), 'page')}, {c.get('consumed_rcu', 0):,} RCU consumed, "
                     f"{plural(c.get('scan_retries', 0), 'retry', 'retries')}, "
                     f"{plural(c.get('throttled_pages', 0), 'throttled page')}")
    if result.segments_done is not None:
        lines.append(f"{'segments' if p.scanning else 'export data files'}: {result.segments_done} of "
                     f"{p.total_segments} stored")
    kept = max(result.dead_letter_lines, 0)
    unwritten = c["dead_lettered"] - kept if early and result.dead_letter_lines >= 0 else 0
    # A resumed run's file covers every attempt (the earlier ones' segments are not read again), its counters this one
    earlier = kept - c["dead_lettered"] if p.options.resume and not early else 0
    if result.dead_letters_unjoined:  # a full disk: the file is as it was; the letters are in its part files
        count = "an unknown number of" if result.dead_letter_lines < 0 else f"{result.dead_letter_lines}"
        lines.append(f"dead letters: {count} in {p.dead_letter}.parts, not joined into {p.dead_letter} "
                     f"({result.dead_letters_unjoined}; --resume joins them; "
                     + (f"{unwritten} more dead-lettered items were not written before the run stopped: running it "
                        "again reads them again; " if unwritten > 0 else "") + "holds user data)")
        return lines
    lines.append(f"dead letters: {p.dead_letter} ({result.dead_letter_lines} lines; "
                 + (f"{unwritten} more dead-lettered items were not written before the run stopped: running it "
                    "again reads them again; " if unwritten > 0 else "")
                 + (f"{earlier} of them dead-lettered by earlier attempts of this run; " if earlier > 0 else "")
                 + "holds user data)")
    if early:  # the CLI ends with the one line that says why, and how to go on
        return lines
    if result.dead_letter_lines > c.get("export_count_mismatch", 0):  # a count mismatch's line holds no item
        lines.append(f"fix the spec or the data (the reasons above say which), then re-drive them: "
                     f"{redrive_command(p.dead_letter, spec_path, p.options)}")
    lines += [f"PROBLEM: {problem}" for problem in result.problems]
    lines.append("run OK" if result.ok else "run FAILED")
    if p.resumable:  # a finished run needs no resume command: only the folder (redrive, validate, cutover use it)
        lines.append(f"run folder: {p.run_dir}" + ("" if result.ok else
                                                   f" (resume with: {result.resume_command(spec_path, extra)})"))
    return lines


def redrive_command(dead_letter: str, spec_path: str, options: RunOptions | None = None) -> str:
    """`ddb2bt redrive RUN SPEC`, quoted for a shell: the run folder when the dead letters are its own file in it; with
    the run's options that redrive takes (Bigtable's and the writer's: the redrive writes where the run wrote)."""
    import os

    from ...app.options import RUN_OPTIONS

    folder, name = os.path.split(dead_letter)
    where = folder if name == "dead_letters.jsonl" and folder else dead_letter
    others = tuple(option.name for option in RUN_OPTIONS if option.group not in ("google", "writer"))
    return (options or RunOptions()).go_on("redrive", where, None, without=others, positional=(spec_path,))


def reason_lines(reasons: dict[str, dict[str, int]]) -> list[str]:
    """One line per kind that has any: `skipped 20: 10 <reason>, 10 <reason>`, biggest first (migrate, redrive)."""
    lines = []
    for kind, label in (("skipped", "skipped"), ("dead_lettered", "dead-lettered")):
        found = reasons.get(kind)
        if found:
            lines.append(f"{label} {sum(found.values())}: " + ", ".join(f"{n} {reason}" for reason, n in found.items()))
    return lines


def failure_line(result: MigrateResult, spec_path: str, extra: tuple[str, ...] = ()) -> str:
    """What ended a failed run, on one line, with how to go on: the exact resume command after a dependency failed;
    any other error (too many dead letters, a broken export) says itself what to fix first."""
    assert result.error is not None
    from ...pipelines.run.dead_letters import TooManyDeadLetters

    from ...pipelines.dynamodb.export import ExportError

    line = result.error.one_line()
    if isinstance(result.error, TooManyDeadLetters) and result.prepared.resumable:
        return f"{line}: {result.resume_command(spec_path, extra, accept_dead_letters=True)}"
    if isinstance(result.error, ExportError) and result.prepared.resumable:  # the files not stored are read again
        return f"{line}; once the export's files are whole again, resume with: {result.resume_command(spec_path, extra)}"
    if not isinstance(result.error, ServiceError):
        return line
    if result.prepared.resumable:
        return f"{line}; resume with: {result.resume_command(spec_path, extra)}"
    return f"{line}; run it again (a --sample run keeps no checkpoint)"


def as_json(result: MigrateResult, spec_path: str, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    """The result as one JSON object, every value in full."""
    p = result.prepared
    return {
        "state": result.state, "ok": result.ok, "finished": result.finished, "interrupted": result.interrupted,
        "source": p.source, "target": p.target, "runner": p.runner, "dry_run": p.dry_run, "run_dir": p.run_dir,
        "dead_letter": p.dead_letter, "dead_letter_lines": result.dead_letter_lines,
        "dead_letters_unjoined": result.dead_letters_unjoined or None, "counters": result.counters,
        "cells_written_exact": result.cells_exact,
        "problems": result.problems, "skipped_by_reason": result.reasons.get("skipped", {}),
        "dead_lettered_by_reason": result.reasons.get("dead_lettered", {}),
        "error": None if result.error is None else {"kind": type(result.error).__name__,
                                                    "message": result.error.one_line(),
                                                    "exit_code": result.error.exit_code},
        "segments": {"total": p.total_segments, "stored": result.segments_done} if p.resumable else None,
        "resume_command": result.resume_command(spec_path, extra) if p.resumable else None,
        "job_id": result.job_id, "console_url": result.console_url, "stages": list(result.stages),
        "staged_package": result.staged_package, "target_diff": p.target_diff.as_dict() if p.target_diff else None,
    }
