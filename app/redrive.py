"""The redrive use case: run a run's dead letters through the (fixed) spec again, as a run of its own.

``redrive(run_dir, spec)`` reads ``<run_dir>/dead_letters.jsonl`` (or a dead-letter file given
directly), checks every line before anything is written, and runs the items through the same
Beam pipeline as ``migrate`` with the file as its source (a ``DeadLetterSource``). The
redrive has its own run folder, dead-letter file (only what still fails) and reconciliation:
items read = rows written + dead-lettered + skipped, where the items read are the file's items.
Lines that hold no item (an export's count mismatch) cannot be re-driven and are reported.

Cells that take the run's time (no ``migration_time`` in the spec, no timestamp attribute) get
the original run's "now" when its folder records one (``checkpoint.json`` of a scan), so a
redriven item is written as the original run would have written it.

The backfill's dead letters of a cutover (its folder holds a timeline) are images the tail and the catch-ups may have
overtaken: they are read again and written as DynamoDB holds them now (:mod:`.redrive_current`).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from apache_beam.io.filesystems import FileSystems

from ..mappers.errors import UsageError
from ..pipelines.cutover.letters import holds_changes
from ..pipelines.run.dead_letter_source import DeadLetterSource
from ..pipelines.run.dead_letters import check_dead_letter_destination
from ..pipelines.run.metrics import by_reason
from ..pipelines.pipeline import build_pipeline, reconcile
from ..pipelines.bigtable.target import describe_target
from ..pipelines.sinks import BigtableSink
from ..pipelines.run.local_runner import new_pipeline
from .assembly import runner_for
from .context import load_spec, unfinished, wait_for
from .options import RunOptions
from .redrive_folder import (DEAD_LETTER_FILE, RedriveResult, cutover_of, dead_letter_file, default_redrive_dir, record,
                             recorded_now, recorded_spec, recorded_table)

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..mappers.spec import MappingSpec
    from .change_redrive import ChangeRedriveResult

def redrive(run_dir: str, spec: MappingSpec | str | Path | None = None, options: RunOptions = RunOptions(), *,
            now_ms: int | None = None, started: Callable[[str], None] | None = None
            ) -> RedriveResult | ChangeRedriveResult:
    """Re-run the dead letters of ``run_dir`` through ``spec`` (default: the spec the folder keeps).

    Change dead letters (the tail's, a catch-up's) are re-applied as changes (:mod:`.change_redrive`); a cutover's
    backfill letters are read again and written as the items are now (:mod:`.redrive_current`).

    Cells that take the run's time get the original run's "now" when its folder records one, else
    ``now_ms``, else the time now. UsageError (nothing written) for a bad file, spec or folder. A file without dead
    letters is nothing to do (``nothing``: no folder made). ``started`` is told what the redrive does, once the file
    is known to hold letters.
    """


    letters = dead_letter_file(run_dir)
    if holds_changes(letters):  # the tail's or a catch-up's: change records, re-applied as changes
        from .change_redrive import redrive_changes

        if started:
            started("→ Bigtable (re-applied as changes)")
        return redrive_changes(letters, spec, options)
    folder = run_dir if letters != run_dir else FileSystems.split(letters)[0] or "."
    source = DeadLetterSource(letters)
    source.check()  # every line checked before anything is written
    found = source.found
    assert found is not None
    if not found.items:  # nothing to write: no folder, no spec needed
        mismatches = (f"{len(found.without_item)} lines of {letters} hold no item (an export's count mismatch) and "
                      "stay there unresolved: fix the source and migrate it again",) if found.without_item else ()
        return RedriveResult(letters, "", "", "", "NOTHING", 0, False, {}, found.without_item, problems=mismatches,
                             nothing=True)
    cutover = cutover_of(folder)
    if started:
        started("→ Bigtable (each item read again from DynamoDB)" if cutover is not None else
                "→ Bigtable (DirectRunner)")
    loaded = load_spec(spec if spec is not None else recorded_spec(folder), options)
    ran = recorded_table(folder)
    export = loaded.source.export.path if loaded.source.export else None
    if ran is not None and ran not in (loaded.source.table, export):  # the dead letters are another table's items
        named = f"{spec} reads" if isinstance(spec, (str, Path)) else "the spec reads"
        raise UsageError(f"{letters} holds dead letters of {ran}, but {named} {loaded.source.table or export}",
                         f"redrive them through the (fixed) spec of {ran}: ddb2bt redrive RUN_DIR SPEC")
    if cutover is not None:  # the images may be stale: the tail and catch-ups applied what changed since
        from .redrive_current import redrive_as_now

        result = redrive_as_now(letters, cutover, found, loaded, spec, options, ran or loaded.source.table or export)
        if result.ok:
            _cutover_goes_on_with(cutover, loaded)
        return result
    new_dir = options.run_dir or default_redrive_dir(loaded.target.table)
    run = runner_for(loaded, options, source=source, run_dir=new_dir)
    dead_letter = options.dead_letter or FileSystems.join(new_dir, DEAD_LETTER_FILE)
    inherited = recorded_now(folder)
    now = inherited or now_ms or int(time.time() * 1000)

    sink = BigtableSink(loaded.target)
    sink.check()  # a dead Bigtable fails here, in seconds
    check_dead_letter_destination(dead_letter)  # never the file being read: that one exists
    sink.prepare(create=True)  # a fixed spec may add a family
    record(new_dir, letters, Path(spec) if isinstance(spec, (str, Path)) else None, now, ran or loaded.source.table or export)

    pipeline = new_pipeline(run.pipeline_options)
    build_pipeline(pipeline, loaded, dead_letter=dead_letter, flow=options.flow_control(), now_ms=now, source=source)
    state, counters, lines = wait_for(pipeline.run(), dead_letter)
    counters, reasons = by_reason(counters)
    problems = unfinished(state) + reconcile(counters, loaded.unmatched)
    if counters["items_read"] != found.items:
        problems.append(f"{counters['items_read']} items read, but {letters} holds {found.items}")
    if found.without_item:  # nothing to re-drive, and nothing resolved: the run they belong to is still short
        problems.append(f"{len(found.without_item)} lines of {letters} hold no item (an export's count mismatch) and "
                        "stay there unresolved: fix the source and migrate it again")
    return RedriveResult(letters, new_dir, dead_letter, describe_target(loaded.target), state, now, inherited is not None,
                         found.items_by_stage, found.without_item, counters, lines, tuple(problems), reasons,
                         loaded.migration_time.isoformat() if loaded.migration_time else None)


def _cutover_goes_on_with(folder: str, loaded: MappingSpec) -> None:
    """A cutover's backfill redriven through a fixed spec: its tail, catch-ups and status go on with that spec (they
    refuse another, and cutover-status maps the backfill's dead letters by it), as a change redrive records it."""
    from ..pipelines.cutover import timeline as tl
    from ..pipelines.run.checkpoint import spec_data_hash, spec_hash

    timeline = tl.peek(folder)
    if timeline is None:
        return
    if timeline.spec is None or spec_data_hash(timeline.spec) != spec_hash(loaded):
        timeline.spec = loaded.model_dump(mode="json", by_alias=True)
        tl.save(folder, timeline)
