"""Apply item changes to Bigtable: the mutations of :mod:`ddb2bt.mappers.changes`, written and counted.

:class:`ChangeSink` is the :class:`~ddb2bt.pipelines.sink.Sink` the catch-up and the tail write through: its
``check`` refuses a target that is not there, its ``write`` is the catch-up's Beam step, its ``applier`` the
tail's writer without Beam. Shared by the catch-up (a Beam DoFn per worker) and the stream tail (one process): both hand over
the changes of many items, each item's changes in order, and get back how many were applied, skipped
and dead-lettered. The tail waits for each page (:meth:`ChangeApplier.apply`: it saves its position
after); the catch-up overlaps mapping and writing through the client's batcher
(:class:`OverlappedWrites`), and waits at the end of each bundle. Every cell has an explicit timestamp and every
delete names one cell's millisecond (a counter's, its whole column, then the new value added, in one entry), so a
write retried or a change applied twice replaces each cell with itself: entries are idempotent and the client may
retry them.

A change whose new image does not map still deletes the old image's cells (the item is then
absent from Bigtable, as the backfill would have left it) and is dead-lettered with its record.
An entry Bigtable refuses for good (an unknown family) dead-letters its item's changes; a
transient failure raises :class:`BigtableWriteError`, so nothing is checkpointed past it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import apache_beam as beam

from ...mappers.changes import Change, ChangeSet, RowChange, diff_many, item_key
from ...mappers.limits import MUTATIONS_PER_ENTRY_MAX
from ..bigtable.entries import mutations_entry_class, with_counters
from ..bigtable.sink import BigtableWriteError, Destination, FlowControl, TableBatchers, refused_for_good
from ..bigtable.target import describe_target, probe_target
from ..run.dead_letters import DeadLetter
from ..run.in_flight import InFlight
from ..sink import Sink

CHANGE_COUNTERS = ("changes_read", "changes_applied", "changes_dead_lettered", "changes_skipped", "cells_set",
                   "cells_deleted", "ttl_deletes")


def row_entries(row: RowChange, counters: frozenset[str] = frozenset()) -> list[Any]:
    """The ``RowMutationEntry`` objects for one row: exact one-millisecond deletes, then the new cells.

    Built as the wire message directly (as :mod:`..bigtable.entries` does for the backfill), from the
    diff's own tuples: a ``CellDelete`` (family, qualifier, micros) or a ``Cell`` (family, qualifier,
    micros, value), told apart by length, because the client's ``DeleteRangeFromColumn``/``SetCell`` objects and
    proto-plus cost more than the change itself (measured in docs/PERFORMANCE.md). Byte for byte the same request
    (tests/pipelines/test_change_sink.py).

    Counters (cells of the aggregate families, ``counters``) converge on the new image's value, never by a delta
    that a replay would add twice: a counter the new image has is its whole column deleted and the value added
    (:func:`..bigtable.entries.whole_counter`, the two kept in one entry); one it no longer has, its whole column
    deleted (an application's increments included).
    """
    mutations = counter_changes(row, counters) if counters else row.deletes + row.sets
    entry = mutations_entry_class()
    if len(mutations) <= MUTATIONS_PER_ENTRY_MAX:
        return [entry(row.row_key, mutations)]
    entries, start = [], 0
    while start < len(mutations):
        end = min(start + MUTATIONS_PER_ENTRY_MAX, len(mutations))
        if end < len(mutations) and len(mutations[end]) == 5:  # never part a counter's delete from its add
            end -= 1
        entries.append(entry(row.row_key, mutations[start:end]))
        start = end
    return entries


def counter_changes(row: RowChange, counters: frozenset[str]) -> tuple:
    """A row's mutations with its counters rewritten whole: see :func:`row_entries`."""
    counted = {cell[:2] for cell in row.sets if cell[0] in counters}
    deletes: dict[tuple, None] = {}
    for delete in row.deletes:
        if delete[0] not in counters:
            deletes[delete] = None
        elif delete[:2] not in counted:  # a column the sets rewrite anyway is deleted by them, in their entry
            deletes[delete[:2]] = None
    return tuple(deletes) + with_counters(row.sets, counters)


@dataclass
class Outcome:
    """What applying some changes did; ``read = applied + dead_lettered + skipped``."""

    read: int = 0
    applied: int = 0
    skipped: int = 0
    dead_letters: list[DeadLetter] = field(default_factory=list)
    cells_set: int = 0
    cells_deleted: int = 0
    ttl_deletes: int = 0

    @property
    def dead_lettered(self) -> int:
        return len(self.dead_letters)

    def add(self, other: Outcome) -> None:
        self.read += other.read
        self.applied += other.applied
        self.skipped += other.skipped
        self.dead_letters += other.dead_letters
        self.cells_set += other.cells_set
        self.cells_deleted += other.cells_deleted
        self.ttl_deletes += other.ttl_deletes

    def counters(self) -> dict[str, int]:
        return {"changes_read": self.read, "changes_applied": self.applied, "changes_dead_lettered": self.dead_lettered,
                "changes_skipped": self.skipped, "cells_set": self.cells_set, "cells_deleted": self.cells_deleted,
                "ttl_deletes": self.ttl_deletes}


def change_letter(change: Change, stage: str, reason: str, entity: str | None = None,
                  attribute: str | None = None, row_key: bytes | None = None) -> DeadLetter:
    """A dead letter carrying the whole change record (keys, both images, time, sequence number)."""
    return DeadLetter(change.record(), stage, reason, entity, attribute, row_key)


class Mapped(NamedTuple):
    """What settling needs of one item's change set, once its entries are built.

    Not the ChangeSet itself: its cells are in the entries already, and a catch-up holds tens of
    thousands of these until the batcher drains; every object held is walked by each collection of
    the garbage collector's older generations (the ChangeSet's rows, deletes and cell tuples were
    most of the objects a held change kept alive, profiled).
    """

    changes: Sequence[Change]
    entity: str | None
    row_key: bytes | None
    failures: tuple[tuple[Change, Any], ...]
    cells_set: int
    cells_deleted: int


_new = tuple.__new__  # a Mapped from a tuple of all its fields, without NamedTuple's Python __new__


@dataclass
class Prepared:
    """Changes mapped and their entries built, not yet known to be in Bigtable."""

    outcome: Outcome
    """Read, skipped and TTL deletes so far; applied and dead-lettered once the writes are settled."""
    entries: list[Any] = field(default_factory=list)
    owners: list[int] = field(default_factory=list)
    """Entry index -> index in ``groups``."""
    groups: list[Mapped] = field(default_factory=list)
    tables: dict[int, str] = field(default_factory=dict)
    """Entry index -> the index table it goes to (an index's own table); the others go to the main table."""


def refusal(error: Any, flow: FlowControl) -> str:
    """Why Bigtable refused one entry for good; a transient failure raises :class:`BigtableWriteError` instead."""
    why = refused_for_good(error, flow, "changes",
                           "check that Bigtable is reachable; run the command again, it continues where it stopped")
    return f"Bigtable refused the change: {why}"


class ChangeApplier:
    """Maps changes with the compiled spec and writes their mutations; one per process or DoFn instance."""

    def __init__(self, destination: Destination, compiled: Any, flow: FlowControl | None = None) -> None:
        from google.cloud.bigtable.data import BigtableDataClient

        self._compiled = compiled
        self._counters = destination.counters
        self.flow = flow or FlowControl()
        self._client = BigtableDataClient(project=destination.project)
        self._destination = destination
        self.table = self._client.get_table(destination.instance, destination.table,
                                            app_profile_id=destination.app_profile)
        self._tables: dict[str, Any] = {}

    def table_named(self, name: str) -> Any:
        """An index's own table, in the main table's instance and app profile."""
        if name not in self._tables:
            self._tables[name] = self._client.get_table(self._destination.instance, name,
                                                        app_profile_id=self._destination.app_profile)
        return self._tables[name]

    def close(self) -> None:
        self._client.close()

    def apply(self, groups: Iterable[Sequence[Change]]) -> Outcome:
        """Apply each group (one item's changes, in order) and wait until Bigtable holds them."""
        prepared = self.prepare(groups)
        return self.settle(prepared, self._write(prepared.entries, prepared.tables))

    def prepare(self, groups: Iterable[Sequence[Change]]) -> Prepared:
        """Map each group (one item's changes, in order) and build its entries."""
        prepared = Prepared(Outcome())
        outcome, entries, owners, pending = prepared.outcome, prepared.entries, prepared.owners, prepared.groups
        compiled, counters, tables = self._compiled, self._counters, prepared.tables
        read = ttl_deletes = skipped = 0  # added to the outcome once, not per change
        for changes in groups:
            read += len(changes)
            for change in changes:
                if change.ttl:
                    ttl_deletes += 1
            result = diff_many(compiled, changes)
            if result.__class__ is not ChangeSet:
                skipped += len(changes)
                continue
            owner, cells_set, cells_deleted, rows = len(pending), 0, 0, result.rows
            for row in rows:
                cells_set += len(row.sets)
                cells_deleted += len(row.deletes)
                for entry in row_entries(row, counters):
                    if row.table is not None:
                        tables[len(entries)] = row.table
                    entries.append(entry)
                    owners.append(owner)
            pending.append(_new(Mapped, (changes, result.entity, rows[0].row_key if rows else None, result.failures,
                                         cells_set, cells_deleted)))
        outcome.read += read
        outcome.ttl_deletes += ttl_deletes
        outcome.skipped += skipped
        return prepared

    @staticmethod
    def settle(prepared: Prepared, refused: dict[int, str]) -> Outcome:
        """The outcome once the entries are written, ``refused`` ({entry index: reason}) for good."""
        outcome = prepared.outcome
        failed_groups: dict[int, str] = {prepared.owners[index]: reason for index, reason in refused.items()}
        for number, mapped in enumerate(prepared.groups):
            if number in failed_groups:
                outcome.dead_letters += [change_letter(change, "write", failed_groups[number], mapped.entity, None,
                                                       mapped.row_key) for change in mapped.changes]
                continue
            failed = {id(change): error for change, error in mapped.failures}
            for change in mapped.changes:
                error = failed.get(id(change))
                if error is None:
                    outcome.applied += 1
                else:
                    outcome.dead_letters.append(change_letter(change, error.stage, error.reason,
                                                              error.entity, error.attribute))
            outcome.cells_set += mapped.cells_set
            outcome.cells_deleted += mapped.cells_deleted
        return outcome

    def _write(self, entries: list[Any], tables: dict[int, str]) -> dict[int, str]:
        """Write the entries and wait; {index: reason} for those Bigtable refused for good. ``tables``: the entries
        that go to an index's own table (by index), written by a request of their own."""
        if not tables:
            return self._write_to(self.table, entries)
        parts: dict[str | None, list[int]] = {}
        for number in range(len(entries)):
            parts.setdefault(tables.get(number), []).append(number)
        refused = {}
        for table, numbers in parts.items():
            found = self._write_to(self.table if table is None else self.table_named(table),
                                   [entries[number] for number in numbers])
            refused.update({numbers[index]: reason for index, reason in found.items()})
        return refused

    def _write_to(self, table: Any, entries: list[Any]) -> dict[int, str]:
        from google.cloud.bigtable.data.exceptions import MutationsExceptionGroup

        if not entries:
            return {}
        try:
            table.bulk_mutate_rows(entries, operation_timeout=self.flow.operation_timeout,
                                   attempt_timeout=self.flow.attempt_timeout)
        except MutationsExceptionGroup as group:
            refused = {}
            for error in group.exceptions:
                if error.index is None:
                    raise BigtableWriteError(f"Bigtable failed a write without naming the entry: {group}") from group
                refused[error.index] = refusal(error, self.flow)
            return refused
        return {}


class OverlappedWrites:
    """Changes written through the client's ``MutationsBatcher``: requests go out in the background while the
    next changes are mapped (the catch-up's writer; the tail waits for each page, it checkpoints after it).

    Order: the batcher sends several requests at once, and they may land in any order. So two changes of
    one item are never in flight together (the later one could land first: a cell deleted then set again,
    or set then deleted, would end the wrong way): an item already in flight has everything before it
    drained first. A catch-up export holds each item once, so there this never waits. Within one item's
    change set the deletes and the sets name different cells, so its own entries may land in any order.
    """

    def __init__(self, applier: ChangeApplier) -> None:
        self._applier = applier
        self._batcher: Any = None
        self._prepared: list[Prepared] = []
        self._where: dict[int, tuple[int, int]] = {}
        """id(entry) -> (index in _prepared, entry index there)."""
        self._items: set[tuple] = set()
        self._settled = Outcome()

    @property
    def pending_entries(self) -> int:
        return len(self._where)

    def add(self, groups: Iterable[Sequence[Change]]) -> None:
        """Map the groups (one item's changes each, in order) and hand their entries to the batcher."""
        run: list[Sequence[Change]] = []
        for changes in groups:
            if not changes:
                continue
            key = item_key(changes[0].keys, ())
            if key in self._items:  # an earlier change of this item may still be in flight
                self._append(run)
                run = []
                self._flush()
            self._items.add(key)
            run.append(changes)
        self._append(run)

    def drain(self) -> Outcome:
        """Wait until Bigtable holds everything added; what it all did since the last drain."""
        self._flush()
        outcome, self._settled = self._settled, Outcome()
        return outcome

    def discard(self) -> None:
        """Forget what was added (a failed bundle, retried as a whole); what was appended is still sent."""
        batcher, self._batcher = self._batcher, None
        self._prepared, self._where, self._items, self._settled = [], {}, set(), Outcome()
        if batcher is not None:
            try:
                batcher.close()
            except Exception:  # noqa: BLE001 - the bundle already failed with its own error
                pass

    def _append(self, run: list[Sequence[Change]]) -> None:
        if not run:
            return
        prepared = self._applier.prepare(run)
        number = len(self._prepared)
        self._prepared.append(prepared)
        if not prepared.entries:
            return
        if self._batcher is None:
            self._batcher = TableBatchers(self._applier.table, self._applier.flow, self._applier.table_named)
        tables, where, to = prepared.tables, self._where, self._batcher.to
        main = to(None)
        for index, entry in enumerate(prepared.entries):
            where[id(entry)] = (number, index)
            (main if not tables or index not in tables else to(tables[index]))(entry)

    def _flush(self) -> None:
        batcher, prepared, where = self._batcher, self._prepared, self._where
        self._batcher, self._prepared, self._where, self._items = None, [], {}, set()
        refused: list[dict[int, str]] = [{} for _ in prepared]
        for error in batcher.close() if batcher is not None else ():
            number, index = where[id(error.entry)]
            refused[number][index] = refusal(error, self._applier.flow)
        for number, done in enumerate(prepared):
            self._settled.add(ChangeApplier.settle(done, refused[number]))


# --------------------------------------------------------------------------- the catch-up's Beam step


class ApplyChangesFn(beam.DoFn):
    """Batches of changes (one per item, as an export holds them) in; counters and dead-letter part files out."""

    def __init__(self, destination: Destination, spec: dict, now_ms: int, dead_letter: str,
                 flow: FlowControl | None = None, tally: Callable[[list[Change]], Any] | None = None) -> None:
        from apache_beam.metrics import Metrics

        from ..run.metrics import NAMESPACE

        self._destination, self._spec, self._now_ms = destination, spec, now_ms
        self._dead_letter, self._flow, self._tally = dead_letter, flow, tally
        self._counters = {name: Metrics.counter(NAMESPACE, name) for name in CHANGE_COUNTERS}

    def setup(self) -> None:
        from ...mappers.compiler import compile_spec
        from ...mappers.spec import MappingSpec

        from ..run.collector import relax_young_gc

        self._in_flight = InFlight(self._release)  # first: a teardown lets go of whatever setup got to
        relax_young_gc()  # as the backfill's map step does: a change holds two images' worth of young objects
        compiled = compile_spec(MappingSpec.model_validate(self._spec), now_ms=self._now_ms)
        self._applier = ChangeApplier(self._destination, compiled, self._flow)
        self._writes = OverlappedWrites(self._applier)

    def start_bundle(self) -> None:
        self._in_flight.started()
        self._writes.discard()  # left over from a failed bundle, which the runner retries as a whole

    def process(self, batch: list[Change]) -> None:
        self._in_flight.check()
        if self._tally is not None:
            self._tally(batch)
        self._writes.add([(change,) for change in batch])
        if self._writes.pending_entries >= self._applier.flow.max_pending_entries:  # bounds the changes held
            self._report(self._writes.drain())

    def finish_bundle(self) -> None:
        self._report(self._writes.drain())
        self._in_flight.finished()

    def _report(self, outcome: Outcome) -> None:
        from ..run.dead_letters import write_part

        self._in_flight.check()  # torn down under the drain: no dead letter, the catch-up runs again
        if outcome.dead_letters:  # before the counters: a retried bundle repeats identical lines, joined once
            write_part(self._dead_letter, [letter.to_json() for letter in outcome.dead_letters])
        for name, value in outcome.counters().items():
            self._counters[name].inc(value)

    def teardown(self) -> None:
        if hasattr(self, "_in_flight"):  # setup ran: let go now, or leave it to a bundle still running elsewhere
            self._in_flight.teardown()

    def _release(self) -> None:
        writes = getattr(self, "_writes", None)
        if writes is not None:
            writes.discard()
        applier = getattr(self, "_applier", None)
        if applier is not None:
            applier.close()


class ChangeSink(Sink):
    """Changes applied to Bigtable with the spec (cells at the backfill's time ``now_ms``); what Bigtable refuses is
    written as change dead letters to ``dead_letter``, which `ddb2bt redrive` re-applies."""

    kind = "bigtable changes"
    refusals = "change dead letters in its own file"

    def __init__(self, spec: Any, now_ms: int, dead_letter: str, flow: FlowControl | None = None) -> None:
        self.spec, self.now_ms, self.dead_letter, self.flow = spec, now_ms, dead_letter, flow

    def describe(self) -> str:
        return describe_target(self.spec.target)

    def check(self) -> None:
        probe_target(self.spec.target, must_exist=True)

    def prepare(self, *, create: bool = True) -> None:
        """Changes go into the table the backfill made: nothing to create."""

    def applier(self) -> ChangeApplier:
        """A writer without Beam (the tail's): maps changes with the spec and waits until Bigtable holds them."""
        from ...mappers.compiler import compile_spec

        return ChangeApplier(Destination.from_target(self.spec.target), compile_spec(self.spec, now_ms=self.now_ms),
                             self.flow)

    def write(self, batches: Any, label: str | None = None, *,
              tally: Callable[[list[Change]], Any] | None = None) -> Any:
        """The apply step; ``tally`` is called with each batch as it comes in (the live count of changes read, kept by
        this step rather than by a step of its own)."""
        return batches | (label or "Apply") >> beam.ParDo(ApplyChangesFn(
            Destination.from_target(self.spec.target), self.spec.model_dump(by_alias=True), self.now_ms,
            self.dead_letter, self.flow, tally))
