"""What a change source holds that the tail has not applied yet, read through the source, without moving anything.

``cutover-status`` must not judge the tail by what the tail says about itself (a tail far behind, or
stopped, saved its last lag when it last saved): it reads the tail's change source itself (the table's
stream, or whatever :mod:`~ddb2bt.pipelines.change_sources` gave the tail) through the
:class:`~ddb2bt.pipelines.change_source.ChangeSource` interface — its pieces, and each piece's pages from a
saved position — and never writes the tail's checkpoint (``tail.json``). Per piece (a stream's shard) it
counts the changes after the tail's saved position (the *unread* ones, with the time of the oldest), and
lists the keys of the changes between the last status check's own position and the tail's (the items
changed since the last check, which the parity check compares).

A piece is read to its end (a closed shard, a page marked ``done``) or to its current tip (an open
shard: :data:`TIP_EMPTY_PAGES` empty pages in a row, as the tail follows them, or a read that gives no
page). Past :data:`MAX_PAGES_PER_SHARD` pages the count is a lower bound (``capped``), never READY. A
source that is not the one the tail followed, a piece the tail had not finished that the source no longer
lists, and a position the source no longer holds make the count impossible (``problems``). Changes from
before the tail's start (the timeline's end minus the start margin) are not counted: the tail skips them
too, they are in what the earlier phases applied.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ...mappers.attrvalue import to_export_json
from ...mappers.errors import Ddb2btError, UsageError
from ..change_source import ChangePage, ChangeSource, plan_pieces
from ..dynamodb.stream import StreamChanges
from .tail import EMPTY_PAGES_PER_TURN, PAGE_LIMIT, TailState

TIP_EMPTY_PAGES = EMPTY_PAGES_PER_TURN
MAX_PAGES_PER_SHARD = 500
"""At most this many pages a piece per read; past it the count is a lower bound (``capped``) and never READY."""


@dataclass
class ShardBacklog:
    shard: str
    unread: int = 0
    oldest_unread_us: int | None = None
    """The time of the oldest change the tail has not applied."""
    newest_us: int | None = None
    """The newest change seen in this piece (applied or not)."""
    tail_done: bool = False
    capped: bool = False
    """Stopped after MAX_PAGES_PER_SHARD pages: ``unread`` is a lower bound."""
    checked_to: str | None = None
    """The tail's position this check listed the changed keys up to: where the next check starts listing."""


@dataclass
class StreamBacklog:
    shards: list[ShardBacklog] = field(default_factory=list)
    changed_keys: list[dict[str, Any]] = field(default_factory=list)
    """Keys (export JSON) of the items whose changes the tail applied since the last check, each once."""
    removed: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Of those, the items whose last change listed deleted them: their old image, by the JSON of their key (the parity
    check looks for its cells, which must be gone)."""
    problems: list[str] = field(default_factory=list)
    """What makes the count impossible (another source, a piece lost past the retention): never READY."""
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


def read_backlog(source: ChangeSource | Any, state: TailState, checked: dict[str, str], *,
                 max_pages: int = MAX_PAGES_PER_SHARD) -> StreamBacklog:
    """Count, per piece of ``source``, the changes after the tail's saved position; list the keys changed since
    ``checked``.

    ``source``: the change source the tail follows, or a ``dynamodbstreams`` client (the stream the tail's
    checkpoint names, read with :data:`PAGE_LIMIT` records a page). ``checked`` maps piece ids to the tail's
    position an earlier check listed up to (its ``checked_to``); a piece it does not name is listed from its
    start. Nothing is written anywhere.
    """
    backlog = StreamBacklog()
    try:
        if isinstance(source, ChangeSource):
            window = source.window()
            if window.id != state.stream_arn:
                backlog.problems.append(f"the tail followed {state.stream_arn}, and {source.name()} is now "
                                        f"{window.id}: what the tail has not applied cannot be counted")
                return backlog
        else:
            source = StreamChanges.reading(source, state.stream_arn, page_limit=PAGE_LIMIT)
        listed = source.pieces()
    except UsageError as error:
        backlog.problems.append(f"{source.name()} cannot be read: {error.one_line()}")
        return backlog
    for piece_id in plan_pieces(listed, state.shards).lost:
        lost = source.lost(piece_id)
        said = lost.one_line() if isinstance(lost, Ddb2btError) else str(lost)
        backlog.problems.append(f"{piece_id}: its unread {source.changes_name} cannot be counted: {said}")
    keys: dict[str, dict[str, Any]] = {}
    for piece in listed:
        saved = state.shards.get(piece.id)
        tail_at, tail_done = (saved.sequence, saved.done) if saved is not None else (None, False)
        result = ShardBacklog(piece.id, tail_done=tail_done, checked_to=tail_at)
        backlog.shards.append(result)
        start = checked.get(piece.id)
        if tail_at is not None and start != tail_at and not _list(source, state, result, start, tail_at, keys,
                                                                  backlog.removed,
                                                                  max_pages):
            backlog.notes.append(f"{piece.id}: the keys changed before the tail's position {tail_at} were not all "
                                 "listed for the parity check (past the source's retention, more than "
                                 f"{max_pages} pages, or a position the source reads no more)")
        if not tail_done:
            try:
                _count(source, state, result, tail_at, max_pages)
            except UsageError as error:
                backlog.problems.append(f"{piece.id}: the {source.changes_name} after the tail's position "
                                        f"{tail_at} cannot be read ({error.one_line()}): they may be lost")
    backlog.changed_keys = list(keys.values())
    return backlog


def _to_tip(source: ChangeSource, piece: str, position: str | None) -> Iterator[ChangePage]:
    """The pages of ``piece`` after ``position``, turn after turn, to its end or its current tip."""
    empty = 0
    while True:
        turn = 0
        for page in source.pages(piece, position):
            turn += 1
            yield page
            position = page.position
            empty = 0 if page.changes else empty + 1
            if page.done or empty >= TIP_EMPTY_PAGES:
                return
        if not turn:
            return


def _list(source: ChangeSource, state: TailState, result: ShardBacklog, start: str | None, tail_at: str,
          keys: dict[str, dict[str, Any]], removed: dict[str, dict[str, Any]], max_pages: int) -> bool:
    """Add the keys of the changes after ``start`` up to the tail's position (and, in ``removed``, the old image of
    those whose last change is a delete); False if they were not all read (a position the source no longer holds,
    more than ``max_pages`` pages, or the tail's position never met)."""
    try:
        for number, page in enumerate(_to_tip(source, result.shard, start), start=1):
            for at, change in enumerate(page.changes, start=1):
                result.newest_us = change.time_us
                if change.time_us >= state.start_us:  # before the tail's start: the earlier phases hold it
                    exported = to_export_json(change.keys)
                    text = json.dumps(exported, sort_keys=True)
                    keys.setdefault(text, exported)
                    if change.new is None and change.old is not None:
                        removed[text] = change.old
                    else:
                        removed.pop(text, None)
                if change.sequence == tail_at or (at == len(page.changes) and page.position == tail_at):
                    return True
            if number >= max_pages:
                return False
    except UsageError:
        return False
    return False


def _count(source: ChangeSource, state: TailState, result: ShardBacklog, tail_at: str | None,
           max_pages: int) -> None:
    """Count the changes after the tail's position, to the piece's end or tip (``capped`` past ``max_pages``)."""
    for number, page in enumerate(_to_tip(source, result.shard, tail_at), start=1):
        for change in page.changes:
            result.newest_us = change.time_us
            if change.time_us < state.start_us:
                continue  # before the tail's start: the earlier phases hold it, the tail skips it
            result.unread += 1
            if result.oldest_unread_us is None or change.time_us < result.oldest_unread_us:
                result.oldest_unread_us = change.time_us
        if number >= max_pages:
            result.capped = not page.done  # more may follow: a lower bound
            return
