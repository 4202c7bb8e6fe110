"""The validation pipeline: DynamoDB (scan, export or a sample) -> map -> look up rows -> compare -> part files.

Shape of the compare pass (one fused stage after the source's reshuffle, as for migrate, so that
a segment is marked done as soon as everything it found is stored)::

    source ─ Map (+ tally) ─ Compare ─[ WriteToBigtable (--repair) ]─ Persist

``Compare`` groups each batch's mapped rows by row key, carries the batch's last group over to
the next batch (a row folded from consecutive items stays one group across page ends), reads
the batch's rows from Bigtable in ReadRows requests of up to 1,000 keys, and compares each group
(:class:`ddb2bt.mappers.validate.Comparer`): cell by cell, and item by item through the decoder.
With ``--repair`` the cells a group misses or holds differently go to the same writer migrate
uses. ``Persist`` writes differences, row-group candidates and figures to part files
(:mod:`.validate_files`), finishes them and marks the segment done after the segment's done
marker has passed the writer.

The rows pass (``build_rows_pass``, a second, small pipeline over the first one's files) decides
what one group cannot: cells of a row that no group produces (extra cells and versions, deleted
cell by cell with ``--repair``), cells that groups far apart both produce (collisions), and, with
``--target-scan``, rows of the table no source item maps to.
"""

from __future__ import annotations

import base64
import functools
import json
import operator
import logging
from collections import Counter
from typing import Any, Iterator, NamedTuple

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.transforms.window import GlobalWindows

from ..mappers.results import Cell, MappedRow
from . import checkpoint as ckpt
from .batches import BATCH_ITEMS, Batch, SegmentDone
from .bigtable_read import RowLookup, ScanRowKeys, delete_entries, key_ranges
from .bigtable_sink import NAMESPACE, Destination, FlowControl, WriteToBigtable
from .dead_letters import DeadLetter, write_part
from .pipeline import _MapFn as MapFn, relax_young_gc  # the migration's map step, reused
from .validate_files import FOLDERS, PartWriter, finished_parts

log = logging.getLogger(__name__)

CARRY_LIMIT = 10_000
"""Items of one row group held back for the next batch at most; a longer run of one row is compared in parts."""
DELETES_PER_REQUEST = 1000


class Tally(NamedTuple):
    """Items read in a batch, and how many of them the spec skips (they have nothing in Bigtable)."""

    items: int
    skipped: int


class Found(NamedTuple):
    """What a stretch of the compare step found, as file lines, and its figures: one element (one barrier for the writer)."""

    differences: tuple[str, ...] = ()
    candidates: tuple[str, ...] = ()
    row_keys: tuple[str, ...] = ()
    stats: tuple[tuple[str, int], ...] = ()


class _TallyMapFn(MapFn):
    """The migration's map step, telling the compare step how many items each batch held."""

    def process(self, batch: Any) -> Iterator[Any]:
        if isinstance(batch, SegmentDone):
            yield from super().process(batch)
            return
        left = len(batch)  # skipped = what neither became a row nor a dead letter
        for output in super().process(batch):
            if isinstance(output, DeadLetter):
                left -= 1
            elif isinstance(output, list):
                left -= len(output)
            yield output
        yield Tally(len(batch), left)


def _line(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, sort_keys=True)


class _CompareFn(beam.DoFn):
    """Row groups in, differences, candidates and (with ``repair``) fixes out; see the module doc."""

    def __init__(self, spec: dict, destination: Destination, now_ms: int, *, repair: bool, extras: bool,
                 scan_order: bool, collect_keys: bool, decode: bool = True) -> None:
        self._spec, self._destination, self._now_ms = spec, destination, now_ms
        self._repair, self._extras, self._collect_keys, self._decode = repair, extras, collect_keys, decode
        self._scan_order = scan_order
        self._counters = {name: Metrics.counter(NAMESPACE, name) for name in (
            "items_compared", "rows_compared", "rows_found", "cells_expected", "cells_matched", "differences",
            "repair_rows", "repair_cells")}

    def setup(self) -> None:
        from ..mappers.spec import MappingSpec
        from ..mappers.validate import Comparer

        spec = MappingSpec.model_validate(self._spec)
        keys = tuple(name for name in (spec.source.partition_key, spec.source.sort_key) if name)
        self._comparer = Comparer(spec, now_us=self._now_ms * 1000, key_names=keys, decode=self._decode)
        self._lookup = RowLookup(self._destination)
        relax_young_gc()

    def start_bundle(self) -> None:
        self._carry: tuple[bytes, list] | None = None
        self._stats: Counter[str] = Counter()
        self._split: set[bytes] = set()
        """Rows whose items were compared in parts (more than CARRY_LIMIT in a row): never whole rows."""

    def process(self, element: Any) -> Iterator[Any]:
        if isinstance(element, SegmentDone):
            yield from self._flush()
            yield element
        elif isinstance(element, Tally):
            self._stats["items_read"] += element.items
            self._stats["skipped"] += element.skipped
        elif isinstance(element, DeadLetter):  # an item the spec cannot map: nothing in Bigtable to compare
            self._stats["not_mapped"] += 1
        elif isinstance(element, list) and element:
            groups: dict[bytes, list] = {}
            if self._carry is not None:
                groups[self._carry[0]] = self._carry[1]
            for pair in element:
                groups.setdefault(pair[0].row_key, []).append(pair)
            last = element[-1][0].row_key
            if len(groups[last]) < CARRY_LIMIT:
                self._carry = (last, groups.pop(last))
            else:
                self._carry = None
                self._split.add(last)
            yield from self._compare(groups)

    def finish_bundle(self) -> Iterator[Any]:
        for output in self._flush():
            yield GlobalWindows.windowed_value(output)

    def _flush(self) -> Iterator[Any]:
        groups = {}
        if self._carry is not None:
            groups[self._carry[0]] = self._carry[1]
            self._carry = None
        if groups or self._stats:
            yield from self._compare(groups)

    def _compare(self, groups: dict[bytes, list]) -> Iterator[Any]:
        actual = self._lookup.rows(groups) if groups else {}
        differences, candidates, row_keys, fixes = [], [], [], Batch()
        figures: Counter[str] = Counter()
        compare = self._comparer.compare
        for row_key, members in groups.items():
            result = compare(row_key, members, actual.get(row_key), extras=self._extras,
                             scan_order=self._scan_order and row_key not in self._split)
            figures["items_compared"] += len(members)
            figures["cells_expected"] += result.cells_expected
            figures["cells_matched"] += result.cells_matched
            figures["rows_found"] += result.row_found
            for difference in result.differences:
                differences.append(_line(difference.to_json()))
                Metrics.counter(NAMESPACE, f"diff_{difference.kind}").inc()
            if result.candidate is not None:
                candidates.append(_line(result.candidate.to_json()))
            if self._collect_keys:
                row_keys.append(base64.b64encode(row_key).decode("ascii"))
            if result.fixes and self._repair:
                row, item = members[0]
                fixes.append((MappedRow(row_key, tuple(result.fixes), row.entity), item))
                figures["repair_rows"] += 1
                figures["repair_cells"] += len(result.fixes)
        figures["rows_compared"] = len(groups)
        figures["differences"] = len(differences)
        for name, counter in self._counters.items():
            counter.inc(figures[name])
        self._stats.update(figures)
        stats, self._stats = self._stats, Counter()
        yield Found(tuple(differences), tuple(candidates), tuple(row_keys), tuple(stats.items()))
        if fixes:
            yield fixes

    def teardown(self) -> None:
        lookup = getattr(self, "_lookup", None)
        if lookup is not None:
            lookup.close()


class _PersistFn(beam.DoFn):
    """Found lines to part files, finished (and the segment marked done) when a segment's marker arrives.

    With ``--repair`` it comes after the writer, so a segment is marked only once its repairs are
    stored; the repairs Bigtable refused are dead letters (``dead_letter``).
    """

    def __init__(self, run_dir: str, dead_letter: str | None, mark_segments: bool) -> None:
        self._run_dir, self._dead_letter, self._mark = run_dir, dead_letter, mark_segments

    def start_bundle(self) -> None:
        self._writers = {folder: PartWriter(self._run_dir, folder) for folder in FOLDERS}
        self._stats: Counter[str] = Counter()
        self._letters: list[str] = []
        self._pending = False

    def process(self, element: Any) -> None:
        if isinstance(element, SegmentDone):
            self._finish(element.segment)
        elif isinstance(element, DeadLetter):
            self._letters.append(element.to_json())
            self._stats["repair_refused"] += 1
            self._pending = True
        elif isinstance(element, Found):
            for folder, found in zip(("differences", "candidates", "row_keys"), element[:3]):
                for line in found:
                    self._writers[folder].add(line)
            self._stats.update(dict(element.stats))
            self._pending = True

    def finish_bundle(self) -> None:
        if self._pending:
            self._finish(None)

    def _finish(self, segment: int | None) -> None:
        if self._letters and self._dead_letter:
            write_part(self._dead_letter, self._letters)
        self._writers["stats"].add(_line({"segment": segment, **self._stats}))
        for writer in self._writers.values():
            writer.finish(segment)
        if segment is not None and self._mark:
            ckpt.mark_segment_done(self._run_dir, segment)
        self._stats, self._letters, self._pending = Counter(), [], False


def build_compare_pass(p: beam.Pipeline, spec: Any, *, run_dir: str, now_ms: int, total_segments: int = 1,
                       completed: frozenset[int] = frozenset(), sample: list[dict] | None = None, repair: bool = False,
                       collect_keys: bool = False, dead_letter: str | None = None, flow: FlowControl | None = None,
                       segments_in_flight: int | None = None, decode: bool = True) -> None:
    """Add the compare pass to ``p``: ``sample`` replaces the source with these items (no checkpoint, no extras)."""
    if sample is not None:
        batches = [Batch(sample[start:start + BATCH_ITEMS]) for start in range(0, len(sample), BATCH_ITEMS)]
        items = p | "Sample" >> beam.Create(batches)
    elif spec.source.export is not None:
        from .export_source import ReadDynamoDBExport

        items = (p | "ReadExport" >> ReadDynamoDBExport(spec.source.export.path))["batches"]
    else:
        from .dynamodb_scan import ScanDynamoDB

        items = p | "Scan" >> ScanDynamoDB(spec.source, total_segments, completed_segments=completed,
                                             segments_in_flight=segments_in_flight)
    destination = Destination.from_target(spec.target)
    scanning = sample is None and spec.source.export is None
    compare = _CompareFn(spec.model_dump(by_alias=True), destination, now_ms, repair=repair, extras=sample is None,
                         scan_order=scanning, collect_keys=collect_keys, decode=decode)
    found = (items
             | "Map" >> beam.ParDo(_TallyMapFn(spec.model_dump(by_alias=True), now_ms)).with_output_types(Batch)
             | "Compare" >> beam.ParDo(compare).with_output_types(Batch))
    if repair:
        found = found | "Repair" >> WriteToBigtable(destination, flow)
    _ = found | "Persist" >> beam.ParDo(_PersistFn(run_dir, dead_letter, scanning))


# --------------------------------------------------------------------------- the rows pass


class Deletion(NamedTuple):
    row_key: bytes
    cells: tuple[Cell, ...]


class _ResolveFn(beam.DoFn):
    """(row key, candidate lines) -> a Found of extra cells and cross-group collisions, and their Deletion."""

    def __init__(self, repair: bool) -> None:
        self._repair = repair

    def process(self, element: tuple[str, Any]) -> Iterator[Any]:
        from ..mappers.validate import Candidate, resolve_row

        candidates = [Candidate.from_json(json.loads(line)) for line in element[1]]
        differences, extra = resolve_row(candidates)
        stats = Counter(diff.kind for diff in differences)
        if extra and self._repair:
            yield Deletion(candidates[0].row_key, tuple(extra))
            stats["repair_deletes"] += len(extra)
        yield Found(tuple(_line(d.to_json()) for d in differences), stats=tuple(stats.items()))


class _ExtraRowsFn(beam.DoFn):
    """Row keys (base64) only the target has -> an extra_row each, and with ``repair`` a Deletion of its cells."""

    def __init__(self, destination: Destination, repair: bool) -> None:
        self._destination, self._repair = destination, repair

    def setup(self) -> None:
        self._lookup = RowLookup(self._destination)

    def process(self, keys: list[str]) -> Iterator[Any]:
        from ..mappers.validate import Difference

        rows = self._lookup.rows(base64.b64decode(key) for key in keys)
        differences = []
        for row_key, cells in rows.items():
            differences.append(_line(Difference("extra_row", row_key, found=f"{len(cells)} cells".encode()).to_json()))
            if self._repair:
                yield Deletion(row_key, tuple(cells))
        stats = {"extra_row": len(differences), "repair_deletes": sum(len(c) for c in rows.values()) if self._repair else 0}
        yield Found(tuple(differences), stats=tuple(stats.items()))

    def teardown(self) -> None:
        lookup = getattr(self, "_lookup", None)
        if lookup is not None:
            lookup.close()


class _DeleteFn(beam.DoFn):
    """Deletions in, applied in bulk requests, cell version by cell version; counts what was deleted or refused."""

    def __init__(self, destination: Destination) -> None:
        self._destination = destination
        self._deleted = Metrics.counter(NAMESPACE, "cells_deleted")
        self._refused = Metrics.counter(NAMESPACE, "delete_failures")

    def setup(self) -> None:
        self._lookup = RowLookup(self._destination)

    def start_bundle(self) -> None:
        self._pending: list[Deletion] = []

    def process(self, deletion: Deletion) -> None:
        self._pending.append(deletion)
        if len(self._pending) >= DELETES_PER_REQUEST:
            self._apply()

    def finish_bundle(self) -> None:
        self._apply()

    def _apply(self) -> None:
        from google.cloud.bigtable.data.exceptions import MutationsExceptionGroup

        pending, self._pending = self._pending, []
        if not pending:
            return
        refused = 0
        try:
            self._lookup.table.bulk_mutate_rows([delete_entries(d.row_key, d.cells) for d in pending])
        except MutationsExceptionGroup as group:
            refused = sum(len(pending[error.index].cells) for error in group.exceptions)
        self._deleted.inc(sum(len(d.cells) for d in pending) - refused)
        self._refused.inc(refused)

    def teardown(self) -> None:
        lookup = getattr(self, "_lookup", None)
        if lookup is not None:
            lookup.close()


def _candidate_row(line: str) -> tuple[str, str]:
    return json.loads(line)["row_key"], line


def build_rows_pass(p: beam.Pipeline, spec: Any, *, run_dir: str, rows_dir: str, repair: bool,
                    target_scan: bool) -> bool:
    """Add the rows pass to ``p`` (see the module doc); False when there is nothing for it to do."""
    destination = Destination.from_target(spec.target)
    candidates, known = finished_parts(run_dir, "candidates"), finished_parts(run_dir, "row_keys")
    outputs = []
    if candidates:
        outputs.append(p | "Candidates" >> beam.Create(candidates) | "ReadCandidates" >> beam.io.ReadAllFromText()
                       | "ByRowKey" >> beam.Map(_candidate_row) | "GroupRows" >> beam.GroupByKey()
                       | "Resolve" >> beam.ParDo(_ResolveFn(repair)))
    if target_scan:
        source = (p | "SourceKeyFiles" >> beam.Create(known) | "SourceKeys" >> beam.io.ReadAllFromText()
                  | "FromSource" >> beam.Map(lambda key: (key, 1)))
        target = (p | "Ranges" >> beam.Create(key_ranges(destination)) | "SpreadRanges" >> beam.Reshuffle()
                  | "TargetKeys" >> beam.ParDo(ScanRowKeys(destination))
                  | "FromTarget" >> beam.Map(lambda key: (base64.b64encode(key).decode("ascii"), 2)))
        only_target = ((source, target) | "BothSides" >> beam.Flatten()
                       | "Where" >> beam.CombinePerKey(lambda sides: functools.reduce(operator.or_, sides, 0))
                       | "TargetOnly" >> beam.FlatMap(lambda kv: [kv[0]] if kv[1] == 2 else [])
                       | "InBatches" >> beam.BatchElements(min_batch_size=100, max_batch_size=1000)
                       | "ExtraRows" >> beam.ParDo(_ExtraRowsFn(destination, repair)))
        outputs.append(only_target)
    if not outputs:
        return False
    found = outputs[0] if len(outputs) == 1 else tuple(outputs) | "AllFound" >> beam.Flatten()
    _ = (found | "OnlyFound" >> beam.Filter(lambda e: isinstance(e, Found))
         | "PersistRows" >> beam.ParDo(_PersistFn(rows_dir, None, False)))
    if repair:
        _ = (found | "OnlyDeletions" >> beam.Filter(lambda e: isinstance(e, Deletion))
             | "Delete" >> beam.ParDo(_DeleteFn(destination)))
    return True
