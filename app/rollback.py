"""The rollback use case: Bigtable → DynamoDB through the spec's decoder, resumable, then compared.

``rollback(spec, request)`` reads the Bigtable table (or ``start``..``end``, or with ``since`` only the
rows holding a cell written since then) range by range in key order (`pipelines.rollback_source`),
decodes each row into the items it was mapped from (`mappers.decode.Decoder.decode_row`), and writes
them with BatchWriteItem (`pipelines.dynamodb_sink`) into the spec's source table or ``to_table``.
A row that cannot be decoded is a dead letter (row key and reason, mode 0600), as is an item
DynamoDB refuses. Then every row is read and decoded again and each item is read back with
BatchGetItem and compared, type for type.

A plain threaded runner, not Beam: resuming needs the rows of a range to be committed in key
order (a checkpoint of the last row whose items are in DynamoDB), which one reader per range and
a few writer threads give directly; the work is bounded by DynamoDB's write rate, not by CPU.

Run folder (``runs/<table>-rollback-<UTC time>``): ``rollback.json`` (what is rolled back: spec hash,
target table, ranges, since), ``checkpoint.json`` (per range the last committed row key, the
counters and the dead-letter file's committed length; replaced atomically after each commit),
``dead_letters.jsonl`` and ``differences.jsonl`` (user data, 0600). A batch is committed when its
items are written; its dead letters are appended and the checkpoint replaced under one lock, so a
kill -9 anywhere leaves a checkpoint whose counters and dead-letter length match: ``--resume``
cuts the dead-letter file back to that length and reads on after each range's committed row.

Reconciliation: rows read = rows decoded + rows dead-lettered + rows empty, and items decoded =
items written + items refused + items unkeyed (both dead-lettered: DynamoDB refused the item; the
spec declares a key attribute lost, e.g. versioning's sort key, so the item's key cannot be rebuilt).
"""

from __future__ import annotations

import base64
import json
import os
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..mappers.errors import UsageError
from .context import load_spec
from .options import RunOptions

if TYPE_CHECKING:
    from ..mappers.spec import MappingSpec

RECORD_FILE = "rollback.json"
CHECKPOINT_FILE = "checkpoint.json"
DEAD_LETTER_FILE = "dead_letters.jsonl"
DIFFERENCES_FILE = "differences.jsonl"
ITEMS_PER_COMMIT = 100
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
    compare: bool = True
    types: dict[str, str] = field(default_factory=dict)
    """DynamoDB types of attributes that live only in a key, qualifier or timestamp (the table's keys come
    from DescribeTable); S where not given."""
    retry_seconds: float = 120.0


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
    from ..mappers.decode import Decoder
    from ..mappers.rollback import latest_only, lost_keys, verdict
    from ..pipelines.bigtable.sink import Destination
    from ..pipelines.dynamodb.client import ClientSettings, keep_field_raw, make_client
    from ..pipelines.dynamodb.sink import DynamoWriter, WriteBudget, send_requests_raw
    from ..pipelines.run.checkpoint import spec_hash
    from ..pipelines.bigtable.rows import ranges
    from ..pipelines.bigtable.target import describe_target, probe_target

    began = time.monotonic()
    loaded = load_spec(spec, options)
    table = request.to_table or loaded.source.table
    if not table:
        raise RollbackError("the spec reads an export and names no DynamoDB table", "name one: --to-table TABLE")
    client = make_client(ClientSettings.from_source(loaded.source))
    send_requests_raw(client)
    keep_field_raw(client, "BatchGetItem", "Responses")  # the comparison reads B as bytes or base64 alike
    key_names, key_types = _table_keys(client, table, loaded)
    probe_target(loaded.target, must_exist=True)
    destination = Destination.from_target(loaded.target)
    run_dir = options.run_dir or default_run_dir(table)
    record = {"spec_hash": spec_hash(loaded), "table": table, "start": _b64(request.start), "end": _b64(request.end),
              "since_us": request.since_us}
    state = _Checkpoint.open(run_dir, record, options.resume,
                             lambda: ranges(destination, request.start, request.end))
    decoder = Decoder(loaded, {**key_types, **request.types})
    writer = DynamoWriter(client, table, key_names, WriteBudget(request.wcu), retry_seconds=request.retry_seconds)
    newest = latest_only(loaded)
    unkeyed = lost_keys(loaded, key_names)
    _write_phase(state, destination, decoder, writer, key_names, request, newest, unkeyed, progress)
    dead_lines = state.dead_lines()
    counters = dict(state.counters)
    problems = _reconcile(counters)
    compared = differences = not_compared = 0
    differences_file = None
    if request.compare:
        differences_file = os.path.join(run_dir, DIFFERENCES_FILE)
        compared, differences, not_compared = _compare(state, destination, decoder, writer, key_names, request.since_us,
                                                       newest, unkeyed, differences_file, request.writers,
                                                       progress)
        if differences:
            problems.append(f"{differences} items differ between DynamoDB and Bigtable (see {differences_file})")
    if dead_lines:
        problems.append(f"{dead_lines} dead letters: rows or items not rolled back (see {state.dead_letter})")
    notes = [NOT_DELETED] if request.since_us is None and request.to_table is None else []
    if request.since_us is not None:
        notes.insert(0, f"--since: {UNSEEN_BY_SINCE}")
    return RollbackResult(run_dir, table, describe_target(loaded.target), counters, state.dead_letter, dead_lines,
                          compared, differences, differences_file, not_compared, state.resumed,
                          time.monotonic() - began, tuple(verdict(loaded).lines()) if verdict(loaded).losses else (),
                          tuple(notes), tuple(problems))


def _table_keys(client: Any, table: str, spec: MappingSpec) -> tuple[tuple[str, ...], dict[str, str]]:
    """The table's key names and types (DescribeTable); RollbackError when it is missing or keyed otherwise."""
    from botocore.exceptions import ClientError

    try:
        described = client.describe_table(TableName=table)["Table"]
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
            raise RollbackError(f"DynamoDB table {table} does not exist",
                                "create it with the source table's key schema, or name another with --to-table") from None
        raise
    schema = sorted(described["KeySchema"], key=lambda key: key["KeyType"])  # HASH before RANGE
    names = tuple(key["AttributeName"] for key in schema)
    types = {d["AttributeName"]: d["AttributeType"] for d in described.get("AttributeDefinitions", [])}
    wanted = tuple(name for name in (spec.source.partition_key, spec.source.sort_key) if name)
    if spec.source.partition_key and wanted != names:
        raise RollbackError(f"DynamoDB table {table} is keyed by {', '.join(names)}, the spec's items by "
                            f"{', '.join(wanted)}", "roll back into a table with the source's key schema (--to-table)")
    return names, {name: types[name] for name in names if name in types}


def _b64(key: bytes | None) -> str | None:
    return None if key is None else base64.b64encode(key).decode("ascii")


def _unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


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
        self.resumed = saved != {}
        self.dead_letter = os.path.join(run_dir, DEAD_LETTER_FILE)

    @classmethod
    def open(cls, run_dir: str, record: dict, resume: bool, split: Callable[[], list[tuple[bytes, bytes]]]) -> _Checkpoint:
        from ..pipelines.run.dead_letters import create_private

        record_path, checkpoint = os.path.join(run_dir, RECORD_FILE), os.path.join(run_dir, CHECKPOINT_FILE)
        if resume:
            if not os.path.exists(record_path):
                raise RollbackError(f"{run_dir} holds no rollback to resume ({RECORD_FILE} missing)",
                                    "give the folder of an earlier rollback with --run-dir, or leave out --resume")
            with open(record_path, encoding="utf-8") as handle:
                recorded = json.load(handle)
            differ = [name for name in record if recorded.get(name) != record[name]]
            if differ:
                raise RollbackError(f"{run_dir} rolled back another {differ[0].replace('_', ' ')} "
                                    f"({recorded.get(differ[0])!r}, now {record[differ[0]]!r})",
                                    "resume with the same spec and options, or start a new run folder")
            key_ranges = [(_unb64(a) or b"", _unb64(b) or b"") for a, b in recorded["ranges"]]
            saved = None
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
            # No fsync: a kill -9 leaves the page cache to the kernel; only a machine crash could lose this write.
            _replace(os.path.join(self.run_dir, CHECKPOINT_FILE), {
                "after": {str(i): _b64(key) for i, key in self.after.items()}, "done": sorted(self.done),
                "counters": dict(self.counters), "dead_letter_bytes": self.dead_bytes})

    def dead_lines(self) -> int:
        with open(self.dead_letter, "rb") as handle:
            return sum(1 for _ in handle)


def _replace(path: str, data: dict) -> None:
    temporary = path + ".tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        handle.write(json.dumps(data))  # json.dump with indent would encode in Python, after every batch
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
    origin: dict[int, bytes] = field(default_factory=dict)
    """The row key each item came from (by the item's id), for its dead letter."""
    counts: Counter[str] = field(default_factory=Counter)
    letters: list[str] = field(default_factory=list)


def _decode(decoder: Any, row_key: bytes, cells: list, key_names: tuple[str, ...], batch: _Batch,
            unkeyed: dict[str, Any]) -> None:
    """One row into the batch: its items, or a dead letter naming the row key and why it cannot be decoded. Items of
    an entity whose key is a declared loss (``unkeyed``) are dead letters too: their old key cannot be rebuilt."""
    from ..mappers.attrvalue import AttributeValueError
    from ..mappers.decode import DecodeError
    from ..pipelines.run.dead_letters import DeadLetter

    batch.counts["rows_read"] += 1
    batch.last_key = row_key
    try:
        found = decoder.decode_entities(row_key, cells)
        for entity, item in found:  # an attribute the match fixes comes back from the match, even a dropped one
            for name, value in decoder.by_name[entity].fixed.items():
                item.setdefault(name, value)
        missing = [item for entity, item in found if entity not in unkeyed and any(n not in item for n in key_names)]
        if missing:
            raise DecodeError(f"an item without its key ({', '.join(n for n in key_names if n not in missing[0])} "
                              "missing)")
    except (DecodeError, AttributeValueError, ValueError, UnicodeDecodeError) as err:
        batch.counts["rows_dead_lettered"] += 1
        batch.letters.append(DeadLetter(None, "decode", f"cannot be decoded: {err}", row_key=row_key).to_json())
        return
    if not found:
        batch.counts["rows_empty"] += 1
        return
    batch.counts["rows_decoded"] += 1
    batch.counts["items_decoded"] += len(found)
    for entity, item in found:
        loss = unkeyed.get(entity)
        if loss is not None:
            batch.counts["items_unkeyed"] += 1
            batch.letters.append(DeadLetter(item, "decode", f"its key cannot be rebuilt: {loss.reason}", entity,
                                            loss.attribute, row_key).to_json())
            continue
        batch.items.append(item)
        batch.origin[id(item)] = row_key


def _write_phase(state: _Checkpoint, destination: Any, decoder: Any, writer: Any, key_names: tuple[str, ...],
                 request: RollbackRequest, newest: bool, unkeyed: dict[str, Any], progress: Progress | None) -> None:
    """Each unfinished range: read and decode in key order here, write in ``request.writers`` threads, commit in order."""
    from ..pipelines.run.dead_letters import DeadLetter
    from ..pipelines.bigtable.rows import RowSource

    def write(batch: _Batch) -> _Batch:
        for item, reason in writer.write(batch.items):
            batch.counts["items_refused"] += 1
            batch.letters.append(DeadLetter(item, "write", reason, row_key=batch.origin.get(id(item))).to_json())
        batch.counts["items_written"] += len(batch.items) - batch.counts["items_refused"]
        return batch

    def commit(future: Future) -> None:
        batch = future.result()
        state.commit(batch.index, batch.last_key, batch.counts, batch.letters)
        if progress is not None:
            progress("write", dict(state.counters))

    with RowSource(destination, since_us=request.since_us, latest_only=newest) as source, \
            ThreadPoolExecutor(max_workers=request.writers, thread_name_prefix="rollback-write") as pool:
        for index, key_range in enumerate(state.ranges):
            if index in state.done:
                continue
            flying: deque[Future] = deque()
            batch = _Batch(index)
            for row_key, cells in source.rows(key_range, state.after.get(index)):
                _decode(decoder, row_key, cells, key_names, batch, unkeyed)
                if len(batch.items) >= ITEMS_PER_COMMIT or len(batch.letters) >= ITEMS_PER_COMMIT:
                    flying.append(pool.submit(write, batch))
                    batch = _Batch(index)
                while flying and (flying[0].done() or len(flying) > 2 * request.writers):
                    commit(flying.popleft())
            flying.append(pool.submit(write, batch))
            while flying:
                commit(flying.popleft())
            state.commit(index, None, Counter(), [], finished=True)


def _reconcile(c: dict[str, int]) -> list[str]:
    problems = []
    if c["rows_read"] != c["rows_decoded"] + c["rows_dead_lettered"] + c["rows_empty"]:
        problems.append(f"rows read ({c['rows_read']}) ≠ decoded ({c['rows_decoded']}) + dead-lettered "
                        f"({c['rows_dead_lettered']}) + empty ({c['rows_empty']})")
    if c["items_decoded"] != c["items_written"] + c["items_refused"] + c["items_unkeyed"]:
        problems.append(f"items decoded ({c['items_decoded']}) ≠ written ({c['items_written']}) + refused "
                        f"({c['items_refused']}) + without their key ({c['items_unkeyed']})")
    return problems


def _compare(state: _Checkpoint, destination: Any, decoder: Any, writer: Any, key_names: tuple[str, ...],
             since_us: int | None, newest: bool, unkeyed: dict[str, Any], path: str, threads: int,
             progress: Progress | None) -> tuple[int, int, int]:
    """Every row again: its items against DynamoDB's (BatchGetItem of 100 keys, ``threads`` calls in flight while
    the rows are read on); (items compared, differing, not comparable)."""
    from ..mappers.attrvalue import to_export_json
    from ..mappers.decode import comparable
    from ..mappers.rollback import key_of
    from ..pipelines.run.dead_letters import create_private
    from ..pipelines.bigtable.rows import RowSource

    def canonical(item: dict) -> dict:
        return {name: comparable(value) for name, value in item.items()}

    def check(items: list[dict]) -> tuple[int, list[str]]:
        """(items compared, a differences.jsonl line per item that differs)."""
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
        return len(wanted), lines

    compared = differing = unreadable = 0
    with RowSource(destination, since_us=since_us, latest_only=newest) as source, create_private(path) as out, \
            ThreadPoolExecutor(max_workers=threads, thread_name_prefix="rollback-compare") as pool:
        flying: deque[Future] = deque()

        def collect(future: Future) -> None:
            nonlocal compared, differing
            count, lines = future.result()
            compared += count
            differing += len(lines)
            out.write("".join(lines).encode("utf-8"))
            if progress is not None:
                progress("compare", {"compared": compared, "differing": differing})

        pending: list[dict] = []
        for key_range in state.ranges:
            for row_key, cells in source.rows(key_range):
                batch = _Batch(0)
                _decode(decoder, row_key, cells, key_names, batch, unkeyed)
                unreadable += batch.counts["rows_dead_lettered"]
                pending += batch.items
                if len(pending) >= GET_BATCH:
                    flying.append(pool.submit(check, pending))
                    pending = []
                    while flying and (flying[0].done() or len(flying) > 2 * threads):
                        collect(flying.popleft())
        flying.append(pool.submit(check, pending))
        while flying:
            collect(flying.popleft())
    if progress is not None:
        progress("compare", {"compared": compared, "differing": differing})
    return compared, differing, unreadable
