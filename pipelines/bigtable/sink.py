"""The Bigtable side: table and family setup (admin API) and batched writes from Beam.

Setup runs once, on the launcher, *before* the pipeline writes anything: a table whose families
carry different GC rules than the spec asks for is refused, because writing into it would let
Bigtable garbage-collect migrated cells by rules nobody reviewed. Missing families are added
(additive, touches no existing data); extra families in the table are left alone.

Writes go through the data client's ``MutationsBatcher``, its MutateRows requests sent as the entries' bytes
(:mod:`.mutate`). An entry Bigtable refuses for good
(an unknown family, a row over the mutation limit) becomes a dead letter carrying the original
item; transient failures (deadline, unavailable) fail the bundle instead, so the runner retries
it. Retrying is safe because every cell has an explicit timestamp: rewriting a cell with the same
family, qualifier and timestamp replaces it with itself.
"""

from __future__ import annotations

import logging
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from collections import Counter
from dataclasses import dataclass
from itertools import islice
from typing import TYPE_CHECKING, Any, Iterable, Iterator

import apache_beam as beam
from apache_beam.transforms.window import GlobalWindows

from ...mappers.results import MappedRow
from ...mappers.gc import AGGREGATE_TEXT, combine, describe_gc
from ..run.batches import Barrier
from ..run.in_flight import InFlight
from ..run.metrics import NAMESPACE, ReasonCounters, letter_reason
from .entries import entry_maker, to_mutation_entry
from .mutate import Pools, batcher_class
from .raw_answers import free_finished_operations
from ..run.progress import reporter
from ..run.dead_letters import DeadLetter, ItemsMapped
from ...mappers.errors import ServiceError, UsageError

if TYPE_CHECKING:
    from ...mappers.spec import GcPolicy, TargetSpec

log = logging.getLogger(__name__)



class BigtableSetupError(UsageError):
    """The target table cannot be used as the spec asks; nothing has been written."""


class SchemaMismatchError(BigtableSetupError):
    """An existing table's column family has a different GC rule (or value type) than the spec declares."""


class TableMissingError(BigtableSetupError):
    """The table does not exist and creating it was not allowed."""


REFUSED = "Bigtable refused the row"
UNBUILDABLE = "cannot build the Bigtable mutation"
"""How a write dead letter's reason begins (its counter's reason: see ``metrics.letter_reason``)."""


class BigtableWriteError(ServiceError):
    """Bigtable could not be reached or kept timing out; the bundle fails so the runner retries it."""


# --------------------------------------------------------------------------- GC rules


def gc_rule_for(policy: GcPolicy | None) -> Any:
    """The ``google.cloud.bigtable.column_family`` GC rule for a policy; None keeps every version."""
    from google.cloud.bigtable import column_family as cf

    if policy is None:
        return None
    rules: list[Any] = []
    if policy.max_versions is not None:
        rules.append(cf.MaxVersionsGCRule(policy.max_versions))
    if policy.max_age is not None:
        rules.append(cf.MaxAgeGCRule(policy.max_age))
    if not rules:
        return None
    if len(rules) == 1:
        return rules[0]
    return cf.GCRuleUnion(rules) if policy.combine == "union" else cf.GCRuleIntersection(rules)


def _canonical(rule: Any) -> Any:
    """A Bigtable GC rule in the spec's comparable form (mappers/gc.py)."""
    from google.cloud.bigtable import column_family as cf

    if rule is None:
        return None
    if isinstance(rule, cf.MaxVersionsGCRule):
        return ("versions", rule.max_num_versions)
    if isinstance(rule, cf.MaxAgeGCRule):
        return ("age_ms", round(rule.max_age.total_seconds() * 1000))
    kind = "union" if isinstance(rule, cf.GCRuleUnion) else "intersection"
    return combine(kind, [_canonical(sub) for sub in rule.rules])


def describe_gc_rule(rule: Any) -> str:
    """A GC rule in words, for error messages and plans."""
    return describe_gc(_canonical(rule))


def gc_rule_difference(expected: Any, found: Any) -> str | None:
    """None when the rules are equivalent, else 'expected ..., found ...' in words."""
    if _canonical(expected) == _canonical(found):
        return None
    return f"expected {describe_gc_rule(expected)}, found {describe_gc_rule(found)}"


# --------------------------------------------------------------------------- value types (aggregate families)


@dataclass(frozen=True)
class Family:
    """A column family as the spec wants it or the table has it: its GC rule and, for an aggregate family, its
    aggregation (``"sum"``: Int64 sum, the spec's ``aggregate: sum``; another aggregate is named in words)."""

    rule: Any = None
    aggregate: str | None = None

    def words(self) -> str:
        if self.aggregate is None:
            return describe_gc_rule(self.rule)
        kind = AGGREGATE_TEXT.get(self.aggregate, self.aggregate)
        return kind if self.rule is None else f"{kind}, {describe_gc_rule(self.rule)}"

    def difference(self, found: Family) -> str | None:
        """``"type"`` when one is an aggregate and the other not (or another aggregate), ``"gc"`` when the GC rules
        differ, None when they are the same family."""
        if self.aggregate != found.aggregate:
            return "type"
        return "gc" if gc_rule_difference(self.rule, found.rule) else None


def family_for(policy: GcPolicy | None) -> Family:
    """What the spec's family declaration asks of the table."""
    return Family(gc_rule_for(policy), policy.aggregate if policy is not None else None)


def aggregate_of(value_type: Any) -> str | None:
    """A family's value type (``bigtable_admin_v2.types.Type``) as :attr:`Family.aggregate`: None for a plain family,
    ``"sum"`` for an Int64 sum aggregate, else the aggregate in words."""
    raw = getattr(value_type, "_pb", value_type)
    if raw is None or raw.WhichOneof("kind") != "aggregate_type":
        return None
    aggregate = raw.aggregate_type
    aggregator, input_kind = aggregate.WhichOneof("aggregator"), aggregate.input_type.WhichOneof("kind")
    if (aggregator, input_kind) == ("sum", "int64_type"):
        return "sum"
    return f"{(input_kind or '?').removesuffix('_type').capitalize()} {aggregator} aggregate"


def _value_type(aggregate: str) -> Any:
    from google.cloud.bigtable_admin_v2.types import Type

    if aggregate != "sum":
        raise ValueError(f"no value type for aggregate {aggregate!r}")
    return Type(aggregate_type=Type.Aggregate(input_type=Type(int64_type=Type.Int64()), sum=Type.Aggregate.Sum()))


# --------------------------------------------------------------------------- table setup


@dataclass(frozen=True)
class TableSetup:
    """What :func:`ensure_table` did."""

    table: str
    created: bool
    added_families: tuple[str, ...] = ()


@dataclass(frozen=True)
class FamilyDifference:
    family: str
    wanted: str
    """The spec's GC rule (or value type), in words."""
    found: str
    """The table's, in words."""
    kind: str = "gc"
    """``gc``: the GC rules differ (a rule can be changed); ``type``: plain against aggregate (a family's type cannot)."""

    def words(self) -> str:
        return f"family {self.family!r}: expected {self.wanted}, found {self.found}"


@dataclass(frozen=True)
class TableComparison:
    """The spec's families against a table's (read-only): what :func:`ensure_table` would do, or refuse."""

    exists: bool
    missing: tuple[str, ...]
    """Families to create: all of them when the table does not exist."""
    different: tuple[FamilyDifference, ...]
    """Families whose GC rule or value type differs: ensure_table refuses the table (SchemaMismatchError)."""
    same: tuple[str, ...] = ()
    extra: tuple[str, ...] = ()
    """Families in the table that the spec does not declare (left alone)."""


ADMIN_DEADLINE = 60.0
"""Seconds an admin read (does the table exist, which families) may take, retries included."""
ADMIN_ATTEMPT = 20.0
"""Seconds one admin request may take; a create or modify is one request (not retried: it is not idempotent)."""


@dataclass(frozen=True)
class AdminTable:
    """The table admin API for one table, every call bounded (the client's defaults wait up to 300 s per call)."""

    client: Any
    """A ``BigtableTableAdminClient``."""
    instance: str
    """``projects/P/instances/I``."""
    table_id: str
    deadline: float = ADMIN_DEADLINE

    @property
    def name(self) -> str:
        return f"{self.instance}/tables/{self.table_id}"

    def _retry(self) -> Any:
        from google.api_core import exceptions as core, retry

        transient = retry.if_exception_type(core.ServiceUnavailable, core.DeadlineExceeded)
        return retry.Retry(predicate=transient, initial=0.25, maximum=5.0, multiplier=2.0, timeout=self.deadline)

    def families(self) -> dict[str, Family] | None:
        """Family name -> its GC rule (``column_family`` objects) and value type, or None when the table does not
        exist."""
        from google.api_core.exceptions import NotFound
        from google.cloud.bigtable.column_family import _gc_rule_from_pb  # the client's own reading of a rule

        try:
            found = self.client.get_table(request={"name": self.name, "view": "SCHEMA_VIEW"}, retry=self._retry(),
                                          timeout=min(ADMIN_ATTEMPT, self.deadline))
        except NotFound:
            return None
        return {name: Family(_gc_rule_from_pb(family.gc_rule), aggregate_of(family.value_type))
                for name, family in found.column_families.items()}

    def create(self, families: dict[str, Family]) -> None:
        self.client.create_table(
            request={"parent": self.instance, "table_id": self.table_id,
                     "table": {"column_families": {name: _family_pb(family) for name, family in families.items()}}},
            timeout=self.deadline,
        )

    def add_family(self, name: str, family: Family) -> None:
        self.client.modify_column_families(
            request={"name": self.name, "modifications": [{"id": name, "create": _family_pb(family)}]},
            timeout=self.deadline,
        )


def _family_pb(family: Family) -> Any:
    from google.cloud.bigtable.column_family import ColumnFamily

    found = ColumnFamily("", None, family.rule).to_pb()
    if family.aggregate is not None:
        found.value_type = _value_type(family.aggregate)
    return found


def admin_table(target: TargetSpec, deadline: float = ADMIN_DEADLINE) -> AdminTable:
    from google.cloud.bigtable import Client

    client = Client(project=target.project, admin=True)
    return AdminTable(client.table_admin_client, client.instance(target.instance).name, target.table, deadline)


def existing_families(table: AdminTable) -> dict[str, Family] | None:
    """An admin table's families, GC rules and value types, or None when the table does not exist. Reads only,
    bounded."""
    return table.families()


def compare_families(target: TargetSpec, existing: dict[str, Family] | None) -> TableComparison:
    """The spec's families against ``existing`` (from :func:`existing_families`): the one comparison of GC rules and
    value types."""
    wanted = {name: family_for(policy) for name, policy in target.families.items()}
    if existing is None:
        return TableComparison(False, tuple(sorted(wanted)), ())
    kinds = {name: family.difference(existing[name]) for name, family in wanted.items() if name in existing}
    different = tuple(FamilyDifference(name, family.words(), existing[name].words(), kinds[name] or "gc")
                      for name, family in sorted(wanted.items()) if kinds.get(name))
    return TableComparison(
        True, tuple(sorted(name for name in wanted if name not in existing)), different,
        same=tuple(sorted(n for n in wanted if n in existing and n not in {d.family for d in different})),
        extra=tuple(sorted(name for name in existing if name not in wanted)),
    )


def mismatch_error(target: TargetSpec, comparison: TableComparison) -> SchemaMismatchError:
    typed = [difference for difference in comparison.different if difference.kind == "type"]
    if typed:
        return SchemaMismatchError(
            f"Bigtable table {target.table!r} already exists with {'; '.join(d.words() for d in typed)}. Nothing was "
            f"written. A family's type cannot be changed (a plain family takes SetCell, an aggregate family only "
            f"AddToCell): give the family another name in the spec (migrate creates it), or write to a new table."
        )
    return SchemaMismatchError(
        f"Bigtable table {target.table!r} already exists with different garbage collection than the spec "
        f"declares: {'; '.join(d.words() for d in comparison.different)}. Nothing was written. Either change "
        f"target.families in the spec to match the table, or change the family's GC rule on the table (e.g. "
        f"`cbt setgcpolicy`) if the spec is right, or write to a new table."
    )


def ensure_table(target: TargetSpec, create: bool = True, *, deadline: float = ADMIN_DEADLINE) -> TableSetup:
    """Make sure the target table exists with the spec's families and GC rules.

    Creates the table (or missing families) when allowed. Raises :class:`SchemaMismatchError`
    listing every family whose GC rule differs, before any data is written. Every admin call ends
    within ``deadline`` seconds (the client's error, e.g. RetryError or DeadlineExceeded, if not).
    """
    table = admin_table(target, deadline)
    wanted = {name: family_for(policy) for name, policy in target.families.items()}
    comparison = compare_families(target, existing_families(table))
    if not comparison.exists:
        if not create:
            raise TableMissingError(
                f"Bigtable table {target.table!r} does not exist in instance {target.instance!r} "
                f"(project {target.project!r}); create it or run without --no-create."
            )
        table.create(wanted)
        log.info("created table %s with families %s", target.table, ", ".join(sorted(wanted)))
        return TableSetup(target.table, created=True, added_families=tuple(sorted(wanted)))

    if comparison.different:
        raise mismatch_error(target, comparison)
    missing = comparison.missing
    if missing and not create:
        raise TableMissingError(
            f"Bigtable table {target.table!r} lacks column families {', '.join(missing)}; "
            f"add them or allow ddb2bt to create them."
        )
    for name in missing:
        table.add_family(name, wanted[name])
        log.info("added column family %s to table %s", name, target.table)
    return TableSetup(target.table, created=False, added_families=tuple(missing))


# --------------------------------------------------------------------------- writes


@dataclass(frozen=True)
class FlowControl:
    """Batching and in-flight limits for one writer (one DoFn instance), passed to the client's batcher.

    A request goes out at 10,000 mutations (cells) or 20 MiB, whichever comes first: the client's
    work per request (retry wrapper, metrics, futures) is a fixed cost, and at 1,000 mutations it
    was a tenth of the writer's time (docs/PERFORMANCE.md). Bigtable allows 100,000 mutations per request.
    Sizes are real byte counts (see :mod:`.entries`), so the byte limits hold.
    """

    flush_limit_mutation_count: int = 10_000
    flush_limit_bytes: int = 20 * 1024 * 1024
    flow_control_max_mutation_count: int = 100_000
    flow_control_max_bytes: int = 100 * 1024 * 1024
    max_pending_entries: int = 20_000
    """Close and reopen the batcher after this many entries, bounding the items held for dead letters."""
    operation_timeout: float = 60.0
    """Seconds one batch of writes may take, retries included, before the bundle fails with
    :class:`BigtableWriteError` (the client's default is 600: a dead Bigtable went unnoticed for minutes)."""
    attempt_timeout: float = 20.0
    """Seconds one MutateRows request may take before the client retries it."""


@dataclass(frozen=True)
class Destination:
    """Where to write; plain values so the DoFn pickles small and credential-free."""

    project: str
    instance: str
    table: str
    app_profile: str | None = None
    counters: frozenset[str] = frozenset()
    """The aggregate families: every writer rewrites a cell there whole (DeleteFromColumn + AddToCell), since
    Bigtable adds whatever is written to them, a SetCell too."""

    @classmethod
    def from_target(cls, target: TargetSpec) -> Destination:
        counters = frozenset(name for name, policy in target.families.items() if policy.aggregate)
        return cls(target.project, target.instance, target.table, target.app_profile, counters)


def open_batcher(table: Any, flow: FlowControl, pools: Pools | None = None) -> Any:
    """The data client's ``MutationsBatcher`` for ``table`` with ``flow``'s limits, reporting every failure; its
    requests sent as the entries' bytes and its answers read raw (:mod:`.mutate`), its finished operations freed at
    once (:mod:`.raw_answers`); its thread pools lent by ``pools`` (kept across batchers) when given."""
    free_finished_operations()
    cls = batcher_class()
    batcher = cls(
        table,
        **({"pools": pools} if pools is not None and getattr(cls, "borrows_pools", False) else {}),
        flush_limit_mutation_count=flow.flush_limit_mutation_count,
        flush_limit_bytes=flow.flush_limit_bytes,
        flow_control_max_mutation_count=flow.flow_control_max_mutation_count,
        flow_control_max_bytes=flow.flow_control_max_bytes,
        batch_operation_timeout=flow.operation_timeout,
        batch_attempt_timeout=flow.attempt_timeout,
    )
    # The batcher keeps only the first and last 10 failures per close() and drops the rest;
    # every failure must become a dead letter, so lift that limit (close_batcher checks that none was dropped).
    if hasattr(batcher, "_exception_list_limit"):
        batcher._exception_list_limit = sys.maxsize
    return batcher


class TableBatchers:
    """The batcher of the main table, and one per index table (`target: {table: ...}`) opened as its first entry comes:
    appended to like one batcher, closed together."""

    def __init__(self, table: Any, flow: FlowControl, table_named: Any, pools: Pools | None = None) -> None:
        self._flow, self._table_named, self._pools = flow, table_named, pools
        self.main = open_batcher(table, flow, pools)
        self.append = self.main.append
        self._others: dict[str, Any] = {}

    def to(self, table: str | None) -> Any:
        """The ``append`` of ``table``'s batcher (None: the main table)."""
        if table is None:
            return self.append
        batcher = self._others.get(table)
        if batcher is None:
            batcher = self._others[table] = open_batcher(self._table_named(table), self._flow, self._pools)
        return batcher.append

    def close(self) -> list[Any]:
        """Close every batcher; the errors of the entries they failed (see :func:`close_batcher`)."""
        return [error for batcher in (self.main, *self._others.values()) for error in close_batcher(batcher)]


class _WriteFn(beam.DoFn):
    """Writes ``(MappedRow, item)`` pairs; its only output is a DeadLetter per refused entry."""

    def __init__(self, destination: Destination, flow: FlowControl, progress_dir: str | None = None) -> None:
        self._destination = destination
        self._flow = flow
        self._progress_dir = progress_dir
        self._rows = beam.metrics.Metrics.counter(NAMESPACE, "rows_written")
        self._index_rows = beam.metrics.Metrics.counter(NAMESPACE, "index_rows_written")
        self._cells = beam.metrics.Metrics.counter(NAMESPACE, "cells_written")
        self._bytes = beam.metrics.Metrics.counter(NAMESPACE, "bytes_written")
        self._failures = beam.metrics.Metrics.counter(NAMESPACE, "write_failures")
        self._overwritten = beam.metrics.Metrics.counter(NAMESPACE, "cells_overwritten")
        self._reasons = ReasonCounters()

    def setup(self) -> None:
        from google.cloud.bigtable.data import BigtableDataClient

        self._client: Any = BigtableDataClient(project=self._destination.project)
        self._table = self._client.get_table(
            self._destination.instance, self._destination.table, app_profile_id=self._destination.app_profile
        )
        self._batcher: TableBatchers | None = None
        self._tables: dict[str, Any] = {}
        self._pending: dict[int, tuple[Any, Any, dict]] = {}
        self._recent: dict[bytes, set] = {}  # the last rows' cell coordinates, to see overwrites across batches
        self._closer: ThreadPoolExecutor | None = None
        self._pools = Pools()
        """The batchers' thread pools, kept for the writer's life (a batcher per page made its own: :class:`.Pools`)."""
        self._closing: tuple[Future, dict[int, tuple[Any, Any, dict]], Barrier] | None = None
        """A batcher closing in the background, its entries, and the barrier passed on once it is closed."""
        self._progress = reporter(self._progress_dir)
        self._entry = entry_maker(self._destination.counters)
        self._in_flight = InFlight(self._let_go)
        """Torn down by :meth:`teardown`; a bundle that still runs then stops, passing nothing more on."""

    def start_bundle(self) -> None:
        self._in_flight.started()
        self._pending = {}

    def process(self, element: Any) -> Iterator[Any]:
        self._in_flight.check()
        if isinstance(element, (DeadLetter, ItemsMapped)):  # given up on upstream, or a tally: pass it on
            yield element
            return
        pairs: Iterable[tuple[MappedRow, dict]]
        if isinstance(element, list) and not isinstance(element, Barrier):
            pairs = element
        elif isinstance(element, tuple) and len(element) == 2 and isinstance(element[0], MappedRow):
            pairs = (element,)
        elif isinstance(element, Barrier):
            # a page's savepoint, or a segment's (an export file's) done marker: passed on once everything before
            # it is stored, at the next barrier or the bundle's end. A done marker was passed on after a close
            # waited for here, the next pages queued meanwhile: once per segment, a wait that a run of more segments
            # paid more often (docs/PERFORMANCE.md, "Latency round 12")
            yield from self._settle_closing()
            yield from self._close_behind(element)
            return
        else:  # anything else that is no rows: passed on once everything before it is stored
            yield from self._settle_closing()
            yield from self._close()
            yield element
            return
        if self._batcher is None:
            self._batcher = TableBatchers(self._table, self._flow, self._table_named, self._pools)
        batchers = self._batcher
        append, pending, make = batchers.append, self._pending, self._entry
        for row, item in pairs:
            try:
                entry = make(row)  # sized: a value Bigtable cannot hold fails here, not inside append
            except Exception as err:  # noqa: BLE001 - whatever one row's entry does, it is that row's dead letter
                self._count_letters(Counter({letter_reason("write", row.entity, what=UNBUILDABLE): 1}))
                yield DeadLetter(item, "write", f"{UNBUILDABLE}: {type(err).__name__}: {err}",
                                 row.entity, None, row.row_key)
                continue
            pending[id(entry)] = (entry, row, item)
            if row.__class__ is not MappedRow:  # an index row of its own (validate's repairs of an index table)
                batchers.to(row.table)(entry)  # type: ignore[union-attr]
                continue
            append(entry)
            for index_row in row.index_rows:  # rows of their own, counted apart (index_rows_written)
                index_entry = to_mutation_entry(index_row)
                pending[id(index_entry)] = (index_entry, index_row, item)
                (append if index_row.table is None else batchers.to(index_row.table))(index_entry)
        closing = self._closing
        if len(pending) + (len(closing[1]) if closing is not None else 0) >= self._flow.max_pending_entries:
            # the entries of the batcher closing behind count too (an export file's, behind its done marker): at
            # most ``max_pending_entries`` items held for dead letters, as with one batcher at a time
            yield from self._settle_closing()
            if len(pending) >= self._flow.max_pending_entries:
                yield from self._close()

    def _table_named(self, name: str) -> Any:
        """An index's own table, in the main table's instance and app profile."""
        if name not in self._tables:
            self._tables[name] = self._client.get_table(self._destination.instance, name,
                                                        app_profile_id=self._destination.app_profile)
        return self._tables[name]

    def finish_bundle(self) -> Iterator[Any]:
        self._in_flight.check()
        for element in [*self._settle_closing(), *self._close()]:
            yield GlobalWindows.windowed_value(element)
        self._in_flight.finished()

    def _close(self) -> Iterator[Any]:
        """Flush everything appended so far; count the successes, dead-letter the refusals."""
        batcher, pending = self._batcher, self._pending
        self._batcher, self._pending = None, {}
        if batcher is None:
            return
        yield from self._settle(batcher.close(), pending)

    def _close_behind(self, marker: Barrier) -> Iterator[Any]:
        """Close the batcher in the background and hold ``marker`` until it is closed (:meth:`_settle_closing`,
        at the next barrier or the bundle's end): the next page is mapped and appended to a new batcher meanwhile,
        so a savepoint after every page, or a done marker after every segment, costs no wait for the writes before
        it, and lags the stored pages by at most one."""
        batcher, pending = self._batcher, self._pending
        self._batcher, self._pending = None, {}
        if batcher is None:
            yield marker
            return
        if self._closer is None:
            self._closer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ddb2bt-close")
        self._closing = (self._closer.submit(batcher.close), pending, marker)

    def _settle_closing(self) -> Iterator[Any]:
        """The batcher closing in the background, once closed: its dead letters, then the barrier it held."""
        closing, self._closing = self._closing, None
        if closing is None:
            return
        errors, pending, marker = closing[0].result(), closing[1], closing[2]
        yield from self._settle(errors, pending)
        yield marker

    def _settle(self, errors: list[Any], pending: dict[int, tuple[Any, Any, dict]]) -> Iterator[Any]:
        """Count a closed batcher's successes and dead-letter its refusals (``errors``, from :func:`close_batcher`)."""
        self._in_flight.check()  # its client may have been closed under it: the errors are no refusals
        letters = self._letters(errors, pending)
        cells, written_bytes, index_rows, overwritten = _tallies(pending.values(), self._recent)
        self._rows.inc(len(pending) - index_rows)
        self._index_rows.inc(index_rows)
        self._cells.inc(cells - overwritten)
        self._overwritten.inc(overwritten)
        self._bytes.inc(written_bytes)
        if self._progress is not None:  # live totals (a stop is noticed by the map step, so this segment's marker
            self._progress.add({"rows_written": len(pending) - index_rows, "cells_written": cells - overwritten,  # still goes through)
                                "bytes_written": written_bytes}, check_stop=False)
        if letters:
            self._count_letters(Counter(letter_reason("write", letter.entity, what=REFUSED) for letter in letters))
        yield from letters

    def _count_letters(self, reasons: Counter[str]) -> None:
        """Count this step's dead letters, by reason, in Beam's counters and the live totals."""
        count = sum(reasons.values())
        self._failures.inc(count)
        named = self._reasons.inc("dead_lettered", reasons)
        if self._progress is not None:
            self._progress.add({"dead_lettered": count, **named}, check_stop=False)

    def _letters(self, errors: list[Any], pending: dict[int, tuple[Any, Any, dict]]) -> list[DeadLetter]:
        """One dead letter per item with a refused entry (its row or one of its index rows); the item's other
        entries are taken out of ``pending`` too, so an item is either written (row and index rows) or dead-lettered,
        and a redrive writes all of it again."""
        letters: dict[int, DeadLetter] = {}
        for error in errors:
            _entry, row, item = pending.pop(id(error.entry))
            if id(item) in letters:
                continue
            why = refused_for_good(error, self._flow, "writes",
                                   "check that Bigtable (or the emulator) is up and reachable, then resume the run (--resume)")
            if row.__class__ is not MappedRow:
                why = f"index {row.index_name!r}'s row {row.row_key!r}: {why}"
            letters[id(item)] = DeadLetter(item, "write", f"{REFUSED}: {why}", getattr(row, "entity", None), None,
                                           row.row_key)  # fmt: skip
        if letters:
            for key in [key for key, (_entry, _row, item) in pending.items() if id(item) in letters]:
                del pending[key]
        return list(letters.values())

    def teardown(self) -> None:
        in_flight = getattr(self, "_in_flight", None)
        if in_flight is None:  # setup did not get that far: only its client, if any, to close
            client = getattr(self, "_client", None)
            if client is not None:
                client.close()
            return
        if in_flight.defer():
            # Beam's SDK harness, ending a run that failed or was stopped, tears down the steps of every bundle
            # still in flight from its own thread while they go on (pipelines/run/in_flight.py). Closing the client
            # here failed that bundle's writes ("Channel closed"), which it took for Bigtable refusing the rows: dead
            # letters, then its segment's done marker or savepoint passed on over rows never written, and a resume
            # trusted them. So only mark the writer torn down: the bundle lets go of its batcher and client itself at
            # its next step (or as it finishes), and passes nothing more on.
            return
        closing = self._closing
        if closing is not None:  # a failed bundle: let the background close end (its savepoint is never passed on)
            try:
                closing[0].result()
            except Exception:  # noqa: BLE001 - the run has already failed with its own error
                log.debug("closing a batcher after a failed bundle", exc_info=True)
            self._closing = None
        if self._batcher is not None:  # a failed or interrupted bundle: send what was appended
            try:  # (its segment is not marked done, so --resume writes it again) rather than drop it at exit
                for _letter in self._close():  # counted in the live totals; the rerun dead-letters them again
                    pass
            except Exception:  # noqa: BLE001 - the run has already failed with its own error
                log.debug("closing the batcher after a failed bundle", exc_info=True)
        in_flight.teardown()  # a bundle started on this writer after all stops at once

    def _let_go(self) -> None:
        """Let go of the batchers and the client, counting and passing on nothing: in the bundle's own thread once
        :meth:`teardown` marked the writer torn down (the rows may be written; their segment is not marked, so
        ``--resume`` writes them again; :meth:`InFlight.check` then stops the bundle), or by :meth:`teardown`
        itself after its flush."""
        batcher, self._batcher, self._pending = self._batcher, None, {}
        try:
            if self._closing is not None:
                self._closing[0].result()
            if batcher is not None:
                batcher.close()
        except Exception:  # noqa: BLE001 - the bundle stops below; nothing of it is passed on
            log.debug("closing a batcher of a torn-down writer", exc_info=True)
        self._closing = None
        self._release()

    def _release(self) -> None:
        """The background closer, the live totals and the client, let go of (after the batchers are closed)."""
        closer, self._closer = self._closer, None
        if closer is not None:
            closer.shutdown(wait=True)
        pools = getattr(self, "_pools", None)
        if pools is not None:
            pools.shutdown()
        if self._progress is not None:
            self._progress.flush()
        client, self._client = self._client, None
        if client is not None:
            client.close()


RECENT_ROWS = 64
"""Rows whose cell coordinates a writer remembers from one write batch to the next (see :func:`_tallies`)."""


def _tallies(pending: Iterable[tuple[Any, Any, Any]], recent: dict[bytes, set]) -> tuple[int, ...]:
    """A closed batcher's written entries (``(entry, row, item)``, each row a MappedRow or an IndexRow) counted in one
    pass: their cells, their bytes (row
    keys, qualifiers and values), how many are index rows, and how many cells are overwritten: written again by
    another of these rows, or by one of the ``recent`` rows, at the same coordinate (row, family, qualifier and
    timestamp). Bigtable keeps one cell per coordinate, so these are not counted as written. Only the main table's
    rows are compared (an index table's keys are not its keys).

    ``recent`` holds the cell coordinates of the last :data:`RECENT_ROWS` rows of the write batches
    before, and is updated to this one's. Items folded onto one row from one partition come together
    in a scan, so a row cut by a batch boundary is among them; rows whose items lie farther apart
    (an export's file order, rows folded across partitions) are not, and their overwrites are not
    seen here: ``validate`` counts collisions exactly. Costs one dict lookup per row; the cells are
    compared only for a row key that comes again; then, per batch, the few rows also in ``recent``
    (a set intersection) and RECENT_ROWS rows' coordinates kept (no values).
    """
    seen: dict[bytes, Any] = {}
    cells = written = index_rows = again = 0
    for entry, row, _item in pending:
        row_cells, key = row.cells, row.row_key
        cells += len(row_cells)
        data = entry.data_bytes  # the cells' qualifiers and values, counted as the entry was built
        if data is None:  # an entry of counters: its mutations are not its row's cells
            data = 0
            for _family, qualifier, _micros, value in row_cells:
                data += len(qualifier) + len(value)
        written += len(key) + data
        if row.__class__ is not MappedRow:
            index_rows += 1
            if row.table is not None:
                continue
        known = seen.get(key)
        if known is None:
            seen[key] = row
            continue
        again += _again(seen, key, known, row_cells)
    return cells, written, index_rows, again + _across_batches(seen, recent)


def _again(seen: dict[bytes, Any], key: bytes, known: Any, cells: Iterable[tuple]) -> int:
    """Cells of a row key seen before in this batch that it already wrote; ``seen[key]`` becomes its coordinates."""
    if known.__class__ is not set:
        known = seen[key] = {cell[:3] for cell in known.cells}
    again = 0
    for cell in cells:
        coordinate = cell[:3]
        if coordinate in known:
            again += 1
        else:
            known.add(coordinate)
    return again


def _across_batches(seen: dict[bytes, Any], recent: dict[bytes, set]) -> int:
    """Cells of this batch's rows (``seen``) that the ``recent`` rows wrote; ``recent`` becomes the last rows'."""
    again = 0
    for key in recent.keys() & seen.keys():  # rows this batch goes on writing
        coordinates = _coordinates(seen[key])
        again += len(coordinates & recent[key])
        seen[key] = coordinates | recent.pop(key)
    newest = list(islice(reversed(seen.items()), RECENT_ROWS))
    older = list(recent.items())[len(newest) - RECENT_ROWS:] if len(newest) < RECENT_ROWS else []
    recent.clear()
    recent.update(older)
    recent.update((key, _coordinates(known)) for key, known in reversed(newest))
    return again


def _coordinates(known: Any) -> set:
    """A row's cell coordinates (family, qualifier, timestamp): the set itself, or a MappedRow's."""
    return known if known.__class__ is set else {cell[:3] for cell in known.cells}


def close_batcher(batcher: Any) -> list[Any]:
    """Close ``batcher``, flushing what it holds; the errors of the entries it failed, every one of them (judge each
    with :func:`refused_for_good`). A group that lists fewer failures than it counts raises BigtableWriteError: the
    bundle is retried rather than an entry lost unseen."""
    from google.cloud.bigtable.data.exceptions import MutationsExceptionGroup

    try:
        batcher.close()
    except MutationsExceptionGroup as group:
        if len(group.exceptions) < _failure_count(group):
            raise BigtableWriteError(
                f"Bigtable reported more failed entries than it listed ({group}); retrying the bundle"
            ) from group
        return list(group.exceptions)
    return []


def refused_for_good(error: Any, flow: FlowControl, what: str, hint: str) -> str:
    """``Type: message`` of why Bigtable refused one entry for good (its dead letter's reason). A transient failure
    (Bigtable unreachable or too slow) is no refusal: BigtableWriteError saying the ``what`` were not taken, with
    ``hint``."""
    cause = error.__cause__
    if _is_transient(cause):
        raise BigtableWriteError(
            f"Bigtable did not take the {what} within {flow.operation_timeout:.0f}s: "
            f"{type(cause).__name__}: {' '.join(str(cause).split())[:300]}", hint,
        ) from error
    return f"{type(cause).__name__}: {cause}"


def _failure_count(group: Any) -> int:
    """How many entries failed, which the group's message states even when it truncated its list."""
    head = str(group.args[0] if group.args else "").split(" failed ", 1)[0]
    return int(head) if head.isascii() and head.isdigit() else len(group.exceptions)


def _is_transient(cause: Any) -> bool:
    from google.api_core import exceptions as core
    from google.cloud.bigtable.data.exceptions import RetryExceptionGroup

    transient = (core.DeadlineExceeded, core.ServiceUnavailable, core.Aborted, core.ResourceExhausted)
    return isinstance(cause, (RetryExceptionGroup, *transient))


class WriteToBigtable(beam.PTransform):
    """Lists of ``(MappedRow, item)`` pairs (or single pairs) in; out come a :class:`DeadLetter` per
    refused row, the dead letters that came in, and barriers.

    Any other input element is a *barrier*: the writer passes it on only after every row that arrived before
    it is stored or dead-lettered. The pipeline sends a scan segment's done marker (an export file's) and each
    page's savepoint (:class:`.batches.SegmentAt`) this way, so a checkpoint never gets ahead of the data. A
    :class:`.batches.Barrier` is passed on one page later: its batcher closes in the background while the next
    page is mapped, and the barrier follows at the next barrier or the bundle's end; anything else waits for the
    close.
    """

    def __init__(self, target: TargetSpec | Destination, flow: FlowControl | None = None, *,
                 progress_dir: str | None = None) -> None:
        super().__init__()
        self._destination = target if isinstance(target, Destination) else Destination.from_target(target)
        self._flow = flow or FlowControl()
        self._progress_dir = progress_dir

    def expand(self, rows: Any) -> Any:
        return rows | "Write" >> beam.ParDo(_WriteFn(self._destination, self._flow, self._progress_dir))
