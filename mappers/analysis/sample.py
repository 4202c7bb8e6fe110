"""One pass over a mapped sample: the sizes, keys and shapes that the plan, the lints and the estimates read.

The sample is mapped once (`analyse_sample(items, results)`); everything downstream reads this
object, so the lints and the report can never disagree about what the sample contained.
Sizes are approximations of how DynamoDB and Bigtable account for data, good enough for limits
and capacity planning, not for billing.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict

from ..attrvalue import binary, kind_of
from ..results import ItemError, MappedRow, MapResult, Skipped

TIMESTAMP_BYTES = 8
"""Bigtable stores a 64-bit timestamp with every cell."""


def item_size(item: dict) -> int:
    """DynamoDB's item size: attribute name bytes plus value bytes (numbers ~1 byte per 2 digits + 1)."""
    return sum(len(name.encode()) + _value_size(value) for name, value in item.items())


def _value_size(value: dict) -> int:
    tag, payload = kind_of(value)
    if tag == "S":
        return len(payload.encode())
    if tag == "N":
        return _number_size(payload)
    if tag == "B":
        return len(binary(payload))
    if tag in ("BOOL", "NULL"):
        return 1
    if tag == "SS":
        return sum(len(member.encode()) for member in payload)
    if tag == "NS":
        return sum(_number_size(member) for member in payload)
    if tag == "BS":
        return sum(len(binary(member)) for member in payload)
    if tag == "L":
        return 3 + sum(1 + _value_size(element) for element in payload)
    if tag == "M":
        return 3 + sum(1 + len(name.encode()) + _value_size(element) for name, element in payload.items())
    return len(str(payload))


def _number_size(text: str) -> int:
    digits = sum(ch.isdigit() for ch in text.split("e")[0].split("E")[0].lstrip("-0").replace(".", ""))
    return (digits + 1) // 2 + 1


def cell_size(family: str, qualifier: bytes, value: bytes) -> int:
    """Bytes a cell costs in a row: family name, qualifier, timestamp and value (the row key is counted once)."""
    return len(family) + len(qualifier) + TIMESTAMP_BYTES + len(value)


# --------------------------------------------------------------------------- size distributions


class SizeBin(BaseModel):
    model_config = ConfigDict(frozen=True)
    lower: int
    """Inclusive lower bound in bytes."""
    upper: int
    """Exclusive upper bound in bytes."""
    count: int


class SizeStats(BaseModel):
    """A size distribution: a few quantiles and a power-of-two histogram (readable on a log scale)."""

    model_config = ConfigDict(frozen=True)
    count: int = 0
    total: int = 0
    minimum: int = 0
    median: int = 0
    p95: int = 0
    maximum: int = 0
    histogram: tuple[SizeBin, ...] = ()

    @property
    def mean(self) -> float:
        return self.total / self.count if self.count else 0.0


def size_stats(sizes: list[int]) -> SizeStats:
    if not sizes:
        return SizeStats()
    ordered = sorted(sizes)
    bins: Counter[int] = Counter(max(size, 1).bit_length() - 1 for size in ordered)
    histogram = tuple(
        SizeBin(lower=0 if power == 0 else 1 << power, upper=1 << (power + 1), count=bins[power])
        for power in range(min(bins), max(bins) + 1)
    )
    return SizeStats(
        count=len(ordered),
        total=sum(ordered),
        minimum=ordered[0],
        median=ordered[len(ordered) // 2],
        p95=ordered[min(len(ordered) - 1, (len(ordered) * 95) // 100)],
        maximum=ordered[-1],
        histogram=histogram,
    )


# --------------------------------------------------------------------------- the sample


@dataclass(frozen=True)
class Sample:
    """A mapped sample, aggregated once. Rows are keyed by row key; several items may fold into one."""

    items: tuple[dict, ...]
    results: tuple[MapResult, ...]
    """`results[i]` is what `items[i]` mapped to."""
    item_sizes: tuple[int, ...]
    row_sizes: dict[bytes, int]
    """Approximate stored size of each distinct row: key + all cells the sample writes to it."""
    cell_sizes: tuple[int, ...]
    items_per_row: dict[bytes, int]
    """How many items fold into each row key (a single-table design folds a partition into one row)."""
    cells_per_column: dict[tuple[bytes, str, bytes], int]
    """(row key, family, qualifier) -> cells written there: more than one means versions accumulate."""
    keys_by_entity: dict[str, tuple[bytes, ...]]
    """Row keys each entity produced, in sample order (duplicates kept: sequence matters for some lints)."""
    attribute_types: dict[str, dict[str, int]]
    """Attribute name -> DynamoDB type tag -> how many items carry it with that type."""
    entities_per_family: dict[str, frozenset[str]] = field(default_factory=dict)

    @property
    def mapped(self) -> list[MappedRow]:
        return [result for result in self.results if isinstance(result, MappedRow)]

    @property
    def errors(self) -> list[tuple[dict, ItemError]]:
        return [(item, result) for item, result in zip(self.items, self.results) if isinstance(result, ItemError)]

    @property
    def skipped(self) -> list[Skipped]:
        return [result for result in self.results if isinstance(result, Skipped)]

    @property
    def unmatched(self) -> list[tuple[dict, MapResult]]:
        """Items no entity matched, whether the spec dead-letters or skips them."""
        return [
            (item, result)
            for item, result in zip(self.items, self.results)
            if (isinstance(result, ItemError) and result.stage == "unmatched")
            or (isinstance(result, Skipped) and result.entity is None)
        ]


def analyse_sample(items: list[dict], results: list[MapResult]) -> Sample:
    """Aggregate a sample and its mapping results (same order, same length) in one pass."""
    if len(items) != len(results):
        raise ValueError(f"{len(items)} items but {len(results)} results; map every item once")
    row_sizes: dict[bytes, int] = {}
    items_per_row: Counter[bytes] = Counter()
    cells_per_column: Counter[tuple[bytes, str, bytes]] = Counter()
    keys_by_entity: dict[str, list[bytes]] = defaultdict(list)
    entities_per_family: dict[str, set[str]] = defaultdict(set)
    attribute_types: dict[str, Counter[str]] = defaultdict(Counter)
    cell_sizes: list[int] = []
    item_sizes: list[int] = []
    for item, result in zip(items, results):
        item_sizes.append(item_size(item))
        for name, value in item.items():
            attribute_types[name][next(iter(value), "?")] += 1
        if not isinstance(result, MappedRow):
            continue
        key = result.row_key
        row_sizes.setdefault(key, len(key))
        items_per_row[key] += 1
        keys_by_entity[result.entity].append(key)
        for cell in result.cells:
            size = cell_size(cell.family, cell.qualifier, cell.value)
            cell_sizes.append(size)
            row_sizes[key] += size
            cells_per_column[(key, cell.family, cell.qualifier)] += 1
            entities_per_family[cell.family].add(result.entity)
    return Sample(
        items=tuple(items),
        results=tuple(results),
        item_sizes=tuple(item_sizes),
        row_sizes=row_sizes,
        cell_sizes=tuple(cell_sizes),
        items_per_row=dict(items_per_row),
        cells_per_column=dict(cells_per_column),
        keys_by_entity={name: tuple(keys) for name, keys in keys_by_entity.items()},
        attribute_types={name: dict(types) for name, types in attribute_types.items()},
        entities_per_family={name: frozenset(found) for name, found in entities_per_family.items()},
    )


def readable_bytes(key: bytes) -> str:
    """A row key or qualifier as readable text: UTF-8 when it is printable, else hex (Key Visualizer shows the same)."""
    try:
        text = key.decode()
    except UnicodeDecodeError:
        return "0x" + key.hex()
    return text if text.isprintable() else "0x" + key.hex()
