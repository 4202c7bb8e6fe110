"""The demo use case: the three worked examples end to end on local servers, no cloud account needed.

Starts moto_server (DynamoDB) and the Bigtable emulator, loads the seed tables and, for each,
runs infer, plan, migrate, validate and the report; stops the servers. Safe to re-run: fresh
servers every time, and only what an earlier demo wrote is replaced (its example folders, in a
folder a marker file says the demo made); a folder the demo did not make is refused, and
nothing else in either is ever deleted.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

from ..mappers.errors import UsageError
from ..pipelines.local import servers as local_servers
from ..pipelines.dynamodb.client import ClientSettings, make_client
from ..templates import catalog
from .infer import infer
from .migrate import migrate
from .options import RunOptions
from .plan import plan
from .seeds import SEEDED, load_seed_table
from .validate import validate

MARKER = ".ddb2bt-demo"


@dataclass
class ExampleOutcome:
    name: str
    ok: bool = True


def prepare_out(out: Path, examples: tuple[str, ...]) -> None:
    """Ready ``out`` for the ``examples``' folders: remove those an earlier demo wrote there (nothing else), refuse a
    non-empty folder no demo made."""
    if out.exists():
        if not (out / MARKER).exists() and any(out.iterdir()):
            raise UsageError(f"{out} exists and was not made by `ddb2bt demo`; it is left untouched",
                             "choose another --out folder, or empty this one")
        for name in examples:
            if (out / name).is_dir():
                shutil.rmtree(out / name)
    out.mkdir(parents=True, exist_ok=True)
    (out / MARKER).write_text("made by `ddb2bt demo`; the next demo run replaces its example folders here (nothing "
                              "else)\n", encoding="utf-8")


def run_demo(out: Path, say: Callable[[str], object],
             write_report: Callable[[Any, Path], object]) -> list[ExampleOutcome]:
    """Run every seeded example; ``say`` receives one line per step as it happens, ``write_report(plan, path)``
    renders the schema translation report (HTML or Markdown by the path's suffix)."""

    prepare_out(out, tuple(template.name for template in SEEDED))
    say("Starting local DynamoDB (moto) and the Bigtable emulator…")
    outcomes = []
    with local_servers.moto_server() as moto, local_servers.bigtable_emulator() as bigtable, \
            local_servers.patched_environ(local_servers.emulator_env(bigtable.endpoint)):
        options = RunOptions(endpoint_url=moto.endpoint)
        client = make_client(ClientSettings(endpoint_url=moto.endpoint))
        for template in SEEDED:
            outcome = ExampleOutcome(template.name)
            folder = out / template.name
            folder.mkdir()
            table, count = load_seed_table(client, template)
            say(f"\n▶ {template.name}: {template.description}")
            say(f"  loaded {count} items into DynamoDB table {table}")

            inferred = infer(table, 1000, options, client=client)
            (folder / "inferred.yaml").write_text(inferred.text, encoding="utf-8")
            names = ", ".join(entity["name"] for entity in inferred.draft.spec["entities"])
            say(f"  infer: draft spec with entities {names}" + (f" (needs edits: {inferred.problem})" if inferred.problem else ""))

            spec_path = folder / "spec.yaml"
            spec_path.write_text(catalog.starter_spec(template.name), encoding="utf-8")
            the_plan = plan(spec_path, 1000, options)
            errors = sum(lint.severity == "error" for lint in the_plan.lints)
            warnings = sum(lint.severity == "warning" for lint in the_plan.lints)
            say(f"  migrate-plan: {the_plan.sample.mapped} of {the_plan.sample.items} items map to "
                f"{the_plan.sample.distinct_row_keys} rows; {errors} errors, {warnings} warnings")

            result = migrate(spec_path, replace(options, run_dir=str(folder / "run")))
            c = result.counters
            say(f"  migrate: {c['rows_written']} written, {c['dead_lettered']} dead-lettered, {c['skipped']} skipped — "
                f"{'reconciled' if result.ok else 'NOT reconciled: ' + '; '.join(result.problems)}")

            checked = validate(spec_path, replace(options, run_dir=str(folder / "validate")), target_scan=True)
            say(f"  validate: {checked.totals.get('cells_matched', 0)}/{checked.totals.get('cells_expected', 0)} "
                "cells match" + ("" if checked.ok else f", {checked.differences} differences"))

            write_report(the_plan, folder / "report.html")
            write_report(the_plan, folder / "report.md")
            outcome.ok = result.ok and checked.ok and not errors
            outcomes.append(outcome)
    return outcomes
