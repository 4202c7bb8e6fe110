"""The validation pipeline: DynamoDB (scan, export or a sample) -> map -> look up rows -> compare -> part files.

Shape of the compare pass (one fused stage after the source's reshuffle, as for migrate, so that
a segment is marked done as soon as everything it found is stored)::

    source ─ Map (+ tally) ─ Compare ─[ WriteToBigtable (--repair) ]─ Persist

``Compare`` groups each batch's mapped rows by row key, carries the batch's last group over to
the next batch (a row folded from consecutive items stays one group across page ends), reads
the batch's rows from Bigtable in ReadRows requests of up to 1,000 keys, several at once (in a background thread,
while the batch before is compared; a segment's done marker waits behind the lookup of its last rows, which
so runs while the next segment's first batch is scanned and mapped), and compares each group
(:class:`ddb2bt.mappers.validate.Comparer`): cell by cell, and item by item through the decoder.
With ``--repair`` the cells a group misses or holds differently go to the same writer migrate
uses. ``Persist`` writes differences, row-group candidates and figures to part files
(:mod:`.files`), finishes them and marks the segment done after the segment's done
marker has passed the writer.

What one row group cannot decide is left to the rows pass (:mod:`.rows`).
"""

from __future__ import annotations

import base64
import json
import logging
from collections import Counter, deque
from dataclasses import replace
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterator, NamedTuple

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.transforms.window import GlobalWindows

from ...mappers.index_rows import INDEX_ENTITY, as_index_row, with_index_rows
from ...mappers.results import MappedRow
from ..run import checkpoint as ckpt
from ..run.batches import Batch, SegmentDone
from ..bigtable.read import RowLookup
from ..bigtable.sink import NAMESPACE, Destination, FlowControl
from ..run.dead_letters import DeadLetter, write_part
from ..pipeline import MapFn  # the migration's map step, reused
from ..run.collector import relax_young_gc
from ..run.in_flight import InFlight
from .extra import apply_deletions, resolved
from ..source import ItemsSource, Source
from ..sources import source_for
from ..sinks import BigtableSink
from .files import FOLDERS, PartWriter

log = logging.getLogger(__name__)

CARRY_LIMIT = 10_000
"""Items of one row group held back for the next batch at most; a longer run of one row is compared in parts."""


class Tally(NamedTuple):
    """Items read in a batch, and how many of them the spec skips (they have nothing in Bigtable)."""

    items: int
    skipped: int


class Found(NamedTuple):
    """What a stretch of the compare step found, as file lines, and its figures: one element (one barrier for the writer)."""

    differences: tuple[str, ...] = ()
    candidates: tuple[str, ...] = ()
    owners: tuple[str, ...] = ()
    """Candidates that own their whole row: read only for the rows other candidates name."""
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


_LINE_ENCODER = json.JSONEncoder(ensure_ascii=False, sort_keys=True)
"""One encoder for every line: ``json.dumps`` with these options builds a new one per call."""


def json_line(record: dict[str, Any]) -> str:
    return _LINE_ENCODER.encode(record)


_TEXT = json.encoder.encode_basestring  # what _LINE_ENCODER writes a str as (ensure_ascii=False)


def owner_item_line(row_key: bytes, item: dict, cells: int, key_names: tuple[str, ...]) -> str | None:
    """``owner_json_line`` of the candidate ``Comparer.owner_line`` makes for ``item`` (``key_names`` sorted: the
    comparer's), byte for byte, written straight from the item when each key attribute it has is plain text
    (``{"S": str}``, the export JSON of which is itself); None otherwise (the general path writes it). About a third
    of the benchmark's rows give such a line, and the candidate, its dicts and the encoder's walk cost ~4 µs each."""
    parts = []
    for name in key_names:
        value = item.get(name)
        if value is None:
            if name in item:
                return None
            continue  # item_key leaves out a key attribute the item lacks
        if type(value) is not dict or len(value) != 1:
            return None
        text = value.get("S")
        if type(text) is not str:
            return None
        parts.append(f'{_TEXT(name)}: {{"S": {_TEXT(text)}}}')
    row = base64.b64encode(row_key).decode("ascii")
    return f'{{"cells": {int(cells)}, "owner": {{{", ".join(parts)}}}, "owns_all": true, "row_key": "{row}"}}'


def owner_json_line(owner: Any) -> str:
    """``json_line(owner.to_json())`` of a candidate that owns its whole row, byte for byte (keys sorted, the
    encoder's separators), without building its dict: one such line per row that can be written from elsewhere."""
    row_key = base64.b64encode(owner.row_key).decode("ascii")
    return (f'{{"cells": {int(owner.cells)}, "owner": {_LINE_ENCODER.encode(owner.owner)}, "owns_all": true, '
            f'"row_key": "{row_key}"}}')


class _CompareFn(beam.DoFn):
    """Row groups in, differences, candidates and (with ``repair``) fixes out; see the module doc."""

    def __init__(self, spec: dict, destination: Destination, now_ms: int, *, repair: bool, extras: bool,
                 scan_order: bool, collect_keys: bool, decode_every: int = 1, after_us: int | None = None) -> None:
        self._spec, self._destination, self._now_ms, self._after_us = spec, destination, now_ms, after_us
        self._repair, self._extras, self._collect_keys, self._decode_every = repair, extras, collect_keys, decode_every
        self._scan_order = scan_order
        self._counters = {name: Metrics.counter(NAMESPACE, name) for name in (
            "items_compared", "rows_compared", "rows_found", "cells_expected", "cells_matched", "differences",
            "after_snapshot", "repair_rows", "repair_cells", "index_rows_compared")}

    def setup(self) -> None:
        from ...mappers.spec import MappingSpec
        from ...mappers.validate.compare import Comparer

        self._in_flight = InFlight(self._release)  # first; torn down under a running bundle: it stops before
        # repairing or passing anything on
        spec = MappingSpec.model_validate(self._spec)
        self._indexes = bool(spec.indexes)
        keys = tuple(name for name in (spec.source.partition_key, spec.source.sort_key) if name)
        self._comparer = Comparer(spec, now_us=self._now_ms * 1000, key_names=keys,
                                  decode_every=self._decode_every, after_us=self._after_us)
        self._owner_names = tuple(sorted(keys)) if keys else None  # an owner line's keys, in its JSON's order
        self._lookup = RowLookup(self._destination)
        self._tables: dict[str, RowLookup] = {}
        self._reader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ddb2bt-lookup")
        relax_young_gc()

    def start_bundle(self) -> None:
        self._in_flight.started()
        self._queue: deque[Any] = deque()
        """In stream order: batches whose rows are being read (groups, the lookup's future), the figures counted
        up to a segment's end, and segment markers. Held until the lookup behind them is compared, so that the
        lookup of a segment's last batch runs while the next segment's first batch is scanned and mapped."""
        self._carry: tuple[bytes, list] | None = None
        self._stats: Counter[str] = Counter()
        self._split: set[bytes] = set()
        """Rows whose items were compared in parts (more than CARRY_LIMIT in a row): never whole rows."""

    def process(self, element: Any) -> Iterator[Any]:
        self._in_flight.check()
        if isinstance(element, SegmentDone):
            self._end_stretch()
            self._queue.append(element)  # after everything the segment found
            yield from self._drain(keep=1)
        elif isinstance(element, Tally):
            self._stats["items_read"] += element.items
            self._stats["skipped"] += element.skipped
        elif isinstance(element, DeadLetter):  # an item the spec cannot map: nothing in Bigtable to compare
            self._stats["not_mapped"] += 1
        elif isinstance(element, list) and element:
            if self._indexes:  # an item's index rows are rows to compare too
                elsewhere: dict[str, list] = {}
                element = with_index_rows(element, elsewhere)
                if elsewhere:  # compared at once, so what came before (and its segment's marker) goes first
                    yield from self._drain(keep=0)
                for table, pairs in elsewhere.items():  # an index's own table: read and compared here
                    yield from self._compare_in(table, pairs)
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
            self._read(groups)
            yield from self._drain(keep=1)

    def finish_bundle(self) -> Iterator[Any]:
        self._in_flight.check()
        self._end_stretch()
        for output in self._drain(keep=0):
            yield GlobalWindows.windowed_value(output)
        self._in_flight.finished()

    def _read(self, groups: dict[bytes, list]) -> None:
        if groups:
            self._queue.append((groups, self._reader.submit(self._lookup.rows, list(groups))))

    def _end_stretch(self) -> None:
        """A segment's (or the bundle's) end: its carried group is read too, and the figures so far are its own."""
        if self._carry is not None:
            self._read(dict([self._carry]))
            self._carry = None
        if self._stats:
            self._queue.append(self._stats)
            self._stats = Counter()

    def _drain(self, keep: int) -> Iterator[Any]:
        """Compare what is queued in order, leaving the last ``keep`` lookups (and what follows them) being read."""
        queue = self._queue
        lookups = sum(1 for entry in queue if isinstance(entry, tuple))
        while queue:
            entry = queue[0]
            if isinstance(entry, tuple):
                if lookups <= keep:
                    return
                queue.popleft()
                lookups -= 1
                yield from self._compare(entry[0], entry[1].result())
            elif isinstance(entry, Counter):
                queue.popleft()
                yield Found(stats=tuple(entry.items()))
            else:
                yield queue.popleft()

    def _compare_in(self, table: str, pairs: list) -> Iterator[Any]:
        """Compare the rows of an index in a table of its own (one item each): read from that table, repaired there."""
        lookup = self._tables.get(table)
        if lookup is None:
            lookup = self._tables[table] = RowLookup(replace(self._destination, table=table))
        groups = {row.row_key: [(row, item)] for row, item in pairs}
        yield from self._compare(groups, lookup.rows(list(groups)), table)

    def _compare(self, groups: dict[bytes, list], actual: dict[bytes, list], table: str | None = None) -> Iterator[Any]:
        differences: list[str] = []
        candidates: list[str] = []
        owners: list[str] = []
        row_keys: list[str] = []
        fixes = Batch()
        extra: list = []
        figures: Counter[str] = Counter()
        kinds: Counter[str] = Counter()
        comparer = self._comparer
        compare, plain_match, owner_line = comparer.compare, comparer.plain_match, comparer.owner_line
        owner_needed, owner_names = comparer.owner_needed, self._owner_names
        extras, scan_order, split, indexes = self._extras, self._scan_order, self._split, self._indexes
        collect_keys = self._collect_keys  # an index table's keys too: the target scan lists its rows as well
        key_prefix = "" if table is None else f"{table} "  # files.key_line, inlined
        plain = plain_cells = plain_index = 0
        for row_key, members in groups.items():
            found = actual.get(row_key)
            cells = plain_match(members, found)
            if cells >= 0:  # the common case, counted here; what `compare` would say
                plain += 1
                plain_cells += cells
                if indexes and members[0][0].entity.startswith(INDEX_ENTITY):
                    plain_index += 1
                member = members[0]
                if owner_needed(row_key, member, extras=extras, scan_order=scan_order and row_key not in split):
                    line = None if table is not None or owner_names is None else owner_item_line(
                        row_key, member[1], cells, owner_names)
                    if line is not None:
                        owners.append(line)
                    else:
                        owner = owner_line(row_key, member, cells, extras=extras,
                                           scan_order=scan_order and row_key not in split)
                        if table is not None:
                            extra.append(owner)
                        else:
                            owners.append(owner_json_line(owner))
                if collect_keys:
                    row_keys.append(key_prefix + base64.b64encode(row_key).decode("ascii"))
                continue
            result = compare(row_key, members, found, extras=extras,
                             scan_order=scan_order and row_key not in split, missing_claims=self._repair)
            indexed = sum(row.entity.startswith(INDEX_ENTITY) for row, _item in members) if self._indexes else 0
            figures["items_compared"] += len(members) - indexed
            figures["index_rows_compared"] += indexed
            figures["cells_expected"] += result.cells_expected
            figures["cells_matched"] += result.cells_matched
            figures["rows_found"] += result.row_found
            figures["not_decoded"] += result.not_decoded
            figures["decoded"] += result.decoded
            for difference in result.differences:
                differences.append(json_line(difference.to_json()))
                if difference.after_snapshot:
                    figures["after_snapshot"] += 1
                else:
                    kinds[difference.kind] += 1
            if result.candidate is not None and table is not None:  # an index row holds one item: its unclaimed
                extra.append(result.candidate)  # cells are extra, decided here (the rows pass reads the main table)
            elif result.candidate is not None:
                (owners if result.candidate.owns_all else candidates).append(json_line(result.candidate.to_json()))
            if collect_keys:
                row_keys.append(key_prefix + base64.b64encode(row_key).decode("ascii"))
            if result.fixes and self._repair:
                row, item = members[0]
                fixes.append((MappedRow(row_key, tuple(result.fixes), row.entity) if table is None
                              else as_index_row(row_key, tuple(result.fixes), row.entity, table), item))
                figures["repair_rows"] += 1
                figures["repair_cells"] += len(result.fixes)
        figures["items_compared"] += plain - plain_index
        figures["index_rows_compared"] += plain_index
        figures["cells_expected"] += plain_cells
        figures["cells_matched"] += plain_cells
        figures["rows_found"] += plain
        figures["rows_compared"] = len(groups)
        figures["differences"] = len(differences) - figures["after_snapshot"]
        for name, counter in self._counters.items():
            counter.inc(figures[name])
        for kind, count in kinds.items():  # one Beam counter per kind of difference, bumped once a batch
            Metrics.counter(NAMESPACE, f"diff_{kind}").inc(count)
        yield Found(tuple(differences), tuple(candidates), tuple(owners), tuple(row_keys),
                    tuple(figures.items()))
        if extra and table is not None:
            yield from self._extra_in(table, extra)
        if fixes:
            yield fixes

    def _extra_in(self, table: str, candidates: list) -> Iterator[Any]:
        """The extra cells of an index table's rows (one candidate each, never an owner's), and with ``repair`` their
        deletion there, counted as the rows pass counts its own."""
        deletions = []
        for candidate in candidates:
            if candidate.owns_all:
                continue
            differences, stats, deletion = resolved([candidate], self._repair, self._after_us)
            if differences:
                yield Found(tuple(json_line(d.to_json()) for d in differences), stats=tuple(stats.items()))
            if deletion is not None:
                deletions.append(deletion)
        self._in_flight.check()
        deleted, refused = apply_deletions(self._tables[table].table, deletions)
        Metrics.counter(NAMESPACE, "cells_deleted").inc(deleted)
        Metrics.counter(NAMESPACE, "delete_failures").inc(refused)

    def teardown(self) -> None:
        if hasattr(self, "_in_flight"):  # setup ran: let go now, or leave it to a bundle still running elsewhere
            self._in_flight.teardown()

    def _release(self) -> None:
        if getattr(self, "_reader", None) is not None:
            self._reader.shutdown()
        for lookup in [getattr(self, "_lookup", None), *getattr(self, "_tables", {}).values()]:
            if lookup is not None:
                lookup.close()


class PersistFoundFn(beam.DoFn):
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
            for folder, found in zip(("differences", "candidates", "owners", "row_keys"), element[:4]):
                for line in found:
                    self._writers[folder].add(line)
            self._stats.update(dict(element.stats))
            self._pending = True

    def finish_bundle(self) -> None:
        if self._pending:
            self._finish(None)

    def _finish(self, segment: int | None) -> None:
        if self._letters and self._dead_letter:
            with ckpt.folder_writes(self._run_dir):
                write_part(self._dead_letter, self._letters)
        self._writers["stats"].add(json_line({"segment": segment, **self._stats}))
        for writer in self._writers.values():
            writer.finish(segment)
        if segment is not None and self._mark:
            ckpt.mark_segment_done(self._run_dir, segment)
        self._stats, self._letters, self._pending = Counter(), [], False


def build_compare_pass(p: beam.Pipeline, spec: Any, *, run_dir: str, now_ms: int, total_segments: int = 1,
                       completed: frozenset[int] = frozenset(), sample: list[dict] | None = None, repair: bool = False,
                       collect_keys: bool = False, dead_letter: str | None = None, flow: FlowControl | None = None,
                       segments_in_flight: int | None = None, decode_every: int = 1,
                       after_us: int | None = None, progress_dir: str | None = None,
                       source: Source | None = None) -> None:
    """Add the compare pass to ``p``, reading ``source`` (default: the spec's, :func:`..sources.source_for`):
    ``sample`` replaces it with these items (no checkpoint, no extras). ``progress_dir``: where the scan and map steps
    keep live totals, as migrate's do (:mod:`ddb2bt.pipelines.run.progress`: items and pages read, dead letters,
    skipped)."""
    if sample is not None:
        source = ItemsSource(sample)
    elif source is None:
        source = source_for(spec)
    # validate keeps no checkpoint of whole pieces: a scan's segments are marked by their done markers
    items = source.read(p, total_segments=total_segments, completed=completed, segments_in_flight=segments_in_flight,
                        progress_dir=progress_dir, count_read=False).batches
    destination = Destination.from_target(spec.target)
    scanning = sample is None and source.positions
    compare = _CompareFn(spec.model_dump(by_alias=True), destination, now_ms, repair=repair, extras=sample is None,
                         scan_order=scanning, collect_keys=collect_keys, decode_every=decode_every, after_us=after_us)
    found = (items
             | "Map" >> beam.ParDo(_TallyMapFn(spec.model_dump(by_alias=True), now_ms, progress_dir))
             .with_output_types(Batch)
             | "Compare" >> beam.ParDo(compare).with_output_types(Batch))
    if repair:
        found = BigtableSink(spec.target, flow).write(found, "Repair")
    _ = found | "Persist" >> beam.ParDo(PersistFoundFn(run_dir, dead_letter, scanning))
