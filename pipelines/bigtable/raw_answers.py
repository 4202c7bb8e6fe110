"""The data client's MutateRows operation, freed as soon as it has run.

The operation holds itself in a cycle (its retry lambda refers to it), so every batch's entries, their messages
and their cells outlived the request until a full collection of the older generation found them: most of what
that collection walked, and the batch's memory held meanwhile (docs/PERFORMANCE.md). The requests themselves
are ours (:mod:`.mutate`, whose operation is the client's with its request and answers in bytes); this mends the
client's class, so it holds for ours and for the client's own ``bulk_mutate_rows`` alike.
"""

from __future__ import annotations

import functools
from typing import Any


def free_finished_operations() -> None:
    """Make the client's MutateRows operation let go of its retry closure (the one reference back to itself) once
    it has run, so that the operation and the batch it holds are freed by reference counting when the batcher
    drops it, not by the cyclic collector later. Process-wide and idempotent; an operation's outcome (its errors
    raise out of ``start``) is unchanged. Touches ``_MutateRowsOperation.start`` and ``_operation``: pinned in
    pyproject.toml, tested in tests/pipelines/test_bigtable_mutate.py."""
    try:  # a client whose private layout differs loses this saving, never a migration (the test pins it in range)
        from google.cloud.bigtable.data._cross_sync import CrossSync

        operation = CrossSync._Sync_Impl._MutateRowsOperation
        start = operation.start
    except (ImportError, AttributeError):
        return
    if getattr(start, "_ddb2bt_frees", False):
        return

    @functools.wraps(start)
    def start_then_free(self: Any) -> Any:
        try:
            return start(self)
        finally:
            self._operation = None

    start_then_free._ddb2bt_frees = True  # type: ignore[attr-defined]
    operation.start = start_then_free
