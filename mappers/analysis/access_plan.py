"""Access patterns in the migration plan: per pattern, the Bigtable read, what it touches on the sample, and snippets.

Pure. `pattern_plans(spec, items, rows, types)` translates every declared pattern (`mappers.access`), runs each
served one on the sample's mapped rows (the partition with the most items, key values picked from it as `parity`
does), and writes the read as a ready-to-paste snippet for the Python data client and as `cbt` commands. A pattern
the spec cannot serve is an error lint naming it (a global index, whose rows are not written yet, a warning).
"""

from __future__ import annotations

import shlex
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from ..access import BigtableRead, Translation, holds, key_order, operand_value, translate
from ..attrvalue import binary, key_text
from ..decode import Decoder
from .lints import Lint, Severity
from ..index_rows import INDEX_KEY_BYTES, decode_index_row, indexable, key_part
from ..results import Cell, MappedRow, Skipped
from ..spec import IndexRowsSpec, MappingSpec
from ..table import SourceDescription

Item = dict


class PatternPlan(BaseModel):
    model_config = ConfigDict(frozen=True)
    name: str
    description: str | None = None
    dynamodb: str
    """The DynamoDB read, in DynamoDB's own words (KeyConditionExpression, ScanIndexForward, Limit)."""
    status: str
    """served, unservable or needs_index."""
    bigtable: str = ""
    """The Bigtable read, in words."""
    reason: str = ""
    suggestion: str = ""
    example_key: str = ""
    """The key values the sample example used."""
    rows_touched: int = 0
    cells_touched: int = 0
    items_returned: int = 0
    python: str = ""
    """A snippet for google.cloud.bigtable.data: sets `rows` to the rows the pattern reads."""
    cbt: tuple[str, ...] = ()


class IndexPlan(BaseModel):
    """A secondary index carried as index rows, and what the sample writes for it."""

    model_config = ConfigDict(frozen=True)
    name: str
    type: str
    keys: str
    """The index row key, in words: prefix, index keys, table keys."""
    projection: str
    family: str
    table: str = ""
    """The Bigtable table holding the index rows: the main table (under the index's prefix) or the index's own."""
    items_in_index: int = 0
    """Sampled items with the index's key attributes (the others have no index row: indexes are sparse)."""
    items_mapped: int = 0
    cells: int = 0
    bytes: int = 0
    """The index rows' cells and bytes (keys, qualifiers, values) on the sample."""
    example_key: str = ""


def index_plans(spec: MappingSpec, results: Sequence[object]) -> tuple[IndexPlan, ...]:
    """Each declared index: its row key and projection, and its rows on the sample (counted apart from the items')."""
    plans = []
    mapped = [result for result in results if isinstance(result, MappedRow)]
    table_keys = " + ".join(name for name in (spec.source.partition_key, spec.source.sort_key) if name)
    for index in spec.indexes:
        rows = [row for result in mapped for row in result.index_rows if row.index_name == index.name]
        keys = " + ".join(name for name in (index.partition_key, index.sort_key) if name)
        projection = index.projection.type + (f" ({', '.join(index.projection.non_key_attributes)})"
                                              if index.projection.non_key_attributes else "")  # fmt: skip
        plans.append(IndexPlan(
            name=index.name, type=index.type, projection=projection, family=index.family,
            table=index.target.table or spec.target.table,
            keys=(f"{index.target.prefix!r} + " if index.target.prefix else "")
            + f"{keys} + {table_keys} (each order-preserving, ended by \\x00\\x01)",
            items_in_index=len(rows), items_mapped=len(mapped), cells=sum(len(row.cells) for row in rows),
            bytes=sum(len(row.row_key) + sum(len(c.qualifier) + len(c.value) for c in row.cells) for row in rows),
            example_key=_shown_key(rows[0].row_key) if rows else ""))
    return tuple(plans)


def index_lints(spec: MappingSpec, source: SourceDescription | None) -> list[Lint]:
    """Each declared index against DescribeTable: an index it does not have, or has with other keys or another
    projection, would be written as index rows that answer otherwise than the index (a warning: a deliberate choice
    is the user's, and `parity` judges it); and its key types (`index_type_lints`)."""
    if source is None:
        return []
    found = []
    described = {index.name: index for index in source.global_indexes + source.local_indexes}
    for i, index in enumerate(spec.indexes):
        has = described.get(index.name)
        differs = []
        if has is None:
            differs.append(f"DescribeTable has no index {index.name!r} (it has "
                           f"{', '.join(sorted(described)) or 'none'})")  # fmt: skip
        else:
            keys = " + ".join(name for name in (index.partition_key, index.sort_key) if name)
            their_keys = " + ".join(name for name in (has.partition_key, has.sort_key) if name)
            if keys != their_keys or (index.type == "global") != (has.kind == "GSI"):
                differs.append(f"{index.type} index with keys {keys}, DescribeTable {'global' if has.kind == 'GSI' else 'local'} "
                               f"with {their_keys}")  # fmt: skip
            projection = (index.projection.type, tuple(sorted(index.projection.non_key_attributes)))
            if projection != (has.projection, tuple(sorted(has.projected_attributes))):
                differs.append(f"projection {' '.join([projection[0], *projection[1]])}, DescribeTable "
                               f"{' '.join([has.projection, *sorted(has.projected_attributes)])}")  # fmt: skip
        if differs:
            found.append(Lint(severity="warning", code="index-differs", where=f"indexes[{i}]", message=(
                f"index {index.name!r}: {'; '.join(differs)}: its index rows would answer otherwise than the index "
                "does; declare it as DescribeTable gives it (`ddb2bt infer` drafts it)")))
    return found + index_type_lints(spec, source.key_types)


def index_type_lints(spec: MappingSpec, key_types: Mapping[str, str]) -> list[Lint]:
    """Each index's declared key types against DescribeTable's AttributeDefinitions (`key_types`): DynamoDB leaves an
    item whose index key has another type out of the index, and so do index rows where the spec declares the type."""
    found = []
    for i, index in enumerate(spec.indexes):
        for role, attribute, declared in (("partition_key", index.partition_key, index.partition_key_type),
                                          ("sort_key", index.sort_key, index.sort_key_type)):  # fmt: skip
            table = key_types.get(attribute or "")
            if not attribute or table is None or declared == table:
                continue
            where = f"indexes[{i}].{role}_type"
            if declared is None:
                found.append(Lint(severity="warning", code="index-key-type-undeclared", where=where, message=(
                    f"index {index.name!r}: DescribeTable declares {attribute} {table}; an item whose {attribute} has "
                    f"another type is in no DynamoDB index, but would get an index row: add {role}_type: {table}")))
            else:
                found.append(Lint(severity="error", code="index-key-type", where=where, message=(
                    f"index {index.name!r}: {role}_type is {declared}, DescribeTable declares {table} for {attribute}: "
                    f"every item of the index would be left out of its index rows; make it {role}_type: {table}")))
    return found


def _shown_key(key: bytes) -> str:
    """A row key as text, its control bytes (the index rows' part ends) as \\xNN."""
    text = key.decode("utf-8", "backslashreplace")
    return "".join(f"\\x{ord(ch):02x}" if ord(ch) < 0x20 else ch for ch in text)


def dynamodb_text(spec: MappingSpec, translation: Translation) -> str:
    pattern = translation.spec_pattern
    assert pattern is not None
    pk, sk = translation.partition_key or spec.source.partition_key or "pk", translation.sort_key
    if pattern.operation == "get_item":
        return f"GetItem {pk} = :pk" + (f" AND {sk} = :sk" if sk else "")
    on = f"Query {pattern.index.name}" if pattern.index else "Query"
    if pattern.index:
        pk = pattern.index.partition_key
    condition = f"{pk} = :pk"
    if pattern.sort_key is not None:
        operator = pattern.sort_key.operator
        shown = [repr(key_text(operand_value(v))) for v in pattern.sort_key.values] or [":a", ":b"][: 2 if operator == "between" else 1]
        if operator == "between":
            condition += f" AND {sk} BETWEEN {shown[0]} AND {shown[1]}"
        elif operator == "begins_with":
            condition += f" AND begins_with({sk}, {shown[0]})"
        else:
            condition += f" AND {sk} {operator} {shown[0]}"
    extra = "" if pattern.scan_index_forward else ", ScanIndexForward=false"
    extra += f", Limit={pattern.limit}" if pattern.limit else ""
    extra += f", ProjectionExpression={', '.join(pattern.projection)}" if pattern.projection else ""
    return f"{on} {condition}{extra}"


def example_cases(translation: Translation, items: list[Item], most: int = 1) -> list[tuple[dict, list[dict]]]:
    """(partition value, operands) to try, from the sample: the partitions with the most items first."""
    pk, sk = translation.partition_key, translation.sort_key
    pattern = translation.spec_pattern
    assert pattern is not None
    by_partition: dict[tuple, list[Item]] = defaultdict(list)
    values: dict[tuple, dict] = {}
    index = translation.index_rows
    types = (index.partition_key_type, index.sort_key_type) if index is not None else (None, None)
    for item in items:
        if pk in item and (not sk or sk in item) and _keyed(item, pk, sk, types):  # indexes are sparse: an item without the
            # sort key, or with an index key value DynamoDB cannot index (an empty string), is in no index
            key = key_order(item[pk])
            by_partition[key].append(item)
            values[key] = item[pk]
    # A condition with values of its own (begins_with(sk, 'USER#')) is tried first where it returns items: the
    # partitions with the most items alone may hold none of them (a game's scores, not its users), and a parity of
    # nothing against nothing proves nothing.
    fixed = [operand_value(v) for v in pattern.sort_key.values] if pattern.sort_key and sk else []

    def meeting(key: tuple) -> int:
        assert pattern is not None and pattern.sort_key is not None
        return sum(holds(pattern.sort_key.operator, fixed, item.get(sk or "")) for item in by_partition[key])

    cases = []
    for key in sorted(by_partition, key=lambda k: (-(meeting(k) > 0) if fixed else 0, -len(by_partition[k]), k))[:most]:
        members = sorted((item for item in by_partition[key] if sk and sk in item), key=lambda item: key_order(item[sk]))
        sorts = [item[sk] for item in members] if sk else []
        cases.append((values[key], pick_operands(translation, sorts)))
    return cases


def _keyed(item: Item, pk: str, sk: str | None, types: tuple[str | None, ...]) -> bool:
    """Whether the item's key values can be keys (in an index: `indexable`, of the types it declares; a table's keys
    always are)."""
    for limit, name, kind in zip(INDEX_KEY_BYTES, (pk, sk), types):
        if name:
            part = key_part(item[name])
            if part is None or not indexable(item[name], part, limit) or (kind is not None and kind not in item[name]):
                return False
    return True


def pick_operands(translation: Translation, sorts: list[dict]) -> list[dict]:
    """Operands for the condition's parameters, from one partition's sort-key values (in order)."""
    pattern = translation.spec_pattern
    assert pattern is not None
    if pattern.operation == "get_item":
        return sorts[len(sorts) // 2 : len(sorts) // 2 + 1] if sorts else []
    if pattern.sort_key is None or pattern.sort_key.values or not sorts:
        return []
    operator = pattern.sort_key.operator
    if operator == "between":
        return [sorts[len(sorts) // 4], sorts[(3 * len(sorts)) // 4]]
    middle = sorts[len(sorts) // 2]
    if operator != "begins_with":
        return [middle]
    if "B" in middle:
        data = binary(middle["B"])
        return [{"B": data[: max(1, len(data) // 2)]}]
    text = middle["S"]
    cut = next((i + 1 for i, ch in enumerate(text) if ch in "#:/|-_"), max(1, len(text) // 2))
    return [{"S": text[:cut]}]


def python_snippet(spec: MappingSpec, read: BigtableRead) -> str:
    """Code for google.cloud.bigtable.data that sets `rows` to the read's rows (then decode them as the spec says)."""
    lines = [
        "from google.cloud.bigtable.data import BigtableDataClient, ReadRowsQuery, RowRange",
        "from google.cloud.bigtable.data import row_filters",
        "",
        f"with BigtableDataClient(project={spec.target.project!r}) as client:",
        f"    table = client.get_table({spec.target.instance!r}, {read.table!r})",
        "    query = ReadRowsQuery(",
    ]
    if read.row_keys:
        lines.append(f"        row_keys={list(read.row_keys)!r},")
    if read.ranges:
        lines.append("        row_ranges=[")
        for r in read.ranges:
            lines.append(f"            RowRange({r.start!r}, {r.end or None!r}, start_is_inclusive={r.start_inclusive}, "
                         f"end_is_inclusive={r.end_inclusive}),")  # fmt: skip
        lines.append("        ],")
    if read.cell_filter is not None:
        f = read.cell_filter
        column = f"row_filters.ColumnRangeFilter({f.family!r}, {f.qualifier!r}, {f.qualifier!r})"
        if f.cells:
            lines.append(f"        row_filter=row_filters.RowFilterChain([{column}, "
                         f"row_filters.CellsColumnLimitFilter({f.cells})]),")  # fmt: skip
        else:
            lines.append(f"        row_filter={column},")
    if read.rows_limit:
        lines.append(f"        limit={read.rows_limit},")
    lines.append("    )")
    lines.append("    rows = table.read_rows(query) if query.row_keys or query.row_ranges else []")
    if read.reverse_rows:
        lines.append("    rows.reverse()  # descending: Bigtable returns rows in ascending key order")
    if read.keep_rows:
        lines.append(f"    rows = rows[:{read.keep_rows}]")
    return "\n".join(lines) + "\n"


def cbt_commands(spec: MappingSpec, read: BigtableRead) -> tuple[str, ...]:
    """The equivalent `cbt` commands (one per row key or range)."""
    base = f"cbt -project {shlex.quote(spec.target.project)} -instance {shlex.quote(spec.target.instance)}"
    bounds = [*read.row_keys, *(key for r in read.ranges for key in (r.start, r.end))]
    if any(b"\x00" in key for key in bounds):
        return ("# none: cbt takes row keys as C strings, which cannot hold the NUL bytes index row keys end their "
                "parts with; use the Python snippet",)  # fmt: skip
    options = []
    if read.cell_filter is not None:
        options.append("columns=" + shlex.quote(f"{read.cell_filter.family}:{_text(read.cell_filter.qualifier)}"))
        if read.cell_filter.cells:
            options.append(f"cells-per-column={read.cell_filter.cells}")
    tail = (" " + " ".join(options)) if options else ""
    out = [f"{base} lookup {shlex.quote(read.table)} {shlex.quote(_text(key))}{tail}" for key in read.row_keys]
    for r in read.ranges:
        # cbt's start is inclusive and its end exclusive: the next key (key + 0x00) shifts the other kinds
        start = r.start if r.start_inclusive else r.start + b"\x00"
        end = r.end + b"\x00" if r.end and r.end_inclusive else r.end
        parts = [f"start={shlex.quote(_text(start))}"] + ([f"end={shlex.quote(_text(end))}"] if end else [])
        if read.rows_limit:
            parts.append(f"count={read.rows_limit}")
        out.append(f"{base} read {shlex.quote(read.table)} {' '.join(parts)}{tail}")
    return tuple(out)


def _text(key: bytes) -> str:
    """A key as cbt takes it: its UTF-8 text, NUL spelt as $'\\0' is not possible in every shell, so shown escaped."""
    return key.decode("utf-8", "backslashreplace").replace("\x00", "\\x00")


def run_read(read: BigtableRead, rows: Mapping[bytes, list[Cell]]) -> list[tuple[bytes, list[Cell]]]:
    """The read applied to rows held in memory (the sample's mapped rows), as Bigtable would answer it."""
    out = []
    for key in sorted(rows):
        if not read.touches(key):
            continue
        cells = rows[key]
        if read.cell_filter is not None:
            f = read.cell_filter
            cells = sorted((c for c in cells if c.family == f.family and c.qualifier == f.qualifier),
                           key=lambda c: -c.timestamp_micros)[: f.cells or None]  # fmt: skip
        if cells:
            out.append((key, cells))
        if read.rows_limit and len(out) == read.rows_limit:
            break
    return out


def sample_rows(results: Iterable[object]) -> dict[bytes, list[Cell]]:
    """The sample's mapped rows merged per row key (one cell per family, qualifier and timestamp: the last write)."""
    merged: dict[bytes, dict[tuple, Cell]] = defaultdict(dict)
    for result in results:
        if isinstance(result, MappedRow):
            for row in result.rows():
                for cell in row.cells:
                    merged[row.row_key][(cell.family, cell.qualifier, cell.timestamp_micros)] = cell
    return {key: list(cells.values()) for key, cells in merged.items()}


def decode_rows(decoder: Decoder, rows: Iterable[tuple[bytes, list[Cell]]],
                index: IndexRowsSpec | None = None) -> list[tuple[str, Item]]:  # fmt: skip
    """(entity, item) for every item the rows hold, in row order; with `index`, rows of that index (one item each)."""
    if index is not None:
        return [(f"index {index.name}", decode_index_row(index.family, cells)) for _key, cells in rows]
    items: list[tuple[str, Item]] = []
    for key, cells in rows:
        items.extend(decoder.decode_entities(key, cells))
    return items


def pattern_plans(spec: MappingSpec, items: list[Item], results: Sequence[object], decoder: Decoder,
                  types: Mapping[str, str] | None = None) -> tuple[tuple[PatternPlan, ...], tuple[Lint, ...]]:  # fmt: skip
    """Every declared pattern: its translation, tried on the sample; and the lints for those not served."""
    plans, found = [], []
    rows = sample_rows(results) if spec.access_patterns else {}
    unmatched = sum(isinstance(result, Skipped) and result.entity is None for result in results)
    for index, pattern in enumerate(spec.access_patterns):
        translation = translate(spec, pattern, types)
        where = f"access_patterns[{index}]"
        common: dict[str, Any] = {"name": pattern.name, "description": pattern.description,
                                  "dynamodb": dynamodb_text(spec, translation), "status": translation.status}
        if not translation.served:
            plans.append(PatternPlan(**common, reason=translation.reason, suggestion=translation.suggestion))
            severity: Severity = "warning" if translation.status == "needs_index" else "error"
            found.append(Lint(severity=severity, code=f"access-pattern-{translation.status.replace('_', '-')}",
                              where=where, message=f"access pattern {pattern.name!r} cannot be served: "
                              f"{translation.reason}; {translation.suggestion}"))  # fmt: skip
            continue
        for loss in translation.lossy:
            found.append(Lint(severity="warning", code="access-pattern-lossy", where=where,
                              message=f"access pattern {pattern.name!r} returns items of which {loss}: parity will "
                              "show those items differently"))  # fmt: skip
        if spec.unmatched == "skip":  # such items are in no row (nor index row): DynamoDB returns them, Bigtable not
            found.append(Lint(severity="warning", code="access-pattern-unmatched", where=where, message=(
                f"access pattern {pattern.name!r}: items no entity matches are not migrated (unmatched: skip; "
                f"{unmatched} sampled item(s)), and DynamoDB returns them wherever the pattern reaches them: parity "
                "fails on such a partition; map them (an entity that matches them) if the application reads them")))
        cases = example_cases(translation, items)
        if not cases:
            plans.append(PatternPlan(**common, bigtable=translation.summary))
            continue
        partition, operands = cases[0]
        try:
            read = translation.read(partition, operands)
        except ValueError as err:
            plans.append(PatternPlan(**common, bigtable=translation.summary, reason=str(err)))
            continue
        touched = run_read(read, rows)
        try:
            returned = translation.finish(decode_rows(decoder, touched, translation.index_rows), partition, operands)
        except ValueError as err:  # DecodeError among them: the sample's rows do not read back, say why
            reason = f"the rows it reads on the sample do not decode into items: {err}"
            plans.append(PatternPlan(**common, bigtable=translation.summary, reason=reason))
            found.append(Lint(severity="warning", code="access-pattern-undecodable", where=where,
                              message=f"access pattern {pattern.name!r}: {reason}; parity and rollback will fail on "
                              "such rows (give each entity sharing a row qualifiers of its own)"))  # fmt: skip
            continue
        shown = f"{translation.partition_key}={key_text(partition)!r}" + "".join(
            f", {key_text(v)!r}" for v in operands)  # fmt: skip
        plans.append(PatternPlan(
            **common, bigtable=translation.summary + "; then " + ", ".join(read.steps), example_key=shown,
            rows_touched=len(touched), cells_touched=sum(len(cells) for _, cells in touched),
            items_returned=len(returned), python=python_snippet(spec, read), cbt=cbt_commands(spec, read),
        ))  # fmt: skip
    return tuple(plans), tuple(found)
