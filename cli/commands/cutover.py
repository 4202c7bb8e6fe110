"""`ddb2bt catch-up`, `ddb2bt tail`, `ddb2bt cutover-status`: carry the changes made during the backfill.

One verb per phase, all on the backfill's run folder (docs/CUTOVER.md): apply incremental exports
in sequence, then follow the stream until the cutover, and ask whether the target is ready.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Annotated, Optional

import typer

from ...app.options import RunOptions
from ...mappers.errors import Interrupted
from ...mappers.units import plural
from ..errors import ctrl_c_says, report
from ..options import OutputFormat, SpecArg, run_options

RunDir = Annotated[str, typer.Option("--run-dir", help="The backfill's run folder (the one `ddb2bt migrate` "
                                     "used); it holds the cutover timeline.", show_default=False)]


def _echo(lines: list[str]) -> None:
    for line in lines:
        typer.echo(line)


def _counters(c: dict[str, int]) -> str:
    return (f"{c['changes_read']} changes: {c['changes_applied']} applied ({c['cells_set']} cells set, "
            f"{c['cells_deleted']} deleted), {c['changes_dead_lettered']} dead-lettered, {c['changes_skipped']} skipped")


@run_options("aws", "google", "writer")
def catch_up(ctx: typer.Context, spec: SpecArg, run_dir: RunDir,
             export: Annotated[str, typer.Option("--export", help="The incremental export folder (local, gs://, "
                                                 "s3://): NEW_AND_OLD_IMAGES, starting where the timeline ends.",
                                                 show_default=False)], *,
             options: RunOptions) -> None:
    """Apply one DynamoDB incremental export to Bigtable as a batch Beam job (any number, in sequence).

    Beam options (--runner DataflowRunner ...) may follow, as with `migrate`. Exit 1 if the counts do not add up.

    Example: ddb2bt catch-up videos.yaml --run-dir RUN --export s3://bucket/AWSDynamoDB/01234-abcd
    """
    from ...app import cutover
    from ...pipelines.cutover.timeline import us_to_iso
    from ..progress import watching

    live: dict[str, int | None] = {}

    def figures() -> str:
        if "total" not in live:
            return "checking the export"
        read = live["done"] if "done" in live else cutover.catch_up_progress(run_dir).get("changes_read", 0)
        return changes_text(read or 0, live["total"])

    try:
        with watching(f"catch-up of export {export.rstrip('/').rsplit('/', 1)[-1]}", figures):
            result = cutover.catch_up(spec, export, dataclasses.replace(options, run_dir=run_dir),
                                      started=lambda total: live.update(total=total))
            live["done"] = result.counters["changes_read"]
    except KeyboardInterrupt:  # typer would exit 130 without a word
        raise Interrupted(f"catch-up stopped by Ctrl-C; the timeline in {run_dir} advances only once the whole export "
                          "is applied", "a job on Dataflow keeps running (let it end, or cancel it); then run the "
                          "same command again (what was applied is applied again, harmlessly): "
                          f"{options.go_on('catch-up', spec, run_dir, '--export', export)}") from None
    except Exception as error:  # a service gone: where it stopped, then the one line with the command that goes on
        from ...mappers.errors import ServiceError
        from ...pipelines.run.service_errors import as_ddb2bt_error

        failure = as_ddb2bt_error(error)
        if not isinstance(failure, ServiceError):
            raise
        if "total" in live:
            _echo([f"catch-up stopped: {figures()}; the timeline in {run_dir} did not advance"])
        report(failure.exit_code, [f"{failure.one_line()}; once it is back, run the same command again (what was "
                                   "applied is applied again, harmlessly): "
                                   f"{options.go_on('catch-up', spec, run_dir, '--export', export)}"])

    _echo([f"catch-up {result.export_id}: {us_to_iso(result.from_us)} .. {us_to_iso(result.to_us)} "
           f"in {result.seconds:.1f} s",
           _counters(result.counters),
           f"dead letters: {result.dead_letter} ({result.dead_letter_lines} lines; holds user data)"]
          + [f"PROBLEM: {problem}" for problem in result.problems]
          + [f"timeline applied up to {us_to_iso(result.to_us)}" if result.ok else
             "catch-up FAILED: the timeline did not advance; run the same export again once fixed"])
    if not result.ok:
        raise typer.Exit(1)


def changes_text(read: int, total: int | None) -> str:
    """`1,200/3,000 changes read`, or `1,200 changes read (total unknown)`; never a share of more than the total."""
    if total is None:
        return f"{read:,} changes read (total unknown)"
    if read > total:
        return f"{read:,} changes read (more than the {total:,} the export lists)"
    return f"{read:,}/{total:,} changes read"


@run_options("aws", "google", "writer")
def tail(spec: SpecArg, run_dir: RunDir,
         until_idle: Annotated[Optional[float], typer.Option(
             "--until-idle", min=0, help="Stop once no change arrived for this many seconds (default: run until "
             "interrupted).")] = None,
         max_seconds: Annotated[Optional[float], typer.Option(
             "--max-seconds", min=0, help="Stop after this many seconds.")] = None,
         poll_seconds: Annotated[float, typer.Option("--poll-seconds", min=0.01,
                                                     help="Pause between polls of an idle stream.")] = 1.0, *,
         options: RunOptions) -> None:
    """Follow the table's DynamoDB stream into Bigtable from where the timeline ends, until you cut over.

    A plain long-running process: stop it with Ctrl-C (or kill it) and start it again; it continues from
    its checkpoints in the run folder.

    Example: ddb2bt tail videos.yaml --run-dir RUN
    """
    own = ([f"--until-idle={until_idle:g}"] if until_idle is not None else []) + \
        ([f"--max-seconds={max_seconds:g}"] if max_seconds is not None else []) + \
        ([f"--poll-seconds={poll_seconds:g}"] if poll_seconds != 1.0 else [])  # as given: the same kind of run goes on
    start_again = f"start it again: {options.go_on('tail', spec, run_dir, *own)}"
    with ctrl_c_says("tail stopped by Ctrl-C while it was starting: nothing was read from the stream or applied",
                     start_again):
        from ...app import cutover

        stops = ([f"idle for {until_idle:g} s"] if until_idle is not None else []) + \
            ([f"after {max_seconds:g} s"] if max_seconds is not None else []) + ["at Ctrl-C"]
        typer.echo(f"tail {spec} --run-dir {run_dir}: following the table's stream into Bigtable; it stops "
                   f"{' or '.join(stops)} and says what it applied", err=True)  # a long silent run otherwise
    try:
        result = cutover.tail(spec, dataclasses.replace(options, run_dir=run_dir), until_idle_s=until_idle,
                              max_seconds=max_seconds, poll_s=poll_seconds)
    except cutover.TailNotStarted as stopped:
        raise Interrupted(str(stopped), start_again) from None
    _echo([f"tail stopped after {result.seconds:.1f} s: {_counters(result.counters)}; "
           f"{result.counters.get('ttl_deletes', 0)} of them deletes by DynamoDB's TTL",
           f"{plural(len(result.shards), 'shard')}, {sum(s['done'] for s in result.shards.values())} finished; "
           f"dead letters: {result.dead_letter} ({result.dead_letter_lines} lines)"]
          + [f"PROBLEM: {problem}" for problem in result.problems])
    if result.interrupted:
        raise Interrupted(f"tail stopped by Ctrl-C; what it applied is saved in {run_dir}/tail.json",
                          f"start it again with the same options to go on: {options.go_on('tail', spec, run_dir, *own)}")
    if result.error is not None:  # after what it applied: the one line, and the command that goes on
        report(result.error.exit_code, [f"{result.error.one_line()}; what the tail applied is saved in "
                                        f"{run_dir}/tail.json: once it is back, go on with: "
                                        f"{options.go_on('tail', spec, run_dir, *own)}"])
    if not result.ok:
        raise typer.Exit(1)


@run_options("aws", "google")
def cutover_status(run_dir: RunDir,
                   lag_threshold: Annotated[float, typer.Option(
                       "--lag-threshold", min=0, help="Seconds without a heartbeat after which a tail that still has "
                       "records to apply is called stopped.")] = 30.0,
                   sample: Annotated[int, typer.Option("--sample", min=0, help="Items drawn at random across the whole "
                                                       "table for the parity check (every item changed since the last "
                                                       "check is compared as well).")] = 100,
                   output: Annotated[OutputFormat, typer.Option("--format", help="text, or json for automation.")]
                   = OutputFormat.text, *,
                   options: RunOptions) -> None:
    """READY to cut over, or not, and why: four conditions (five with access_patterns), each checked and shown
    with its counts.

    stream: the stream itself (read-only, from the tail's checkpoint) holds no record the tail has not applied;
    dead letters: no change dead letter of the tail or a catch-up is unresolved, and every item the backfill
    dead-lettered is deleted since, skipped by the spec or in Bigtable (checked now); tail: alive (a heartbeat per page)
    or stopped with nothing left; parity: random items across the table and every item changed since the last check
    equal their Bigtable rows; access patterns (when the spec declares them): each returns the same items from
    Bigtable as from DynamoDB. Stop writes to DynamoDB first (docs/CUTOVER.md).

    Exit 0: READY. Exit 1: NOT READY (a script can wait for 0). Exit 2: no run folder there, or no cutover timeline
    in it yet (run `ddb2bt catch-up` or `ddb2bt tail` with it first). Exit 3: AWS or Bigtable unreachable.

    Example: ddb2bt cutover-status --run-dir RUN
    """
    from ...app import cutover

    found = cutover.status(run_dir, lag_threshold_s=lag_threshold, sample=sample, options=options)
    if output is OutputFormat.json:
        typer.echo(json.dumps(found.to_json(), indent=2))
    else:
        _echo(render_status(found))
    if not found.ready:
        raise typer.Exit(1)


def render_status(found) -> list[str]:
    lines = []
    for phase in found.phases:
        extra = f", {_counters(phase['counters'])}" if phase.get("counters") else ""
        lines.append(f"{phase['phase']:9} {phase['state']:8} applied up to {phase.get('applied_up_to') or '-'}{extra}")
    for shard in found.shards:
        unread = (f"{'≥' if shard.capped else ''}{shard.unread} unread, oldest {shard.oldest_unread} "
                  f"({shard.behind_s:.1f} s behind)" if shard.unread else "0 unread")
        lines.append(f"  shard {shard.shard}: {'finished' if shard.done else unread}, "
                     f"last applied {shard.last_record or '-'}")
    for name in sorted({*found.dead_letters, *found.unresolved_dead_letters}):
        left = found.unresolved_dead_letters.get(name)
        count = found.dead_letters.get(name, "in part files")
        lines.append(f"dead letters {name}: {count}" + (f" ({left} unresolved)" if left is not None else
                                                         " (the backfill's: items the spec did not map)"))
    for condition in found.conditions:
        lines.append(f"{'ok  ' if condition.holds else 'FAIL'} {condition.name}: {condition.detail}")
    lines += [f"note: {note}" for note in found.notes]
    lines.append("READY to cut over" if found.ready else "NOT READY: " + "; ".join(found.reasons))
    return lines
