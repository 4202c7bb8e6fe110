"""migrate-plan's text output: the plan object as plain lines, nothing computed here.

Lines rather than tables: piped output is 80 columns wide, and a table squeezed to that breaks entity names, row-key
templates and messages across lines. A line is wrapped by the terminal (or not at all in a file), never cut.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from rich.console import Console
from rich.text import Text

from ..mappers.analysis.plan import PREVIEW_CHARS, extrapolation, shorten, source_count_text
from ..mappers.units import human_duration as _duration, human_size as _size, human_units as _units, plural

if TYPE_CHECKING:
    from ..app.target_diff import TargetDiff
    from ..mappers.analysis.folded import FoldedRow
    from ..mappers.analysis.plan import ExampleRow, MigrationPlan

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
        lines.append(f"  migrate would refuse this table: {plural(len(diff.blocking), 'GC rule')} differ; nothing would be "
                     "written")
    elif created:
        lines.append(f"  migrate creates what is marked + above ({plural(created, 'change')}), then writes")
    else:
        lines.append("  nothing to create: the table is as the spec declares")
    return lines


def render_text(plan: MigrationPlan, console: Console, target: TargetDiff | None = None) -> None:
    """The plan as lines; with ``target``, its diff first and in the verdict."""
    if target is not None:
        for line in target_lines(target):
            _line(console, line)
    s = plan.sample
    source = plan.source_table or "(export)"
    console.print(Text.assemble((source, "bold"), " → Bigtable ", (f"{plan.target_instance}/{plan.target_table}", "bold")),
                  soft_wrap=True)  # names as text: a '[' in a table name is not markup
    _line(console, f"sample: {plural(s.items, 'item')} → {s.mapped} mapped, {s.skipped} skipped, "
                   f"{plural(s.errors, 'error')} ({s.unmatched} unmatched); {plural(s.distinct_row_keys, 'distinct row key')}")

    console.print("[bold]Column families[/]")
    for family in plan.families:
        _line(console, f"  {family.name}: {family.gc}")
    console.print("[bold]Entities[/] (sampled items matched, mapped, skipped, errors; distinct rows)")
    for e in plan.entities:
        key = f"row key {e.row_key_template}" if e.row_key_template else "no row key"
        salted = f" (salted ×{e.salt_buckets})" if e.salt_buckets else ""
        _line(console, f"  {e.name} ({e.action}, {key}{salted}): {e.matched} matched, {e.mapped} mapped, "
                       f"{e.skipped} skipped, {plural(e.errors, 'error')}; {plural(e.distinct_row_keys, 'row')}")

    shortened = _rows(plan, console)
    losses = [loss for e in plan.entities for loss in e.losses]
    if losses:
        console.print("[bold]Losses (what the target will not give back)[/]")
        for loss in losses:
            _line(console, f"  {loss}")

    if plan.rollback:
        console.print("[bold]Rollback (ddb2bt rollback: Bigtable → DynamoDB)[/]")
        for line in plan.rollback:
            _line(console, f"  {line}")

    if plan.dead_letters.total:
        console.print(f"[bold]Dead letters in the sample: {plan.dead_letters.total}[/]")
        for cause in plan.dead_letters.causes:
            _line(console, f"  {cause.line()}")

    for line in estimate_lines(plan):
        _line(console, line)
    if plan.indexes:
        console.print("[bold]Secondary indexes[/] (index rows, written with their items)")
        for line in index_lines(plan):
            _line(console, line)
    if plan.access_patterns:
        console.print("[bold]Access patterns[/] (the Bigtable read serving each; tried on the sample)")
        for line in pattern_lines(plan):
            _line(console, line)
    if plan.lints:  # lines, not a table: a message squeezed into a column at 80 characters is hard to read
        console.print("[bold]Findings[/]")
        for lint in plan.lints:
            console.print(Text.assemble("  ", (lint.severity, _STYLE[lint.severity]), f" {lint.where}: {lint.message}"),
                          soft_wrap=True)
    errors = sum(lint.severity == "error" for lint in plan.lints) + (len(target.blocking) if target else 0)
    warnings = sum(lint.severity == "warning" for lint in plan.lints) + (len(target.warnings) if target else 0)
    verdict = "[bold red]errors: fix them before migrating[/]" if errors else "[green]no errors[/]"
    console.print(f"{verdict} ({plural(errors, 'error')}, {plural(warnings, 'warning')})")
    if shortened:
        _line(console, f"values longer than {PREVIEW_CHARS} characters are shortened above (… (+N chars)); "
                       "`--format json` has them whole")


def _line(console: Console, text: str) -> None:
    """Plain text, wrapped at the console's width but never cut (piped output is 80 columns)."""
    console.print(text, markup=False, highlight=False, soft_wrap=True)


def _rows(plan: MigrationPlan, console: Console) -> bool:
    """The first folded row whole (single-table designs), else one item's row; True when a value was shortened."""
    if plan.folded_rows:
        shortened = _folded(plan.folded_rows[0], console)
        others = len(plan.folded_rows) - 1
        if others:
            _line(console, f"({others} more folded row{'s' * (others != 1)} in `--format json` and `ddb2bt report`)")
        return shortened
    example = next((x for e in plan.entities for x in e.examples if x.outcome == "mapped"), None)
    return _example(example, console) if example is not None else False


def _example(example: ExampleRow, console: Console) -> bool:
    """One item's row, a cell a line."""
    _line(console, f"Example row {example.row_key} (one item)")
    return _cells(console, ((cell.column, cell.timestamp, "", cell.encoding, cell.value) for cell in example.cells))


def _cells(console: Console, cells: Iterable[tuple[str, str, str, str, str]]) -> bool:
    """(column, timestamp, where from, encoding, value) a line; True when a value was shortened."""
    shortened = False
    for column, timestamp, origin, encoding, value in cells:
        shown, cut = shorten(value)
        shortened |= cut
        _line(console, f"  {column} @ {timestamp}{origin}, {encoding}: {shown}")
    return shortened


def _folded(row: FoldedRow, console: Console) -> bool:
    """One folded row as plain lines (a six-column table would be unreadable at 80 columns): its items, every cell
    newest first with the item that wrote it, and why a column holds versions."""
    _line(console, f"Row {row.row_key}, whole: {len(row.items)} sampled items write into it")
    for item in row.items:
        _line(console, f"  #{item.number} {item.entity}: {item.key}")
    shortened = _cells(console, (
        (cell.column + (f" (version {cell.version} of {cell.versions})" if cell.versions > 1 else ""),
         cell.timestamp, f" from #{cell.item}", cell.encoding, cell.value) for cell in row.cells))
    if row.more_cells:
        _line(console, f"  … and {row.more_cells:,} more cells (not listed)")
    for text in row.versions:
        _line(console, f"  {text}")
    return shortened


def estimate_lines(plan: MigrationPlan) -> list[str]:
    """The estimates with their basis: where items and size come from, and whether figures are extrapolated."""
    e, source = plan.estimates, plan.source
    scaled, _ = extrapolation(plan)
    least = "at least " if e.lower_bound else ""
    if e.table_bytes_from == "DescribeTable":
        size = f"{_size(e.table_bytes)} (DescribeTable)"
    elif e.lower_bound:
        size = f"at least {_size(e.table_bytes)} (the sampled items' size)"
    else:
        reported = f"; DescribeTable reports {_size(source.size_bytes)}" if source is not None else ""
        size = f"{_size(e.table_bytes)} (the sample's average item × {e.items:,} items{reported})"
    if e.read_units_per_second is None:
        scan = "an export: no read capacity consumed"
    else:
        scan = (f"{least}{_units(e.scan_read_units)} RCU at {_units(e.read_units_per_second)} RCU/s, "
                f"{least}~{_duration(e.scan_seconds)}")
    return [
        f"estimates ({scaled}):",
        f"  source: {source_count_text(plan)}, {size}",
        f"  scan: {scan}",
        f"  target: {least}~{e.target_rows:,} rows, {e.target_cells:,} cells, {_size(e.target_bytes)}; "
        f"{least}{plural(e.suggested_nodes, 'node')} to write in {e.target_write_hours:g} h (bound by {e.node_basis})",
    ]


def index_lines(plan: MigrationPlan) -> list[str]:
    """Per index carried as index rows: its row key, projection, and its rows on the sample."""
    lines = []
    for index in plan.indexes:
        lines.append(f"  {index.name} ({index.type}, {index.projection}, family {index.family}): rows of table "
                     f"{index.table} keyed {index.keys}")
        lines.append(f"    on the sample: {index.items_in_index} of {index.items_mapped} mapped item(s) in the index "
                     f"(the others lack its keys), {index.cells} cell(s), {_size(index.bytes)}"
                     + (f"; e.g. {index.example_key}" if index.example_key else ""))
    return lines


def pattern_lines(plan: MigrationPlan) -> list[str]:
    """Per declared access pattern: the DynamoDB read, the Bigtable read or why none, the sample's figures, snippets."""
    lines: list[str] = []
    for p in plan.access_patterns:
        lines.append(f"  {p.name}: {p.dynamodb}" + (f" — {p.description}" if p.description else ""))
        if p.status != "served":
            lines.append(f"    NOT SERVED: {p.reason}; {p.suggestion}")
            continue
        lines.append(f"    Bigtable: {p.bigtable}")
        if p.example_key:
            lines.append(f"    on the sample ({p.example_key}): {p.rows_touched} row(s), {p.cells_touched} cell(s) read, "
                         f"{p.items_returned} item(s) returned")
        if p.reason:  # served, but its read could not be tried on the sample
            lines.append(f"    on the sample: {p.reason}")
        if p.python:
            lines.append("    python:")
            lines += [f"      {line}" if line else "" for line in p.python.splitlines()]
        lines += [f"    cbt: {command}" for command in p.cbt]
    return lines
