"""Extra cells decided and deleted: for the rows pass, and for an index table's rows in the compare pass.

The rows pass resolves a row's candidates together; an index table's row holds one item, so its candidate decides
alone, in the compare pass (pipelines/validate/pipeline.py)."""

from __future__ import annotations

from collections import Counter
from typing import Any, NamedTuple

from ...mappers.results import Cell
from ..bigtable.read import delete_entries


class Deletion(NamedTuple):
    row_key: bytes
    cells: tuple[Cell, ...]
    table: str | None = None
    """The index table the row is in; None for the main table."""


def resolved(candidates: list[Any], repair: bool, after_us: int | None = None) -> tuple[list[Any], Counter[str],
                                                                                         Deletion | None]:  # fmt: skip
    """One row's candidates -> its differences, their figures, and with ``repair`` the extra cells to delete."""
    from ...mappers.validate.compare import resolve_row

    differences, extra = resolve_row(candidates, after_us)
    stats: Counter[str] = Counter("after_snapshot" if d.after_snapshot else d.kind for d in differences)
    deletion = None
    if extra and repair:
        deletion = Deletion(candidates[0].row_key, tuple(extra))
        stats["repair_deletes"] += len(extra)
    return differences, stats, deletion


def apply_deletions(table: Any, deletions: list[Deletion]) -> tuple[int, int]:
    """Delete exactly these cell versions in one bulk request; (cells deleted, cells refused)."""
    from google.cloud.bigtable.data.exceptions import MutationsExceptionGroup

    if not deletions:
        return 0, 0
    refused = 0
    try:
        table.bulk_mutate_rows([delete_entries(d.row_key, d.cells) for d in deletions])
    except MutationsExceptionGroup as group:
        refused = sum(len(deletions[error.index].cells) for error in group.exceptions)
    return sum(len(d.cells) for d in deletions) - refused, refused
