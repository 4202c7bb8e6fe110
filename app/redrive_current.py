"""A cutover's backfill dead letters redriven as DynamoDB holds the items now, not as the backfill read them.

A backfill's dead letter holds the item's image as the backfill read it. Once a cutover goes on from
that backfill (its folder holds a timeline), the tail and the catch-ups have applied every change
since: an item deleted since is gone from Bigtable, an item changed since has its later version
there. Writing the backfill's image then would put a deleted item back, or an older version over a
newer one (cells without a time attribute all carry the timeline's one "now", so no cell version
tells the two apart), and the status's checks would not see it.

So each letter's item is read now (``BatchGetItem``, consistent, unprocessed keys asked again) and
the difference is applied with the tail's change semantics (:class:`ddb2bt.pipelines.cutover.change_sink.ChangeSink`),
old image the letter's, new image what DynamoDB holds: the current image's cells set, and the cells
the letter's image produces that the current one does not deleted by exact coordinates (an earlier
redrive may have written them). An item deleted since has the letter image's cells deleted: never
a row delete (other items folded into the row keep theirs). The tail must be stopped: a change it
applied between the read and the write would be overwritten.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from apache_beam.io.filesystems import FileSystems

from ..mappers.attrvalue import to_export_json
from ..mappers.compiler import compile_spec
from ..mappers.changes import Change, kind_of_change
from ..mappers.errors import UsageError
from ..mappers.results import MappedRow, Skipped
from ..pipelines.bigtable.sink import ensure_table
from ..pipelines.bigtable.target import describe_target, probe_target
from ..pipelines.cutover import timeline as tl
from ..pipelines.cutover.change_sink import ChangeSink
from ..pipelines.cutover.parity import read_items
from ..pipelines.dynamodb.client import ClientSettings, make_client
from ..pipelines.run.dead_letter_source import DeadLetterSource
from ..pipelines.run.dead_letters import DeadLetter, check_dead_letter_destination, consolidate, write_part
from ..pipelines.run.metrics import letter_reason, skip_reason
from .options import RunOptions
from .redrive_folder import DEAD_LETTER_FILE, RedriveResult, default_redrive_dir, record, refuse_while_the_tail_runs

if TYPE_CHECKING:
    from ..mappers.spec import MappingSpec
    from ..pipelines.run.dead_letter_source import DeadLetterSurvey

def _key_text(key: dict[str, Any]) -> str:
    return json.dumps(key, sort_keys=True)


CHUNK = 1000
"""Letters read again and applied at a time (10 BatchGetItem requests): a file of any length is never held whole."""


def _chunks(items: Iterator[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    chunk: list[dict[str, Any]] = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _count(changes: list[Change], outcome: Any, compiled: Any, counters: dict[str, int],
           reasons: dict[str, dict[str, int]]) -> list[str]:
    """Count what applying ``changes`` did, item by item; the dead-letter lines of those that still fail (as items:
    their image now, which a redrive of this redrive reads again)."""
    refused = {_key_text(letter.item["Keys"]): letter for letter in outcome.dead_letters if letter.item}
    failing: list[str] = []
    for change in changes:
        letter = refused.get(_key_text(change.keys))
        counters["changed_since"] += change.new is not None and change.new != change.old
        if letter is not None:
            counters["dead_lettered"] += 1
            reason = letter_reason(letter.stage, letter.entity, letter.attribute)
            reasons["dead_lettered"][reason] = reasons["dead_lettered"].get(reason, 0) + 1
            failing.append(DeadLetter(change.new or change.old, letter.stage, letter.reason, letter.entity,
                                      letter.attribute, letter.row_key).to_json())
        elif change.new is None:  # deleted since: the letter image's cells deleted (an earlier redrive wrote them?)
            counters["deleted_since"] += 1
        else:
            result = compiled.map_item(change.new)
            if isinstance(result, MappedRow):
                counters["rows_written"] += 1
                cells = [cell for row in result.rows() for cell in row.cells]
                counters["cells_written"] += len(cells)
                counters["bytes_written"] += sum(len(cell.value) for cell in cells)
            elif isinstance(result, Skipped):
                counters["skipped"] += 1
                reason = skip_reason(result.reason, result.entity)
                reasons["skipped"][reason] = reasons["skipped"].get(reason, 0) + 1
            # an ItemError the applier did not dead-letter cannot be: the counts would not add up (a problem)
    return failing


def redrive_as_now(letters: str, cutover: str, found: DeadLetterSurvey, loaded: MappingSpec,
                   spec: MappingSpec | str | Path | None, options: RunOptions, table: str | None) -> RedriveResult:
    """Re-drive the item dead letters in ``letters`` (of the cutover in folder ``cutover``) as their items are now."""

    timeline = tl.peek(cutover)
    assert timeline is not None
    if loaded.source.table is None:
        raise UsageError("the backfill's dead letters of a cutover are written as DynamoDB holds the items now (the "
                         "images they hold may have changed or been deleted since), which is read from the table: the "
                         "spec needs source.table", "name the table in source.table")
    refuse_while_the_tail_runs(cutover)
    key_names = [name for name in (loaded.source.partition_key, loaded.source.sort_key) if name]

    new_dir = options.run_dir or default_redrive_dir(loaded.target.table)
    dead_letter = options.dead_letter or FileSystems.join(new_dir, DEAD_LETTER_FILE)
    probe_target(loaded.target)  # a dead Bigtable fails here, in seconds
    check_dead_letter_destination(dead_letter)
    client = make_client(ClientSettings.from_source(loaded.source))
    ensure_table(loaded.target, create=True)  # a fixed spec may add a family
    record(new_dir, letters, Path(spec) if isinstance(spec, (str, Path)) else None, timeline.now_ms,
           table, cutover=cutover)

    compiled = compile_spec(loaded, now_ms=timeline.now_ms)  # what each written item's row holds, for the counts
    counters = {"items_read": 0, "rows_written": 0, "cells_written": 0, "bytes_written": 0, "dead_lettered": 0,
                "skipped": 0, "deleted_since": 0, "changed_since": 0}
    reasons: dict[str, dict[str, int]] = {"skipped": {}, "dead_lettered": {}}
    keyless = read_again = 0
    applier = ChangeSink(loaded, timeline.now_ms, dead_letter, options.flow_control()).applier()
    try:
        for chunk in _chunks(DeadLetterSource(letters).items_iter(), CHUNK):  # a file of any length, a chunk in memory
            counters["items_read"] += len(chunk)
            images: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}  # key JSON -> (key, the letter's image)
            for item in chunk:
                if not all(isinstance(item.get(name), dict) for name in key_names):
                    keyless += 1  # nothing to read it by: it stays where it is, unresolved
                    continue
                key = {name: item[name] for name in key_names}
                images[_key_text(key)] = (key, item)
            current = read_items(client, loaded.source.table, [key for key, _image in images.values()])
            changes = []
            for text, (key, old) in images.items():
                now = current.get(text)
                new = to_export_json(now) if now is not None else None
                changes.append(Change(key, old, new, kind_of_change(old, new), 0, "", False))
            read_again += len(changes)
            outcome = applier.apply([[change] for change in changes])
            failing = _count(changes, outcome, compiled, counters, reasons)
            if failing:
                write_part(dead_letter, failing)
    finally:
        applier.close()
    lines = consolidate(dead_letter)

    problems = []
    accounted = counters["rows_written"] + counters["dead_lettered"] + counters["skipped"] + counters["deleted_since"]
    if accounted != read_again:
        problems.append(f"{read_again} items read again, {accounted} written, dead-lettered, skipped or deleted")
    if keyless:
        problems.append(f"{keyless} lines of {letters} hold an item without its key ({', '.join(key_names)}): it "
                        "cannot be read again, and stays there unresolved")
    if found.without_item:
        problems.append(f"{len(found.without_item)} lines of {letters} hold no item (an export's count mismatch) and "
                        "stay there unresolved: fix the source and migrate it again")
    return RedriveResult(letters, new_dir, dead_letter, describe_target(loaded.target), "DONE", timeline.now_ms,
                         True, found.items_by_stage, found.without_item, counters, lines, tuple(problems),
                         reasons, loaded.migration_time.isoformat() if loaded.migration_time else None, reread=True)
