"""The schema translation report: one MigrationPlan rendered as self-contained HTML or as Markdown.

The sections are built once as a small list of neutral blocks (headings, paragraphs, tables,
charts, side-by-side pairs) and then rendered twice, so the HTML and the Markdown can never say
different things. The HTML needs no network to view: inline CSS, charts drawn here as inline SVG,
no scripts, fonts or images. Every piece of user data goes through `html.escape`.
"""

from __future__ import annotations

import html
from typing import NamedTuple

from ddb2bt.mappers.plan import AttributePreview, ExampleRow, MigrationPlan
from ddb2bt.mappers.sample import SizeStats

# --------------------------------------------------------------------------- blocks


class Heading(NamedTuple):
    level: int
    text: str


class Para(NamedTuple):
    text: str
    tone: str = ""
    """'' or a lint severity (error, warning, info, ok) for a coloured callout."""


class Bullets(NamedTuple):
    items: tuple[str, ...]


class Table(NamedTuple):
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    caption: str = ""
    row_tones: tuple[str, ...] = ()


class Chart(NamedTuple):
    title: str
    labels: tuple[str, ...]
    values: tuple[float, ...]
    unit: str = ""


class Pair(NamedTuple):
    """DynamoDB item on the left, Bigtable row on the right."""

    left: Table
    right: Table


Block = Heading | Para | Bullets | Table | Chart | Pair


# --------------------------------------------------------------------------- formatting


def size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "n/a"
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _bins(stats: SizeStats) -> tuple[tuple[str, ...], tuple[float, ...]]:
    labels = tuple(f"{size(b.lower)}–{size(b.upper)}" for b in stats.histogram)
    return labels, tuple(float(b.count) for b in stats.histogram)


# --------------------------------------------------------------------------- sections


def _summary(plan: MigrationPlan) -> list[Block]:
    counts = {s: sum(1 for lint in plan.lints if lint.severity == s) for s in ("error", "warning", "info")}
    sample = plan.sample
    tone = "error" if plan.has_errors else "warning" if plan.has_warnings else "ok"
    verdict = {
        "error": "The plan has errors: fix them before migrating.",
        "warning": "The plan works, with warnings worth reading before a full run.",
        "ok": "No findings: the mapping is ready for a full run.",
    }[tone]
    return [
        Heading(1, f"Schema translation report: DynamoDB {plan.source_table or '(export)'} → Bigtable {plan.target_instance}/{plan.target_table}"),
        Para(f"{verdict} Errors: {counts['error']}, warnings: {counts['warning']}, notes: {counts['info']}.", tone),
        Para(
            f"Sampled {sample.items} items: {sample.mapped} mapped, {sample.skipped} skipped, {sample.errors} would be "
            f"dead-lettered ({sample.unmatched} matched no entity); {sample.distinct_row_keys} distinct row keys."
        ),
    ]  # fmt: skip


def _source(plan: MigrationPlan) -> list[Block]:
    source = plan.source
    rows = [("Partition key", plan.partition_key or "(from DescribeTable)"), ("Sort key", plan.sort_key or "none")]
    if source:
        rows += [
            ("Key types", ", ".join(f"{k}: {t}" for k, t in source.key_types.items()) or "unknown"),
            ("Items (approx.)", f"{source.item_count:,}"),
            ("Size (approx.)", size(source.size_bytes)),
            ("Billing", source.billing_mode + (f", {source.read_capacity:,} RCU" if source.read_capacity else "")),
            ("Stream", source.stream_view_type or "disabled"),
            ("TTL", f"{source.ttl_attribute} ({source.ttl_status or 'status unknown'})" if source.ttl_attribute else "none"),
        ]
    blocks: list[Block] = [Heading(2, "Source: DynamoDB schema"), Table(("Property", "Value"), tuple(rows))]
    if source and (source.global_indexes or source.local_indexes):
        indexes = tuple(
            (i.name, i.kind, i.partition_key, i.sort_key or "—", i.projection + (f" ({', '.join(i.projected_attributes)})" if i.projected_attributes else ""))
            for i in source.global_indexes + source.local_indexes
        )  # fmt: skip
        blocks.append(Table(("Index", "Kind", "Partition key", "Sort key", "Projection"), indexes, "Secondary indexes"))
    types = tuple(
        (name, ", ".join(f"{tag} ×{n}" for tag, n in sorted(seen.items())))
        for name, seen in sorted(plan.sample.attribute_types.items())
    )
    blocks.append(Table(("Attribute", "Types seen in the sample"), types, "Attributes seen"))
    labels, values = _bins(plan.sample.item_sizes)
    blocks.append(Chart("DynamoDB item size (sampled items per size band)", labels, values))
    return blocks


def _target(plan: MigrationPlan) -> list[Block]:
    families = tuple((f.name, f.gc) for f in plan.families)
    keys = tuple(
        (e.name, e.action, e.row_key_template or "—", str(e.salt_buckets or "—"),
         ", ".join(dict.fromkeys(ex.row_key for ex in e.examples if ex.row_key)) or "—")
        for e in plan.entities
    )  # fmt: skip
    mix = plan.sample.entity_mix
    labels, values = _bins(plan.sample.row_sizes)
    return [
        Heading(2, "Target: Bigtable schema"),
        Para(f"Table {plan.target_table} in instance {plan.target_instance}. Cells with no timestamp of their own are written at "
             + (plan.migration_time or "the run's start time (migration_time is unset)") + "."),  # fmt: skip
        Table(("Column family", "Garbage collection"), families, "Column families"),
        Table(("Entity", "Action", "Row key template", "Salt buckets", "Example keys"), keys, "Row keys"),
        Chart("Entity mix (sampled items per entity)", tuple(mix), tuple(float(v) for v in mix.values())),
        Chart("Bigtable row size (sampled rows per size band, all cells written to the row)", labels, values),
    ]


def _item_table(item: tuple[AttributePreview, ...]) -> Table:
    return Table(("Attribute", "Type", "Value"), tuple((a.name, a.type, a.value) for a in item), "DynamoDB item")


def _row_table(example: ExampleRow) -> Table:
    if example.outcome != "mapped":
        return Table(("Outcome", "Reason"), ((example.outcome, example.note or ""),), "Bigtable row")
    cells = tuple((c.column, c.value, c.encoding, c.timestamp) for c in example.cells)
    return Table(("Column", "Value", "Encoding", "Timestamp"), cells, f"Bigtable row {example.row_key}")


def _mapping(plan: MigrationPlan) -> list[Block]:
    blocks: list[Block] = [Heading(2, "Mapping per entity")]
    for entity in plan.entities:
        blocks.append(Heading(3, f"{entity.name} ({entity.action})"))
        blocks.append(Para(
            f"{entity.matched} sampled items matched: {entity.mapped} mapped into {entity.distinct_row_keys} distinct "
            f"rows, {entity.skipped} skipped, {entity.errors} errors. Row key: {entity.row_key_template or '—'}."
        ))  # fmt: skip
        blocks += [Pair(_item_table(ex.item), _row_table(ex)) for ex in entity.examples]
    return blocks


def _reads(plan: MigrationPlan) -> list[Block]:
    source = plan.source
    sort = plan.sort_key or "the sort key"
    items = [
        "GetItem by key → ReadRow by row key; BatchGetItem → ReadRows with a row set.",
        f"Query on {plan.partition_key or 'the partition key'} with a condition on {sort} → a row range (when the sort key "
        "is in the row key) or a column range / qualifier filter within one row (when it became a qualifier); "
        "rows come back sorted by key bytes, forward or reversed, with no 1 MB page limit.",
        "Scan → ReadRows over a prefix or key range; a full-table ReadRows streams everything.",
        "TTL → per-family garbage collection (max_age); GC runs at compaction, so filter by timestamp where expired data must not be seen.",
        "Transactions (TransactWriteItems) → single-row atomicity only: keep data that must change together in one row, "
        "or use CheckAndMutateRow / ReadModifyWriteRow on that row.",
        "Conditional writes → CheckAndMutateRow; atomic counters → Increment on 64-bit big-endian cells (encoding: int64).",
        "Every write is an upsert (MutateRow); deleting an entity folded into one row is one row delete.",
    ]
    indexes = (source.global_indexes + source.local_indexes) if source else ()
    for index in indexes:
        keys = index.partition_key + (f" + {index.sort_key}" if index.sort_key else "")
        items.append(
            f"{index.kind} {index.name} ({keys}) has no Bigtable equivalent: write a second table keyed by {keys} from the "
            "same pipeline, or define a continuous materialized view over this table; otherwise these reads become scans."
        )
    if not indexes:
        items.append("Secondary indexes (GSI/LSI) have no Bigtable equivalent: reads by another key need a second table "
                     "with that row key, written by the same pipeline, or a continuous materialized view.")  # fmt: skip
    return [Heading(2, "What changes for the application's reads"), Bullets(tuple(items))]


def _lints(plan: MigrationPlan) -> list[Block]:
    if not plan.lints:
        return [Heading(2, "Lints"), Para("No findings on the spec or the sample.", "ok")]
    rows = tuple((lint.severity, lint.code, lint.where, lint.message) for lint in plan.lints)
    tones = tuple(lint.severity for lint in plan.lints)
    return [Heading(2, "Lints"), Table(("Severity", "Code", "Where", "What to do"), rows, row_tones=tones)]


def _distribution(plan: MigrationPlan) -> list[Block]:
    blocks: list[Block] = [Heading(2, "Key distribution")]
    for report in plan.hotspots:
        after = f", after the common prefix {report.common_prefix!r}" if report.common_prefix else ""
        blocks.append(Para(f"By {report.dimension}{after}: {report.finding}. Gini {report.gini:.2f} (0 = even).",
                           "warning" if report.flagged else ""))  # fmt: skip
        blocks.append(Chart(f"Share of sampled writes by {report.dimension}", tuple(s.prefix for s in report.shares),
                            tuple(round(s.share * 100, 1) for s in report.shares), " %"))  # fmt: skip
    dead = plan.dead_letters
    if dead.total or plan.unmatched_examples:
        blocks.append(Heading(2, "Dead letters and unmatched items"))
        blocks.append(Table(("Reason", "Items"), tuple((reason, str(n)) for reason, n in dead.by_reason.items())))
        for example in dead.examples + plan.unmatched_examples:
            blocks.append(Para(f"{example.entity or 'unmatched'}: {example.reason}"))
            blocks.append(_item_table(example.item))
    return blocks


def _estimates(plan: MigrationPlan) -> list[Block]:
    e = plan.estimates
    rows = (
        ("Items", f"{e.items:,} (from {e.items_from})"),
        ("Average item size", size(e.average_item_bytes)),
        ("Table size", size(e.table_bytes)),
        ("Read capacity the scan consumes", f"{e.scan_read_units:,.0f} RCU"),
        ("Scan rate at the read budget", f"{e.read_units_per_second:,.0f} RCU/s" if e.read_units_per_second else "n/a (export)"),
        ("Scan duration", duration(e.scan_seconds)),
        ("Bigtable rows / mutation entries", f"{e.target_rows:,} / {e.target_writes:,}"),
        ("Bigtable cells", f"{e.target_cells:,}"),
        ("Bigtable data", size(e.target_bytes)),
        (f"Suggested nodes to write in {e.target_write_hours:g} h", f"{e.suggested_nodes} (bound by {e.node_basis})"),
    )
    return [Heading(2, "Estimates"), Table(("Figure", "Estimate"), rows), Bullets(e.assumptions)]


def report_blocks(plan: MigrationPlan) -> list[Block]:
    """Findings first (they decide whether to run), then the translation, then the numbers."""
    sections = (_summary, _lints, _source, _target, _mapping, _reads, _distribution, _estimates)
    return [block for section in sections for block in section(plan)]


# --------------------------------------------------------------------------- HTML


def bar_chart_svg(chart: Chart, width: int = 720) -> str:
    """A horizontal bar chart as inline SVG (no xmlns URL needed inside HTML)."""
    e = html.escape
    label_w, value_w, bar_h, gap, top = 200, 90, 18, 6, 28
    peak = max(chart.values, default=0) or 1
    height = top + len(chart.values) * (bar_h + gap) + 4
    parts = [f'<svg class="chart" role="img" aria-label="{e(chart.title)}" width="{width}" height="{height}" viewBox="0 0 {width} {height}">',
             f'<text x="0" y="16" class="title">{e(chart.title)}</text>']  # fmt: skip
    for index, (label, value) in enumerate(zip(chart.labels, chart.values)):
        y = top + index * (bar_h + gap)
        bar = (width - label_w - value_w) * value / peak
        shown = label if len(label) <= 28 else label[:27] + "…"
        parts.append(
            f'<text x="{label_w - 8}" y="{y + 13}" text-anchor="end"><title>{e(label)}</title>{e(shown)}</text>'
            f'<rect x="{label_w}" y="{y}" width="{bar:.1f}" height="{bar_h}" rx="2"/>'
            f'<text x="{label_w + bar + 6:.1f}" y="{y + 13}">{value:g}{e(chart.unit)}</text>'
        )
    if not chart.values:
        parts.append(f'<text x="0" y="{top + 12}">no data</text>')
    parts.append("</svg>")
    return "".join(parts)


def _html_table(table: Table) -> str:
    e = html.escape
    head = "".join(f"<th>{e(h)}</th>" for h in table.headers)
    body = []
    for index, row in enumerate(table.rows):
        tone = table.row_tones[index] if index < len(table.row_tones) else ""
        cls = f' class="{e(tone)}"' if tone else ""
        body.append(f"<tr{cls}>" + "".join(f"<td>{e(cell)}</td>" for cell in row) + "</tr>")
    caption = f"<caption>{e(table.caption)}</caption>" if table.caption else ""
    return f"<table>{caption}<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _html_block(block: Block) -> str:
    e = html.escape
    if isinstance(block, Heading):
        return f"<h{block.level}>{e(block.text)}</h{block.level}>"
    if isinstance(block, Para):
        return f'<p class="callout {e(block.tone)}">{e(block.text)}</p>' if block.tone else f"<p>{e(block.text)}</p>"
    if isinstance(block, Bullets):
        return "<ul>" + "".join(f"<li>{e(item)}</li>" for item in block.items) + "</ul>"
    if isinstance(block, Table):
        return _html_table(block)
    if isinstance(block, Chart):
        return f"<figure>{bar_chart_svg(block)}</figure>"
    return f'<div class="pair">{_html_table(block.left)}<div class="arrow">→</div>{_html_table(block.right)}</div>'


_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1f2328;margin:0 auto;max-width:1120px;padding:24px}
h1{font-size:22px;margin:0 0 12px}h2{font-size:18px;border-bottom:1px solid #d0d7de;padding-bottom:4px;margin-top:32px}
h3{font-size:15px;margin-top:20px}table{border-collapse:collapse;margin:8px 0 12px;font-size:13px}
caption{text-align:left;font-weight:600;padding:2px 0}th,td{border:1px solid #d0d7de;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f6f8fa}td{word-break:break-word;max-width:720px}tr.error td{background:#ffebe9}tr.warning td{background:#fff8c5}
tr.info td{background:#ddf4ff}.callout{padding:8px 12px;border-radius:6px;border:1px solid #d0d7de}
.callout.error{background:#ffebe9;border-color:#ff8182}.callout.warning{background:#fff8c5;border-color:#d4a72c}
.callout.ok{background:#dafbe1;border-color:#4ac26b}.callout.info{background:#ddf4ff}
.pair{display:grid;grid-template-columns:minmax(0,1fr) auto minmax(0,1.3fr);gap:12px;align-items:start}
.pair table{width:100%}.pair td{max-width:none}.pair .arrow{font-size:22px;padding-top:28px;color:#57606a}
figure{margin:8px 0 16px}svg.chart text{font-size:12px;fill:#1f2328}svg.chart text.title{font-weight:600;font-size:13px}
svg.chart rect{fill:#4c8bf5}
"""


def render_html(plan: MigrationPlan) -> str:
    """The report as one self-contained HTML page (inline CSS and SVG, no scripts, no external resources)."""
    body = "\n".join(_html_block(block) for block in report_blocks(plan))
    title = html.escape(f"ddb2bt report: {plan.source_table or 'export'} → {plan.target_table}")
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{title}</title>'
            f"<style>{_CSS}</style></head><body>\n{body}\n</body></html>\n")  # fmt: skip


# --------------------------------------------------------------------------- Markdown


def _md(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").replace("<", "&lt;")


def _md_table(table: Table) -> str:
    lines = [f"**{_md(table.caption)}**", ""] if table.caption else []
    lines.append("| " + " | ".join(_md(h) for h in table.headers) + " |")
    lines.append("|" + "---|" * len(table.headers))
    lines += ["| " + " | ".join(_md(cell) for cell in row) + " |" for row in table.rows]
    return "\n".join(lines)


def _md_block(block: Block) -> str:
    if isinstance(block, Heading):
        return "#" * block.level + " " + _md(block.text)
    if isinstance(block, Para):
        return (f"> **{block.tone.upper()}** " if block.tone else "") + _md(block.text)
    if isinstance(block, Bullets):
        return "\n".join(f"- {_md(item)}" for item in block.items)
    if isinstance(block, Table):
        return _md_table(block)
    if isinstance(block, Chart):
        peak = max(block.values, default=0) or 1
        rows = tuple((label, "█" * max(1, round(20 * value / peak)) if value else "", f"{value:g}{block.unit}")
                     for label, value in zip(block.labels, block.values))  # fmt: skip
        return _md_table(Table(("", "", ""), rows, block.title))
    return _md_table(block.left) + "\n\n→\n\n" + _md_table(block.right)


def render_markdown(plan: MigrationPlan) -> str:
    """The same report as Markdown (charts become text bars)."""
    return "\n\n".join(_md_block(block) for block in report_blocks(plan)) + "\n"
