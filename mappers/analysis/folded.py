"""Folded rows: Bigtable rows that several sampled items write into (single-table designs), shown whole.

An example row in the plan shows what one item writes. A single-table design folds a whole
partition into one row, and a column written by several items (the comments of a video) holds
several versions of one cell. :func:`folded_rows` gathers, for the rows of the sample that more
than one item writes, every cell of the row (all versions, newest first, each with the item that
wrote it) and says in words why a column holds versions: which items, at which times, and what
the family's garbage collection keeps of them.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from ..attrvalue import key_text
from .previews import cell_preview
from ..results import MappedRow

if TYPE_CHECKING:
    from ..compiler import CompiledSpec
    from .sample import Sample
    from ..spec import EntitySpec, MappingSpec

FOLDED_ROWS = 3
"""Rows shown: those most items write into."""
MAX_CELLS = 200
"""Cells shown per row; a row with more says how many are left out."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class FoldedItem(_Frozen):
    number: int
    """1-based, in sample order: what the cells' `item` refers to."""
    entity: str
    key: str
    """The item's key attributes, e.g. `pk=0123, sk=VideoComment#8305627524`."""


class FoldedCell(_Frozen):
    column: str
    version: int
    """1 = the newest cell of its column; a read returns versions in this order."""
    versions: int
    value: str
    encoding: str
    timestamp: str
    item: int


class FoldedRow(_Frozen):
    row_key: str
    items: tuple[FoldedItem, ...]
    cells: tuple[FoldedCell, ...]
    more_cells: int = 0
    """Cells of this row not listed (beyond MAX_CELLS)."""
    versions: tuple[str, ...] = ()
    """One sentence per column holding several cells: where they come from and what GC keeps."""


def folded_rows(spec: MappingSpec, compiled: CompiledSpec, sample: Sample, limit: int = FOLDED_ROWS) -> tuple[FoldedRow, ...]:
    """The sampled rows that several items write into (most items first), each with all its cells."""
    by_key: dict[bytes, list[int]] = defaultdict(list)
    for index, result in enumerate(sample.results):
        if isinstance(result, MappedRow):
            by_key[result.row_key].append(index)
    chosen = sorted((indexes for indexes in by_key.values() if len(indexes) > 1), key=lambda ix: (-len(ix), ix[0]))
    return tuple(_row(spec, compiled, sample, indexes) for indexes in chosen[:limit])


def _row(spec: MappingSpec, compiled: CompiledSpec, sample: Sample, indexes: list[int]) -> FoldedRow:
    from .sample import readable_bytes

    entities = {entity.name: entity for entity in spec.entities}
    keys = [k for k in (spec.source.partition_key, spec.source.sort_key) if k]
    items, cells, row_key = [], [], b""
    for number, index in enumerate(indexes, start=1):
        item = sample.items[index]
        result, sources = compiled.trace_item(item)
        assert isinstance(result, MappedRow)
        row_key = result.row_key
        items.append(FoldedItem(number=number, entity=result.entity or "", key=", ".join(
            f"{k}={key_text(item[k])}" for k in keys if k in item)))
        for cell, source in zip(result.cells, sources):
            cells.append((cell, cell_preview(cell, source), number, result.entity, source.attribute if source else None))
    columns: dict[tuple[str, bytes], list[Any]] = defaultdict(list)
    for entry in cells:
        columns[(entry[0].family, entry[0].qualifier)].append(entry)
    shown: list[FoldedCell] = []
    versions: list[str] = []
    for (family, _), column in sorted(columns.items()):
        column.sort(key=lambda entry: -entry[0].timestamp_micros)  # newest first, as a read returns them
        for version, (_, preview, number, _, _) in enumerate(column, start=1):
            shown.append(FoldedCell(column=preview.column, version=version, versions=len(column), value=preview.value,
                                    encoding=preview.encoding, timestamp=preview.timestamp, item=number))
        if len(column) > 1:
            versions.append(_explain(spec, entities, family, column))
    return FoldedRow(row_key=readable_bytes(row_key), items=tuple(items),
                     cells=tuple(shown[:MAX_CELLS]), more_cells=max(0, len(shown) - MAX_CELLS), versions=tuple(versions))


def _explain(spec: MappingSpec, entities: dict[str, EntitySpec], family: str, column: list[Any]) -> str:
    """Why a column holds several cells, and what the family's GC keeps of them."""
    preview = column[0][1]
    numbers = ", ".join(f"#{entry[2]}" for entry in column)
    times = len({entry[0].timestamp_micros for entry in column})
    sources = sorted({f"{entry[3]}: {_time_source(spec, entities.get(entry[3]), entry[4])}" for entry in column})
    text = (f"{preview.column} holds {len(column)} versions, written by items {numbers}, each at its own time "
            f"({'; '.join(sources)}); a read returns the newest first.")
    if times < len(column):
        text += (f" Only {times} distinct timestamp{'s' * (times != 1)}: cells of one column at one time replace each other, so "
                 f"{len(column) - times} of them will not be kept.")
    policy = spec.target.families.get(family)
    if policy is not None and policy.max_versions is not None:
        kept = min(times, policy.max_versions)
        text += (f" Family {family} keeps at most {policy.max_versions} versions"
                 + (f": GC drops the {times - kept} oldest." if kept < times else ", so all of them stay."))
    elif policy is None or policy.max_age is None:
        text += f" Family {family} has no GC rule: every version stays."
    if policy is not None and policy.max_age is not None:
        text += " Versions older than the family's max_age are dropped by GC."
    return text


def _time_source(spec: MappingSpec, entity: EntitySpec | None, attribute: str | None) -> str:
    """Where the cells of ``attribute`` in ``entity`` take their timestamp from, in words."""
    if entity is None:
        return "unknown"
    column = next((c for c in entity.columns if c.attribute == attribute), None)
    stamp = (column.timestamp if column else None) or entity.timestamp
    if entity.ttl is not None:
        return f"TTL attribute {entity.ttl.attribute}"
    if stamp is not None and stamp.attribute:
        return f"attribute {stamp.attribute}"
    if stamp is not None and stamp.template:
        return f"template {stamp.template}"
    if stamp is not None and stamp.fixed:
        return f"fixed {stamp.fixed.isoformat()}"
    return "migration_time" if spec.migration_time else "the run's start time"
