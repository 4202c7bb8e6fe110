"""The garbage collector's thresholds for a process that maps or decodes many items (no Beam: the rollback's
processes use it too)."""

from __future__ import annotations

import gc

YOUNG_GC_THRESHOLD = 50_000
MIDDLE_GC_THRESHOLD = 50


def relax_young_gc() -> None:
    """Collect the young generation every 50,000 allocations rather than every 700, the middle one every 50 young
    collections rather than 10.

    A Scan page parses into tens of thousands of dicts, so at the default threshold the collector
    runs every few items, and the many items still waiting to be written get promoted and walked
    again and again. The middle generation holds the items and entries waiting for their batch to be
    written; its collections walk them and found nothing to free once the client's finished MutateRows
    operations stopped being cyclic garbage (``raw_answers.free_finished_operations``). The oldest keeps
    its threshold (the measurements: docs/PERFORMANCE.md). Process-wide, which suits a worker process; a
    threshold already higher, or a disabled collector, is left as it is.
    """
    young, middle, old = gc.get_threshold()
    if gc.isenabled() and 0 < young < YOUNG_GC_THRESHOLD:
        gc.set_threshold(YOUNG_GC_THRESHOLD, max(middle, MIDDLE_GC_THRESHOLD), old)
