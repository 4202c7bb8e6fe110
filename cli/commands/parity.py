"""`ddb2bt parity`: each declared access pattern run on DynamoDB and, translated, on Bigtable; the same items?

The summary (or, with `--format json`, the result object) goes to stdout. Exit 1 when any case differs or a pattern
cannot be served (nothing is claimed for what was not compared), 2 for a bad spec.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

from ...app.options import RunOptions
from ..options import OutputFormat, Sample, SpecArg, run_options

if TYPE_CHECKING:
    from ...app.parity import ParityResult


@run_options("aws", "google")
def command(
    spec: SpecArg,
    sample: Sample = 200,
    partitions: Annotated[int, typer.Option("--partitions", min=1, help="Partitions (most items first) each pattern "
                                            "is tried on.")] = 3,
    format: Annotated[OutputFormat, typer.Option("--format", help="text or json (the result object, with the "
                                                 "differing items).")] = OutputFormat.text,
    *,
    options: RunOptions,
) -> None:
    """Prove the access patterns: run each on DynamoDB and its Bigtable translation on the target, compare the items.

    Keys come from a sample of the source; each pattern is tried as declared and in the other order, in one request
    and a page at a time. Reads both stores, writes nothing. Exit 1 on any difference or a pattern not served.

    Example: ddb2bt parity videos.yaml --format json
    """
    from ...app.parity import check_parity
    from ..progress import spinner

    with spinner() as step:
        result = check_parity(spec, sample, partitions, options, step=step)
    if format is OutputFormat.json:
        typer.echo(json.dumps(result.to_json(), indent=2))
    else:
        for line in text_lines(result):
            typer.echo(line)
    if not result.ok:
        raise typer.Exit(1)


def text_lines(result: ParityResult) -> list[str]:
    data = result.to_json()
    r = data["reconciliation"]
    lines = [f"{data['source_table']} → {data['target_table']}: {r['patterns_declared']} pattern(s), "
             f"{r['patterns_compared']} compared, {r['patterns_not_served']} not served; {r['cases_tried']} case(s) "
             f"tried = {r['cases_same']} same + {r['cases_different']} different"]  # fmt: skip
    for p in data["patterns"]:
        if p["status"] != "served":
            lines.append(f"  {p['name']}: NOT SERVED ({p['status']}): {p['reason']}")
            continue
        verdict = "same" if p["ok"] else ("no case (no sampled partition)" if not p["cases"] else "DIFFERENT")
        lines.append(f"  {p['name']}: {p['same']}/{p['cases']} cases {verdict}")
        for d in p["differences"]:
            bigtable = f"Bigtable's rows cannot be decoded: {d['bigtable_error']}" if "bigtable_error" in d else \
                f"Bigtable {len(d['bigtable'])}"  # fmt: skip
            lines.append(f"    {d['case']} on {json.dumps(d['partition'])} {json.dumps(d['operands'])}: DynamoDB "
                         f"{len(d['dynamodb'])} item(s), {bigtable}")  # fmt: skip
    lines.append("parity: OK" if result.ok else "parity: FAILED")
    return lines
