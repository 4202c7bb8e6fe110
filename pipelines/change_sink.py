"""Apply item changes to Bigtable: the mutations of :mod:`ddb2bt.mappers.changes`, written and counted.

Shared by the catch-up (a Beam DoFn per worker) and the stream tail (one process): both hand
:meth:`ChangeApplier.apply` the changes of many items, each item's changes in order, and get back
how many were applied, skipped and dead-lettered. Every cell has an explicit timestamp and every
delete names one cell's millisecond, so a write retried or a change applied twice replaces each
cell with itself: entries are idempotent and the client may retry them.

A change whose new image does not map still deletes the old image's cells (the item is then
absent from Bigtable, as the backfill would have left it) and is dead-lettered with its record.
An entry Bigtable refuses for good (an unknown family) dead-letters its item's changes; a
transient failure raises :class:`BigtableWriteError`, so nothing is checkpointed past it.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import apache_beam as beam

from ..mappers.changes import Change, ChangeSet, RowChange, diff_many
from ..mappers.limits import MUTATIONS_PER_ENTRY_MAX
from .bigtable_entries import prebuilt_entry_class
from .bigtable_sink import BigtableWriteError, Destination, FlowControl, _is_transient
from .dead_letters import DeadLetter

CHANGE_COUNTERS = ("changes_read", "changes_applied", "changes_dead_lettered", "changes_skipped", "cells_set",
                   "cells_deleted", "ttl_deletes")


def row_entries(row: RowChange) -> list[Any]:
    """The ``RowMutationEntry`` objects for one row: exact one-millisecond deletes, then the new cells.

    Built as the wire message directly (as :mod:`.bigtable_entries` does for the backfill): through
    the client's ``DeleteRangeFromColumn``/``SetCell`` objects and proto-plus, building the message
    was 40% of a change's cost (profiled). Byte for byte the same request (tests/pipelines/test_change_sink.py).
    """
    mutations = [(True, d.family, d.qualifier, d.timestamp_micros, b"") for d in row.deletes]
    mutations += [(False, c.family, c.qualifier, c.timestamp_micros, c.value) for c in row.sets]
    entry = _change_entry_class()
    return [entry(row.row_key, tuple(mutations[start:start + MUTATIONS_PER_ENTRY_MAX]))
            for start in range(0, len(mutations), MUTATIONS_PER_ENTRY_MAX)]


def client_mutation(mutation: tuple[bool, str, bytes, int, bytes]) -> Any:
    """One mutation as the client's own object (``DeleteRangeFromColumn`` over one ms, or ``SetCell``)."""
    from google.cloud.bigtable.data import DeleteRangeFromColumn, SetCell

    delete, family, qualifier, micros, value = mutation
    if delete:
        return DeleteRangeFromColumn(family, qualifier, micros, micros + 1000)
    return SetCell(family, qualifier, value, micros)


@functools.cache
def _change_entry_class() -> type:
    class ChangeEntry(prebuilt_entry_class()):  # type: ignore[misc]
        """A row's deletes and sets held as ``(delete, family, qualifier, micros, value)`` tuples."""

        _client_mutation = staticmethod(client_mutation)

        def is_idempotent(self) -> bool:
            return True  # explicit timestamps and exact ranges only

        def _fill(self, add: Any) -> None:
            for delete, family, qualifier, micros, value in self.tuples:
                if delete:
                    cell = add().delete_from_column
                    cell.family_name = family
                    cell.column_qualifier = qualifier
                    cell.time_range.start_timestamp_micros = micros
                    cell.time_range.end_timestamp_micros = micros + 1000
                else:
                    cell = add().set_cell
                    cell.family_name = family
                    cell.column_qualifier = qualifier
                    cell.timestamp_micros = micros
                    cell.value = value

    return ChangeEntry


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


class ChangeApplier:
    """Maps changes with the compiled spec and writes their mutations; one per process or DoFn instance."""

    def __init__(self, destination: Destination, compiled: Any, flow: FlowControl | None = None) -> None:
        from google.cloud.bigtable.data import BigtableDataClient

        self._compiled = compiled
        self._flow = flow or FlowControl()
        self._client = BigtableDataClient(project=destination.project)
        self._table = self._client.get_table(destination.instance, destination.table,
                                             app_profile_id=destination.app_profile)

    def close(self) -> None:
        self._client.close()

    def apply(self, groups: Iterable[Sequence[Change]]) -> Outcome:
        """Apply each group (one item's changes, in order) and wait until Bigtable holds them."""
        outcome = Outcome()
        entries: list[Any] = []
        owners: list[int] = []  # entry index -> group index
        pending: list[tuple[Sequence[Change], ChangeSet]] = []
        for changes in groups:
            outcome.read += len(changes)
            outcome.ttl_deletes += sum(change.ttl for change in changes)
            result = diff_many(self._compiled, changes)
            if not isinstance(result, ChangeSet):
                outcome.skipped += len(changes)
                continue
            for row in result.rows:
                for entry in row_entries(row):
                    entries.append(entry)
                    owners.append(len(pending))
            pending.append((changes, result))
        refused = self._write(entries)
        failed_groups: dict[int, str] = {owners[index]: reason for index, reason in refused.items()}
        for number, (changes, result) in enumerate(pending):
            if number in failed_groups:
                row_key = result.rows[0].row_key if result.rows else None
                outcome.dead_letters += [change_letter(change, "write", failed_groups[number], result.entity, None, row_key)
                                         for change in changes]
                continue
            failed = {id(change): error for change, error in result.failures}
            for change in changes:
                error = failed.get(id(change))
                if error is None:
                    outcome.applied += 1
                else:
                    outcome.dead_letters.append(change_letter(change, error.stage, error.reason,
                                                              error.entity, error.attribute))
            outcome.cells_set += sum(len(row.sets) for row in result.rows)
            outcome.cells_deleted += sum(len(row.deletes) for row in result.rows)
        return outcome

    def _write(self, entries: list[Any]) -> dict[int, str]:
        """Write the entries; {index: reason} for those Bigtable refused for good."""
        from google.cloud.bigtable.data.exceptions import MutationsExceptionGroup

        if not entries:
            return {}
        try:
            self._table.bulk_mutate_rows(entries, operation_timeout=self._flow.operation_timeout,
                                         attempt_timeout=self._flow.attempt_timeout)
        except MutationsExceptionGroup as group:
            refused = {}
            for error in group.exceptions:
                cause = error.__cause__
                if _is_transient(cause) or error.index is None:
                    raise BigtableWriteError(
                        f"Bigtable did not take the changes within {self._flow.operation_timeout:.0f}s: "
                        f"{type(cause).__name__}: {' '.join(str(cause).split())[:300]}",
                        "check that Bigtable is reachable; run the command again, it continues where it stopped",
                    ) from group
                refused[error.index] = f"Bigtable refused the change: {type(cause).__name__}: {cause}"
            return refused
        return {}


# --------------------------------------------------------------------------- the catch-up's Beam step


class ApplyChangesFn(beam.DoFn):
    """Batches of changes (one per item, as an export holds them) in; counters and dead-letter part files out."""

    def __init__(self, destination: Destination, spec: dict, now_ms: int, dead_letter: str,
                 flow: FlowControl | None = None) -> None:
        from apache_beam.metrics import Metrics

        from .metrics import NAMESPACE

        self._destination, self._spec, self._now_ms = destination, spec, now_ms
        self._dead_letter, self._flow = dead_letter, flow
        self._counters = {name: Metrics.counter(NAMESPACE, name) for name in CHANGE_COUNTERS}

    def setup(self) -> None:
        from ..mappers.compiler import compile_spec
        from ..mappers.spec import MappingSpec

        compiled = compile_spec(MappingSpec.model_validate(self._spec), now_ms=self._now_ms)
        self._applier = ChangeApplier(self._destination, compiled, self._flow)

    def process(self, batch: list[Change]) -> None:
        from .dead_letters import write_part

        outcome = self._applier.apply([(change,) for change in batch])
        if outcome.dead_letters:  # before the counters: a retried bundle repeats identical lines, joined once
            write_part(self._dead_letter, [letter.to_json() for letter in outcome.dead_letters])
        for name, value in outcome.counters().items():
            self._counters[name].inc(value)

    def teardown(self) -> None:
        applier = getattr(self, "_applier", None)
        if applier is not None:
            applier.close()
