"""`ddb2bt validate`: map the source again and compare with what Bigtable holds, as a Beam run (see docs/VALIDATE.md).

Where it reads, the runner and the run folder go to stderr first; the summary (or, with
`--format json`, the result object) to stdout. Exit 1 on any difference or when the run does
not add up.
"""

from __future__ import annotations

import json
import os
from typing import Annotated, Any, Optional

import typer

from ...app.options import RunOptions
from ...mappers.errors import ServiceError
from ...mappers.units import plural
from ..errors import classify, ctrl_c_says, report
from ..options import OutputFormat, SpecArg, check_run_dir, run_options


NOT_FOR_VALIDATE = {
    "no_wait": "validate waits for its job, whose files it joins at the end",
    "max_dead_letters": "validate stops for no dead letter; the rewrites Bigtable refuses with --repair are "
                        "counted and make the run fail",
}
"""Run options migrate has and validate has no use for: not offered, and refused when given."""
FOR_VALIDATE = {
    "run_dir": "This validation's folder: differences, checkpoint, parts (default runs/<table>-validate-<UTC time>; "
               "a gs:// or s3:// folder on Dataflow); never a migration's.",
    "dead_letter": "With --repair: where the rewrites and deletes Bigtable refuses go (default <run "
                   "dir>/dead_letters.jsonl). It holds user data.",
    "resume": "Continue the validation in --run-dir, skipping the scan segments it completed.",
    "sample": "Validate N items picked at random across the table (no resume, no extra cells).",
    **{name: f"With --repair, its writer: {what}." for name, what in (
        ("flush_limit_mutation_count", "mutations per batch sent"), ("flush_limit_bytes", "bytes per batch sent"),
        ("flow_control_max_mutation_count", "mutations in flight"), ("flow_control_max_bytes", "bytes in flight"),
        ("max_pending_entries", "rows in flight before the bundle waits"))},
}
"""Where validate uses a shared option differently from migrate: its own help."""


@run_options("run", "aws", "google", "writer", refused=NOT_FOR_VALIDATE, helps=FOR_VALIDATE)
def command(
    ctx: typer.Context,
    spec: SpecArg,
    repair: Annotated[bool, typer.Option(
        "--repair", help="Rewrite missing and different cells and delete extra ones, cell by cell. Without it "
                         "nothing is written.")] = False,
    target_scan: Annotated[bool, typer.Option(
        "--target-scan", help="Also scan the whole Bigtable table for rows no source item maps to.")] = False,
    decode_all: Annotated[bool, typer.Option(
        "--decode-all", help="Read every item back through the decoder (default: every item whose cells differ, "
                             "and 1 in 256 of the others).")] = False,
    as_of: Annotated[Optional[str], typer.Option(
        "--as-of", help="The snapshot validated: an ISO-8601 time, or the --run-dir of the migration (its cutover "
                        "timeline, else its backfill's start). Cells that changed after it are counted apart, not as "
                        "differences (they are told by their timestamps: see docs/VALIDATE.md).",
        show_default=False)] = None,
    full: Annotated[bool, typer.Option("--full", hidden=True, help="Old name of --target-scan.")] = False,
    format: Annotated[OutputFormat, typer.Option(
        "--format", help="text (a summary) or json (the result, full values) on stdout.")] = OutputFormat.text,
    *,
    options: RunOptions,
) -> None:
    """Compare the target with the source, cell by cell and through the decoder: missing, different and extra
    cells, collisions. Resumable (--resume --run-dir); --sample N checks N random items. Exit 1 on any difference.

    Beam options (--runner, --region, --temp_location, --setup_file, --direct_running_mode, ...) may follow.

    Example: ddb2bt validate videos.yaml --sample 1000
    """
    flags = ["--repair"] * repair + ["--target-scan"] * (target_scan or full) + ["--decode-all"] * decode_all
    flags += (["--as-of", as_of] if as_of is not None else []) + ["--format", "json"] * (format is OutputFormat.json)
    again = f"run it again: {options.go_on('validate', spec, options.run_dir, *flags, resume=options.resume)}"
    with ctrl_c_says("interrupted before the validation started: nothing was compared or written", again):
        from ...app import validate as use_case
        from ..progress import watching

        check_run_dir(options.run_dir)
        prepared = use_case.prepare(spec, options, repair=repair, target_scan=target_scan or full,
                                    decode_all=decode_all, as_of=as_of, where=_stderr)
    _stderr(f"runner {prepared.runner}; run folder {prepared.run_dir}"
            + (f"; {prepared.total_segments} scan segment{'s' * (prepared.total_segments != 1)}"
               if prepared.scanning else f"; a random sample of {options.sample} items" if options.sample else "")
            + ("; repairing" if repair else "; reads only (nothing is written)"))
    if prepared.after_us is not None:
        _stderr(f"snapshot: {prepared.snapshot}; cells that changed after it are counted apart, not as differences")
        if not use_case.times_from_items(prepared.spec):
            _stderr("note: no cell of this spec takes its timestamp from its item, so a change after the snapshot "
                    "cannot be told apart and shows as a difference (see docs/VALIDATE.md)")
    if prepared.now_unknown:
        _stderr("note: the spec sets no migration_time, so cells without a time of their own carry the run's time "
                "and will show as differences; give the run folder (--as-of RUN_DIR), or set migration_time before "
                "migrating.")
    repaired = " (the cells it repaired stay repaired)" if repair else ""

    def resumable() -> bool:  # its checkpoint made (a remote folder: the job's own)
        return prepared.scanning and ("://" in prepared.run_dir
                                      or os.path.exists(os.path.join(prepared.run_dir, "checkpoint.json")))

    stopped = ctrl_c_says(
        lambda: (f"validation stopped by Ctrl-C: the scan segments compared so far are kept in {prepared.run_dir}"
                 f"{repaired}" if resumable() else
                 f"validation stopped by Ctrl-C before its end: nothing of it is kept to resume{repaired}"),
        lambda: f"resume with: {use_case.resume_command(prepared, str(spec))}" if resumable() else again)
    try:
        with stopped, watching(f"comparing {prepared.source} with {prepared.spec.target.table}",
                               lambda: progress_text(use_case.progress(prepared), prepared)):
            result = use_case.execute(prepared)
    except Exception as error:
        failure = classify(error)
        if not isinstance(failure, ServiceError) or not prepared.scanning:
            raise
        # a dependency died mid-run: what was compared so far (the segments finished are marked), then the one line
        # that says how to go on from them
        typer.echo(so_far(use_case.progress(prepared), prepared))
        report(failure.exit_code, [f"{failure.one_line()}; resume with: {use_case.resume_command(prepared, str(spec))}"])
    if format is OutputFormat.json:
        typer.echo(json.dumps(as_json(result), indent=2, ensure_ascii=False))
    else:
        for line in render(result, str(spec)):
            typer.echo(line)
    if result.finished and not result.ok:
        raise typer.Exit(1)


def so_far(figures: dict[str, int], prepared: Any) -> str:
    """What a validation that ended early compared: the segments finished (every attempt's) and their figures. It
    said nothing of them: only the error line."""
    return (f"compared so far: {figures.get('segments_done', 0)} of {prepared.total_segments} segments "
            f"({figures.get('items_read', 0):,} items read; in the segments finished "
            f"{figures.get('items_compared', 0):,} items compared, {figures.get('rows_found', 0):,}/"
            f"{figures.get('rows_compared', 0):,} rows found, {figures.get('cells_matched', 0):,}/"
            f"{figures.get('cells_expected', 0):,} cells match, {plural(figures.get('differences', 0), 'difference')}; "
            f"the differences file is written when the validation ends)")


def progress_text(figures: dict[str, int], prepared: Any) -> str:
    """`3/8 segments compared · 12,000 items read · 11,800 compared · 0 differences`: what the finished parts say."""
    parts = [f"{figures.get('segments_done', 0)}/{prepared.total_segments} segments compared"] if prepared.scanning else []
    parts += [f"{figures.get('items_read', 0):,} items read", f"{figures.get('items_compared', 0):,} compared",
              plural(figures.get("differences", 0), "difference")]
    return " · ".join(parts)


def as_json(result: Any) -> dict[str, Any]:
    p = result.prepared
    return {"ok": result.ok, "state": result.state, "source": p.source, "target": p.target, "run_dir": p.run_dir,
            "differences_file": p.differences, "counts": result.counts, "differences": result.first,
            "totals": result.totals, "counters": result.counters, "problems": result.problems,
            "repair": p.repair, "target_scan": p.target_scan, "sample": p.options.sample,
            "snapshot": None if p.after_us is None else {"after_us": p.after_us, "from": p.snapshot},
            "after_snapshot": result.after_snapshot}


def render(result: Any, spec_path: str) -> list[str]:
    """One screen: what was compared, counts by kind, the first differences, where the full file is."""
    from ...mappers.validate.compare import Difference, describe_counts

    p, t = result.prepared, result.totals
    if result.state == "DRY_RUN":
        return [f"dry run: built {len(result.stages)} stages: {', '.join(result.stages)}"]
    what = f"a random sample of {t.get('items_read', 0)} items" if p.options.sample else f"{t.get('items_read', 0)} items"
    lines = [
        f"compared {what} ({t.get('not_mapped', 0)} not mapped, {t.get('skipped', 0)} skipped): "
        f"{t.get('rows_found', 0)}/{t.get('rows_compared', 0)} rows found, "
        f"{t.get('cells_matched', 0)}/{t.get('cells_expected', 0)} cells match",
    ]
    every = "every item" if p.decode_every == 1 else f"items whose cells differ and 1 in {p.decode_every} of the others"
    lines.append(f"read back through the decoder: {t.get('decoded', 0)} items ({every})"
                 + (f"; {t['not_decoded']} compared cell by cell only (losses their entity declares keep them from "
                    "reading back)" if t.get("not_decoded") else ""))
    if p.repair:
        lines.append(f"repair: {t.get('repair_cells', 0)} cells rewritten in {t.get('repair_rows', 0)} rows, "
                     f"{t.get('repair_deletes', 0)} cells deleted; validate again to confirm")
    if p.after_us is not None:
        after = sum(result.after_snapshot.values())
        lines.append(f"changed after the snapshot (not differences): {after}"
                     + (f" ({describe_counts(result.after_snapshot)}; marked \"after_snapshot\" in {p.differences})"
                        if after else "") + f"; snapshot: {p.snapshot}")
    lines += [f"PROBLEM: {problem}" for problem in result.problems]
    if not result.counts:
        if not result.problems:
            lines.append("OK: Bigtable holds exactly what the spec maps these items to.")
        return lines
    lines.append(f"DIFFERENT: {describe_counts(result.counts)}")
    lines += [f"  {Difference.from_json(record).describe()}" for record in result.first]
    if result.differences > len(result.first):
        lines.append(f"  … and {result.differences - len(result.first)} more")
    lines.append(f"all differences: {p.differences} (JSON lines; holds user data)")
    if p.scanning:
        lines.append(f"run folder: {p.run_dir}" + ("" if result.ok else f" (resume with: {result.resume_command(spec_path)})"))
    return lines


def _stderr(text: str) -> None:
    typer.echo(text, err=True)
