"""The migration pipeline: DynamoDB (scan or export) -> map -> Bigtable, with dead letters and a reconciliation.

Shape (one fused stage after the source's reshuffle, which is what makes checkpoints sound)::

    source (item batches, segment done) ─ Map ─(row batches, dead letters, segment done)─ Write ─ Persist

Items travel in batches (a Scan page, up to 1000 export lines; see :mod:`.batches`), and
everything from the source to ``Persist`` runs fused in one stage per worker (see ``ScanDynamoDB``).
The map step's dead letters travel in the same stream as the rows, never through a second output
merged back with a ``Flatten``: a Flatten cuts the fusion, and the runner would then run ``Persist``
only after the whole write stage, so no segment could be marked done before the end of the run.

The writer passes a segment's done marker on only after flushing that segment's rows (and
emitting their refusals), and ``Persist`` writes the dead letters it holds to a part file before
it marks the segment done, so a segment marked done has lost nothing, and it is marked as soon as
it is stored. After the run the parts are joined into one dead-letter file and the counters must
add up: ``items_read = rows_written + dead_lettered + skipped``.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections import Counter
from typing import Any, Iterator

import apache_beam as beam
from apache_beam.metrics import Metrics

from ..mappers.limits import DeadLetterLimit
from ..mappers.results import MappedRow, Skipped
from .run import checkpoint as ckpt
from .run import progress
from .run.collector import MIGRATION_YOUNG_GC_THRESHOLD, YOUNG_GC_THRESHOLD, relax_young_gc
from .run.batches import Barrier, Batch, SegmentAt, SegmentDone
from .bigtable.sink import FlowControl
from .run.metrics import NAMESPACE, ReasonCounters, letter_reason, skip_reason
from .run.dead_letters import DeadLetter, DeadLetterGate, ItemsMapped, write_part
from .source import ItemsSource, Source
from .sinks import BigtableSink
from .sources import source_for

log = logging.getLogger(__name__)

COUNTERS = ("items_read", "items_mapped", "rows_written", "cells_written", "bytes_written", "dead_lettered",
            "skipped", "unmatched", "write_failures", "export_count_mismatch", "scan_retries", "throttled_pages",
            "cells_overwritten", "index_rows_written")




class MapFn(beam.DoFn):
    """Maps batches of items with the compiled spec into batches of ``(MappedRow, item)``.

    The spec travels as a plain dict and is compiled in setup. Dead letters leave one by one, in
    the same stream as the rows (the writer passes them on), so the stage stays fused.
    """

    def __init__(self, spec: dict, now_ms: int | None, progress_dir: str | None = None, *,
                 young_gc: int = YOUNG_GC_THRESHOLD) -> None:
        self._spec, self._now_ms, self._progress_dir = spec, now_ms, progress_dir
        self._young_gc = young_gc  # the collector's young threshold in its process (the migration's: higher)
        self._mapped = Metrics.counter(NAMESPACE, "items_mapped")
        self._skipped = Metrics.counter(NAMESPACE, "skipped")
        self._unmatched = Metrics.counter(NAMESPACE, "unmatched")
        self._reasons = ReasonCounters()

    def setup(self) -> None:
        from ..mappers.compiler import compile_spec
        from ..mappers.spec import MappingSpec

        self._compiled = compile_spec(MappingSpec.model_validate(self._spec), now_ms=self._now_ms)
        self._progress = progress.reporter(self._progress_dir)
        relax_young_gc(self._young_gc)

    def teardown(self) -> None:
        progress = getattr(self, "_progress", None)
        if progress is not None:
            progress.flush()

    def process(self, batch: Any) -> Iterator[Any]:
        if isinstance(batch, Barrier):
            yield batch
            return
        map_item = self._compiled.map_item
        rows, unmatched = Batch(nbytes=getattr(batch, "nbytes", 0)), 0
        skips: list[Skipped] = []
        letters: list[DeadLetter] = []
        damaged = batch.damaged if batch.__class__ is Batch else None
        if damaged:  # read but not as DynamoDB writes it (export.checked_item): a dead letter, never mapped
            letters.extend(DeadLetter(batch[place], "map", reason, None, attribute)
                           for place, (attribute, reason) in damaged.items())
        for item in batch if not damaged else (item for place, item in enumerate(batch) if place not in damaged):
            result = map_item(item)
            if isinstance(result, MappedRow):
                rows.append((result, item))
            elif isinstance(result, Skipped):
                skips.append(result)
            else:
                unmatched += result.stage == "unmatched"
                letters.append(DeadLetter(item, result.stage, result.reason, result.entity, result.attribute))
        self._mapped.inc(len(rows))
        self._unmatched.inc(unmatched)
        counts = {"items_read": len(batch), "bytes_read": rows.nbytes, "skipped": len(skips),
                  "dead_lettered": len(letters)}
        if skips:  # why, counted per batch: the reasons are few (see metrics.skip_reason)
            self._skipped.inc(len(skips))
            counts.update(self._reasons.inc("skipped", Counter(skip_reason(s.reason, s.entity) for s in skips)))
        if letters:
            counts.update(self._reasons.inc("dead_lettered", Counter(
                letter_reason(letter.stage, letter.entity, letter.attribute) for letter in letters)))
        if self._progress is not None:  # live totals; counted before the dead letters go on (Persist may end the run)
            if self._progress.stopping:  # a stop was asked: the run ends at this batch, which goes nowhere
                raise progress.RunInterrupted("stop requested")
            self._progress.add(counts, check_stop=False)
        yield from letters
        if rows:
            yield rows
        yield ItemsMapped(len(batch))  # after the batch's dead letters: a share is judged on whole batches


class _PersistFn(beam.DoFn):
    """Writes dead letters to part files, then marks the segments whose done marker arrived, and saves the position
    of those whose page savepoint (:class:`.batches.SegmentAt`) arrived.

    Runs fused right after the writer, so a segment is marked as soon as the writer passes its
    marker on; the dead letters that came before the marker are in a part file by then.
    """

    REMOTE_SAVE_SECONDS = 1.0
    """On an object store a savepoint object is replaced at most this often per segment (Cloud Storage allows about
    one write per second to one object); a local savepoint is replaced after every page."""

    def __init__(self, dead_letter_path: str, run_dir: str | None, limit: DeadLetterLimit | None = None) -> None:
        self._path, self._run_dir, self._limit = dead_letter_path, run_dir, limit
        self._dead = Metrics.counter(NAMESPACE, "dead_lettered")

    def setup(self) -> None:
        self._gate = DeadLetterGate(self._limit, self._path, self._run_dir)  # counts this worker's whole share
        self._stopping = False
        self._saved_at: dict[int, float] = {}

    def start_bundle(self) -> None:
        self._lines: list[str] = []

    def process(self, element: Any) -> None:
        if isinstance(element, ItemsMapped):
            if self._gate.mapped(element.items) or self._stopping:
                self._stop()
        elif isinstance(element, SegmentDone):
            if self._stopping:
                self._stop()  # never marked done: the segment holds dead letters past the limit
            self._flush()
            if self._run_dir is not None:
                ckpt.mark_segment_done(self._run_dir, element.segment)
        elif isinstance(element, SegmentAt):
            if self._stopping:
                self._stop()  # not saved: the pages before it hold dead letters past the limit
            if self._run_dir is not None and self._due(element.segment):
                self._flush()  # the dead letters of the stored pages first, then the position past them
                ckpt.save_position(self._run_dir, element.segment, element.key)
        else:
            self._lines.append(element.to_json())
            if element.item is not None:
                self._dead.inc()
                # a count passed: the run stops after the rest of this batch's dead letters, which the live totals
                # have counted already, so that every dead letter counted is in the file
                self._stopping = self._gate.letter(element) or self._stopping

    def finish_bundle(self) -> None:
        if self._stopping:
            self._stop()
        self._flush()

    def _due(self, segment: int) -> bool:
        """Whether this segment's savepoint may be replaced now (always on a local disk)."""
        assert self._run_dir is not None
        if "://" not in self._run_dir:
            return True
        now = time.monotonic()
        if now - self._saved_at.get(segment, -math.inf) < self.REMOTE_SAVE_SECONDS:
            return False
        self._saved_at[segment] = now
        return True

    def _stop(self) -> None:
        """The dead letters so far are kept; the run ends with TooManyDeadLetters (exit 1, reconciled)."""
        self._flush()
        raise self._gate.error()

    def _flush(self) -> None:
        if self._lines:
            with ckpt.folder_writes(self._run_dir or os.path.dirname(self._path) or "."):
                write_part(self._path, self._lines)
            self._lines = []


def _mismatch_letter(record: dict) -> DeadLetter:
    reason = (f"export count mismatch ({record['kind']}): {record['file']} should hold {record['expected']} "
              f"items, {record['actual']} were read")
    return DeadLetter(None, "source", reason)


def build_pipeline(p: beam.Pipeline, spec: Any, *, dead_letter: str, run_dir: str | None = None,
                   total_segments: int = 1, completed: frozenset[int] = frozenset(),
                   flow: FlowControl | None = None, sample: list[dict] | None = None,
                   now_ms: int | None = None, segments_in_flight: int | None = None,
                   source: Source | None = None, progress_dir: str | None = None,
                   max_dead_letters: DeadLetterLimit | None = None,
                   start_keys: dict[int, dict[str, Any]] | None = None) -> None:
    """Add the migration to ``p``, reading ``source`` (default: the spec's, :func:`.sources.source_for`).
    ``sample`` (these items) replaces it, with no checkpoint.
    With ``run_dir`` the run marks what it stored there: the source's pieces (scan segments, or an export's data
    files numbered by their place in the manifest); ``completed`` pieces are not read again. A scan also saves each
    segment's position after every stored page there, and ``start_keys`` (segment -> ExclusiveStartKey, the
    savepoints a resumed run found) start segments part way.
    ``progress_dir``: where the map and write steps keep live totals (see :mod:`.progress`)."""
    if sample is not None:
        source, run_dir = ItemsSource(sample), None
    elif source is None:
        source = source_for(spec)
    read = source.read(p, total_segments=total_segments, completed=completed, mark_done=run_dir is not None,
                       segments_in_flight=segments_in_flight, start_keys=start_keys, progress_dir=progress_dir)
    items, mismatches = read.batches, read.mismatches
    # Output type Batch for BatchCoder's cheap size estimate; the map's dead letters ride in the same stream.
    mapped = (items | "Map" >> beam.ParDo(MapFn(spec.model_dump(by_alias=True), now_ms, progress_dir,
                                                young_gc=MIGRATION_YOUNG_GC_THRESHOLD))
              .with_output_types(Batch))
    _ = (BigtableSink(spec.target, flow, progress_dir=progress_dir).write(mapped)
         | "Persist" >> beam.ParDo(_PersistFn(dead_letter, run_dir, max_dead_letters)))
    if mismatches is not None:  # exports only; a file with a count mismatch is never marked done
        _ = (mismatches | "MismatchLetters" >> beam.Map(_mismatch_letter)
             | "PersistMismatches" >> beam.ParDo(_PersistFn(dead_letter, None)))


def reconcile(counters: dict[str, int], unmatched_policy: str) -> list[str]:
    """What does not add up; empty when the run is complete."""
    c = counters
    problems = []
    accounted = c["rows_written"] + c["dead_lettered"] + c["skipped"]
    if c["items_read"] != accounted:
        problems.append(f"items read ({c['items_read']}) != written + dead-lettered + skipped ({accounted})")
    if c["export_count_mismatch"]:
        problems.append(f"{c['export_count_mismatch']} export count mismatch(es) (a data file holds another number "
                        "of items than its manifest says; each is a line of the dead-letter file): copy the export "
                        "again and resume, or export the table again and migrate that export")
    if unmatched_policy == "fail" and c["unmatched"]:
        problems.append(f"{c['unmatched']} items matched no entity and the spec says unmatched: fail")
    return problems


def query_counters(result: Any) -> dict[str, int]:
    """Our counters summed over steps: committed values, or attempted where a runner commits none."""
    from apache_beam.metrics.metric import MetricsFilter

    totals = dict.fromkeys(COUNTERS, 0)
    for counter in result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))["counters"]:
        value = counter.committed if counter.committed is not None else counter.attempted
        totals[counter.key.metric.name] = totals.get(counter.key.metric.name, 0) + (value or 0)
    return totals
