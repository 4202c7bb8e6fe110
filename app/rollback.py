"""The rollback use case: Bigtable → DynamoDB through the spec's decoder, resumable, then compared.

``rollback(spec, request)`` reads the Bigtable table (or ``start``..``end``, or with ``since`` only the
rows holding a cell written since then) range by range in key order through its source,
`pipelines.bigtable.rows.RowSource` (a `pipelines.source.Source`: key ranges as pieces, the last
committed row key as the position), decodes each row into the items it was mapped from (the source's
`entities`, with the spec's decoder `mappers.decode`), and writes
them with BatchWriteItem (`pipelines.dynamodb.sink`) into the spec's source table or ``to_table``.
A row that cannot be decoded is a dead letter (row key and reason, mode 0600), as is an item
DynamoDB refuses. Then every row is read and decoded again and each item is read back with
BatchGetItem and compared, type for type.

A plain runner, not Beam: resuming needs the rows of a range to be committed in key order (a
checkpoint of the last row whose items are in DynamoDB), which one reader per range and a few writer
threads give directly. Decoding is Python and takes a core, so the ranges are shared out among
``processes`` worker processes (one per core but one by default), each with its share of the write budget;
they send each batch's commit to this process, which alone writes the run folder.

Run folder (``runs/<table>-rollback-<UTC time>``): ``rollback.json`` (what is rolled back: spec hash,
target table, ranges, since), ``checkpoint.json`` (per range the last committed row key, the
counters and the dead-letter file's committed length; replaced atomically after each commit),
``dead_letters.jsonl`` and ``differences.jsonl`` (user data, 0600). A batch is committed when its
items are written; its dead letters are appended and the checkpoint replaced by one process, so a
kill -9 anywhere (of that process or of a worker) leaves a checkpoint whose counters and dead-letter length match: ``--resume``
cuts the dead-letter file back to that length and reads on after each range's committed row.

Reconciliation: rows read = rows decoded + rows dead-lettered + rows empty, and items decoded =
items written + items refused + items unkeyed (both dead-lettered: DynamoDB refused the item; the
spec declares a key attribute lost, e.g. versioning's sort key, so the item's key cannot be rebuilt).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..mappers.errors import Interrupted, ServiceError, UsageError
from .options import RunOptions

if TYPE_CHECKING:
    from ..mappers.rollback import Verdict
    from ..mappers.spec import MappingSpec
    from ..pipelines.bigtable.rows import RowSource
    from ..pipelines.dynamodb.sink import DynamoDBSink, DynamoWriter

RECORD_FILE = "rollback.json"
CHECKPOINT_FILE = "checkpoint.json"
DEAD_LETTER_FILE = "dead_letters.jsonl"
DIFFERENCES_FILE = "differences.jsonl"
ITEMS_PER_COMMIT = 100
SAVE_SECONDS = 0.2
"""How often the checkpoint file is rewritten while batches are committed."""
GET_BATCH = 100
"""Items compared per BatchGetItem (its limit)."""
COUNTERS = ("rows_read", "rows_decoded", "rows_dead_lettered", "rows_empty", "items_decoded", "items_written",
            "items_refused", "items_unkeyed")
UNSEEN_BY_SINCE = ("rows deleted in Bigtable since then, and cells deleted from rows not written since then, are not "
                   "seen: their items stay in DynamoDB as they were (docs/ROLLBACK.md: Bigtable change streams "
                   "carry deletes)")
NOT_DELETED = ("items in the DynamoDB table that Bigtable no longer holds are not deleted: roll back into a new, "
               "empty table (--to-table) to get exactly what Bigtable holds")

Progress = Callable[[str, dict[str, int]], object]
"""Called with the phase ("write" or "compare") and the counters so far; the CLI shows it."""


class RollbackError(UsageError):
    """A rollback that cannot start: the target table, the run folder or an option is wrong; nothing was written."""


@dataclass(frozen=True)
class RollbackRequest:
    to_table: str | None = None
    """The DynamoDB table written (default: the spec's source table)."""
    start: bytes = b""
    end: bytes = b""
    since_us: int | None = None
    """Only rows holding a cell written at or after this time (microseconds since the epoch)."""
    wcu: float | None = None
    """Write capacity units per second for the whole run; None: as fast as DynamoDB takes them."""
    writers: int = 4
    """Writer threads of each process."""
    processes: int | None = None
    """Worker processes, each reading, decoding and writing whole key ranges (None: one per core but one, at least
    one; 1: this process)."""
    compare: bool = True
    accept_loss: bool = False
    """Write into the spec's source table although the spec cannot rebuild every attribute (each put replaces the
    whole item: what the spec does not keep is removed from the live items)."""
    types: dict[str, str] = field(default_factory=dict)
    """DynamoDB types of attributes that live only in a key, qualifier or timestamp (the table's keys come
    from DescribeTable); S where not given."""
    retry_seconds: float = 120.0

    def as_args(self) -> list[str]:
        """`ddb2bt rollback`'s own arguments that ask for this again (defaults left out), for the command that goes on."""
        args = ["--to-table", self.to_table] if self.to_table else []
        if self.since_us is not None:  # epoch milliseconds where exact, else ISO 8601 to the microsecond
            from datetime import datetime, timedelta, timezone

            exact_ms = self.since_us >= 0 and self.since_us % 1000 == 0
            args += ["--since", str(self.since_us // 1000) if exact_ms else
                     (datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(microseconds=self.since_us)).isoformat()]
        args += ["--start", self.start.decode("utf-8", "backslashreplace")] if self.start else []
        args += ["--end", self.end.decode("utf-8", "backslashreplace")] if self.end else []
        args += ["--wcu", f"{self.wcu:g}"] if self.wcu is not None else []
        args += ["--writers", str(self.writers)] if self.writers != RollbackRequest.writers else []
        args += ["--processes", str(self.processes)] if self.processes is not None else []
        for name, kind in sorted(self.types.items()):
            args += ["--type", f"{name}={kind}"]
        args += ["--accept-loss"] if self.accept_loss else []
        return args + ([] if self.compare else ["--no-compare"])


@dataclass(frozen=True)
class RollbackResult:
    run_dir: str
    table: str
    source: str
    counters: dict[str, int]
    dead_letter: str
    dead_letter_lines: int
    compared: int = 0
    differences: int = 0
    differences_file: str | None = None
    not_compared: int = 0
    resumed: bool = False
    seconds: float = 0.0
    losses: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems


def default_run_dir(table: str) -> str:
    return f"runs/{table}-rollback-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"


def rollback(spec: MappingSpec | str | Path, request: RollbackRequest = RollbackRequest(),
             options: RunOptions = RunOptions(), *, progress: Progress | None = None) -> RollbackResult:
    """Roll the Bigtable table back into DynamoDB; RollbackError (nothing written) when it cannot start."""
    from .context import load_spec  # here: a worker process imports this module and needs no Beam

    began = time.monotonic()
    loaded = load_spec(spec, options)
    workers = _Workers(_processes(request)) if _processes(request) > 1 else None
    try:
        spec_path = str(spec) if isinstance(spec, (str, Path)) else None  # for the command that goes on
        return _rollback(loaded, request, options, workers, progress, began, spec_path)
    finally:
        if workers is not None:
            workers.close()


def _rollback(loaded: MappingSpec, request: RollbackRequest, options: RunOptions, workers: _Workers | None,
              progress: Progress | None, began: float, spec_path: str | None = None) -> RollbackResult:
    from ..mappers.rollback import latest_only, lost_keys, text_only_attributes, verdict
    from ..pipelines.run.checkpoint import spec_hash
    from ..pipelines.run.collector import relax_young_gc

    relax_young_gc()  # as migrate's map step does: each row decodes into many young objects waiting for their batch
    table = request.to_table or loaded.source.table
    if not table:
        raise RollbackError("the spec reads an export and names no DynamoDB table", "name one: --to-table TABLE")
    rebuilt = verdict(loaded)  # what the decoder cannot give back: refused over the source table, then the notes
    _refuse_a_lossy_overwrite(loaded, rebuilt, table, request)
    sink = _sink(loaded, table, request)
    # One DynamoDB client for this process's whole run: the table's check, the writers and the comparison (each
    # client is a botocore session and its handlers built anew); worker processes make their own.
    client = sink.client()
    key_names, key_types = _table_keys(sink, loaded, client)
    sampled, type_notes = _sampled_types(loaded, [name for name in text_only_attributes(loaded)
                                                  if name not in key_types and name not in request.types])
    setup = _Setup(loaded, table, key_names, {**key_types, **sampled, **request.types}, request,
                   latest_only(loaded), lost_keys(loaded, key_names), ())
    source = setup.source()
    source.check()
    run_dir = options.run_dir or default_run_dir(table)
    record = {"spec_hash": spec_hash(loaded), "table": table, "start": _b64(request.start), "end": _b64(request.end),
              "since_us": request.since_us}
    state = _Checkpoint.open(run_dir, record, options.resume, source.pieces)
    setup = replace(setup, ranges=tuple(state.ranges))
    resume = "continue it with: " + options.go_on("rollback", spec_path or "SPEC", run_dir, *request.as_args(),
                                                  resume=True)
    _write_phase(state, setup, workers, progress, resume, client)
    dead_lines = state.dead_lines()
    counters = dict(state.counters)
    problems = _reconcile(counters)
    compared = differences = not_compared = 0
    differences_file = None
    if request.compare:
        differences_file = os.path.join(run_dir, DIFFERENCES_FILE)
        compared, differences, not_compared = _compare(setup, workers, differences_file, progress, resume, client)
        if differences:
            problems.append(f"{differences} items differ between DynamoDB and Bigtable (see {differences_file})")
    if dead_lines:
        problems.append(f"{dead_lines} dead letters: rows or items not rolled back (see {state.dead_letter})")
    notes = [NOT_DELETED] if request.since_us is None and request.to_table is None else []
    if request.since_us is not None:
        notes.insert(0, f"--since: {UNSEEN_BY_SINCE}")
    notes[:0] = type_notes
    return RollbackResult(run_dir, table, source.name(), counters, state.dead_letter, dead_lines,
                          compared, differences, differences_file, not_compared, state.resumed,
                          time.monotonic() - began, tuple(rebuilt.lines()) if rebuilt.losses else (),
                          tuple(notes), tuple(problems))


TYPE_SAMPLE = 1000
"""Items of the source read to learn the types of attributes Bigtable keeps as text alone."""
ROLLBACK_TYPES = ("S", "N", "B", "BOOL")
"""The types such an attribute can read back as (`mappers.decode.typed`)."""


def _sampled_types(spec: MappingSpec, names: list[str]) -> tuple[dict[str, str], list[str]]:
    """The DynamoDB types of attributes Bigtable keeps only as text (a row key, qualifier or timestamp), from a sample
    of the source (the table, or the export), and notes saying where each type came from. Without them every such
    attribute read back as S: an N or BOOL written back as S, and the comparison, decoding with the same types,
    calling it equal. An attribute the sample does not show with one type is written as S, and the note says so."""
    if not names:
        return {}, []
    from ..pipelines.sources import read_items

    fix = "give its type with --type NAME=S|N|B|BOOL"
    try:
        items = read_items(spec.source, TYPE_SAMPLE)
    except Exception as err:  # noqa: BLE001 - the source gone or unreadable: the rollback goes on, saying what it assumes
        return {}, [f"{', '.join(names)}: kept in Bigtable as text alone (a row key, qualifier or timestamp), and a "
                    f"sample of the source could not be read ({str(err)[:200]}): written as S; {fix}"]
    found: dict[str, str] = {}
    unsure = []
    for name in names:
        kinds = sorted({next(iter(item[name])) for item in items if isinstance(item.get(name), dict) and item[name]})
        if len(kinds) == 1 and kinds[0] in ROLLBACK_TYPES:
            found[name] = kinds[0]
        else:
            unsure.append(f"{name} ({'/'.join(kinds) if kinds else 'not in the sample'})")
    notes = []
    if found:
        notes.append("types of attributes kept in Bigtable as text alone, from a sample of the source: "
                     + ", ".join(f"{name} {kind}" for name, kind in found.items()))
    if unsure:
        notes.append(f"kept in Bigtable as text alone and of no one type in a sample of the source: {', '.join(unsure)}:"
                     f" written as S; {fix}")
    return found, notes


def _refuse_a_lossy_overwrite(spec: MappingSpec, rebuilt: Verdict, table: str, request: RollbackRequest) -> None:
    """A put replaces the whole item: rolled back into the table the items came from, a spec that cannot rebuild
    every attribute would remove what it does not keep from the live items. Loss is explicit: --accept-loss."""
    losses = [loss for loss in rebuilt.losses if loss.attribute]  # whole items lost are not written at all
    if table != spec.source.table or request.accept_loss or not losses:
        return
    named = ", ".join(sorted({f"{loss.entity}.{loss.attribute}" for loss in losses}))
    raise RollbackError(f"the spec cannot rebuild {len(losses)} attribute(s) ({named}) and {table} is the table the "
                        "items came from: each put replaces the whole item, so they would be removed from the live "
                        "items", "roll back into another table (--to-table NEW), or pass --accept-loss to overwrite "
                        f"{table} knowing what is lost (see `ddb2bt migrate-plan SPEC`'s rollback section)")


def _sink(spec: MappingSpec, table: str, request: RollbackRequest, key_names: tuple[str, ...] = (),
          ) -> DynamoDBSink:
    """The rollback's sink: the DynamoDB table ``table`` of the spec's source account, within ``--wcu``."""
    from ..pipelines.dynamodb.client import ClientSettings
    from ..pipelines.dynamodb.sink import DynamoDBSink

    return DynamoDBSink(ClientSettings.from_source(spec.source), table, key_names, wcu=request.wcu,
                        retry_seconds=request.retry_seconds)


def _table_keys(sink: DynamoDBSink, spec: MappingSpec, client: Any = None) -> tuple[tuple[str, ...], dict[str, str]]:
    """The table's key names and types (the sink's DescribeTable, through ``client`` when given); RollbackError when
    it is missing or keyed otherwise."""
    found = sink.table_keys(client)
    if found is None:
        raise RollbackError(f"DynamoDB table {sink.table} does not exist",
                            "create it with the source table's key schema, or name another with --to-table")
    names, types = found
    wanted = tuple(name for name in (spec.source.partition_key, spec.source.sort_key) if name)
    if spec.source.partition_key and wanted != names:
        raise RollbackError(f"DynamoDB table {sink.table} is keyed by {', '.join(names)}, the spec's items by "
                            f"{', '.join(wanted)}", "roll back into a table with the source's key schema (--to-table)")
    if spec.source.table and spec.source.table != sink.table:
        # Another table than the source: its key schema must be the source's, types and HASH/RANGE included (a spec
        # naming no keys takes them from DescribeTable, as migrate did). Keyed otherwise, every row was a dead letter,
        # a key type changed stopped the run on an exception, and swapped key roles were written and called OK.
        source = _sink(spec, spec.source.table, RollbackRequest()).table_keys(client)
        if source is not None and (source[0] != names or source[1] != types):

            def shown(keys: tuple[str, ...], typed: dict[str, str]) -> str:
                return ", ".join(f"{name} ({typed.get(name, '?')})" for name in keys)

            raise RollbackError(f"DynamoDB table {sink.table} is keyed by {shown(names, types)}, the source table "
                                f"{spec.source.table} by {shown(*source)}",
                                "roll back into a table with the source's key schema (names, types, HASH then RANGE)")
    return names, types


def _b64(key: bytes | None) -> str | None:
    return None if key is None else base64.b64encode(key).decode("ascii")


def _unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


@contextlib.contextmanager
def _written_by_us(path: str) -> Iterator[None]:
    """RollbackError naming ``path`` for a file of the run folder that is not what a rollback wrote there (damaged or
    edited: it was 'unexpected JSONDecodeError ... (a bug)')."""
    try:
        yield
    except (ValueError, KeyError, TypeError, AttributeError) as err:  # JSONDecodeError, binascii.Error among them
        detail = f"no field {err}" if isinstance(err, KeyError) else getattr(err, "msg", None) or str(err)
        raise RollbackError(f"{path} is not what a rollback wrote ({detail})",
                            "start the rollback again with another --run-dir") from None


class _Checkpoint:
    """The run folder's state: ranges, the last committed row of each, counters, the dead letters' committed length."""

    def __init__(self, run_dir: str, record: dict, key_ranges: list[tuple[bytes, bytes]], saved: dict | None) -> None:
        self.run_dir, self.record, self.ranges = run_dir, record, key_ranges
        self.lock = threading.Lock()
        saved = saved or {}
        self.after: dict[int, bytes | None] = {int(i): _unb64(key) for i, key in saved.get("after", {}).items()}
        self.done: set[int] = set(saved.get("done", []))
        self.counters: Counter[str] = Counter({name: 0 for name in COUNTERS})
        self.counters.update(saved.get("counters", {}))
        self.dead_bytes: int = saved.get("dead_letter_bytes", 0)
        if not all(type(n) is int for n in (*self.counters.values(), self.dead_bytes, *self.done)):
            raise ValueError("a count that is no whole number")
        self.resumed = saved != {}
        self.dead_letter = os.path.join(run_dir, DEAD_LETTER_FILE)
        self._next_save = 0.0

    @classmethod
    def open(cls, run_dir: str, record: dict, resume: bool, split: Callable[[], list[tuple[bytes, bytes]]]) -> _Checkpoint:
        from ..pipelines.run.dead_letters import create_private

        record_path, checkpoint = os.path.join(run_dir, RECORD_FILE), os.path.join(run_dir, CHECKPOINT_FILE)
        if resume:
            if not os.path.exists(record_path):
                raise RollbackError(f"{run_dir} holds no rollback to resume ({RECORD_FILE} missing)",
                                    "give the folder of an earlier rollback with --run-dir, or leave out --resume")
            with _written_by_us(record_path):
                with open(record_path, encoding="utf-8") as handle:
                    recorded = json.load(handle)
                differ = [name for name in record if recorded.get(name) != record[name]]
                key_ranges = [(_unb64(a) or b"", _unb64(b) or b"") for a, b in recorded["ranges"]]
            if differ:
                raise RollbackError(f"{run_dir} rolled back another {differ[0].replace('_', ' ')} "
                                    f"({recorded.get(differ[0])!r}, now {record[differ[0]]!r})",
                                    "resume with the same spec and options, or start a new run folder")
            saved = None
            with _written_by_us(checkpoint):
                if os.path.exists(checkpoint):
                    with open(checkpoint, encoding="utf-8") as handle:
                        saved = json.load(handle)
                state = cls(run_dir, record, key_ranges, saved)
            _truncate(state.dead_letter, state.dead_bytes)  # lines of batches the kill left uncommitted
            state.resumed = True
            return state
        if os.path.exists(record_path):
            raise RollbackError(f"{run_dir} already holds a rollback",
                                "pass --resume to continue it, or choose a new --run-dir")
        key_ranges = split()
        os.makedirs(run_dir, exist_ok=True)
        with create_private(os.path.join(run_dir, DEAD_LETTER_FILE)):
            pass
        _replace(record_path, {**record, "ranges": [[_b64(a), _b64(b)] for a, b in key_ranges]})
        return cls(run_dir, record, key_ranges, None)

    def commit(self, index: int, last_key: bytes | None, counts: Counter[str], letters: list[str],
               finished: bool = False) -> None:
        """One batch of range ``index`` is in DynamoDB: its dead letters, counters and row key, together."""
        with self.lock:
            if letters:
                with open(self.dead_letter, "ab") as handle:
                    handle.write("".join(line + "\n" for line in letters).encode("utf-8"))
                    self.dead_bytes = handle.tell()
            self.counters.update(counts)
            if last_key is not None:
                self.after[index] = last_key
            if finished:
                self.done.add(index)
            # Saved every SAVE_SECONDS and when a range is done, not per batch: a kill loses the batches since
            # (written again on resume, and their dead letters cut off beyond the saved length), never consistency.
            if finished or time.monotonic() >= self._next_save:
                self._save()

    def save(self) -> None:
        """The checkpoint as committed so far (at the end of a phase, or when it is stopped)."""
        with self.lock:
            self._save()

    def _save(self) -> None:
        self._next_save = time.monotonic() + SAVE_SECONDS
        # No fsync: a kill -9 leaves the page cache to the kernel; only a machine crash could lose this write.
        _replace(os.path.join(self.run_dir, CHECKPOINT_FILE), {
            "after": {str(i): _b64(key) for i, key in self.after.items()}, "done": sorted(self.done),
            "counters": dict(self.counters), "dead_letter_bytes": self.dead_bytes})

    def dead_lines(self) -> int:
        with open(self.dead_letter, "rb") as handle:
            return sum(1 for _ in handle)


def _replace(path: str, data: dict) -> None:
    from ..pipelines.run.dead_letters import create_private

    temporary = path + ".tmp"
    with create_private(temporary) as handle:  # row keys are user data: 0600, as dead letters are
        handle.write(json.dumps(data).encode("utf-8"))  # json.dump with indent would encode in Python, per batch
    os.replace(temporary, path)


def _truncate(path: str, size: int) -> None:
    from ..pipelines.run.dead_letters import create_private

    if not os.path.exists(path):
        with create_private(path):
            return
    with open(path, "r+b") as handle:
        handle.truncate(size)


@dataclass
class _Batch:
    index: int
    last_key: bytes | None = None
    items: list[dict] = field(default_factory=list)
    origin: list[bytes] = field(default_factory=list)
    """The row key each item came from (item by item), for its dead letter."""
    counts: Counter[str] = field(default_factory=Counter)
    """Counters of the batch, but those of the rows and items read as expected (``decoded``)."""
    letters: list[str] = field(default_factory=list)
    decoded: list[int] = field(default_factory=lambda: [0, 0, 0])
    """Rows read, rows decoded, items decoded: counted row by row, where a Counter costs more."""

    def counted(self) -> Counter[str]:
        """Every counter of the batch."""
        rows, decoded, items = self.decoded
        self.counts.update(rows_read=rows, rows_decoded=decoded, items_decoded=items)
        self.decoded = [0, 0, 0]
        return self.counts

    def row_key_of(self, item: dict) -> bytes | None:
        """The row key ``item`` (one of the batch's) came from."""
        return next((key for found, key in zip(self.items, self.origin) if found is item), None)


RowDecoder = Callable[[bytes, list, _Batch], None]
"""One row (key, cells) into a batch."""


def _row_decoder(source: RowSource, key_names: tuple[str, ...], unkeyed: dict[str, Any]) -> RowDecoder:
    """A row's items into the batch, or a dead letter naming the row key and why it cannot be decoded. Items of an
    entity whose key is a declared loss (``unkeyed``) are dead letters too: their old key cannot be rebuilt."""
    from ..mappers.attrvalue import AttributeValueError
    from ..mappers.decode import DecodeError
    from ..pipelines.run.dead_letters import DeadLetter

    entities, keys, failures = source.entities, frozenset(key_names), (DecodeError, AttributeValueError, ValueError,
                                                                       UnicodeDecodeError)

    def decode(row_key: bytes, cells: list, batch: _Batch) -> None:
        counted = batch.decoded
        counted[0] += 1
        batch.last_key = row_key
        try:
            found = entities(row_key, cells)
            for entity, item in found:
                if not item.keys() >= keys and entity not in unkeyed:
                    raise DecodeError(f"an item without its key ({', '.join(n for n in key_names if n not in item)} "
                                      "missing)")
        except failures as err:
            batch.counts["rows_dead_lettered"] += 1
            batch.letters.append(DeadLetter(None, "decode", f"cannot be decoded: {err}", row_key=row_key).to_json())
            return
        if not found:
            batch.counts["rows_empty"] += 1
            return
        counted[1] += 1
        counted[2] += len(found)
        for entity, item in found:
            loss = unkeyed.get(entity) if unkeyed else None
            if loss is not None:
                batch.counts["items_unkeyed"] += 1
                batch.letters.append(DeadLetter(item, "decode", f"its key cannot be rebuilt: {loss.reason}", entity,
                                                loss.attribute, row_key).to_json())
                continue
            batch.items.append(item)
            batch.origin.append(row_key)

    return decode


@dataclass(frozen=True)
class _Setup:
    """What reading, decoding and writing need; picklable, so that a worker process builds its own clients from it."""

    spec: MappingSpec
    table: str
    key_names: tuple[str, ...]
    types: dict[str, str]
    request: RollbackRequest
    newest: bool
    unkeyed: dict[str, Any]
    ranges: tuple[tuple[bytes, bytes], ...]
    processes: int = 1
    """How many processes share the work (and the write budget)."""

    def writer(self, client: Any = None) -> DynamoWriter:
        """This process's writer, from the sink (the interface every run writes through), on ``client`` when given
        (one the sink made); its budget is this process's share of ``--wcu``."""
        return _sink(self.spec, self.table, self.request, self.key_names).writer(share=self.processes, client=client)

    def source(self) -> RowSource:
        """The Bigtable rows (a :class:`~ddb2bt.pipelines.source.Source`): key ranges, rows from a committed row key
        on, and the spec's decoder with this run's attribute types."""
        from ..pipelines.bigtable.rows import RowSource

        return RowSource(self.spec, since_us=self.request.since_us, latest_only=self.newest, types=self.types,
                         start=self.request.start, end=self.request.end)


Commit = Callable[[int, "bytes | None", "Counter[str]", list[str], bool], None]
"""(range, last row key, counters, dead-letter lines, range finished): one batch's items are in DynamoDB."""


def _write_phase(state: _Checkpoint, setup: _Setup, workers: _Workers | None, progress: Progress | None,
                 resume: str, client: Any = None) -> None:
    """Every unfinished range, in this process or in the worker processes (each reading, decoding and writing whole
    ranges); either way this process alone commits, so the checkpoint and dead letters stay one consistent file."""

    def commit(index: int, last_key: bytes | None, counts: Counter[str], letters: list[str], finished: bool) -> None:
        state.commit(index, last_key, counts, letters, finished)
        if progress is not None:
            progress("write", dict(state.counters))

    todo = [index for index in range(len(setup.ranges)) if index not in state.done]
    queue = deque(todo)
    try:
        if workers is not None and len(todo) > 1:
            workers.run(replace(setup, processes=min(workers.count, len(todo))), "write", todo, state.after,
                        lambda message: commit(*message), resume)
        else:
            _write_ranges(setup, dict(state.after), lambda: queue.popleft() if queue else None, commit, lambda: False,
                          client=client)
    except KeyboardInterrupt:
        raise Interrupted("rollback stopped: every range is committed up to its last row written", resume) from None
    except Exception as error:  # a service gone part way: the one line says what is kept and how to go on
        from ..pipelines.run.service_errors import as_ddb2bt_error

        failure = as_ddb2bt_error(error)
        if not isinstance(failure, ServiceError):
            raise
        raise ServiceError(f"{failure.one_line()}; the rollback stopped with every range committed up to its last "
                           "row written", f"once it is back, {resume}") from error
    finally:
        state.save()


def _processes(request: RollbackRequest) -> int:
    if request.processes is not None:
        return request.processes
    # One core is left to this process (it commits every batch), the clients' I/O threads and whatever serves the
    # run on this machine: on two cores that is one process, everything here, which measured faster than two workers
    # whose start-up (a forkserver importing the clients, each worker's clients) is not repaid (docs/ROLLBACK.md).
    return max(1, (os.cpu_count() or 1) - 1)


def _write_ranges(setup: _Setup, after: dict[int, bytes | None], next_range: Callable[[], int | None],
                  commit: Commit, stopping: Callable[[], bool], *, client: Any = None) -> None:
    """Ranges from ``next_range`` until None: read and decode in key order here, write in ``request.writers`` threads
    (through ``client`` when given), ``commit`` in order; ``stopping()`` ends the run after the batches in flight are
    committed."""
    from ..pipelines.run.dead_letters import DeadLetter

    writer, source = setup.writer(client), setup.source()
    source.decoder  # noqa: B018 - built before the first row: a spec it cannot decode fails the run here
    decode = _row_decoder(source, setup.key_names, setup.unkeyed)

    def write(batch: _Batch) -> _Batch:
        for item, reason in writer.write(batch.items):
            batch.counts["items_refused"] += 1
            batch.letters.append(DeadLetter(item, "write", reason, row_key=batch.row_key_of(item)).to_json())
        batch.counts["items_written"] += len(batch.items) - batch.counts["items_refused"]
        return batch

    def done(future: Future) -> None:
        batch = future.result()
        commit(batch.index, batch.last_key, batch.counted(), batch.letters, False)

    writers = setup.request.writers
    with source, ThreadPoolExecutor(max_workers=writers, thread_name_prefix="rollback-write") as pool:
        # The batches sent, in the order they were read, and after a range's last batch its index: committed in
        # that order, so that a range is finished once its batches are, while the next range is read already.
        flying: deque[Future | int] = deque()
        sent = 0  # batches in flying

        def settle(at_most: int) -> None:
            """Commit from the front what is written (and any range finished there), and more until no more than
            ``at_most`` batches are in flight."""
            nonlocal sent
            while flying and (isinstance(flying[0], int) or flying[0].done() or sent > at_most):
                head = flying.popleft()
                if isinstance(head, int):
                    commit(head, None, Counter(), [], True)
                else:
                    sent -= 1
                    done(head)

        while (index := next_range()) is not None:
            batch = _Batch(index)
            for row_key, cells in source.rows(setup.ranges[index], after.get(index)):
                decode(row_key, cells, batch)
                if len(batch.items) >= ITEMS_PER_COMMIT or len(batch.letters) >= ITEMS_PER_COMMIT:
                    flying.append(pool.submit(write, batch))
                    sent += 1
                    batch = _Batch(index)
                    if stopping():  # what is sent is committed first, so that a resume need not send it again
                        settle(0)
                        return
                    settle(2 * writers)
            flying.append(pool.submit(write, batch))
            flying.append(index)
            sent += 1
            settle(2 * writers)
        settle(0)


def _reconcile(c: dict[str, int]) -> list[str]:
    problems = []
    if c["rows_read"] != c["rows_decoded"] + c["rows_dead_lettered"] + c["rows_empty"]:
        problems.append(f"rows read ({c['rows_read']}) ≠ decoded ({c['rows_decoded']}) + dead-lettered "
                        f"({c['rows_dead_lettered']}) + empty ({c['rows_empty']})")
    if c["items_decoded"] != c["items_written"] + c["items_refused"] + c["items_unkeyed"]:
        problems.append(f"items decoded ({c['items_decoded']}) ≠ written ({c['items_written']}) + refused "
                        f"({c['items_refused']}) + without their key ({c['items_unkeyed']})")
    return problems


def _compare(setup: _Setup, workers: _Workers | None, path: str, progress: Progress | None,
             resume: str, client: Any = None) -> tuple[int, int, int]:
    """Every row again: its items against DynamoDB's, in this process or in worker processes (each its own ranges);
    the differences go into ``path`` from this process alone. (items compared, differing, rows not decodable)."""
    from ..pipelines.run.dead_letters import create_private

    totals = Counter[str]()
    with create_private(path) as out:

        def report(compared: int, lines: list[str], unreadable: int) -> None:
            totals.update(compared=compared, differing=len(lines), unreadable=unreadable)
            out.write("".join(lines).encode("utf-8"))
            if progress is not None:
                progress("compare", {"compared": totals["compared"], "differing": totals["differing"]})

        todo = list(range(len(setup.ranges)))
        if workers is not None and len(todo) > 1:
            workers.run(replace(setup, processes=min(workers.count, len(todo))), "compare", todo, {},
                        lambda message: report(*message), resume)
        else:
            queue = deque(todo)
            _compare_ranges(setup, lambda: queue.popleft() if queue else None, report, lambda: False, client=client)
    if progress is not None:
        progress("compare", {"compared": totals["compared"], "differing": totals["differing"]})
    return totals["compared"], totals["differing"], totals["unreadable"]


def _compare_ranges(setup: _Setup, next_range: Callable[[], int | None],
                    report: Callable[[int, list[str], int], None], stopping: Callable[[], bool], *,
                    client: Any = None) -> None:
    """The rows of each range from ``next_range``: their items against DynamoDB's (BatchGetItem of 100 keys,
    ``request.writers`` calls in flight while the rows are read on, through ``client`` when given); ``report(compared,
    difference lines, rows not decodable)`` per call."""
    from ..mappers.attrvalue import to_export_json
    from ..mappers.decode import comparable
    from ..mappers.rollback import key_of

    writer, source = setup.writer(client), setup.source()
    source.decoder  # noqa: B018 - built before the first row: a spec it cannot decode fails the run here
    key_names, threads = setup.key_names, setup.request.writers
    decode = _row_decoder(source, key_names, setup.unkeyed)

    def canonical(item: dict) -> dict:
        return {name: comparable(value) for name, value in item.items()}

    def check(items: list[dict], unreadable: int) -> tuple[int, list[str], int]:
        wanted = {key_of(item, key_names): item for item in items}  # a later item of one key wins, as written
        got = {key_of(item, key_names): item for item in writer.get([{n: i[n] for n in key_names}
                                                                      for i in wanted.values()])}
        lines = []
        for key, item in wanted.items():
            found = got.get(key)
            if found is None or canonical(found) != canonical(item):
                lines.append(json.dumps({"key": to_export_json({n: item[n] for n in key_names}),
                                         "bigtable": to_export_json(item),
                                         "dynamodb": None if found is None else to_export_json(found)},
                                        sort_keys=True) + "\n")
        return len(wanted), lines, unreadable

    with source, ThreadPoolExecutor(max_workers=threads, thread_name_prefix="rollback-compare") as pool:
        flying: deque[Future] = deque()
        pending: list[dict] = []
        unreadable = 0
        while (index := next_range()) is not None and not stopping():
            for row_key, cells in source.rows(setup.ranges[index]):
                batch = _Batch(0)
                decode(row_key, cells, batch)
                unreadable += batch.counts["rows_dead_lettered"]
                pending += batch.items
                if len(pending) >= GET_BATCH:
                    flying.append(pool.submit(check, pending, unreadable))
                    pending, unreadable = [], 0
                    while flying and (flying[0].done() or len(flying) > 2 * threads):
                        report(*flying.popleft().result())
        flying.append(pool.submit(check, pending, unreadable))
        while flying:
            report(*flying.popleft().result())


# --------------------------------------------------------------------------- worker processes
#
# Decoding is Python, bound by one core per interpreter (threads share its GIL), so the ranges are shared out among
# worker processes. Each has its own pipe to this one: it asks for the next range, reads, decodes and writes it, and
# sends each batch's commit (or, comparing, its differences) once the batch is in DynamoDB. This process alone writes
# the checkpoint, dead letters and differences. A pipe per worker, not a shared queue: a worker killed in the middle
# of a message breaks only its own pipe (a shared queue's lock could be left held by the dead process).

STOP = "stop"
STOP_SECONDS = 30.0
QUIET_LOGGERS = ("google.cloud.bigtable.data._metrics",)
WORKER_MODULES = ("ddb2bt.app.rollback", "google.cloud.bigtable.data", "ddb2bt.mappers.decode",
                  "ddb2bt.pipelines.bigtable.rows", "ddb2bt.pipelines.dynamodb.client", "ddb2bt.pipelines.dynamodb.sink")
"""What the forkserver imports once for every worker."""
"""After Ctrl-C, how long the workers may take to commit what they have sent before they are terminated."""


class _Workers:
    """Worker processes, started before this one checks the table (they import their libraries meanwhile) and given
    both phases' work: ``run`` hands out ranges until none is left, ``close`` ends them."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.processes: dict[Any, Any] = {}
        self._lives: list[Any] = []
        self._error: BaseException | None = None
        self._started = threading.Thread(target=self._start, name="ddb2bt-rollback-start", daemon=True)
        self._started.start()  # in the background: this process checks the table meanwhile

    def _start(self) -> None:
        try:
            self._fork()
        except Exception as err:  # noqa: BLE001 - raised by run(), in the caller's thread
            self._error = err

    def _fork(self) -> None:
        import multiprocessing

        # forkserver: one fresh process imports the libraries once (no gRPC channel is made before the fork, as gRPC
        # requires), and each worker is forked from it; a fork of this process would copy its gRPC state and threads.
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["__main__", *WORKER_MODULES])  # __main__: a script is not run again per worker
        for number in range(self.count):
            mine, theirs = context.Pipe()
            life, lifeline = context.Pipe(duplex=False)  # never written: the worker sees its end close when we die
            process = context.Process(target=_worker, args=(theirs, life, _quiet()),
                                      name=f"ddb2bt-rollback-{number}", daemon=True)
            process.start()
            theirs.close()
            life.close()
            self.processes[mine] = process
            self._lives.append(lifeline)

    def run(self, setup: _Setup, phase: str, todo: list[int], after: dict[int, bytes | None],
            on_message: Callable[[tuple], None], resume: str) -> None:
        """``phase`` ("write" or "compare") of the ranges ``todo``; each message a worker sends for a batch goes to
        ``on_message``. A worker that fails or dies stops the others and the run (its error, or ServiceError:
        resumable); Ctrl-C stops them after the batches in flight are committed and raises Interrupted."""
        from multiprocessing.connection import wait

        self._started.join()
        if self._error is not None:
            raise ServiceError(f"the rollback's worker processes could not start: {self._error}",
                               "roll back in this process with --processes 1")
        queue = deque(todo)
        busy = dict(self.processes)
        failure: BaseException | None = None
        stopping = False
        for connection in busy:
            with contextlib.suppress(OSError):  # a worker that died meanwhile: its pipe's end is read below
                connection.send((phase, setup, after))

        def stop_all() -> None:
            nonlocal stopping
            stopping = True
            for connection in busy:
                with contextlib.suppress(OSError):  # that worker has ended already
                    connection.send(STOP)

        def fail(error: BaseException) -> None:
            nonlocal failure
            if failure is None:
                failure = error
                stop_all()

        def serve(deadline: float | None) -> None:
            while busy and (deadline is None or time.monotonic() < deadline):
                ready: list[Any] = wait(list(busy), timeout=1.0)
                for connection in ready:
                    process = busy[connection]
                    try:
                        message = connection.recv()
                    except (EOFError, OSError):
                        process.join()
                        del busy[connection], self.processes[connection]
                        fail(ServiceError(f"rollback worker process {process.pid} ended "
                                          f"({_how_it_ended(process.exitcode)}) before its ranges were done",
                                          f"the checkpoint holds every batch it committed; {resume}"))
                        continue
                    kind = message[0]
                    if kind == "next":
                        task = queue.popleft() if queue and not stopping else None
                        try:
                            connection.send(task)
                        except OSError:  # it died after asking: its pipe's end is read next, and fails the run
                            if task is not None:
                                queue.appendleft(task)
                    elif kind == "done":
                        del busy[connection]
                    elif kind == "error":
                        del busy[connection]
                        fail(message[1])
                    elif kind == "crash":
                        del busy[connection]
                        fail(ServiceError(f"rollback worker process {process.pid} failed: {message[1]}", resume))
                    else:
                        on_message(message[1:])

        try:
            serve(None)
        except KeyboardInterrupt:
            stop_all()
            with contextlib.suppress(KeyboardInterrupt):  # a second Ctrl-C: do not wait for the batches in flight
                serve(time.monotonic() + STOP_SECONDS)
            raise Interrupted("rollback stopped: every range is committed up to its last row written", resume) from None
        if failure is not None:
            raise failure
        if queue:  # never a false OK: every range was handed out and finished
            done = "written" if phase == "write" else "compared"
            raise ServiceError(f"{len(queue)} key ranges were not {done}: the worker processes ended first", resume)

    def close(self) -> None:
        self._started.join()
        for connection in self.processes:
            with contextlib.suppress(OSError):
                connection.send(None)
        for connection, process in self.processes.items():
            process.join(timeout=5)
            if process.is_alive():
                process.terminate()
                process.join()
            connection.close()
        for lifeline in self._lives:
            lifeline.close()
        self.processes.clear()


def _how_it_ended(code: int | None) -> str:
    import signal

    if code is not None and code < 0:
        return f"killed by {signal.Signals(-code).name}"
    return f"exit status {code}"


def _quiet() -> tuple[list, dict[str, int]]:
    """This process's warning filters and the levels of the loggers the CLI quietens, for a worker to take over."""
    import logging
    import warnings

    builtin = [entry for entry in warnings.filters if entry[2].__module__ == "builtins"]  # others' would import them
    return builtin, {name: logging.getLogger(name).level for name in QUIET_LOGGERS}


def _worker(connection: Any, life: Any, quiet: tuple[list, dict[str, int]]) -> None:
    """A worker process: phases from the parent over ``connection``, ranges asked one by one, each batch's outcome
    sent back, until the parent sends None."""
    import logging
    import signal
    import traceback
    import warnings

    from ..mappers.errors import Ddb2btError
    from ..pipelines.run.collector import relax_young_gc

    relax_young_gc()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole process group: the parent decides
    _exit_with_parent(life)
    warnings.filters[:] = quiet[0]  # type: ignore[index]
    for name, level in quiet[1].items():
        logging.getLogger(name).setLevel(level)
    stopped = False

    def stopping() -> bool:
        nonlocal stopped
        while not stopped and connection.poll():
            stopped = connection.recv() == STOP
        return stopped

    def next_range() -> int | None:
        nonlocal stopped
        if stopped:
            return None
        connection.send(("next",))
        answer = connection.recv()
        while answer == STOP:  # a stop sent before the answer
            stopped = True
            answer = connection.recv()
        return None if stopped else answer

    def commit(index: int, last_key: bytes | None, counts: Counter[str], letters: list[str], finished: bool) -> None:
        connection.send(("commit", index, last_key, dict(counts), letters, finished))

    def report(compared: int, lines: list[str], unreadable: int) -> None:
        connection.send(("report", compared, lines, unreadable))

    while (job := connection.recv()) is not None:
        if job == STOP:  # sent to a worker that had already finished the phase
            continue
        phase, setup, after = job
        stopped = False
        try:
            if phase == "write":
                _write_ranges(setup, after, next_range, commit, stopping)
            else:
                _compare_ranges(setup, next_range, report, stopping)
        except Ddb2btError as err:
            connection.send(("error", err))
        except Exception as err:  # noqa: BLE001 - the parent reports it; the worker has no one else to tell
            traceback.print_exc()
            connection.send(("crash", f"{type(err).__name__}: {err}"))
        else:
            connection.send(("done",))
    connection.close()


def _exit_with_parent(life: Any) -> None:
    """End this worker at once when its parent dies (kill -9 included), so that no orphan goes on writing beside a
    resumed run: ``life`` is the read end of a pipe the parent never writes, so it is ready only when it closes."""

    def watch() -> None:
        from multiprocessing.connection import wait

        wait([life])
        os._exit(1)

    threading.Thread(target=watch, name="ddb2bt-parent-watch", daemon=True).start()
