"""`ddb2bt rollback`: Bigtable → DynamoDB through the spec's decoder, resumable, reconciled, then compared.

Progress and notes go to stderr, the result (or `--format json`) to stdout.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Annotated, Any, Optional

import typer

from ...app.options import RunOptions
from ...mappers.errors import UsageError
from ...mappers.units import plural
from ..options import OutputFormat, SpecArg, check_run_dir, run_options

TYPES = ("S", "N", "B", "BOOL")


@run_options("run", "aws", "google", refused={
    "dead_letter": "a rollback keeps its dead letters in its run folder",
    "total_segments": "a rollback reads Bigtable key ranges, not scan segments",
    "sample": "a rollback copies every row (narrow it with --start/--end or --since)",
    "no_wait": "a rollback runs here, not on Dataflow",
    "max_dead_letters": "a rollback never stops for dead letters: it reports them, and exits 1",
}, helps={
    "run_dir": "Folder of the rollback's checkpoint, dead letters and differences (default "
               "runs/<table>-rollback-<UTC time>).",
    "resume": "Continue the rollback in --run-dir (required) after each key range's last row whose items are written.",
})
def command(
    spec: SpecArg,
    to_table: Annotated[Optional[str], typer.Option("--to-table", help="The DynamoDB table written (default: the "
                                                    "spec's source table). It must exist, keyed as the source.",
                                                    show_default=False)] = None,
    since: Annotated[Optional[str], typer.Option("--since", help="Only rows holding a cell written at or after this "
                                                 "time (ISO 8601, e.g. 2026-11-26T12:00:00Z, or epoch milliseconds): "
                                                 "what the application wrote to Bigtable after cutover. Deletes are "
                                                 "not seen (docs/ROLLBACK.md).", show_default=False)] = None,
    start: Annotated[Optional[str], typer.Option("--start", help="First row key (inclusive, UTF-8).",
                                                 show_default=False)] = None,
    end: Annotated[Optional[str], typer.Option("--end", help="Row key to stop before (exclusive, UTF-8).",
                                               show_default=False)] = None,
    wcu: Annotated[Optional[float], typer.Option("--wcu", min=0.1, help="Write capacity units per second for the "
                                                 "whole run (default: as fast as the table takes them).",
                                                 show_default=False)] = None,
    writers: Annotated[int, typer.Option("--writers", min=1, max=64, help="Writer threads of each process.")] = 4,
    processes: Annotated[Optional[int], typer.Option("--processes", min=1, max=256, help="Worker processes, each "
                                                     "reading, decoding and writing whole key ranges with its share "
                                                     "of --wcu (default: one per core but one, at least one; 1: all "
                                                     "in this process).",
                                                     show_default=False)] = None,
    type_: Annotated[Optional[list[str]], typer.Option("--type", help="NAME=S|N|B|BOOL: the DynamoDB type of an "
                                                       "attribute that lives only in a row key, qualifier or timestamp "
                                                       "(the table's keys are read from DescribeTable; others from a "
                                                       "sample of the source, else S).",
                                                       show_default=False)] = None,
    no_compare: Annotated[bool, typer.Option("--no-compare", help="Skip reading every item back from DynamoDB "
                                             "and comparing it with Bigtable.")] = False,
    accept_loss: Annotated[bool, typer.Option("--accept-loss", help="Write into the spec's source table although "
                                              "the spec cannot rebuild every attribute (what it does not keep is "
                                              "removed from the live items; without it such a rollback is refused).")
                           ] = False,
    format: Annotated[OutputFormat, typer.Option("--format", help="text, or json (the whole result).")] = OutputFormat.text,
    *,
    options: RunOptions,
) -> None:
    """Roll back: read the Bigtable table, decode every row into its DynamoDB items, write them with BatchWriteItem,
    reconcile, then read every item back and compare. Exit 1 on dead letters, differences or counts that do not add up.

    Resumable: after a kill, `--resume --run-dir FOLDER` continues after the last row whose items are written.

    Example: ddb2bt rollback videos.yaml --to-table Videos-restored --since 2026-11-26T12:00:00Z
    """
    from ...app.rollback import RollbackRequest, rollback
    from ..progress import say, watching

    check_run_dir(options.run_dir)
    request = RollbackRequest(to_table=to_table, start=(start or "").encode(), end=(end or "").encode(),
                              since_us=parse_since(since) if since else None, wcu=wcu, writers=writers,
                              processes=processes,
                              compare=not no_compare, accept_loss=accept_loss, types=parse_types(type_ or []))
    seen: dict[str, Any] = {"phase": "", "counters": {}}

    def progress(phase: str, counters: dict[str, int]) -> None:
        seen.update(phase=phase, counters=counters)  # one assignment: the progress thread reads either whole

    target = to_table or "(the spec’s source table)"
    say(f"rollback {spec} → DynamoDB {target}")
    with watching(f"rollback into {target}", lambda: progress_text(seen["phase"], seen["counters"])):
        result = rollback(spec, request, options, progress=progress)
    if format is OutputFormat.json:
        typer.echo(json.dumps({**asdict(result), "ok": result.ok}, indent=2, sort_keys=True))
    else:
        for line in render(result):
            typer.echo(line)
    if not result.ok:
        raise typer.Exit(1)


def progress_text(phase: str, counters: dict[str, int]) -> str:
    """What the rollback has done so far; how many rows Bigtable holds is not known before they are read."""
    c = counters
    if phase == "write":
        dead = c.get("rows_dead_lettered", 0) + c.get("items_refused", 0) + c.get("items_unkeyed", 0)
        return (f"{c.get('rows_read', 0):,} rows read (total unknown) · {plural(c.get('items_written', 0), 'item')} "
                f"written · {plural(dead, 'dead letter')}")
    if phase == "compare":
        return (f"{plural(c.get('compared', 0), 'item')} compared with DynamoDB (total unknown) · "
                f"{c.get('differing', 0):,} differ")
    return "reading Bigtable (total unknown)"


def parse_since(text: str) -> int:
    """ISO 8601 (a zone, or UTC) or epoch milliseconds -> microseconds since the epoch."""
    from datetime import datetime, timezone

    if text.isascii() and text.isdigit():  # int() also takes other scripts' digits; '²' would be a traceback
        return int(text) * 1000
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"--since {text!r} is no time", "give ISO 8601 (2026-11-26T12:00:00Z) or epoch "
                         "milliseconds") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return int(moment.timestamp() * 1_000_000)


def parse_types(pairs: list[str]) -> dict[str, str]:
    found = {}
    for pair in pairs:
        name, _, kind = pair.partition("=")
        if not name or kind not in TYPES:
            raise UsageError(f"--type {pair!r} is not NAME=TYPE", f"TYPE is one of {', '.join(TYPES)}: --type id=N")
        found[name] = kind
    return found


def render(result: Any) -> list[str]:
    c = result.counters
    lines = [f"from {result.source} into DynamoDB table {result.table}" + (" (resumed)" if result.resumed else ""),
             f"read {c['rows_read']} rows: {c['rows_decoded']} decoded, {c['rows_dead_lettered']} dead-lettered, "
             f"{c['rows_empty']} empty",
             f"wrote {c['items_written']} of {c['items_decoded']} items ({c['items_refused']} refused by DynamoDB, "
             f"{c['items_unkeyed']} whose key the spec does not keep) in {result.seconds:.1f} s"]
    if result.differences_file is not None:
        lines.append(f"compared {result.compared} items with DynamoDB: {result.differences} differ"
                     + (f" ({result.not_compared} rows could not be decoded)" if result.not_compared else ""))
    else:
        lines.append("not compared (--no-compare)")
    lines += [f"note: {line}" for line in result.losses + result.notes]
    lines.append(f"dead letters: {result.dead_letter} ({result.dead_letter_lines} lines; holds user data)")
    lines += [f"PROBLEM: {problem}" for problem in result.problems]
    lines.append(f"rollback {'OK' if result.ok else 'FAILED'}; run folder: {result.run_dir}")
    return lines
