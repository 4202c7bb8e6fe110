"""The schema translation report: one MigrationPlan rendered as self-contained HTML or as Markdown.

The sections are built once as a small list of neutral blocks (headings, paragraphs, tables,
charts, side-by-side pairs) and then rendered twice, so the HTML and the Markdown can never say
different things. The HTML needs no network to view: inline CSS, charts drawn here as inline SVG,
no scripts, fonts or images. Every piece of user data goes through `html.escape`.
"""

from __future__ import annotations

import html
from pathlib import Path
from collections.abc import Iterable
from typing import NamedTuple

from ddb2bt.mappers.analysis.costs import Costs, cost_rows
from ddb2bt.mappers.analysis.folded import FoldedRow
from ddb2bt.mappers.analysis.plan import AttributePreview, ExampleRow, MigrationPlan, extrapolation, shorten, source_count_text
from ddb2bt.mappers.analysis.sample import SizeStats
from ddb2bt.mappers.units import human_duration, human_size, human_units

# --------------------------------------------------------------------------- blocks


class Heading(NamedTuple):
    level: int
    text: str
    anchor: str = ""
    """The id a section's h2 carries, for the table of contents."""


class Contents(NamedTuple):
    """The table of contents: (anchor, title) of every section."""

    entries: tuple[tuple[str, str], ...]


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


Block = Heading | Para | Bullets | Table | Chart | Pair | Contents


# --------------------------------------------------------------------------- formatting


size, duration, units = human_size, human_duration, human_units
EXAMPLES = 1
"""Items shown per entity beside their rows (migrate-plan's `--format json` has all it sampled)."""
FOLDED_ROWS = 1
"""Folded rows shown whole."""
VALUE_CHARS = 240
"""Longer values are shortened in the report, saying by how much (`--format json` of migrate-plan has them whole)."""


def _shown(text: str) -> str:
    return shorten(text, VALUE_CHARS)[0]


def _bins(stats: SizeStats) -> tuple[tuple[str, ...], tuple[float, ...]]:
    labels = tuple(f"{size(b.lower)}–{size(b.upper)}" for b in stats.histogram)
    return labels, tuple(float(b.count) for b in stats.histogram)


# --------------------------------------------------------------------------- sections


def _losses_of(plan: MigrationPlan) -> list[str]:
    return [loss for entity in plan.entities for loss in entity.losses]


def verdict(plan: MigrationPlan) -> tuple[str, str]:
    """(tone, sentence): errors block a run; losses and warnings are to be read first; ready only with neither."""
    losses = len(_losses_of(plan))
    if plan.has_errors:
        return "error", "Not ready: the plan has errors; fix them before migrating."
    if losses:
        return "warning", (f"Ready to run once the {_plural(losses, 'loss', 'losses')} below are accepted: the target "
                           "will not give back everything the source holds.")
    if plan.has_warnings:
        return "warning", "Ready to run, with warnings worth reading before a full run."
    return "ok", "No findings and no losses: the mapping is ready for a full run."


def _plural(count: int, one: str, many: str | None = None) -> str:
    return f"{count:,} {one if count == 1 else many or one + 's'}"


def _summary(plan: MigrationPlan) -> list[Block]:
    counts = {s: sum(1 for lint in plan.lints if lint.severity == s) for s in ("error", "warning", "info")}
    sample, source = plan.sample, plan.source
    tone, sentence = verdict(plan)
    mapped = [e for e in plan.entities if e.action == "map"]
    items = f"{source.item_count:,} items, {size(source.size_bytes)}" if source else f"{sample.items:,} sampled items"
    losses = _losses_of(plan)
    risks = [lint for lint in plan.lints if lint.severity in ("error", "warning")]
    rows = [
        ("Moves", f"{plan.source_table or '(export)'} ({items}) → {plan.target_instance}/{plan.target_table}: "
                  f"{_plural(len(mapped), 'entity', 'entities')}, {_plural(len(plan.families), 'family', 'families')}"),
        ("Losses", f"{_plural(len(losses), 'loss', 'losses')}, listed next" if losses else "none"),
        ("Risks", f"{_plural(counts['error'], 'error')}, {_plural(counts['warning'], 'warning')}"
                  + (f": {', '.join(dict.fromkeys(lint.code for lint in risks))}" if risks else "")),
        ("Sample", f"{sample.items:,} items: {sample.mapped:,} mapped, {sample.errors:,} dead letters, "
                   f"{sample.skipped:,} skipped"),
    ]  # fmt: skip
    indexes = (source.global_indexes + source.local_indexes) if source else ()
    if indexes:
        rows.append(("Indexes", ", ".join(f"{i.kind} {i.name}" for i in indexes) + ": a second table each"))
    return [
        Heading(1, f"Schema translation report: DynamoDB {plan.source_table or '(export)'} → Bigtable "
                   f"{plan.target_instance}/{plan.target_table}"),
        Heading(2, "Summary", "summary"),
        Para(sentence, tone),
        Table(("", ""), tuple(rows)),
    ]  # fmt: skip


def _losses(plan: MigrationPlan) -> list[Block]:
    losses = _losses_of(plan)
    blocks: list[Block] = [Heading(2, "Losses", "losses")]
    if not losses:
        return blocks + [Para("None: every sampled item reads back from its cells exactly (the decoder checks each).", "ok")]
    return blocks + [
        Para(f"{_plural(len(losses), 'thing', 'things')} the target will not give back, declared (drop, lossy, skip, "
             "TTL) or implied by the spec's shape (keys that cannot be split back, overwritten cells):", "warning"),
        Bullets(tuple(losses)),
    ]


def _keys(plan: MigrationPlan) -> list[Block]:
    """Each entity's row key taken apart, one table row per entity: its parts in order, an example, the byte order."""
    rows = []
    for entity in plan.entities:
        if entity.key is None:
            continue
        key = entity.key
        parts = " + ".join(f"{part.text} ({part.meaning})" for part in key.parts if part.kind != "delimiter")
        example = next((ex.row_key for ex in entity.examples if ex.row_key), None)
        rows.append((entity.name, f"{entity.row_key_template}; delimiter {key.delimiter!r}, on_delimiter: "
                                  f"{key.on_delimiter}" + (f"; e.g. {example}" if example else ""), parts, key.order))
    if not rows:
        return []
    return [Heading(2, "Row keys", "keys"), Table(("Entity", "Template", "Parts in order", "What the order means"),
                                                  tuple(rows))]


def _indexes(plan: MigrationPlan) -> list[Block]:
    """Secondary indexes carried as index rows: one table row each, with its rows on the sample."""
    if not plan.indexes:
        return []
    rows = tuple((index.name, index.type, index.table, index.keys, index.projection,
                  f"{index.items_in_index} of {index.items_mapped} items, {index.cells} cells, {size(index.bytes)}")
                 for index in plan.indexes)  # fmt: skip
    return [Heading(2, "Secondary indexes", "indexes"),
            Para("Each index is written as index rows, beside the items' rows under a prefix or in a table of their "
                 "own: one row per item that has the index's key attributes (indexes are sparse), so that a query on "
                 "the index is one range of rows."),
            Table(("Index", "Type", "Table", "Row key", "Projection", "On the sample"), rows)]


def _source(plan: MigrationPlan) -> list[Block]:
    source = plan.source
    rows = [("Partition key", plan.partition_key or "(from DescribeTable)"), ("Sort key", plan.sort_key or "none")]
    if source:
        rows += [
            ("Key types", ", ".join(f"{k}: {t}" for k, t in source.key_types.items()) or "unknown"),
            ("Items (approx.)", source_count_text(plan) if plan.estimates.lower_bound else f"{source.item_count:,}"),
            ("Size (approx.)", _source_size(plan)),
            ("Billing", source.billing_mode + (f", {source.read_capacity:,} RCU" if source.read_capacity else "")),
            ("Stream", source.stream_view_type or "disabled"),
            ("TTL", f"{source.ttl_attribute} ({source.ttl_status or 'status unknown'})" if source.ttl_attribute else "none"),
        ]
    blocks: list[Block] = [Heading(2, "Source: DynamoDB schema", "source"), Table(("Property", "Value"), tuple(rows))]
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


def _source_size(plan: MigrationPlan) -> str:
    """DescribeTable's size, and where the estimates' size comes from when they differ (so the two agree)."""
    source, e = plan.source, plan.estimates
    assert source is not None
    reported = f"{size(source.size_bytes)} (DescribeTable, refreshed about every 6 h)"
    if source.size_bytes == e.table_bytes:
        return reported
    if e.lower_bound:
        return f"{reported}; at least {size(e.table_bytes)}, the sampled items' size"
    return f"{reported}; the estimates use {size(e.table_bytes)}: the sample's average item × {e.items:,} items"


def _target(plan: MigrationPlan) -> list[Block]:
    families = tuple((f.name, f.gc) for f in plan.families)
    mix = plan.sample.entity_mix
    labels, values = _bins(plan.sample.row_sizes)
    return [
        Heading(2, "Target: Bigtable schema", "target"),
        Para(f"Table {plan.target_table} in instance {plan.target_instance}. Cells with no timestamp of their own are written at "
             + (plan.migration_time or "the run's start time (migration_time is unset)") + "."),  # fmt: skip
        Table(("Column family", "Garbage collection"), families, "Column families"),
        Chart("Entity mix (sampled items per entity)", tuple(mix), tuple(float(v) for v in mix.values())),
        Chart("Bigtable row size (sampled rows per size band, all cells written to the row)", labels, values),
    ]


def _item_table(item: tuple[AttributePreview, ...]) -> Table:
    return Table(("Attribute", "Type", "Value"), tuple((a.name, a.type, _shown(a.value)) for a in item), "DynamoDB item")


def _row_table(example: ExampleRow) -> Table:
    if example.outcome != "mapped":
        return Table(("Outcome", "Reason"), ((example.outcome, example.note or ""),), "Bigtable row")
    cells = tuple((c.column, _shown(c.value), c.encoding, c.timestamp) for c in example.cells)
    return Table(("Column", "Value", "Encoding", "Timestamp"), cells, f"Bigtable row {example.row_key}")


def _mapping(plan: MigrationPlan) -> list[Block]:
    blocks: list[Block] = [Heading(2, "Mapping per entity", "mapping")]
    for entity in plan.entities:
        blocks.append(Heading(3, f"{entity.name} ({entity.action})"))
        blocks.append(Para(
            f"{entity.matched} sampled items matched: {entity.mapped} mapped into {entity.distinct_row_keys} distinct "
            f"rows, {entity.skipped} skipped, {entity.errors} errors. Row key: {entity.row_key_template or '—'}."
        ))  # fmt: skip
        shown = {row.row_key for row in plan.folded_rows[:FOLDED_ROWS]}  # those rows show their items whole below
        blocks += [Pair(_item_table(ex.item), _row_table(ex)) for ex in entity.examples[:EXAMPLES] if ex.row_key not in shown]
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
    return [Heading(2, "What changes for the application's reads", "reads"), Bullets(tuple(items))]


def _lints(plan: MigrationPlan) -> list[Block]:
    if not plan.lints:
        if _losses_of(plan):  # never an all-clear while losses are declared
            return [Heading(2, "Findings", "findings"), Para("Nothing to fix in the spec or the sample; the losses above "
                                                             "are to be accepted.")]
        return [Heading(2, "Findings", "findings"), Para("No findings on the spec or the sample.", "ok")]
    rows = tuple((lint.severity, lint.where, lint.message) for lint in plan.lints)
    tones = tuple(lint.severity for lint in plan.lints)
    return [Heading(2, "Findings", "findings"), Table(("Severity", "Where", "What to do"), rows, row_tones=tones)]


def _distribution(plan: MigrationPlan) -> list[Block]:
    blocks: list[Block] = [Heading(2, "Key distribution", "distribution")]
    for report in plan.hotspots:
        after = f", after the common prefix {report.common_prefix!r}" if report.common_prefix else ""
        blocks.append(Para(f"By {report.dimension}{after}: {report.finding}. Gini {report.gini:.2f} (0 = even).",
                           "warning" if report.flagged else ""))  # fmt: skip
        blocks.append(Chart(f"Share of sampled writes by {report.dimension}", tuple(s.prefix for s in report.shares),
                            tuple(round(s.share * 100, 1) for s in report.shares), " %"))  # fmt: skip
    dead = plan.dead_letters
    if dead.total or plan.unmatched_examples:
        blocks.append(Heading(2, "Dead letters and unmatched items", "dead-letters"))
        blocks.append(Bullets(tuple(cause.line() for cause in dead.causes)))
        for example in (dead.examples + plan.unmatched_examples)[:2]:
            blocks.append(Para(f"{example.entity or 'unmatched'}: {example.reason}"))
            blocks.append(_item_table(example.item))
    return blocks


def _estimates(plan: MigrationPlan) -> list[Block]:
    e = plan.estimates
    scaled, sentence = extrapolation(plan)
    size_basis = ("DescribeTable" if e.table_bytes_from == "DescribeTable" else "the sample's average item × items"
                  if e.items_from == "DescribeTable" else "the sample")
    least = "at least " if e.lower_bound else ""  # the count is unknown: the sample's figures are lower bounds
    rows = (
        ("Items", f"{least}{e.items:,}", "DescribeTable (approximate)" if e.items_from == "DescribeTable"
         else "the sample (DescribeTable reports 0)" if e.lower_bound else "the sample"),
        ("Average item size", size(e.average_item_bytes), "table size ÷ items" if size_basis == "DescribeTable"
         else "the sample"),
        ("Table size", least + size(e.table_bytes), size_basis),
        ("Read capacity the scan consumes", f"{least}{units(e.scan_read_units)} RCU", "table size ÷ 4 KiB per read unit"),
        ("Scan rate at the read budget", f"{units(e.read_units_per_second)} RCU/s" if e.read_units_per_second
         else "n/a (export)", "read budget × the table's RCU"),
        ("Scan duration", least + duration(e.scan_seconds), "read units ÷ rate"),
        ("Bigtable rows / mutation entries", f"{least}{e.target_rows:,} / {e.target_writes:,}", scaled),
        ("Bigtable cells", f"{least}{e.target_cells:,}", scaled),
        ("Bigtable data", least + size(e.target_bytes), scaled),
        (f"Suggested nodes to write in {e.target_write_hours:g} h", least + str(e.suggested_nodes),
         f"bound by {e.node_basis}"),
    )
    return [Heading(2, "Estimates", "estimates"), Para(sentence), Table(("Figure", "Estimate", "Basis"), rows), Bullets(e.assumptions)]


def _costs(costs: Costs | None) -> list[Block]:
    """What the migration costs and what the target needs (what `migrate-plan` prints), with the prices assumed."""
    if costs is None:
        return []
    rows = tuple((what[0].upper() + what[1:], dollars, basis) for what, dollars, basis in cost_rows(costs))
    return [Heading(2, "Cost and size", "costs"),
            Para("List prices assumed (change them with `ddb2bt migrate-plan SPEC --price NAME=VALUE`): "
                 + "; ".join(f"{name} ${value:g} ({costs.price_sources[name]})"
                             for name, value in costs.prices.model_dump().items()) + "."),
            Table(("Figure", "Dollars", "Basis"), rows),
            Bullets((f"Per node: {costs.per_node}.", *costs.notes))]


def _folded(plan: MigrationPlan) -> list[Block]:
    blocks: list[Block] = [Heading(2, "Folded rows: several items, one row", "folded")]
    if not plan.folded_rows:
        return blocks + [Para("No sampled row is written by more than one item: each row holds one item's cells, as "
                              "shown under Mapping per entity.")]
    blocks.append(Para("Several items write into each of these Bigtable rows (a single-table design folds a partition "
                       "into one row). Each row is shown whole: every cell the sampled items write there, all versions "
                       "newest first, with the item that wrote it."))
    for row in plan.folded_rows[:FOLDED_ROWS]:
        blocks += _folded_row(row)
    more = len(plan.folded_rows) - FOLDED_ROWS
    if more > 0:
        blocks.append(Para(f"{_plural(more, 'more folded row')} in migrate-plan's `--format json`."))
    return blocks


def _folded_row(row: FoldedRow) -> list[Block]:
    items = tuple((f"#{item.number}", item.entity, item.key) for item in row.items)
    cells = tuple((cell.column, f"{cell.version} of {cell.versions}" if cell.versions > 1 else "only", _shown(cell.value),
                   cell.encoding, cell.timestamp, f"#{cell.item}") for cell in row.cells)
    blocks: list[Block] = [
        Heading(3, f"Row {row.row_key}: {len(row.items)} items"),
        Table(("Item", "Entity", "Key"), items, "Items folded into this row"),
        Table(("Column", "Version", "Value", "Encoding", "Timestamp", "From item"), cells,
              f"Bigtable row {row.row_key}, whole"),
    ]
    if row.more_cells:
        blocks.append(Para(f"… and {row.more_cells:,} more cells in this row (not listed)."))
    blocks.append(Bullets(row.versions) if row.versions else Para("No column of this row holds more than one version."))
    return blocks


def report_blocks(plan: MigrationPlan, costs: Costs | None = None) -> list[Block]:
    """The summary and the losses first (they decide whether to run), then the findings, the keys, the translation,
    the numbers and, when given, the costs; a table of contents after the summary."""
    sections = (_losses, _lints, _keys, _indexes, _source, _target, _mapping, _folded, _reads, _distribution, _estimates)
    summary = _summary(plan)
    body = _telling([*(block for section in sections for block in section(plan)), *_costs(costs)])
    contents = Contents(tuple((block.anchor, block.text) for block in [*summary, *body]
                              if isinstance(block, Heading) and block.anchor))
    return [*summary, contents, *body]


def _telling(blocks: Iterable[Block]) -> list[Block]:
    """The blocks, with a chart that would say nothing as a sentence: one with a single bar (a chart of one value),
    and one that repeats an earlier chart's bars (two views that agree on a small sample)."""
    out: list[Block] = []
    seen: list[tuple[float, ...]] = []
    for block in blocks:
        if isinstance(block, Chart):
            bars = [(label, value) for label, value in zip(block.labels, block.values) if value]
            if len(bars) < 2:
                only = f"{bars[0][0]} only ({bars[0][1]:g}{block.unit})" if bars else "no data"
                out.append(Para(f"{block.title}: {only}."))
                continue
            if block.values in seen:
                out.append(Para(f"{block.title}: the same bars as the chart above."))
                continue
            seen.append(block.values)
        out.append(block)
    return out


# --------------------------------------------------------------------------- HTML

CHART_WIDTH = 400
"""The charts' drawing width (viewBox units): they scale to the page (width 100%, at most 1.2× this)."""
CHART_LABEL_CHARS = 56
"""Longer bar labels are cut (the whole label is the bar's tooltip)."""
CHART_FIT_CHARS = 36
"""Labels longer than this are fitted to 7 units a character (SVG textLength), so no glyph runs past the width."""
WIDE_TABLE = 4
LONG_WORD = 30
"""A cell word longer than this (characters) lets its column break words anywhere."""
TIGHT_WORD = 24
"""A wide table's column of single words no longer than this (an ISO timestamp) does not wrap."""
"""Tables with this many columns or more become stacked cards on narrow screens (fewer fit, wrapping)."""


def bar_chart_svg(chart: Chart) -> str:
    """A horizontal bar chart as inline SVG that scales with the page: each label above its bar, the value after it."""
    e = html.escape
    width, label_h, bar_h, gap = CHART_WIDTH, 15, 14, 9
    value_w = 64  # room after the longest bar for its value
    peak = max(chart.values, default=0) or 1
    step = label_h + bar_h + gap
    height = max(len(chart.values), 1) * step
    parts = [f'<svg class="chart" role="img" aria-label="{e(chart.title)}" viewBox="0 0 {width} {height}" '
             f'width="100%" preserveAspectRatio="xMinYMin meet">']
    for index, (label, value) in enumerate(zip(chart.labels, chart.values)):
        y = index * step
        bar = (width - value_w) * value / peak
        shown = label if len(label) <= CHART_LABEL_CHARS else label[: CHART_LABEL_CHARS - 1] + "…"
        # A long label is fitted to the drawing (wide glyphs could otherwise run past it): never clipped.
        fit = (f' textLength="{min(width, len(shown) * 7)}" lengthAdjust="spacingAndGlyphs"'
               if len(shown) > CHART_FIT_CHARS else "")
        parts.append(
            f'<text x="0" y="{y + 11}"{fit}><title>{e(label)}</title>{e(shown)}</text>'
            f'<rect x="0" y="{y + label_h}" width="{bar:.1f}" height="{bar_h}" rx="2"/>'
            f'<text x="{bar + 5:.1f}" y="{y + label_h + 11}">{value:g}{e(chart.unit)}</text>'
        )
    if not chart.values:
        parts.append('<text x="0" y="16">no data</text>')
    parts.append("</svg>")
    return "".join(parts)


def _html_table(table: Table) -> str:
    e = html.escape
    wide = len(table.headers) >= WIDE_TABLE
    # Only columns holding long unbroken runs (URLs, JSON, keys) may break anywhere: elsewhere words stay whole.
    columns = list(zip(*table.rows))
    long = {i for i, column in enumerate(columns) if any(len(word) > LONG_WORD for cell in column for word in cell.split())}
    # In wide tables (cards when narrow), short one-word columns (timestamps, ids) stay on one line.
    tight = {i for i, column in enumerate(columns) if wide and all(len(c) <= TIGHT_WORD and " " not in c for c in column)}
    head = "".join(f"<th>{e(h)}</th>" for h in table.headers) if any(table.headers) else ""
    body = []
    for index, row in enumerate(table.rows):
        tone = table.row_tones[index] if index < len(table.row_tones) else ""
        cls = f' class="{e(tone)}"' if tone else ""
        cells = []
        for i, (label, cell) in enumerate(zip(table.headers, row)):
            kind = "long" if i in long else "tight" if i in tight else ""
            attributes = (f' class="{kind}"' if kind else "") + (f' data-label="{e(label)}"' if wide and label else "")
            cells.append(f"<td{attributes}>{e(cell)}</td>")
        body.append(f"<tr{cls}>" + "".join(cells) + "</tr>")
    caption = f"<caption>{e(table.caption)}</caption>" if table.caption else ""
    return (f'<table class="{"cards" if wide else "plain"}">{caption}{f"<thead><tr>{head}</tr></thead>" if head else ""}'
            f"<tbody>{''.join(body)}</tbody></table>")


def _html_block(block: Block) -> str:
    e = html.escape
    if isinstance(block, Heading):
        anchor = f' id="{e(block.anchor)}"' if block.anchor else ""
        return f"<h{block.level}{anchor}>{e(block.text)}</h{block.level}>"
    if isinstance(block, Contents):
        links = "".join(f'<li><a href="#{e(anchor)}">{e(text)}</a></li>' for anchor, text in block.entries)
        return f'<nav aria-label="Contents"><ol class="contents">{links}</ol></nav>'
    if isinstance(block, Para):
        return f'<p class="callout {e(block.tone)}">{e(block.text)}</p>' if block.tone else f"<p>{e(block.text)}</p>"
    if isinstance(block, Bullets):
        return "<ul>" + "".join(f"<li>{e(item)}</li>" for item in block.items) + "</ul>"
    if isinstance(block, Table):
        return _html_table(block)
    if isinstance(block, Chart):
        return f"<figure><figcaption>{e(block.title)}</figcaption>{bar_chart_svg(block)}</figure>"
    return (f'<div class="pair"><div class="side">{_html_table(block.left)}</div>'
            f'<div class="arrow" aria-hidden="true"></div><div class="side">{_html_table(block.right)}</div></div>')


# Narrow first: one column, tables of 3+ columns as cards (each cell with its header); from 900 px the item and its
# row sit side by side and tables are tables again. Long values (URLs, JSON) wrap anywhere rather than widen the page.
_CSS = f"""
*{{box-sizing:border-box}}
body{{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1f2328;margin:0 auto;max-width:1120px;
padding:16px;overflow-wrap:break-word}}
h1{{font-size:20px;margin:0 0 12px}}h2{{font-size:17px;border-bottom:1px solid #d0d7de;padding-bottom:4px;margin-top:28px}}
h3{{font-size:15px;margin-top:20px}}
table{{border-collapse:collapse;margin:8px 0 12px;font-size:13px;max-width:100%}}
caption{{text-align:left;font-weight:600;padding:2px 0;overflow-wrap:anywhere}}
th,td{{border:1px solid #d0d7de;padding:3px 8px;text-align:left;vertical-align:top}}td.long{{overflow-wrap:anywhere}}td.tight{{white-space:nowrap}}
th{{background:#f6f8fa}}tr.error td{{background:#ffebe9}}tr.warning td{{background:#fff8c5}}tr.info td{{background:#ddf4ff}}
.callout{{padding:8px 12px;border-radius:6px;border:1px solid #d0d7de}}
.callout.error{{background:#ffebe9;border-color:#ff8182}}.callout.warning{{background:#fff8c5;border-color:#d4a72c}}
.callout.ok{{background:#dafbe1;border-color:#4ac26b}}.callout.info{{background:#ddf4ff}}
.pair{{display:grid;grid-template-columns:minmax(0,1fr);gap:0;margin-bottom:8px}}
.pair .side{{min-width:0}}.pair table{{width:100%}}
.pair .arrow{{font-size:20px;color:#57606a;text-align:center;line-height:1}}.pair .arrow::after{{content:"\\2193"}}
figure{{margin:8px 0 16px}}
ol.contents{{columns:2 9em;margin:4px 0 8px;padding-left:1.6em}}ol.contents a{{color:#0969da}}figcaption{{font-weight:600;font-size:13px;margin-bottom:4px}}
svg.chart{{display:block;width:100%;max-width:{CHART_WIDTH * 6 // 5}px;height:auto}}
svg.chart text{{font-size:12px;fill:#1f2328}}svg.chart rect{{fill:#4c8bf5}}
@media (max-width:899px){{
table.cards,table.cards tbody,table.cards tr,table.cards td,table.cards caption{{display:block;width:100%}}
table.cards thead{{display:none}}
table.cards tr{{border:1px solid #d0d7de;border-radius:6px;margin:0 0 8px;padding:4px 0}}
table.cards td{{border:0;padding:2px 10px;display:grid;grid-template-columns:minmax(0,7.5em) minmax(0,1fr);gap:8px}}
table.cards td::before{{content:attr(data-label);font-weight:600;color:#57606a}}
}}
@media (min-width:900px){{
table{{width:auto}}
.pair{{grid-template-columns:minmax(0,1fr) auto minmax(0,1.3fr);gap:12px;align-items:start}}
.pair .arrow{{padding-top:28px}}.pair .arrow::after{{content:"\\2192"}}
}}
"""


def render_html(plan: MigrationPlan, costs: Costs | None = None) -> str:
    """The report as one self-contained HTML page (inline CSS and SVG, no scripts, no external resources), readable
    from a 420 px phone to a wide screen."""
    body = "\n".join(_html_block(block) for block in report_blocks(plan, costs))
    title = html.escape(f"ddb2bt report: {plan.source_table or 'export'} → {plan.target_table}")
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{title}</title><style>{_CSS}</style></head><body>\n{body}\n</body></html>\n")


# --------------------------------------------------------------------------- Markdown


def _md(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").replace("<", "&lt;")


def _slug(text: str) -> str:
    """The anchor GitHub and most Markdown viewers give a heading: lower case, punctuation dropped, spaces as -."""
    return "".join(c for c in text.lower() if c.isalnum() or c in " -_").replace(" ", "-")


def _md_table(table: Table) -> str:
    lines = [f"**{_md(table.caption)}**", ""] if table.caption else []
    lines.append("| " + " | ".join(_md(h) for h in table.headers) + " |")
    lines.append("|" + "---|" * len(table.headers))
    lines += ["| " + " | ".join(_md(cell) for cell in row) + " |" for row in table.rows]
    return "\n".join(lines)


def _md_block(block: Block) -> str:
    if isinstance(block, Heading):
        return "#" * block.level + " " + _md(block.text)
    if isinstance(block, Contents):
        return "**Contents**\n\n" + "\n".join(f"{n}. [{_md(text)}](#{_slug(text)})"
                                               for n, (_, text) in enumerate(block.entries, 1))
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


def render_markdown(plan: MigrationPlan, costs: Costs | None = None) -> str:
    """The same report as Markdown (charts become text bars)."""
    return "\n\n".join(_md_block(block) for block in report_blocks(plan, costs)) + "\n"


# --------------------------------------------------------------------------- files

KINDS = {"html": "html", "htm": "html", "md": "md", "markdown": "md"}


def render(plan: MigrationPlan, kind: str, costs: Costs | None = None) -> str:
    """The report as ``kind`` (html or md)."""
    return render_html(plan, costs) if kind == "html" else render_markdown(plan, costs)


def write_report(plan: MigrationPlan, output: Path, costs: Costs | None = None) -> None:
    """The report for ``plan`` as HTML or Markdown, by ``output``'s suffix (one of KINDS)."""
    from ..pipelines.run.dead_letters import create_private  # the report shows sample items (user data): 0600

    with create_private(str(output)) as handle:
        handle.write(render(plan, KINDS[output.suffix.lower().lstrip(".")], costs).encode("utf-8"))
