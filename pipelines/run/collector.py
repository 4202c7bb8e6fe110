"""The garbage collector's thresholds for a process that maps or decodes many items (no Beam: the rollback's
processes use it too)."""

from __future__ import annotations

import gc

YOUNG_GC_THRESHOLD = 50_000
MIDDLE_GC_THRESHOLD = 50
MIGRATION_YOUNG_GC_THRESHOLD = 200_000
"""The young generation's threshold where the migration's map step runs (``pipelines/pipeline.py``
``build_pipeline``'s ``MapFn``; validate's map step, the same class, keeps :data:`YOUNG_GC_THRESHOLD`: not measured
there). What a migration keeps alive in its young generation is the items in flight (a Scan
page's parse, the rows and entries of the page being written, the one being closed behind it): alive for a page or
two, none of it cyclic garbage, so every young collection walked them to find nothing, and at 50,000 allocations it
ran about once per page (~4 µs per item at 100,000 items, with a middle collection). At 200,000 allocations most of
a page's objects are freed by reference counting before a collection comes, and it comes ~15 times less often
(docs/PERFORMANCE.md, "Own CPU round 11": collector 4.2 -> 1.3 µs per item, peak memory the same)."""


def relax_young_gc(young: int = YOUNG_GC_THRESHOLD) -> None:
    """Collect the young generation every ``young`` allocations (50,000; the migration's map step's 200,000:
    :data:`MIGRATION_YOUNG_GC_THRESHOLD`) rather than every 700, the middle one every 50 young collections rather
    than 10.

    A Scan page parses into tens of thousands of dicts, so at the default threshold the collector
    runs every few items, and the many items still waiting to be written get promoted and walked
    again and again. The middle generation holds the items and entries waiting for their batch to be
    written; its collections walk them and found nothing to free once the client's finished MutateRows
    operations stopped being cyclic garbage (``raw_answers.free_finished_operations``). The oldest keeps
    its threshold (the measurements: docs/PERFORMANCE.md). Process-wide, which suits a worker process; a
    threshold already higher, or a disabled collector, is left as it is.
    """
    current, middle, old = gc.get_threshold()
    if gc.isenabled() and 0 < current < young:
        gc.set_threshold(young, max(middle, MIDDLE_GC_THRESHOLD), old)
