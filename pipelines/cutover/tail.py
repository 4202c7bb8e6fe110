"""Tail a change source (a DynamoDB stream, NEW_AND_OLD_IMAGES) into Bigtable: a plain long-running process with
checkpoints.

The tail follows any :class:`~ddb2bt.pipelines.change_source.ChangeSource` piece by piece (the stream's is
:class:`~ddb2bt.pipelines.dynamodb.stream.StreamChanges`: shards, sequence numbers, retention, TTL records)
and writes through the :class:`~.change_sink.ChangeSink` (its ``check`` refuses a target that is not there, its
applier maps and writes each page and waits until Bigtable holds it).

Positions live in ``<run dir>/tail.json``: per piece (shard) the sequence number of the last record whose
mutations Bigtable holds, whether the piece is finished, its parent. A page of records is applied
(and its dead letters written) *before* its position is saved, so a kill -9 at any moment loses
nothing; the records after the saved position are applied again on restart, in order, which is
harmless (see docs/CUTOVER.md: an in-order replay of a suffix converges).

* Lineage: a piece is read only once its parent is finished (or no longer listed), so an item's
  changes are applied in stream order across splits
  (:func:`~ddb2bt.pipelines.change_source.plan_pieces`, a pure function of the source's pieces and the
  checkpoint; :func:`plan_shards` is the same over DescribeStream's shard list). A piece the checkpoint has not finished that the source no
  longer lists (a shard past the 24-hour retention) stops the tail with the source's error.
* The first start checks that the source holds the timeline's end (:meth:`ChangeSource.check`) and
  applies records from the timeline's end minus :data:`START_MARGIN_US` (ApproximateCreationDateTime
  is rounded to the second); a restart checks that the source is the one its checkpoint was made of.
* TTL deletions are applied like any delete, so the target mirrors the table, and counted (``ttl_deletes``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...mappers.attrvalue import to_export_json
from ...mappers.changes import group_by_item
from ..change_source import ChangeSource, Piece, PiecePlan, plan_pieces
from ..dynamodb.stream import EMPTY_PAGES_PER_TURN, PAGE_LIMIT, START_MARGIN_US, to_change
from ..run.dead_letters import write_part
from ..run.json_files import read_json
from .change_sink import ChangeSink, Outcome
from .timeline import join, write_json

TAIL_FILE = "tail.json"
STOPPED_FILE = "tail.stopped.json"
RECENT_KEYS = 50

__all__ = ["ShardState", "TailState", "plan_shards", "TailRun", "load_state", "save_state", "record_stop",
           "stopped_since",
           "EMPTY_PAGES_PER_TURN", "PAGE_LIMIT", "to_change"]  # the last three: what cutover/backlog.py imports here


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


def plan_shards(listed: list[dict[str, Any]], saved: dict[str, ShardState]) -> PiecePlan:
    """Which shards to read, from DescribeStream's shard list and the checkpoint. Pure: no I/O.

    A stream's shards form a lineage: a shard splits (or is rolled over) into children listed with
    its ``ParentShardId``, and an item's changes move to a child when its parent closes (the parent's
    ``SequenceNumberRange`` then has an ``EndingSequenceNumber``). So a shard is read only once its
    parent is finished, that is, read to its end (GetRecords returned no next iterator) — a parent
    still open, or closed but not read to its end, keeps its children waiting, which also covers
    children listed before their parent is closed. A parent the stream no longer lists (trimmed after
    24 hours, or never known to this checkpoint) holds nothing the timeline needs, so its children are
    read. A shard the checkpoint holds unfinished that is no longer listed lost records: ``lost``.
    (:func:`~ddb2bt.pipelines.change_source.plan_pieces` for any change source's pieces.)
    """
    return plan_pieces([Piece(shard["ShardId"], shard.get("ParentShardId")) for shard in listed], saved)


def load_state(run_dir: str) -> TailState | None:
    return read_json(join(run_dir, TAIL_FILE), TailState.from_json)


def save_state(run_dir: str, state: TailState) -> None:
    write_json(join(run_dir, TAIL_FILE), state.to_json())


def record_stop(run_dir: str, now_us: int) -> None:
    """The tail stopped cleanly (Ctrl-C, its limits, an error): beside the checkpoint, which it leaves as it is."""
    write_json(join(run_dir, STOPPED_FILE), {"stopped_us": now_us})


def stopped_since(run_dir: str, state: TailState) -> bool:
    """The tail stopped cleanly after its last heartbeat (a kill -9 leaves the heartbeat only)."""
    stopped_us = read_json(join(run_dir, STOPPED_FILE), lambda saved: int(saved.get("stopped_us", 0))) or 0
    return stopped_us >= state.heartbeat_us


@dataclass
class TailRun:
    """One tail process: the change source it follows, the change sink it writes through, and when to stop."""

    run_dir: str
    source: ChangeSource
    sink: ChangeSink
    until_idle_s: float | None = None
    max_seconds: float | None = None
    poll_s: float = 1.0
    now_us: Callable[[], int] = lambda: int(time.time() * 1_000_000)
    outcome: Outcome = field(default_factory=Outcome)

    def __post_init__(self) -> None:
        self.applier = self.sink.applier()

    def close(self) -> None:
        self.applier.close()

    @property
    def stream_seconds(self) -> float:
        """Time spent waiting for the source (GetRecords), for benchmarks and tuning."""
        return float(getattr(self.source, "stream_seconds", 0.0))

    def start(self, timeline_end_us: int) -> TailState:
        """The saved state, or a new one from the timeline's end after checking the source still holds it."""
        window = self.source.window()
        state = load_state(self.run_dir)
        self.source.check(from_us=timeline_end_us, resuming=state.stream_arn if state is not None else None)
        if state is not None:
            return state
        state = TailState(window.id, timeline_end_us - START_MARGIN_US)
        save_state(self.run_dir, state)
        return state

    def run(self, state: TailState) -> TailState:
        """Read every ready piece in turn until stopped (idle for until_idle_s, or max_seconds elapsed)."""
        started = idle_since = time.monotonic()
        while True:
            listed = self.source.pieces()
            plan = plan_pieces(listed, state.shards)
            if plan.lost:
                raise self.source.lost(plan.lost[0])
            for piece in listed:
                state.shards.setdefault(piece.id, ShardState(parent=piece.parent))
            # Finished pieces the source no longer lists are forgotten: a new shard every few hours would
            # otherwise grow tail.json (rewritten after every page) for as long as the tail runs.
            listed_ids = {piece.id for piece in listed}
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

    def _read_shard(self, state: TailState, shard_id: str, saved: ShardState) -> bool:
        """Apply what the piece holds after its saved position (a turn of the source's pages)."""
        got = False
        for page in self.source.pages(shard_id, saved.sequence):
            changes = page.changes
            if not changes:
                saved.behind_us, saved.caught_up_us = 0, self.now_us()
                saved.done = saved.done or page.done
                continue
            got = True
            late = [change for change in changes if change.time_us >= state.start_us]
            outcome = self.applier.apply(list(group_by_item(late, ()).values())) if late else Outcome()
            outcome.read += len(changes) - len(late)  # before the timeline's end: already applied, counted skipped
            outcome.skipped += len(changes) - len(late)
            if outcome.dead_letters:
                write_part(self.sink.dead_letter, [letter.to_json() for letter in outcome.dead_letters])
            self.outcome.add(outcome)
            saved.sequence = page.position
            saved.last_record_us = changes[-1].time_us
            saved.behind_us = max(0, self.now_us() - changes[-1].time_us) if not page.done else 0
            for name, value in outcome.counters().items():
                state.counters[name] = state.counters.get(name, 0) + value
            recent = [to_export_json(change.keys) for change in late[-RECENT_KEYS:]]
            state.recent = [json.loads(text) for text in dict.fromkeys(
                json.dumps(keys, sort_keys=True) for keys in [*state.recent, *recent])][-RECENT_KEYS:]
            state.heartbeat_us = self.now_us()  # per page: a tail working through a backlog is alive
            save_state(self.run_dir, state)  # only now: the page is in Bigtable
            saved.done = saved.done or page.done  # closed, and read to its end: saved with the turn
        return got
