"""Bigtable's limits, checked where the mutations are built (not when the server refuses them)."""

from __future__ import annotations

from .results import Cell

ROW_KEY_MAX_BYTES = 4 * 1024
QUALIFIER_MAX_BYTES = 16 * 1024
CELL_MAX_BYTES = 100 * 1024 * 1024
CELL_WARN_BYTES = 10 * 1024 * 1024
ROW_WARN_BYTES = 100 * 1024 * 1024
ROW_MAX_BYTES = 256 * 1024 * 1024
MUTATIONS_PER_ENTRY_MAX = 100_000
FAMILIES_WARN = 100


class LimitError(ValueError):
    """A mutation Bigtable would refuse."""


def check_cells(cells: list[Cell]) -> tuple[str, ...]:
    """Raise LimitError for what Bigtable refuses; return warnings for what it merely advises against."""
    if len(cells) > MUTATIONS_PER_ENTRY_MAX:
        raise LimitError(f"{len(cells)} cells in one row entry; Bigtable allows {MUTATIONS_PER_ENTRY_MAX} mutations")
    # Hot path (every item): plain tuple indexing, and the detailed pass only when something is large.
    for cell in cells:
        if len(cell[1]) > QUALIFIER_MAX_BYTES or len(cell[3]) > CELL_WARN_BYTES:
            break
    else:
        return ()
    warnings = []
    for cell in cells:
        if len(cell.qualifier) > QUALIFIER_MAX_BYTES:
            raise LimitError(f"qualifier {cell.qualifier[:40]!r}... is {len(cell.qualifier)} bytes; the limit is 16 KiB")
        size = len(cell.value)
        if size > CELL_WARN_BYTES:
            if size > CELL_MAX_BYTES:
                raise LimitError(f"cell {cell.family}:{cell.qualifier[:40]!r} is {size} bytes; the limit is 100 MiB")
            warnings.append(f"cell {cell.family}:{cell.qualifier[:40]!r} is {size} bytes (over the advised 10 MiB)")
    return tuple(warnings)
