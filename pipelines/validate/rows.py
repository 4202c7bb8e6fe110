"""The rows pass of a validation: what one row group cannot decide, over the compare pass's files.

A row folded from items far apart in the source is compared in several groups; each leaves a
candidate (:class:`ddb2bt.mappers.validate.Candidate`). Grouped by row key, they give the cells
no item produces (extra cells and versions: with ``--repair`` deleted cell version by cell
version, never the row) and the cells several groups produce (collisions). With
``--target-scan``, the row keys of the table and of every index in a table of its own (read
range by range, values stripped) are joined with the row keys the source maps to, index rows
included: rows only the target has are ``extra_row``, naming the index when the row is an index
table's or under an index's prefix (with ``--repair`` their cells are deleted one by one, in the
table they are in).

Groups that own every cell of their row (the usual case where rows may be folded from items far
apart, e.g. from an export) leave a short ``owners`` line instead of their claims; only the
owners of rows that some claiming candidate names are read back, so a clean table costs a
stream over those files and nothing held. Small inputs (up to ``LAUNCHER_BYTES`` of claiming
candidates, no target scan) are resolved in the launcher, which saves a pipeline's start;
larger ones by a Beam job whose GroupByKey holds them (in memory on the DirectRunner, in the
shuffle on Dataflow).
"""

from __future__ import annotations

import functools
import json
import operator
from collections import Counter, defaultdict
from dataclasses import replace
from typing import Any, Iterator

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics

from ..bigtable.read import RowLookup, ScanRowKeys, key_ranges
from ..bigtable.sink import NAMESPACE, Destination
from ..run.in_flight import InFlight
from .extra import Deletion, apply_deletions, resolved
from .files import PartWriter, finished_parts, key_line, key_of_line, lines
from .pipeline import Found, json_line, PersistFoundFn

DELETES_PER_REQUEST = 1000
LAUNCHER_BYTES = 32 << 20
"""Candidates up to this size (in their part files) are resolved in the launcher rather than by a Beam job."""


def resolve(candidate_lines: list[str], repair: bool, after_us: int | None = None) -> tuple[Found, Deletion | None]:
    """One row's candidates -> its differences (and figures), and with ``repair`` the extra cells to delete."""
    from ...mappers.validate.compare import Candidate

    candidates = [Candidate.from_json(json.loads(line)) for line in candidate_lines]
    differences, stats, deletion = resolved(candidates, repair, after_us)
    return Found(tuple(json_line(d.to_json()) for d in differences), stats=tuple(stats.items())), deletion


class _ResolveFn(beam.DoFn):
    def __init__(self, repair: bool, after_us: int | None) -> None:
        self._repair, self._after_us = repair, after_us

    def process(self, element: tuple[str, Any]) -> Iterator[Any]:
        found, deletion = resolve(list(element[1]), self._repair, self._after_us)
        if deletion is not None:
            yield deletion
        yield found


class Lookups:
    """One RowLookup per table, opened when first used: the main table (None) and the index tables."""

    def __init__(self, destination: Destination) -> None:
        self._destination = destination
        self._open: dict[str | None, RowLookup] = {}

    def __getitem__(self, table: str | None) -> RowLookup:
        lookup = self._open.get(table)
        if lookup is None:
            where = self._destination if table is None else replace(self._destination, table=table)
            lookup = self._open[table] = RowLookup(where)
        return lookup

    def close(self) -> None:
        for lookup in self._open.values():
            lookup.close()
        self._open = {}


def index_of(spec: Any) -> tuple[dict[str, str], tuple[tuple[bytes, str], ...]]:
    """Which index a row belongs to: {index table: index name}, and (prefix, index name) for indexes under a prefix
    of the main table, longest prefix first."""
    tables = {index.target.table: index.name for index in spec.indexes if index.target.table is not None}
    prefixes = sorted(((index.target.prefix.encode(), index.name) for index in spec.indexes
                       if index.target.prefix is not None), key=lambda pair: -len(pair[0]))
    return tables, tuple(prefixes)


class _ExtraRowsFn(beam.DoFn):
    """``row_keys`` lines only the target has -> an extra_row each (naming its index, for an index row), and with
    ``repair`` a Deletion of its cells in its table."""

    def __init__(self, destination: Destination, repair: bool, after_us: int | None = None,
                 tables: dict[str, str] | None = None, prefixes: tuple[tuple[bytes, str], ...] = ()) -> None:
        self._destination, self._repair, self._after_us = destination, repair, after_us
        self._tables, self._prefixes = tables or {}, prefixes

    def setup(self) -> None:
        self._lookups = Lookups(self._destination)

    def _index(self, table: str | None, row_key: bytes) -> str | None:
        if table is not None:
            return self._tables.get(table, table)
        return next((name for prefix, name in self._prefixes if row_key.startswith(prefix)), None)

    def process(self, keys: list[str]) -> Iterator[Any]:
        from ...mappers.validate.compare import Difference

        by_table: dict[str | None, list[bytes]] = defaultdict(list)
        for line in keys:
            table, row_key = key_of_line(line)
            by_table[table].append(row_key)
        differences = []
        stats: Counter[str] = Counter()
        for table, row_keys in by_table.items():
            for row_key, cells in self._lookups[table].rows(row_keys).items():
                later = self._after_us is not None and any(c.timestamp_micros > self._after_us for c in cells)
                differences.append(json_line(Difference("extra_row", row_key, found=f"{len(cells)} cells".encode(),
                                                        after_snapshot=later,
                                                        index_name=self._index(table, row_key)).to_json()))
                stats["after_snapshot" if later else "extra_row"] += 1
                if self._repair and not later:
                    yield Deletion(row_key, tuple(cells), table)
                    stats["repair_deletes"] += len(cells)
        yield Found(tuple(differences), stats=tuple(stats.items()))

    def teardown(self) -> None:
        if getattr(self, "_lookups", None) is not None:
            self._lookups.close()


class _DeleteFn(beam.DoFn):
    """Deletions in, applied in bulk requests (one per table); counts the cells deleted and refused."""

    def __init__(self, destination: Destination) -> None:
        self._destination = destination
        self._deleted = Metrics.counter(NAMESPACE, "cells_deleted")
        self._refused = Metrics.counter(NAMESPACE, "delete_failures")

    def setup(self) -> None:
        self._in_flight = InFlight(self._release)  # torn down under a running bundle: no deletion refused for a closed client
        self._lookups = Lookups(self._destination)

    def start_bundle(self) -> None:
        self._in_flight.started()
        self._pending: list[Deletion] = []

    def process(self, deletion: Deletion) -> None:
        self._in_flight.check()
        self._pending.append(deletion)
        if len(self._pending) >= DELETES_PER_REQUEST:
            self._apply()

    def finish_bundle(self) -> None:
        self._apply()
        self._in_flight.finished()

    def _apply(self) -> None:
        self._in_flight.check()
        by_table: dict[str | None, list[Deletion]] = defaultdict(list)
        for deletion in self._pending:
            by_table[deletion.table].append(deletion)
        self._pending = []
        for table, deletions in by_table.items():
            deleted, refused = apply_deletions(self._lookups[table].table, deletions)
            self._deleted.inc(deleted)
            self._refused.inc(refused)

    def teardown(self) -> None:
        if hasattr(self, "_in_flight"):  # setup ran: let go now, or leave it to a bundle still running elsewhere
            self._in_flight.teardown()

    def _release(self) -> None:
        if getattr(self, "_lookups", None) is not None:
            self._lookups.close()


def _candidate_row(line: str) -> tuple[str, str]:
    return json.loads(line)["row_key"], line


def candidate_bytes(run_dir: str) -> int:
    """Size of the candidates that claim cells (owners of whole rows aside): what the rows pass holds."""
    paths = finished_parts(run_dir, "candidates")
    return sum(meta.size_in_bytes for result in FileSystems.match(paths) for meta in result.metadata_list) if paths else 0


def resolve_here(run_dir: str, rows_dir: str, destination: Destination, repair: bool,
                 after_us: int | None = None) -> dict[str, int]:
    """The rows pass without the target scan, in this process (for candidates up to LAUNCHER_BYTES); its counters.

    The owners' files are streamed: only the owners of rows a candidate names are kept.
    """
    by_row: dict[str, list[str]] = defaultdict(list)
    for raw in lines(finished_parts(run_dir, "candidates")):
        row_key, line = _candidate_row(raw.decode())
        by_row[row_key].append(line)
    for raw in lines(finished_parts(run_dir, "owners")):
        row_key, line = _candidate_row(raw.decode())
        if row_key in by_row:
            by_row[row_key].append(line)
    differences, figures = PartWriter(rows_dir, "differences"), PartWriter(rows_dir, "stats")
    stats: Counter[str] = Counter()
    deletions: list[Deletion] = []
    for candidate_lines in by_row.values():
        found, deletion = resolve(candidate_lines, repair, after_us)
        for line in found.differences:
            differences.add(line)
        stats.update(dict(found.stats))
        if deletion is not None:
            deletions.append(deletion)
    figures.add(json_line({"segment": None, **stats}))
    differences.finish(None)
    figures.finish(None)
    deleted = refused = 0
    if deletions:
        with RowLookup(destination) as lookup:
            for start in range(0, len(deletions), DELETES_PER_REQUEST):
                done, failed = apply_deletions(lookup.table, deletions[start:start + DELETES_PER_REQUEST])
                deleted, refused = deleted + done, refused + failed
    return {"cells_deleted": deleted, "delete_failures": refused}


def build_rows_pass(p: beam.Pipeline, spec: Any, *, run_dir: str, rows_dir: str, repair: bool,
                    target_scan: bool, after_us: int | None = None) -> bool:
    """Add the rows pass to ``p``; False when there is nothing for it to do."""
    destination = Destination.from_target(spec.target)
    candidates, known = finished_parts(run_dir, "candidates"), finished_parts(run_dir, "row_keys")
    owners = finished_parts(run_dir, "owners")
    outputs = []
    if candidates:
        claiming = (p | "Candidates" >> beam.Create(candidates) | "ReadCandidates" >> beam.io.ReadAllFromText()
                    | "ByRowKey" >> beam.Map(_candidate_row))
        named = beam.pvalue.AsDict(claiming | "RowsNamed" >> beam.Map(lambda kv: (kv[0], True))
                                   | "OncePerRow" >> beam.combiners.Count.PerKey())
        if owners:  # only the owners of rows a candidate names
            owning = (p | "Owners" >> beam.Create(owners) | "ReadOwners" >> beam.io.ReadAllFromText()
                      | "OwnerRows" >> beam.Map(_candidate_row)
                      | "NamedOnly" >> beam.Filter(lambda kv, rows: kv[0] in rows, named))
            claiming = (claiming, owning) | "WithOwners" >> beam.Flatten()
        outputs.append(claiming | "GroupRows" >> beam.GroupByKey() | "Resolve" >> beam.ParDo(_ResolveFn(repair, after_us)))
    if target_scan:  # the main table and every index table, each listed range by range, joined in one combine
        tables, prefixes = index_of(spec)
        source = (p | "SourceKeyFiles" >> beam.Create(known) | "SourceKeys" >> beam.io.ReadAllFromText()
                  | "FromSource" >> beam.Map(lambda key: (key, 1)))
        sides = [source]
        for table in [None, *tables]:
            where = destination if table is None else replace(destination, table=table)
            name = "" if table is None else f"[{table}]"
            sides.append(p | f"Ranges{name}" >> beam.Create(key_ranges(where))
                         | f"SpreadRanges{name}" >> beam.Reshuffle()
                         | f"TargetKeys{name}" >> beam.ParDo(ScanRowKeys(where))
                         | f"FromTarget{name}" >> beam.Map(lambda key, table: (key_line(key, table), 2), table))
        only_target = (tuple(sides) | "BothSides" >> beam.Flatten()
                       | "Where" >> beam.CombinePerKey(lambda sides: functools.reduce(operator.or_, sides, 0))
                       | "TargetOnly" >> beam.FlatMap(lambda kv: [kv[0]] if kv[1] == 2 else [])
                       | "InBatches" >> beam.BatchElements(min_batch_size=100, max_batch_size=1000)
                       | "ExtraRows" >> beam.ParDo(_ExtraRowsFn(destination, repair, after_us, tables, prefixes)))
        outputs.append(only_target)
    if not outputs:
        return False
    found = outputs[0] if len(outputs) == 1 else tuple(outputs) | "AllFound" >> beam.Flatten()
    _ = (found | "OnlyFound" >> beam.Filter(lambda e: isinstance(e, Found))
         | "PersistRows" >> beam.ParDo(PersistFoundFn(rows_dir, None, False)))
    if repair:
        _ = (found | "OnlyDeletions" >> beam.Filter(lambda e: isinstance(e, Deletion))
             | "Delete" >> beam.ParDo(_DeleteFn(destination)))
    return True
