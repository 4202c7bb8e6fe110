"""What the stream holds that the tail has not applied yet, read from the stream itself, without moving anything.

``cutover-status`` must not judge the tail by what the tail says about itself (a tail far behind, or
stopped, saved its last lag when it last saved): it reads every shard of the stream read-only —
DescribeStream, GetShardIterator ``AFTER_SEQUENCE_NUMBER`` from a saved position, GetRecords — and
never writes the tail's checkpoint (``tail.json``). Per shard it counts the records after the tail's
saved position (the *unread* ones, with the time of the oldest), and lists the keys of the records
between the last status check's own position and the tail's (the items changed since the last
check, which the parity check compares).

A shard is read to its end (a closed shard: GetRecords gives no next iterator) or to its current tip
(an open shard: :data:`TIP_EMPTY_PAGES` empty pages in a row, as the tail follows them). Records from
before the tail's start (the timeline's end minus the start margin) are not counted: the tail skips
them too, they are in what the earlier phases applied.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ...mappers.attrvalue import to_export_json
from .tail import EMPTY_PAGES_PER_TURN, PAGE_LIMIT, TailState, plan_shards, to_change

TIP_EMPTY_PAGES = EMPTY_PAGES_PER_TURN
MAX_PAGES_PER_SHARD = 500
"""At most this many pages a shard per check; past it the count is a lower bound (``capped``) and never READY."""


@dataclass
class ShardBacklog:
    shard: str
    unread: int = 0
    oldest_unread_us: int | None = None
    """ApproximateCreationDateTime of the oldest record the tail has not applied."""
    newest_us: int | None = None
    """The newest record seen in this shard (applied or not)."""
    tail_done: bool = False
    capped: bool = False
    """Stopped after MAX_PAGES_PER_SHARD pages: ``unread`` is a lower bound."""
    checked_to: str | None = None
    """The last applied record this check saw: where the next check starts listing changed keys."""


@dataclass
class StreamBacklog:
    shards: list[ShardBacklog] = field(default_factory=list)
    changed_keys: list[dict[str, Any]] = field(default_factory=list)
    """Keys (export JSON) of the items whose changes the tail applied since the last check, each once."""
    problems: list[str] = field(default_factory=list)
    """What makes the count impossible (a shard lost past the retention): never READY."""
    notes: list[str] = field(default_factory=list)

    @property
    def unread(self) -> int:
        return sum(shard.unread for shard in self.shards)

    @property
    def oldest_unread_us(self) -> int | None:
        times = [shard.oldest_unread_us for shard in self.shards if shard.oldest_unread_us is not None]
        return min(times) if times else None

    @property
    def complete(self) -> bool:
        return not self.problems and not any(shard.capped for shard in self.shards)


def _code(error: Exception) -> str:
    return str((getattr(error, "response", None) or {}).get("Error", {}).get("Code", ""))


def list_shards(streams: Any, stream_arn: str) -> list[dict[str, Any]]:
    """Every shard of the stream (DescribeStream pages)."""
    shards: list[dict[str, Any]] = []
    start: dict[str, Any] = {}
    while True:
        page = streams.describe_stream(StreamArn=stream_arn, **start)["StreamDescription"]
        shards += page.get("Shards", [])
        last = page.get("LastEvaluatedShardId")
        if not last:
            return shards
        start = {"ExclusiveStartShardId": last}


def _position(streams: Any, stream_arn: str, shard_id: str, after: str | None) -> str | None:
    kind = {"ShardIteratorType": "AFTER_SEQUENCE_NUMBER", "SequenceNumber": after} if after \
        else {"ShardIteratorType": "TRIM_HORIZON"}
    return streams.get_shard_iterator(StreamArn=stream_arn, ShardId=shard_id, **kind).get("ShardIterator")


def _before(sequence: str | None, other: str | None) -> bool:
    """``sequence`` is strictly before ``other`` (stream sequence numbers are decimal integers)."""
    return sequence is not None and other is not None and int(sequence) < int(other)


def read_backlog(streams: Any, state: TailState, checked: dict[str, str], *,
                 max_pages: int = MAX_PAGES_PER_SHARD) -> StreamBacklog:
    """Count, per shard, the records after the tail's saved position; list the keys changed since ``checked``.

    ``checked`` maps shard ids to the last record an earlier check listed (its ``checked_to``); a
    shard it does not name is listed from the tail's start. Nothing is written anywhere.
    """
    backlog = StreamBacklog()
    listed = list_shards(streams, state.stream_arn)
    lost = plan_shards(listed, state.shards).lost
    backlog.problems += [f"shard {shard_id} is no longer in the stream (past its 24-hour retention) before the tail "
                         "read it to its end: its unread records cannot be counted" for shard_id in lost]
    keys: dict[str, dict[str, Any]] = {}
    for shard in listed:
        shard_id = shard["ShardId"]
        saved = state.shards.get(shard_id)
        tail_at, tail_done = (saved.sequence, saved.done) if saved is not None else (None, False)
        result = ShardBacklog(shard_id, tail_done=tail_done)
        backlog.shards.append(result)
        start = checked.get(shard_id)
        if tail_at is None and not tail_done:
            start = None  # the tail applied nothing of it yet: every record from its start is unread
        elif start is not None and _before(tail_at, start):
            start = tail_at  # the tail's position went back (a checkpoint replaced): list again from there
        if tail_done and start == tail_at:
            result.checked_to = start
            continue  # read to its end by the tail, and listed by an earlier check
        if start != tail_at and not _list(streams, state, result, start, tail_at, keys, max_pages):
            backlog.notes.append(f"shard {shard_id}: the keys changed before the tail's position {tail_at} were not "
                                 "all listed for the parity check (past the stream's retention, or more than "
                                 f"{max_pages} pages)")
            start = tail_at
        if start == tail_at and not tail_done:
            if not _list(streams, state, result, start, tail_at, keys, max_pages, counting=True):
                backlog.problems.append(f"shard {shard_id}: the tail's position {tail_at} is past the stream's "
                                        "retention; the records after it are lost")
    backlog.changed_keys = list(keys.values())
    return backlog


def _list(streams: Any, state: TailState, result: ShardBacklog, start: str | None, tail_at: str | None,
          keys: dict[str, dict[str, Any]], max_pages: int, counting: bool = False) -> bool:
    """Read the shard after ``start``; False if the stream no longer holds ``start`` or, when not ``counting`` (still
    listing what the tail applied), the applied part is longer than ``max_pages``."""
    try:
        iterator = _position(streams, state.stream_arn, result.shard, start)
    except Exception as error:
        if _code(error) == "TrimmedDataAccessException":
            return False
        raise
    result.checked_to = start
    return _read_shard(streams, iterator, state, result, tail_at, keys, max_pages, counting)


def _read_shard(streams: Any, iterator: str | None, state: TailState, result: ShardBacklog, tail_at: str | None,
                keys: dict[str, dict[str, Any]], max_pages: int, counting: bool) -> bool:
    pages = empty = 0
    applied = True
    while iterator and empty < TIP_EMPTY_PAGES:
        if pages >= max_pages:
            if applied and not counting:
                return False  # still in what the tail applied: the caller counts from the tail's position instead
            result.capped = True
            return True
        page = streams.get_records(ShardIterator=iterator, Limit=PAGE_LIMIT)
        pages += 1
        records = page.get("Records", [])
        empty = 0 if records else empty + 1
        for record in records:
            change = to_change(record)
            result.newest_us = change.time_us
            applied = result.tail_done or (tail_at is not None and not _before(tail_at, change.sequence))
            if applied:
                result.checked_to = change.sequence
            if change.time_us < state.start_us:
                continue  # before the tail's start: the earlier phases hold it, the tail skips it
            if applied:
                exported = to_export_json(change.keys)
                keys.setdefault(json.dumps(exported, sort_keys=True), exported)
            else:
                result.unread += 1
                if result.oldest_unread_us is None:
                    result.oldest_unread_us = change.time_us
        iterator = page.get("NextShardIterator")
    return True
