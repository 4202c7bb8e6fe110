"""migrate-plan's text output: the plan object as a few rich tables, nothing computed here."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from ..mappers.units import human_duration as _duration, human_size as _size

if TYPE_CHECKING:
    from ..app.target_diff import TargetDiff
    from ..mappers.plan import MigrationPlan

_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def target_lines(diff: TargetDiff, header: bool = True) -> list[str]:
    """The target's diff as plain lines (terraform style): where (unless not ``header``), one line per change, the
    verdict."""
    lines = [f"target: {diff.where}" if header else "target:"]
    if not diff.read:
        return lines + [f"  ? {diff.note}"]
    lines += [f"  {change.symbol} {change.text}" for change in diff.changes]
    created = sum(change.symbol == "+" for change in diff.changes)
    if diff.blocking:
        lines.append(f"  migrate would refuse this table: {len(diff.blocking)} GC rule(s) differ; nothing would be "
                     "written")
    elif created:
        lines.append(f"  migrate creates {created} thing(s) above, then writes")
    else:
        lines.append("  nothing to create: the table is as the spec declares")
    return lines


def _table(title: str, *columns: str, right: tuple[str, ...] = ()) -> Table:
    """A table whose cells wrap instead of being cut (piped output is 80 columns wide)."""
    table = Table(title=title, title_justify="left")
    for name in columns:
        table.add_column(name, justify="right" if name in right else "left", overflow="fold")
    return table


def render_text(plan: MigrationPlan, console: Console, target: TargetDiff | None = None) -> None:
    """The plan as rich tables; with ``target``, its diff first and in the verdict."""
    if target is not None:
        for line in target_lines(target):
            console.print(line, markup=False, highlight=False, soft_wrap=True)
    s = plan.sample
    source = plan.source_table or "(export)"
    console.print(f"[bold]{source}[/] → Bigtable [bold]{plan.target_instance}/{plan.target_table}[/]")
    console.print(
        f"sample: {s.items} items → {s.mapped} mapped, {s.skipped} skipped, {s.errors} errors "
        f"({s.unmatched} unmatched); {s.distinct_row_keys} distinct row keys"
    )

    families = _table("Column families", "family", "garbage collection")
    for family in plan.families:
        families.add_row(family.name, family.gc)
    console.print(families)

    counts = ("matched", "mapped", "skipped", "errors", "rows")
    entities = _table("Entities", "entity", "action", "row key", *counts, right=counts)
    for e in plan.entities:
        key = e.row_key_template or "-"
        if e.salt_buckets:
            key += f" (salted ×{e.salt_buckets})"
        entities.add_row(e.name, e.action, key, *(str(v) for v in (e.matched, e.mapped, e.skipped, e.errors, e.distinct_row_keys)))
    console.print(entities)

    example = next((x for e in plan.entities for x in e.examples if x.outcome == "mapped"), None)
    if example is not None:
        cells = _table(f"Example row {example.row_key}", "column", "value", "encoding", "timestamp")
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
        lints = _table("Findings", "severity", "where", "message")
        for lint in plan.lints:
            lints.add_row(f"[{_STYLE[lint.severity]}]{lint.severity}[/]", lint.where, lint.message)
        console.print(lints)
    errors = sum(lint.severity == "error" for lint in plan.lints) + (len(target.blocking) if target else 0)
    warnings = sum(lint.severity == "warning" for lint in plan.lints) + (len(target.warnings) if target else 0)
    verdict = "[bold red]errors: fix them before migrating[/]" if errors else "[green]no errors[/]"
    console.print(f"{verdict} ({errors} errors, {warnings} warnings)")
