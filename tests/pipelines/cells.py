"""What a migration should leave in Bigtable, and what it did: every cell, row by row, all versions."""

from __future__ import annotations

from ddb2bt.mappers.compiler import compile_spec
from ddb2bt.mappers.results import MappedRow
from ddb2bt.mappers.spec import MappingSpec

from .test_bigtable_sink import read_cells

__all__ = ["expected_cells", "read_cells"]


def expected_cells(spec: MappingSpec, items: list[dict], now_ms: int | None = None) -> dict:
    """The cells one uninterrupted run of ``spec`` over ``items`` writes, in :func:`read_cells`' form."""
    compiled = compile_spec(spec, now_ms=now_ms)
    found: dict = {}
    for item in items:
        result = compiled.map_item(item)
        if isinstance(result, MappedRow):
            found.setdefault(result.row_key, []).extend(
                (c.family, c.qualifier, c.timestamp_micros, c.value) for c in result.cells)
    return {key: sorted(cells) for key, cells in found.items()}
