"""Redrive of change dead letters (the tail's, a catch-up's): re-apply the changes through the fixed spec.

A change dead letter carries a whole change record (keys, old and new image, time, sequence
number): it is applied again as the tail applies changes (the applier of
:class:`ddb2bt.pipelines.cutover.change_sink.ChangeSink`: the new image's cells set, the old images' cells
it no longer produces deleted by exact coordinates), never as an item. Per item, the letters are applied
in stream order (sequence numbers; an export's write time), folded as the tail folds a page.

Only where that is still the item's latest state: each item is read now (consistent read) and its
letters are applied only when the last one's new image is what DynamoDB holds (or both say deleted).
Otherwise the item changed after the letter, and the later change — applied by the tail already, or
waiting in the stream for it — leaves Bigtable right by itself (its old image is the letter's new
image, whose cells it deletes); applying the stale letter after it would put an older version back.
Such letters are *superseded*, and resolved. A redrive and a running tail could write one item out of
order, so the tail must be stopped (its heartbeat older than the status threshold, or stopped cleanly).

The letters resolved (applied, superseded, or now skipped by the spec) are recorded beside the file
(:mod:`ddb2bt.pipelines.cutover.letters`), so ``cutover-status`` stops counting them; those that still
fail go to this redrive's own dead-letter file and stay unresolved. The fixed spec becomes the
cutover's spec (saved in ``cutover.json``): start the tail again with it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from apache_beam.io.filesystems import FileSystems

from ..mappers.attrvalue import to_export_json, to_typed_json
from ..mappers.changes import Change, item_key
from ..mappers.errors import UsageError
from ..pipelines.cutover import letters as change_letters
from ..pipelines.cutover import timeline as tl
from ..pipelines.bigtable.sink import ensure_table
from ..pipelines.cutover.change_sink import ChangeSink
from ..pipelines.run.checkpoint import spec_data_hash, spec_hash
from ..pipelines.run.dead_letter_source import DeadLetterFileError
from ..pipelines.run.dead_letters import check_dead_letter_destination, consolidate, write_part
from ..pipelines.dynamodb.client import ClientSettings, make_client
from ..pipelines.cutover.parity import read_items
from ..pipelines.bigtable.target import describe_target, probe_target
from .context import load_spec
from .options import RunOptions
from .redrive_folder import DEAD_LETTER_FILE, default_redrive_dir, record, refuse_while_the_tail_runs

if TYPE_CHECKING:
    from ..mappers.spec import MappingSpec

@dataclass(frozen=True)
class ChangeRedriveResult:
    source: str
    run_dir: str
    """This redrive's folder (redrive.json, a copy of the spec, its dead letters)."""
    dead_letter: str
    """The changes that still fail."""
    target: str
    letters: int
    items: int
    applied: int
    """Changes re-applied (their items now hold what DynamoDB holds)."""
    superseded: int
    """Changes of items that changed again after them: the later change leaves Bigtable right."""
    skipped: int
    still_failing: int
    cells_set: int
    cells_deleted: int
    not_redriven: tuple[str, ...]
    """Reasons of lines that hold no change (an export's count mismatch): they stay unresolved."""
    spec_recorded: bool
    """The fixed spec replaced the cutover's spec in cutover.json (the tail must be started with it)."""
    problems: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems


def _canonical(image: dict | None) -> dict | None:

    return None if image is None else {name: to_typed_json(value) for name, value in image.items()}


def redrive_changes(letters: str, spec: MappingSpec | str | Path | None, options: RunOptions = RunOptions()
                    ) -> ChangeRedriveResult:
    """Re-apply the change dead letters in ``letters`` through ``spec``; UsageError (nothing written) if they cannot."""


    folder = FileSystems.split(letters)[0] or "."
    timeline = tl.peek(folder)
    if timeline is None:
        raise UsageError(f"{letters} holds change dead letters, which are applied on the cutover's run folder, and "
                         f"{folder} holds no cutover timeline ({tl.TIMELINE_FILE})",
                         "give the dead-letter file where `ddb2bt tail` or `ddb2bt catch-up` wrote it (in its --run-dir)")
    if spec is None:
        raise UsageError("change dead letters are re-applied through the fixed spec", f"ddb2bt redrive {letters} SPEC")
    loaded = load_spec(spec, options)
    if loaded.source.table is None:
        raise UsageError("a change is re-applied only where it is still the item's latest state, which is read from "
                         "the table: the spec needs source.table", "name the table in source.table")
    refuse_while_the_tail_runs(folder)

    records: list[tuple[bytes, dict]] = []
    without: list[str] = []
    for number, line in enumerate(change_letters.lines(letters), start=1):
        try:
            letter = json.loads(line)
        except ValueError:
            raise DeadLetterFileError(f"{letters} line {number} is not JSON", "give a ddb2bt dead-letter file") from None
        item = letter.get("item") if isinstance(letter, dict) else None
        if isinstance(letter, dict) and "item" in letter and item is None:
            without.append(str(letter.get("reason", "")))
        elif isinstance(item, dict) and change_letters.is_change_record(item):
            records.append((line, item))
        else:
            raise DeadLetterFileError(f"{letters} line {number} is not a change dead letter (Keys and images), but the "
                                      "file holds change dead letters", "give the tail's or a catch-up's dead-letter "
                                      "file as it wrote it")

    new_dir = options.run_dir or default_redrive_dir(loaded.target.table)
    dead_letter = options.dead_letter or FileSystems.join(new_dir, DEAD_LETTER_FILE)
    probe_target(loaded.target)
    check_dead_letter_destination(dead_letter)
    ensure_table(loaded.target, create=True)  # a fixed spec may add a family
    record(new_dir, letters, Path(spec) if isinstance(spec, (str, Path)) else None, timeline.now_ms)

    changes = sorted(((change_letters.to_change(item), line) for line, item in records),
                     key=lambda pair: change_letters.order(pair[0]))
    groups: dict[tuple, list[tuple[Change, bytes]]] = {}
    for change, line in changes:
        groups.setdefault(item_key(change.keys, ()), []).append((change, line))
    client = make_client(ClientSettings.from_source(loaded.source))
    now = read_items(client, loaded.source.table, [to_export_json(group[0][0].keys) for group in groups.values()])
    current: list[list[tuple[Change, bytes]]] = []
    stale: list[list[tuple[Change, bytes]]] = []
    for group in groups.values():
        key = json.dumps(to_export_json(group[0][0].keys), sort_keys=True)
        last = group[-1][0]
        (current if _canonical(now.get(key)) == _canonical(last.new) else stale).append(group)

    applier = ChangeSink(loaded, timeline.now_ms, dead_letter, options.flow_control()).applier()
    try:
        outcome = applier.apply([[change for change, _line in group] for group in current])
    finally:
        applier.close()
    failed = {json.dumps(to_export_json(letter.item), sort_keys=True) for letter in outcome.dead_letters}
    resolved = [line for group in stale for _change, line in group]
    failing: list[str] = []  # an item whose last change still does not map; an earlier one that fails is overtaken
    still = 0
    for group in current:
        if json.dumps(to_export_json(group[-1][0].record()), sort_keys=True) in failed:
            still += len(group)
            records_of = {json.dumps(to_export_json(change.record()), sort_keys=True) for change, _line in group}
            failing += [letter.to_json() for letter in outcome.dead_letters
                        if json.dumps(to_export_json(letter.item), sort_keys=True) in records_of]
        else:
            resolved += [line for _change, line in group]
    if failing:
        write_part(dead_letter, failing)
    consolidate(dead_letter)
    change_letters.mark_resolved(letters, resolved, new_dir)

    recorded = timeline.spec is None or spec_data_hash(timeline.spec) != spec_hash(loaded)
    if recorded:  # the cutover goes on with the fixed spec: the tail, status and catch-ups use it
        timeline.spec = loaded.model_dump(mode="json", by_alias=True)
        tl.save(folder, timeline)
    superseded = sum(len(group) for group in stale)
    accounted = len(resolved) + still
    problems = () if accounted == len(records) else (
        f"{len(records)} change dead letters read, {accounted} resolved or still failing",)
    return ChangeRedriveResult(letters, new_dir, dead_letter, describe_target(loaded.target), len(records),
                               len(groups), outcome.applied, superseded, outcome.skipped, still, outcome.cells_set,
                               outcome.cells_deleted, tuple(without), recorded, problems)
