"""Tail a DynamoDB stream (NEW_AND_OLD_IMAGES) into Bigtable: a plain long-running process with checkpoints.

Positions live in ``<run dir>/tail.json``: per shard the sequence number of the last record whose
mutations Bigtable holds, whether the shard is finished, its parent. A page of records is applied
(and its dead letters written) *before* its position is saved, so a kill -9 at any moment loses
nothing; the records after the saved position are applied again on restart, in order, which is
harmless (see docs/CUTOVER.md: an in-order replay of a suffix converges).

* Shard lineage: a shard is read only once its parent is finished (or no longer listed), so an item's
  changes are applied in stream order across splits (:func:`plan_shards`, a pure function of
  DescribeStream's shard list and the checkpoint).
* Each shard's next iterator is kept from turn to turn (in memory), and empty pages with a next
  iterator are followed (up to :data:`EMPTY_PAGES_PER_TURN` a turn): a stream may answer several
  empty pages before a shard's next records (trimmed ones at TRIM_HORIZON, say), which a reader
  starting over from its saved position every turn would never get past. A shard iterator that
  expired (they live 15 minutes), and the first after a restart, come from the saved position.
* A position the stream no longer holds (24-hour retention), a stream re-enabled since, or a timeline
  end older than the retention is a :class:`StreamRetentionError` pointing to incremental-export
  catch-up. The first start reads from TRIM_HORIZON and applies records from the timeline's end
  minus :data:`START_MARGIN_US` (ApproximateCreationDateTime is rounded to the second).
* TTL deletions (userIdentity: Service, dynamodb.amazonaws.com; see :func:`is_ttl_delete`) are applied like
  any delete, so the target mirrors the table, and counted (``ttl_deletes``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ...mappers.attrvalue import to_export_json
from ...mappers.changes import Change, group_by_item, kind_of_change
from ...mappers.errors import UsageError
from .change_sink import ChangeApplier, Outcome
from ..run.dead_letters import write_part
from .timeline import join, read_json, write_json

TAIL_FILE = "tail.json"
STOPPED_FILE = "tail.stopped.json"
RETENTION_US = 24 * 3_600_000_000
START_MARGIN_US = 2_000_000
PAGE_LIMIT = 1000
PAGES_PER_TURN = 20
EMPTY_PAGES_PER_TURN = 3
RECENT_KEYS = 50


class StreamRetentionError(UsageError):
    """The stream no longer holds the records the timeline needs: catch up from an incremental export first."""


RETENTION_HINT = ("catch up with an incremental export from the timeline's end (`ddb2bt catch-up SPEC --run-dir R "
                  "--export PATH`; ExportFromTime = the time above), then start the tail again")


@dataclass
class ShardState:
    sequence: str | None = None
    """The last record applied; None before the first."""
    done: bool = False
    parent: str | None = None
    last_record_us: int | None = None
    behind_us: int = 0
    """How far the last page read was behind the shard's newest record (0 once caught up)."""
    caught_up_us: int | None = None


@dataclass
class TailState:
    stream_arn: str
    start_us: int
    shards: dict[str, ShardState] = field(default_factory=dict)
    counters: dict[str, int] = field(default_factory=dict)
    heartbeat_us: int = 0
    recent: list[dict[str, Any]] = field(default_factory=list)
    """Keys of the items changed last (export JSON), for the parity check of cutover-status."""

    def to_json(self) -> dict[str, Any]:
        return {"stream_arn": self.stream_arn, "start_us": self.start_us, "counters": self.counters,
                "heartbeat_us": self.heartbeat_us, "recent": self.recent,
                "shards": {shard_id: vars(shard) for shard_id, shard in self.shards.items()}}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TailState:
        shards = {shard_id: ShardState(**shard) for shard_id, shard in data.get("shards", {}).items()}
        return cls(data["stream_arn"], int(data["start_us"]), shards, dict(data.get("counters", {})),
                   int(data.get("heartbeat_us", 0)), list(data.get("recent", [])))


@dataclass(frozen=True)
class ShardPlan:
    """What one turn of the tail reads (see :func:`plan_shards`)."""

    ready: list[str]
    """Shards to read now, each after its ancestors."""
    waiting: list[str]
    """Shards whose parent is still being read (open, or closed but not read to its end)."""
    lost: list[str]
    """Shards the checkpoint has not finished that the stream no longer lists: past the retention."""


def plan_shards(listed: list[dict[str, Any]], saved: dict[str, ShardState]) -> ShardPlan:
    """Which shards to read, from DescribeStream's shard list and the checkpoint. Pure: no I/O.

    A stream's shards form a lineage: a shard splits (or is rolled over) into children listed with
    its ``ParentShardId``, and an item's changes move to a child when its parent closes (the parent's
    ``SequenceNumberRange`` then has an ``EndingSequenceNumber``). So a shard is read only once its
    parent is finished, that is, read to its end (GetRecords returned no next iterator) — a parent
    still open, or closed but not read to its end, keeps its children waiting, which also covers
    children listed before their parent is closed. A parent the stream no longer lists (trimmed after
    24 hours, or never known to this checkpoint) holds nothing the timeline needs, so its children are
    read. A shard the checkpoint holds unfinished that is no longer listed lost records: ``lost``.
    """
    by_id = {shard["ShardId"]: shard for shard in listed}
    parent_of = {shard_id: shard.get("ParentShardId") for shard_id, shard in by_id.items()}

    def finished(shard_id: str) -> bool:
        state = saved.get(shard_id)
        return state is not None and state.done

    def depth(shard_id: str) -> int:
        seen, parent = {shard_id}, parent_of.get(shard_id)
        while parent is not None and parent in by_id and parent not in seen:
            seen.add(parent)
            parent = parent_of.get(parent)
        return len(seen)

    ready: list[str] = []
    waiting: list[str] = []
    for shard_id in sorted(by_id, key=lambda shard_id: (depth(shard_id), shard_id)):
        if finished(shard_id):
            continue
        parent = parent_of[shard_id]
        (waiting if parent is not None and parent in by_id and not finished(parent) else ready).append(shard_id)
    lost = sorted(shard_id for shard_id, state in saved.items() if not state.done and shard_id not in by_id)
    return ShardPlan(ready, waiting, lost)


def load_state(run_dir: str) -> TailState | None:
    saved = read_json(join(run_dir, TAIL_FILE))
    return None if saved is None else TailState.from_json(saved)


def save_state(run_dir: str, state: TailState) -> None:
    write_json(join(run_dir, TAIL_FILE), state.to_json())


def record_stop(run_dir: str, now_us: int) -> None:
    """The tail stopped cleanly (Ctrl-C, its limits, an error): beside the checkpoint, which it leaves as it is."""
    write_json(join(run_dir, STOPPED_FILE), {"stopped_us": now_us})


def stopped_since(run_dir: str, state: TailState) -> bool:
    """The tail stopped cleanly after its last heartbeat (a kill -9 leaves the heartbeat only)."""
    saved = read_json(join(run_dir, STOPPED_FILE)) or {}
    return int(saved.get("stopped_us", 0)) >= state.heartbeat_us


TTL_IDENTITY = ("Service", "dynamodb.amazonaws.com")


def is_ttl_delete(record: dict[str, Any]) -> bool:
    """Whether DynamoDB's TTL process made the record: its ``userIdentity`` is the service dynamodb.amazonaws.com.

    botocore returns the members as the service model names them (``Type``, ``PrincipalId``: GetRecords'
    wire JSON); AWS's TTL page and Lambda's stream events write them ``type`` and ``principalId``. Both count.
    """
    identity = record.get("userIdentity") or {}
    kind = identity.get("Type", identity.get("type"))
    principal = identity.get("PrincipalId", identity.get("principalId"))
    return (kind, principal) == TTL_IDENTITY


def to_change(record: dict[str, Any]) -> Change:
    """A stream record as a Change (ApproximateCreationDateTime in µs; TTL deletions flagged)."""
    data = record["dynamodb"]
    moment = data.get("ApproximateCreationDateTime")
    time_us = int(moment.timestamp() * 1_000_000) if hasattr(moment, "timestamp") else int(float(moment or 0) * 1e6)
    ttl = is_ttl_delete(record)
    old, new = data.get("OldImage"), data.get("NewImage")
    return Change(data["Keys"], old, new, record.get("eventName") or kind_of_change(old, new), time_us,
                  data.get("SequenceNumber", ""), ttl)


def _error_code(error: Exception) -> str:
    return str((getattr(error, "response", None) or {}).get("Error", {}).get("Code", ""))


def require_streams_api(streams: Any) -> None:
    """Refuse a Streams endpoint that has no Streams API at all (dynalite answers UnknownOperationException)."""
    try:
        streams.list_streams(Limit=1)
    except Exception as error:
        if _error_code(error) != "UnknownOperationException":
            return  # whatever else is wrong shows where the stream itself is read
        from ..run.service_errors import redact

        raise UsageError(f"{redact(str(streams.meta.endpoint_url))} does not serve DynamoDB Streams (dynalite has "
                         "none), so the tail has no stream to read", "run the local servers with moto (`ddb2bt local "
                         "up --dynamodb moto`), or point AWS_ENDPOINT_URL_DYNAMODB_STREAMS at the server holding the "
                         "table's stream") from None


@dataclass
class TailRun:
    """One tail process: the clients, the applier, where to write, and when to stop."""

    run_dir: str
    table: str
    dynamodb: Any
    streams: Any
    applier: ChangeApplier
    dead_letter: str
    until_idle_s: float | None = None
    max_seconds: float | None = None
    poll_s: float = 1.0
    now_us: Callable[[], int] = lambda: int(time.time() * 1_000_000)
    outcome: Outcome = field(default_factory=Outcome)
    stream_seconds: float = 0.0
    """Time spent waiting for GetRecords (the rest is mapping and writing), for benchmarks and tuning."""
    iterators: dict[str, str] = field(default_factory=dict, init=False, repr=False)
    """Each shard's next iterator where the last turn stopped reading it."""

    def start(self, timeline_end_us: int) -> TailState:
        """The saved state, or a new one from the timeline's end after checking the stream still holds it."""
        description = self.dynamodb.describe_table(TableName=self.table)["Table"]
        stream_arn = description.get("LatestStreamArn")
        view = (description.get("StreamSpecification") or {}).get("StreamViewType")
        if not stream_arn or not (description.get("StreamSpecification") or {}).get("StreamEnabled", True):
            require_streams_api(self.streams)
            raise UsageError(f"table {self.table} has no DynamoDB stream",
                             "enable one with view NEW_AND_OLD_IMAGES (it must exist since the backfill started)")
        if view != "NEW_AND_OLD_IMAGES":
            raise UsageError(f"the stream of {self.table} has view {view}: without old images the cells a change "
                             "removes cannot be found", "enable the stream with NEW_AND_OLD_IMAGES")
        state = load_state(self.run_dir)
        if state is not None:
            if state.stream_arn != stream_arn:
                raise StreamRetentionError(f"the stream of {self.table} changed since the tail started "
                                           f"({state.stream_arn} → {stream_arn}): positions are lost", RETENTION_HINT)
            return state
        from .timeline import us_to_iso

        start_us = timeline_end_us - START_MARGIN_US
        if self.now_us() - start_us >= RETENTION_US:
            raise StreamRetentionError(f"the timeline ends at {us_to_iso(timeline_end_us)}, more than the stream's "
                                       "24-hour retention ago", RETENTION_HINT)
        stream = self.streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]
        created = stream.get("CreationRequestDateTime")
        if created is not None and int(created.timestamp() * 1_000_000) > timeline_end_us:
            raise StreamRetentionError(f"the stream of {self.table} was enabled at {us_to_iso(int(created.timestamp() * 1e6))}, "
                                       f"after the timeline's end ({us_to_iso(timeline_end_us)}): the changes between "
                                       "are in no stream", RETENTION_HINT)
        state = TailState(stream_arn, start_us)
        save_state(self.run_dir, state)
        return state

    def shards(self, state: TailState) -> list[dict[str, Any]]:
        """Every shard of the stream (DescribeStream pages)."""
        shards: list[dict[str, Any]] = []
        start: dict[str, Any] = {}
        while True:
            page = self.streams.describe_stream(StreamArn=state.stream_arn, **start)["StreamDescription"]
            shards += page.get("Shards", [])
            last = page.get("LastEvaluatedShardId")
            if not last:
                break
            start = {"ExclusiveStartShardId": last}
        return shards

    def run(self, state: TailState) -> TailState:
        """Read every ready shard in turn until stopped (idle for until_idle_s, or max_seconds elapsed)."""
        started = idle_since = time.monotonic()
        while True:
            listed = self.shards(state)
            plan = plan_shards(listed, state.shards)
            if plan.lost:
                raise StreamRetentionError(f"shard {plan.lost[0]} is no longer in the stream (past its 24-hour "
                                           "retention) before the tail finished reading it", RETENTION_HINT)
            for shard in listed:
                state.shards.setdefault(shard["ShardId"], ShardState(parent=shard.get("ParentShardId")))
            # Finished shards the stream no longer lists are forgotten: a new shard every few hours would
            # otherwise grow tail.json (rewritten after every page) for as long as the tail runs.
            listed_ids = {shard["ShardId"] for shard in listed}
            state.shards = {shard_id: saved for shard_id, saved in state.shards.items()
                            if shard_id in listed_ids or not saved.done}
            busy = False
            for shard_id in plan.ready:  # parents before children; a child waits for the next turn
                busy |= self._read_shard(state, shard_id, state.shards[shard_id])
                busy |= state.shards[shard_id].done and any(  # a parent just finished: its children next, at once
                    state.shards[child].parent == shard_id for child in plan.waiting)
            state.heartbeat_us = self.now_us()
            save_state(self.run_dir, state)
            now = time.monotonic()
            if busy:
                idle_since = now
            if self.max_seconds is not None and now - started >= self.max_seconds:
                return state
            if self.until_idle_s is not None and now - idle_since >= self.until_idle_s:
                return state
            if not busy:
                time.sleep(self.poll_s)

    def _iterator(self, state: TailState, shard_id: str, saved: ShardState) -> str | None:
        kind = {"ShardIteratorType": "AFTER_SEQUENCE_NUMBER", "SequenceNumber": saved.sequence} if saved.sequence \
            else {"ShardIteratorType": "TRIM_HORIZON"}
        try:
            return self.streams.get_shard_iterator(StreamArn=state.stream_arn, ShardId=shard_id, **kind)["ShardIterator"]
        except Exception as error:
            if _error_code(error) == "TrimmedDataAccessException":
                raise StreamRetentionError(f"shard {shard_id} no longer holds the records after {saved.sequence} "
                                           "(past the 24-hour retention)", RETENTION_HINT) from None
            raise

    def _pages(self, state: TailState, shard_id: str, saved: ShardState) -> Iterator[dict[str, Any]]:
        iterator = self.iterators.pop(shard_id, None) or self._iterator(state, shard_id, saved)
        pages = empty = 0
        while iterator and pages < PAGES_PER_TURN and empty < EMPTY_PAGES_PER_TURN:
            asked = time.perf_counter()
            try:
                page = self.streams.get_records(ShardIterator=iterator, Limit=PAGE_LIMIT)
            except Exception as error:
                code = _error_code(error)
                if code == "ExpiredIteratorException":  # 15 minutes old: renew it from the saved position
                    iterator = self._iterator(state, shard_id, saved)
                    continue
                if code == "TrimmedDataAccessException":
                    raise StreamRetentionError(f"shard {shard_id}: the records after {saved.sequence} are past the "
                                               "stream's retention", RETENTION_HINT) from None
                raise
            finally:
                self.stream_seconds += time.perf_counter() - asked
            pages += 1
            yield page  # applied when this resumes; a page that failed drops the iterator: the saved position next
            iterator = page.get("NextShardIterator")
            empty = 0 if page.get("Records") else empty + 1
        if iterator:
            self.iterators[shard_id] = iterator
        else:
            saved.done = True  # closed, and read to its end

    def _read_shard(self, state: TailState, shard_id: str, saved: ShardState) -> bool:
        """Apply what the shard holds after its saved position (a turn of up to PAGES_PER_TURN pages)."""
        got = False
        for page in self._pages(state, shard_id, saved):
            records = page.get("Records", [])
            if not records:
                saved.behind_us, saved.caught_up_us = 0, self.now_us()
                continue
            got = True
            changes = [to_change(record) for record in records]
            late = [change for change in changes if change.time_us >= state.start_us]
            outcome = self.applier.apply(list(group_by_item(late, ()).values())) if late else Outcome()
            outcome.read += len(changes) - len(late)  # before the timeline's end: already applied, counted skipped
            outcome.skipped += len(changes) - len(late)
            if outcome.dead_letters:
                write_part(self.dead_letter, [letter.to_json() for letter in outcome.dead_letters])
            self.outcome.add(outcome)
            saved.sequence = changes[-1].sequence
            saved.last_record_us = changes[-1].time_us
            saved.behind_us = max(0, self.now_us() - changes[-1].time_us) if page.get("NextShardIterator") else 0
            for name, value in outcome.counters().items():
                state.counters[name] = state.counters.get(name, 0) + value
            recent = [to_export_json(change.keys) for change in late[-RECENT_KEYS:]]
            state.recent = [json.loads(text) for text in dict.fromkeys(
                json.dumps(keys, sort_keys=True) for keys in [*state.recent, *recent])][-RECENT_KEYS:]
            state.heartbeat_us = self.now_us()  # per page: a tail working through a backlog is alive
            save_state(self.run_dir, state)  # only now: the page is in Bigtable
        return got


def make_streams_client(settings: Any) -> Any:
    """A ``dynamodbstreams`` client with the DynamoDB client's region, profile and timeouts; its endpoint follows the
    DynamoDB one where that is local (:func:`ddb2bt.pipelines.dynamodb.aws.endpoint_for`)."""
    from botocore.config import Config

    from ..dynamodb.aws import aws_client

    config = Config(retries={"mode": "standard", "total_max_attempts": settings.max_attempts},
                    connect_timeout=settings.connect_timeout, read_timeout=settings.read_timeout)
    return aws_client("dynamodbstreams", endpoint_url=settings.endpoint_url, region=settings.region,
                      profile=settings.profile, config=config)
