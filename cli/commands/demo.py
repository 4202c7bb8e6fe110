"""`ddb2bt demo`: the three worked examples end to end on local servers, no cloud account needed.

Starts moto_server (DynamoDB) and the Bigtable emulator, loads the seed tables, and for each one
runs infer, migrate-plan, migrate, validate and report; stops the servers. Safe to re-run: fresh
servers every time, and the output folder is replaced.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Annotated

import typer

from .. import inputs


def command(
    out: Annotated[Path, typer.Option("--out", help="Folder for specs, reports and dead letters (replaced).")] = Path("out/demo"),
) -> None:
    """Run the three worked examples end to end on local servers (moto + Bigtable emulator)."""
    from ...pipelines import local_servers
    from ...pipelines.pipeline import run_migration
    from ...templates import catalog
    from ..seeds import SEEDED, load_seed_table
    from .infer import draft_problem, infer_table, render
    from .plan import ReportFormat, write_report
    from .validate import check

    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    say = typer.echo
    say("Starting local DynamoDB (moto) and the Bigtable emulator…")
    failed = []
    with local_servers.moto_server() as moto, local_servers.bigtable_emulator() as bigtable, \
            local_servers.patched_environ(local_servers.emulator_env(bigtable.endpoint)):
        client = inputs.dynamodb_client(moto.endpoint, None, None)
        for template in SEEDED:
            folder = out / template.name
            folder.mkdir()
            table, count = load_seed_table(client, template)
            say(f"\n▶ {template.name}: {template.description}")
            say(f"  loaded {count} items into DynamoDB table {table}")

            draft, _ = infer_table(client, table, 1000)
            (folder / "inferred.yaml").write_text(render(draft), encoding="utf-8")
            names = ", ".join(entity["name"] for entity in draft.spec["entities"])
            say(f"  infer: draft spec with entities {names}" + (f" (needs edits: {p})" if (p := draft_problem(draft, "inferred.yaml")) else ""))

            spec_path = folder / "spec.yaml"
            spec_path.write_text(catalog.starter_spec(template.name), encoding="utf-8")
            spec = inputs.load(spec_path, endpoint_url=moto.endpoint)
            plan = inputs.plan_for(spec, 1000)
            lints = sum(lint.severity == "error" for lint in plan.lints), sum(lint.severity == "warning" for lint in plan.lints)
            say(f"  migrate-plan: {plan.sample.mapped} of {plan.sample.items} items map to {plan.sample.distinct_row_keys} rows; "
                f"{lints[0]} errors, {lints[1]} warnings")

            result = run_migration(spec, run_dir=str(folder / "run"), pipeline_args=["--runner=DirectRunner"])
            c = result.counters
            say(f"  migrate: {c['rows_written']} written, {c['dead_lettered']} dead-lettered, {c['skipped']} skipped — "
                f"{'reconciled' if result.ok else 'NOT reconciled: ' + '; '.join(result.problems)}")

            _, _, outcome = check(spec, 1000, full=True)
            say(f"  validate: {outcome.cells_matched}/{outcome.cells_expected} cells match"
                + ("" if outcome.ok else f", {len(outcome.differences)} differences"))

            write_report(plan, folder / "report.html", ReportFormat.html)
            write_report(plan, folder / "report.md", ReportFormat.md)
            if not (result.ok and outcome.ok and not lints[0]):
                failed.append(template.name)
    say(f"\nServers stopped. Reports: {out}/<example>/report.html (and report.md); specs and dead letters are there too.")
    if failed:
        say(f"Something did not add up for: {', '.join(failed)}", err=True)
        raise typer.Exit(1)
    say("Next: `ddb2bt init --list` to start your own spec, or `ddb2bt infer --table YOUR_TABLE`.")
