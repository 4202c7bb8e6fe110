"""migrate-plan's text output: the plan object as a few rich tables, nothing computed here."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from ..mappers.plan import MigrationPlan

_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{seconds:.0f}s"
    return f"{seconds / 60:.0f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


def render_text(plan: MigrationPlan, console: Console) -> None:
    s = plan.sample
    source = plan.source_table or "(export)"
    console.print(f"[bold]{source}[/] → Bigtable [bold]{plan.target_instance}/{plan.target_table}[/]")
    console.print(
        f"sample: {s.items} items → {s.mapped} mapped, {s.skipped} skipped, {s.errors} errors "
        f"({s.unmatched} unmatched); {s.distinct_row_keys} distinct row keys"
    )

    families = Table(title="Column families", title_justify="left")
    families.add_column("family")
    families.add_column("garbage collection")
    for family in plan.families:
        families.add_row(family.name, family.gc)
    console.print(families)

    entities = Table(title="Entities", title_justify="left")
    for name in ("entity", "action", "row key", "matched", "mapped", "skipped", "errors", "rows"):
        entities.add_column(name, justify="right" if name in ("matched", "mapped", "skipped", "errors", "rows") else "left")
    for e in plan.entities:
        key = e.row_key_template or "-"
        if e.salt_buckets:
            key += f" (salted ×{e.salt_buckets})"
        entities.add_row(e.name, e.action, key, *(str(v) for v in (e.matched, e.mapped, e.skipped, e.errors, e.distinct_row_keys)))
    console.print(entities)

    example = next((x for e in plan.entities for x in e.examples if x.outcome == "mapped"), None)
    if example is not None:
        cells = Table(title=f"Example row {example.row_key}", title_justify="left")
        for name in ("column", "value", "encoding", "timestamp"):
            cells.add_column(name)
        for cell in example.cells:
            cells.add_row(cell.column, cell.value, cell.encoding, cell.timestamp)
        console.print(cells)

    losses = [loss for e in plan.entities for loss in e.losses]
    if losses:
        console.print("[bold]Losses (what the target will not give back)[/]")
        for loss in losses:
            console.print(f"  {loss}", markup=False)

    if plan.dead_letters.total:
        console.print(f"[bold]Dead letters in the sample: {plan.dead_letters.total}[/]")
        for reason, count in plan.dead_letters.by_reason.items():
            console.print(f"  {count} × {reason}", markup=False)

    est = plan.estimates
    console.print(
        f"estimates: {est.items} items (from {est.items_from}), {_size(est.table_bytes)} to scan, "
        f"{est.scan_read_units:.0f} RCU, scan ~{_duration(est.scan_seconds)}; "
        f"target ~{est.target_rows} rows, {_size(est.target_bytes)}, {est.suggested_nodes} node(s) ({est.node_basis})"
    )

    if plan.lints:
        lints = Table(title="Findings", title_justify="left")
        for name in ("severity", "where", "message"):
            lints.add_column(name)
        for lint in plan.lints:
            lints.add_row(f"[{_STYLE[lint.severity]}]{lint.severity}[/]", lint.where, lint.message)
        console.print(lints)
    errors = sum(lint.severity == "error" for lint in plan.lints)
    warnings = sum(lint.severity == "warning" for lint in plan.lints)
    verdict = "[bold red]errors: fix them before migrating[/]" if errors else "[green]no errors[/]"
    console.print(f"{verdict} ({errors} errors, {warnings} warnings)")
