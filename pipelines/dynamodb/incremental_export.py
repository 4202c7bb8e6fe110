"""Read a DynamoDB incremental export (DYNAMODB_JSON or ION) as item changes.

An incremental export covers a window ``[ExportFromTime, ExportToTime)``. Its folder
``[prefix/]AWSDynamoDB/<exportId>/`` holds ``manifest-summary.json`` (``exportType``
``INCREMENTAL_EXPORT``, ``outputView``, the window, ``tableArn``/``tableId``) and
``manifest-files.json``; its gzipped JSON-lines data files are in the *shared* folder
``[prefix/]AWSDynamoDB/data/`` beside the export folders (``dataFileS3Key``
``AWSDynamoDB/data/<name>.json.gz``; see :func:`.export.resolve_key`). Each line is one
changed item, compacted to its final state for the window::

    {"Metadata": {"WriteTimestampMicros": {"N": "1714564800123456"}},
     "Keys": {"pk": {"S": "a"}},
     "OldImage": {...},          # NEW_AND_OLD_IMAGES only; absent for an item created in the window
     "NewImage": {...}}          # absent for an item deleted in the window

An item created and deleted within the window does not appear. Only NEW_AND_OLD_IMAGES exports can
be applied: without the old image the cells a change must delete cannot be found (a NEW_IMAGE export
is refused before anything is written).

A record that is not a change (an unknown type tag, no Keys, a timestamp that is no integer) refuses
the whole export before anything is written (:func:`check_export`): applying the rest would delete
the item's old cells and dead-letter its new image, and the timeline would then refuse the corrected
export as already applied.

:class:`IncrementalExportChanges` is the export as a :class:`~ddb2bt.pipelines.change_source.ChangeSource`
(the catch-up's): its window and table from the manifest, its data files as pieces, each read whole.
"""

from __future__ import annotations

import gc
import json
import re
import uuid
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import apache_beam as beam
from apache_beam.metrics import Metrics

from ...mappers.attrvalue import is_value as _valid_value, value_problem
from ...mappers.changes import KINDS, Change, kind_of_change
from ..change_source import ChangePage, ChangeSource, ChangeWindow, Piece
from ..run.batches import Batch
from ..run.metrics import NAMESPACE
from ..source import SourceRead
from .export import (SUMMARY, ExportError, ExportFile, SourceTable, check_format, export_id, file_batches,
                     file_problem, find_export_dir, manifest_files, mismatch_record, read_summary, sized_records,
                     summary_item_count)
from ..cutover.timeline import iso_to_us

INCREMENTAL = "INCREMENTAL_EXPORT"
VIEWS = ("NEW_AND_OLD_IMAGES", "NEW_IMAGE")


@dataclass(frozen=True)
class IncrementalManifest:
    export_dir: str
    export_id: str
    item_count: int
    from_us: int
    to_us: int
    view: str
    files: tuple[ExportFile, ...]
    table: SourceTable | None = None


def _window(summary: dict[str, Any], where: str) -> tuple[int, int, str]:
    spec = summary.get("incrementalExportSpecification") or {}
    start = summary.get("exportFromTime") or spec.get("exportFromTime")
    end = summary.get("exportToTime") or spec.get("exportToTime")
    view = summary.get("outputView") or spec.get("exportViewType") or "NEW_AND_OLD_IMAGES"
    if not start or not end:
        raise ExportError(f"{where} names no export window (exportFromTime, exportToTime)",
                          "add them to the summary as DescribeExport reports them (IncrementalExportSpecification)")
    try:
        return _time_us(start), _time_us(end), view
    except (TypeError, ValueError) as err:
        raise ExportError(f"{where}: the export window is not a time: {err}") from None


def _time_us(value: Any) -> int:
    if isinstance(value, (int, float)):  # epoch seconds, as the API takes them
        return int(value * 1_000_000)
    return iso_to_us(str(value))


def read_incremental_manifest(path: str) -> IncrementalManifest:
    """The manifest of the incremental export at (or just below) ``path``; ExportError if it is not one we apply."""
    export_dir = find_export_dir(path)
    where = f"{export_dir}/{SUMMARY}"
    summary = read_summary(export_dir)
    if summary.get("exportType") != INCREMENTAL:
        raise ExportError(f"{export_dir} is a {summary.get('exportType', 'FULL_EXPORT')}, not an incremental export",
                          "a full export is a backfill source (source.export in the spec); catch-up takes incremental ones")
    check_format(str(summary.get("outputFormat", "DYNAMODB_JSON")), export_dir)
    start, end, view = _window(summary, where)
    if view != "NEW_AND_OLD_IMAGES":
        raise ExportError(f"{export_dir} was exported with view {view}: without old images the cells a change "
                          "removes cannot be found", "export with ExportViewType NEW_AND_OLD_IMAGES")
    files = manifest_files(export_dir, summary)
    item_count = summary_item_count(summary, export_dir) if "itemCount" in summary else sum(f.item_count for f in files)
    return IncrementalManifest(export_dir, export_id(export_dir, summary), item_count, start, end, view, files,
                               SourceTable.of(summary))


def parse_record(record: dict[str, Any]) -> Change:
    """One export line (parsed) as a Change; KeyError/TypeError/ValueError when it is not a change record."""
    micros = record["Metadata"]["WriteTimestampMicros"]
    micros = int(micros["N"] if isinstance(micros, dict) else micros)
    old, new = record.get("OldImage"), record.get("NewImage")
    return Change(record["Keys"], old, new, kind_of_change(old, new), micros)


class RecordError(ValueError):
    """An export line that is not a change record; the message names the field."""


def check_record(record: Any, key_names: tuple[str, ...] = (), line: bytes | None = None) -> Change:
    """One export line checked field by field, then parsed: RecordError naming the first field that is wrong.

    Keys (holding ``key_names``, the table's key attributes), a WriteTimestampMicros that is an integer,
    at least one image, every value of Keys and the images a valid DynamoDB value, and the images' key
    attributes equal to Keys. ``line``: the JSON line ``record`` was parsed from; where :data:`VALUES_VALID`
    matches it, every value of Keys and the images is known valid, and they are not visited one by one. Where the
    compiled module is built, it answers a record that passes every check (:data:`_compiled_check`); Python answers
    the rest, and words every refusal.
    """
    if line is not None and _compiled_check is not None:
        fields = _compiled_check(record, key_names, line, KINDS)
        if fields is not None:
            return _new(Change, fields)
    if not isinstance(record, dict):
        raise RecordError("the line is no JSON object")
    metadata = record.get("Metadata")
    micros = metadata.get("WriteTimestampMicros") if isinstance(metadata, dict) else None
    text = micros.get("N") if isinstance(micros, dict) else micros  # documented {"N": "..."}; a bare one read too
    text = str(text) if isinstance(text, int) and not isinstance(text, bool) else text
    if not isinstance(text, str) or not (text.isascii() and text.isdigit()):
        raise RecordError(f"Metadata.WriteTimestampMicros is {json.dumps(micros)[:60]}, not {{\"N\": \"<integer>\"}}")
    keys = record.get("Keys")
    if not isinstance(keys, dict) or not keys:
        raise RecordError("Keys is missing or empty")
    for name in key_names:
        if name not in keys:
            raise RecordError(f"Keys has no {name} (the table's key attribute)")
    visit = line is None or _vouched(line) is not True
    problem = _first_problem(keys, "Keys") if visit else None
    if problem:
        raise RecordError(problem)
    old, new = record.get("OldImage"), record.get("NewImage")
    if old is None and new is None:
        raise RecordError("neither OldImage nor NewImage is present")
    for part, image in (("OldImage", old), ("NewImage", new)):
        if image is None:
            continue
        if type(image) is not dict:
            raise RecordError(f"{part} is no object")
        problem = _first_problem(image, part) if visit else None
        if problem:
            raise RecordError(problem)
        for name, value in keys.items():
            if image.get(name) != value:
                raise RecordError(f"{part}.{name} differs from Keys.{name}")
    return _new(Change, (keys, old, new, kind_of_change(old, new), int(text), "", False))  # parse_record's change


_new = tuple.__new__  # a Change from a tuple of all its fields, without NamedTuple's Python __new__


def _values_pattern(depth: int) -> bytes:
    """A regular expression that matches only a compact JSON line of a change record all of whose values under
    Keys, OldImage and NewImage (every occurrence of them) are valid DynamoDB values, as ``is_value`` judges them:
    a type tag and a payload of its shape; N plain decimals of at most 38 characters (``_number_ok``'s own first
    test), B canonical padded base64 (which strict base64 decoding takes), sets not empty, M and L nested ``depth``
    levels deep. A line it does not match (spaces, escapes in a tag or a number, another member, deeper nesting,
    anything wrong) is checked value by value, so it only has to be sure, never complete; its tokens are JSON's
    (a string runs to its first unescaped quote), so a line that parsed has one reading, and it is the parser's."""
    text = rb'"[^"\\]*+(?:\\.[^"\\]*+)*+"'
    number = rb'"(?=[-.0-9]{1,38}")-?(?:[0-9]++(?:\.[0-9]*+)?|\.[0-9]++)"'
    binary = rb'"(?:[A-Za-z0-9+/]{4})*+(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?"'

    def members(value: bytes) -> bytes:  # {"name":value,...}: each member followed by a comma and a name, or the end
        return rb"\{(?:" + text + b":" + value + rb'(?:,(?=")|(?=\})))*+\}'

    def elements(value: bytes, first: bytes, least: bytes) -> bytes:  # [value,...]
        return rb"\[(?:" + value + rb"(?:,(?=" + first + rb")|(?=\])))" + least + rb"\]"

    scalar = (rb'S":' + text + rb'|N":' + number + rb'|BOOL":(?:true|false)|NULL":true|B":' + binary
              + rb'|SS":' + elements(text, b'"', b"++") + rb'|NS":' + elements(number, b'"', b"++")
              + rb'|BS":' + elements(binary, b'"', b"++"))
    value = rb'\{"(?:' + scalar + rb")\}"
    for _ in range(depth):
        value = (rb'\{"(?:' + scalar + rb'|M":' + members(value) + rb'|L":' + elements(value, rb"\{", b"*+")
                 + rb")\}")
    attributes = members(value)
    member = (rb'(?:"Keys":' + attributes + rb'|"(?:Old|New)Image":(?:' + attributes + rb'|null)'
              rb'|"Metadata":\{"WriteTimestampMicros":\{"N":"[0-9]++"\}\})')
    return rb"\{(?:" + member + rb'(?:,(?=")|(?=\})))++\}'


VALUES_VALID = re.compile(_values_pattern(3))
"""Every value of the record's Keys and images valid (:func:`_values_pattern`): one match over the line costs about
half of visiting each value (docs/PERFORMANCE.md, "h/catchup7")."""


def _expression_vouches(line: Any) -> bool | None:
    return VALUES_VALID.fullmatch(line) is not None if isinstance(line, bytes) else None


_compiled_vouch: Callable[[Any], bool | None] | None
try:
    from ._vouch import values_valid as _compiled_vouch
except ImportError:  # not built (no C compiler where the package was installed): the expression, the same answer
    _compiled_vouch = None

_compiled_check: Callable[[Any, tuple[str, ...], Any, tuple[str, str, str]], tuple | None] | None
try:
    from ._vouch import checked_change as _compiled_check
except ImportError:
    _compiled_check = None
"""check_record's Change fields for a record that passes every one of its checks, its values vouched for by its line
(``_vouch.c``: the same reading of the line as :data:`_vouched`, and the record's fields checked as check_record checks
them, without the interpreter's per-operation cost: ~1 µs against ~4.5 per change line); None for anything else,
which check_record's Python then answers or refuses (tests/pipelines/test_vouch_compiled.py)."""

_vouched: Callable[[Any], bool | None] = _expression_vouches if _compiled_vouch is None else _compiled_vouch
"""Whether :data:`VALUES_VALID` matches the whole line: answered by the compiled module ``_vouch.c`` where it is built
(the expression's grammar read in one pass, ~1 µs for a change line against the expression's ~9: docs/PERFORMANCE.md,
"Catch-up round 10"; True and False exactly where the expression says so, tested), else by the expression. Anything
but True (False, or None for a line that is no bytes object, from either) has every value visited by the general
check."""


def _first_problem(attributes: dict[str, Any], where: str) -> str | None:
    if all(map(_valid_value, attributes.values())):
        return None
    for name, value in attributes.items():
        problem = value_problem(value, f"{where}.{name}")
        if problem:
            return problem
    return None


CHECKED_KEPT_BYTES = 24 * 1024 * 1024
"""How many bytes of export lines :func:`check_export` keeps parsed for the apply (what that costs in memory:
docs/PERFORMANCE.md, "the export read once"); a file beyond it is read again."""

_checked: dict[str, dict[str, list[tuple[int, Change]]]] = {}
"""The latest keeping check's changes: its ``keep`` name -> data file path -> the file's ``(bytes, Change)``, as
checked; each file taken (once) by the :class:`ReadIncrementalExport` given that name, in the same process. Only
a read given the name takes them, so a read that no check of its own preceded (another run in this process, a
file copied again since) reads its files; a check that refuses keeps nothing, the next keeping check drops what an
earlier one kept, and what an :class:`IncrementalExportChanges` kept goes with it (a run that failed before its job
ran holds nothing once its source is gone)."""

_frozen: list[str] = []
"""The keep name whose check froze the collector's generations (``gc.freeze``), while nothing has thawed them."""


def _drop_kept(name: str | None = None) -> None:
    """Forget the changes kept under ``name`` (None: every kept change) and undo their check's ``gc.freeze``: what it
    froze is collected as usual again."""
    if name is None:
        _checked.clear()
    else:
        _checked.pop(name, None)
    if _frozen and (name is None or name in _frozen):
        _frozen.clear()
        gc.unfreeze()


def check_export(manifest: IncrementalManifest, key_names: tuple[str, ...] = (), *, keep: str | None = None) -> int:
    """Read every record of the export and check it (:func:`check_record`); the number of records.

    ExportError naming the file, the line and the field of the first bad record: nothing may be applied
    from an export that holds one. With ``keep`` (a name for this check's read; the pipeline will run in this
    process: DirectRunner in_memory), the checked changes of whole files, up to :data:`CHECKED_KEPT_BYTES` of their
    lines, are kept for ``ReadIncrementalExport(manifest, kept=keep)``, which then applies exactly what was checked
    without parsing it again (docs/PERFORMANCE.md); the other files are read again.
    """
    if keep is not None:
        # the job runs in this process, whose DoFns relax the collector anyway: the kept changes are walked less
        from ..run.collector import relax_young_gc

        relax_young_gc()
        _drop_kept()
    kept_files: dict[str, list[tuple[int, Change]]] = {}
    budget, count = CHECKED_KEPT_BYTES if keep is not None else 0, 0
    # Kept, the parsed lines would be walked by every collection of the young generation they pass through and of
    # the older ones they land in (the benchmark's 10,000 changes: a dozen young collections, 0.1-0.2 s; a full one,
    # ~1 s). Parsing makes no cycles, so the collector pauses while they are read and checked, and once the export
    # passed they are frozen (gc.freeze: left out of every collection, still freed when their last reference goes)
    # until the read that takes them is done (_drop_kept). docs/PERFORMANCE.md, "Catch-up round 6".
    pause = keep is not None and gc.isenabled()
    if pause:
        gc.disable()
    try:
        for data_file in manifest.files:
            kept: list[tuple[int, Change]] | None = [] if budget > 0 else None
            for size, change in sized_records(data_file.path, lambda record, line: check_record(record, key_names, line),
                                              "a change record", with_line=True):
                count += 1
                if kept is not None:
                    kept.append((size, change))
                    budget -= size
                    if budget < 0:
                        kept = None
            if kept is not None:
                kept_files[data_file.path] = kept
        if kept_files and keep is not None:  # only once every record passed: a refused export keeps nothing
            _checked[keep] = kept_files
            if pause:
                gc.freeze()
                _frozen.append(keep)
    finally:
        if pause:
            gc.enable()
    return count


class _ReadChangesFn(beam.DoFn):
    """A data file's changes in batches (its element), or, given ``files``, every one of those files' (its element
    only starts it: the graph's Impulse)."""

    def __init__(self, kept: str | None, files: tuple[ExportFile, ...] | None = None) -> None:
        self._kept, self._files = kept, files
        self._mismatches = Metrics.counter(NAMESPACE, "export_count_mismatch")

    def process(self, element: Any) -> Iterable[Any]:
        try:
            for data_file in (element,) if self._files is None else self._files:
                yield from self._read(data_file)
        finally:
            if self._kept is not None:  # every kept change read (or the bundle failed): collected as usual again
                _drop_kept(self._kept)

    def _read(self, data_file: ExportFile) -> Iterable[Any]:
        count = 0
        records: Iterable[tuple[int, Any]] | None = None
        if self._kept is not None:  # as check_export kept it for this read
            records = _checked.get(self._kept, {}).pop(data_file.path, None)
        if records is None:
            records = sized_records(data_file.path, parse_record, "an incremental export record")
        for batch in file_batches(records):
            count += len(batch)
            yield batch
        if count != data_file.item_count:
            self._mismatches.inc()
            yield beam.pvalue.TaggedOutput("count_mismatch",
                                           mismatch_record("file", data_file.key, data_file.item_count, count))


class ReadIncrementalExport(beam.PTransform):
    """Batches of :class:`Change` (one per changed item; an export has each item once), and count mismatches."""

    def __init__(self, manifest: IncrementalManifest, kept: str | None = None) -> None:
        super().__init__()
        self.manifest, self.kept = manifest, kept

    def expand(self, pbegin: beam.pvalue.PBegin) -> dict[str, beam.PCollection]:
        if self.kept is None:  # the files spread over the workers: Create redistributes them (a Reshuffle inside)
            files, read = pbegin | "Files" >> beam.Create(self.manifest.files), _ReadChangesFn(None)
        else:
            # The job runs in this process (DirectRunner in_memory: one interpreter), where spreading the files
            # buys nothing and each step of the graph costs its construction, translation and a bundle of its
            # own (docs/PERFORMANCE.md, "Catch-up round 5"): one step reads every file.
            files, read = pbegin | "Files" >> beam.Impulse(), _ReadChangesFn(self.kept, self.manifest.files)
        out = files | "Read" >> beam.ParDo(read).with_output_types(Batch).with_outputs("count_mismatch",
                                                                                      main="batches")
        return {"batches": out.batches, "count_mismatch": out.count_mismatch}


class IncrementalExportChanges(ChangeSource):
    """An incremental export (its folder, or the folder just above it) as a change source: the window and the table
    from its manifest, each data file a piece read whole (a position is no more than "read": the export's lines are
    compacted, one per item, so a file is applied again as a whole, harmlessly)."""

    kind = "incremental export"
    pieces_name = "export data files"

    def __init__(self, path: str) -> None:
        self.manifest = read_incremental_manifest(path)
        self._kept: str | None = None
        """The name this source's last check kept its changes under (``check(keep=True)``), for its read."""

    def name(self) -> str:
        return self.manifest.export_dir

    def window(self) -> ChangeWindow:
        m = self.manifest
        return ChangeWindow(m.export_id, m.from_us, m.to_us, m.item_count, m.table)

    def check(self, key_names: tuple[str, ...] = (), *, from_us: int | None = None,
              resuming: str | None = None, keep: bool = False) -> None:
        """A checkpoint of this export (``resuming``: its id) and a window that starts by ``from_us``; every data file
        there and whole, then every record a change of an item keyed by ``key_names``."""
        m = self.manifest
        if resuming is not None and resuming != m.export_id:
            raise ExportError(f"the checkpoint was made of {resuming}, not of export {m.export_id}",
                              "resume with the source it was made of, or start in another run folder")
        if from_us is not None and m.from_us > from_us:
            from ..cutover.timeline import us_to_iso

            raise ExportError(f"export {m.export_id} starts at {us_to_iso(m.from_us)}, after {us_to_iso(from_us)}: "
                              "the changes between are in no export",
                              f"export the window again with ExportFromTime {us_to_iso(from_us)}")
        problems = [problem for data_file in m.files if (problem := file_problem(data_file))]
        if problems:
            raise ExportError(f"the export in {m.export_dir} is damaged: {'; '.join(problems)}",
                              "copy the export again; nothing was written")
        try:  # every record, before anything is written: one bad record must not cost an item its cells
            self._kept = uuid.uuid4().hex if keep else None
            if self._kept is not None:  # kept for this source's read: no longer once the source is gone
                weakref.finalize(self, _drop_kept, self._kept)
            check_export(m, key_names, keep=self._kept)
        except ExportError as err:
            raise ExportError(f"export {m.export_id} refused: {getattr(err, 'message', err)}",
                              "nothing was written and the timeline is unchanged; export the window again "
                              "(or correct that line) and run catch-up with it") from None

    def pieces(self) -> list[Piece]:
        return [Piece(data_file.key) for data_file in self.manifest.files]

    def pages(self, piece: str, position: str | None) -> Iterator[ChangePage]:
        if position is not None:  # read already, whole
            return
        data_file = next((f for f in self.manifest.files if f.key == piece), None)
        if data_file is None:  # (next() raising inside a generator would be a RuntimeError)
            raise self.lost(piece)
        for batch in file_batches(sized_records(data_file.path, parse_record, "an incremental export record")):
            yield ChangePage(list(batch), None)
        yield ChangePage([], "read", done=True)

    def read(self, p: Any) -> SourceRead:
        read = p | "ReadIncrementalExport" >> ReadIncrementalExport(self.manifest, self._kept)
        return SourceRead(read["batches"], read["count_mismatch"])
