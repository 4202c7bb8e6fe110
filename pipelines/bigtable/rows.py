"""The rollback's source: Bigtable rows in key order, range by range, from a row key on (to resume), as `Cell`s.

:class:`RowSource` is a :class:`~..source.Source` (kind "bigtable rows"): its pieces are key ranges
(`pieces`: the table, or the part of it between `--start` and `--end`, split at the keys Bigtable
samples), its position in a piece is the last row key committed, and `rows` reads one range from
just after such a key, so that a resumed rollback starts after the last row whose items are in
DynamoDB. Its items are the rows decoded with the spec's own decoder (`mappers.decode`). With
`since_us` only rows holding a cell written at or after that time are read, and then whole: a
timestamp-range filter with one cell per row and values stripped lists their keys, then the rows are
read by key (a filter on the rows' own read would return only the newer cells, and an item is rebuilt
from all of its cells).

Only the data client, no Beam at import: a rollback's worker processes import this module, and each
would pay for importing Beam; `read` (the Beam graph) imports it when a graph is built.
"""

from __future__ import annotations

import base64
import random
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ...mappers.decode import Decoder
from ...mappers.gc import GcView
from ...mappers.results import Cell
from ..source import Source, SourceRead, counted
from .target import describe_target, probe_target

if TYPE_CHECKING:
    from ...mappers.spec import MappingSpec, TargetSpec

KEYS_PER_LOOKUP = 500
MAX_RANGES = 32
"""At most this many ranges: each is one ReadRows call begun (and one entry of the checkpoint), and Bigtable (the
emulator even more) samples keys far more often than a rollback needs places to resume from."""


def _open(target: TargetSpec) -> tuple[Any, Any]:
    """(data client, table) of the target."""
    from google.cloud.bigtable.data import BigtableDataClient

    client = BigtableDataClient(project=target.project)
    return client, client.get_table(target.instance, target.table, app_profile_id=target.app_profile)


def ranges(target: TargetSpec, start: bytes = b"", end: bytes = b"") -> list[tuple[bytes, bytes]]:
    """[start, end) split at the table's sampled keys (b"" open-ended; at most MAX_RANGES, evenly picked among
    them), in key order."""
    client, table = _open(target)
    with client:
        splits = sorted({key for key, _offset in table.sample_row_keys() if key})
    inside = [key for key in splits if key > start and (not end or key < end)]
    if len(inside) >= MAX_RANGES:
        step = len(inside) / MAX_RANGES
        inside = [inside[int(step * (number + 1))] for number in range(MAX_RANGES - 1)]
    bounds = [start, *inside, end]
    return list(zip(bounds[:-1], bounds[1:]))


class RowSource(Source):
    """The rows of the spec's Bigtable table as items, key range by key range, optionally only those touched since a
    time. One data client, opened on first use; close it (or `with`)."""

    kind = "bigtable rows"
    pieces_name = "key ranges"
    positions = True

    def __init__(self, spec: MappingSpec, *, since_us: int | None = None, latest_only: bool = False,
                 types: dict[str, str] | None = None, start: bytes = b"", end: bytes = b"",
                 key_ranges: list[tuple[bytes, bytes]] | None = None) -> None:
        self.spec, self.target = spec, spec.target
        self.since_us, self.latest_only, self.types = since_us, latest_only, dict(types or {})
        self.start, self.end = start, end
        # A resumed read must split the table as the first attempt did: Bigtable's samples move as the table
        # changes and compacts, and a saved position belongs to its key range.
        self.key_ranges = list(key_ranges) if key_ranges is not None else None
        self._opened: tuple[Any, Any] | None = None
        self._decoder: Decoder | None = None
        # A counter is the sum of its column's cells (one per timestamp): read whole, and the newest version
        # of other columns picked here (no ReadRows filter says "one version, but not in these families").
        self._counters = frozenset(name for name, family in self.target.families.items()
                                   if family.aggregate) if latest_only else frozenset()
        # The cells the families' GC rules condemn, which Bigtable may still return (mappers.gc.GcView), as of the
        # start of this read (a resumed one starts anew).
        self._gc = GcView(self.target.families, time.time_ns() // 1000)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_opened": None, "_decoder": None}  # a copy opens its own client

    @property
    def _table(self) -> Any:
        if self._opened is None:
            self._opened = _open(self.target)
        return self._opened[1]

    @property
    def decoder(self) -> Decoder:
        """The spec's decoder (rows into items), with ``types`` for attributes that live only in keys."""
        if self._decoder is None:
            from ..dynamodb.wire_json import loader_for, loads  # json.loads's values and errors, faster

            self._decoder = Decoder(self.spec, self.types, json_loads=loads, json_loader_for=loader_for)
        return self._decoder

    def name(self) -> str:
        return describe_target(self.target)

    def check(self, pipeline_options: Any = None) -> int | None:
        probe_target(self.target, must_exist=True)  # a dead Bigtable or a missing table fails here, in seconds
        return None

    def pieces(self) -> list[tuple[bytes, bytes]]:
        """The key ranges to read: ``key_ranges`` when given (a resumed read's, as first saved), else ``ranges`` of
        the table between ``start`` and ``end`` from Bigtable's samples now."""
        if self.key_ranges is not None:
            return list(self.key_ranges)
        return ranges(self.target, self.start, self.end)

    def choose_pieces(self, description: Any) -> int:
        return len(self.pieces())

    def entities(self, row_key: bytes, cells: list[Cell]) -> list[tuple[str, dict]]:
        """(entity, item) of every item folded into the row, with the attributes its entity's match fixes; raises
        the decoder's errors (DecodeError, AttributeValueError, ValueError, UnicodeDecodeError)."""
        decoder = self.decoder
        found = decoder.decode_entities(row_key, cells)
        for entity, item in found:  # an attribute the match fixes comes back from the match, even a dropped one
            fixed = decoder.by_name[entity].fixed
            if fixed:
                for name, value in fixed.items():
                    item.setdefault(name, value)
        return found

    def _decodable(self, key_range: tuple[bytes, bytes], after: bytes | None = None) -> Iterator[dict]:
        for row_key, cells in self.rows(key_range, after):
            try:
                found = self.entities(row_key, cells)
            except (ValueError, UnicodeDecodeError):  # DecodeError and AttributeValueError are ValueErrors too
                continue  # a sample or a read of items skips it; the rollback dead-letters it (it reads rows)
            for _entity, item in found:
                yield item

    def items(self, limit: int | None = None) -> list[dict]:
        """Items of the rows in key order (rows that cannot be decoded left out), up to ``limit``."""
        out: list[dict] = []
        for item in self._decodable((self.start, self.end)):
            out.append(item)
            if limit is not None and len(out) >= limit:
                break
        return out

    def random_sample(self, n: int, *, item_count: int = 0, seed: int | None = None) -> list[dict]:
        """The items of the first rows of key ranges picked at random, up to ``n``."""
        pieces = self.pieces()
        random.Random(seed).shuffle(pieces)
        out: list[dict] = []
        for key_range in pieces:
            for item in self._decodable(key_range):
                out.append(item)
                if len(out) >= n:
                    return out
        return out

    def read(self, p: Any, *, total_segments: int = 1, completed: frozenset[int] = frozenset(),
             mark_done: bool = False, segments_in_flight: int | None = None,
             start_keys: dict[int, dict[str, Any]] | None = None, progress_dir: str | None = None,
             count_read: bool = True) -> SourceRead:
        """The key ranges of ``pieces`` not ``completed`` (``total_segments`` is not used: Bigtable's samples fix
        them), each from just after the row ``start_keys[i]["after"]`` (base64) where given."""
        import apache_beam as beam

        pieces = self.pieces()
        todo = [(index, key_range, (start_keys or {}).get(index, {}).get("after"))
                for index, key_range in enumerate(pieces) if index not in completed]
        read = (p | "KeyRanges" >> beam.Create(todo)
                | "ReadRows" >> beam.FlatMap(_read_piece, self, mark_done))
        if count_read:
            read = read | "CountRead" >> beam.Map(_count_batches)
        return SourceRead(read)

    def rows(self, key_range: tuple[bytes, bytes], after: bytes | None = None) -> Iterator[tuple[bytes, list[Cell]]]:
        """(row key, cells) of the range in key order, from just after ``after`` (None: from the range's start)."""
        if self.since_us is None:
            yield from self._read(key_range, after, self._newest_filter())
            return
        from google.cloud.bigtable.data.row_filters import (CellsRowLimitFilter, RowFilterChain,
                                                            StripValueTransformerFilter,
                                                            TimestampRangeFilter)

        touched = RowFilterChain([TimestampRangeFilter(start=_datetime(self.since_us)),
                                  CellsRowLimitFilter(1), StripValueTransformerFilter(True)])
        keys: list[bytes] = []
        for row_key, _cells in self._read(key_range, after, touched):
            keys.append(row_key)
            if len(keys) == KEYS_PER_LOOKUP:
                yield from self._whole(keys)
                keys = []
        yield from self._whole(keys)

    def _whole(self, keys: list[bytes]) -> Iterator[tuple[bytes, list[Cell]]]:
        if not keys:
            return
        found = dict(self._read_keys(keys))
        for key in sorted(found):
            yield key, found[key]

    def _newest_filter(self) -> Any:
        if not self.latest_only or self._counters:
            return None
        from google.cloud.bigtable.data.row_filters import CellsColumnLimitFilter

        return CellsColumnLimitFilter(1)

    def _read_keys(self, keys: list[bytes]) -> Iterator[tuple[bytes, list[Cell]]]:
        from google.cloud.bigtable.data import ReadRowsQuery

        for row in self._table.read_rows_stream(ReadRowsQuery(row_keys=list[str | bytes](keys), row_filter=self._newest_filter())):
            yield row.row_key, self._cells(row)

    def _read(self, key_range: tuple[bytes, bytes], after: bytes | None, row_filter: Any) -> Iterator[tuple[bytes, list[Cell]]]:
        from .chunks import read_range

        self._table  # noqa: B018 - opens the client
        assert self._opened is not None
        client, table = self._opened
        for row_key, cells in read_range(client, table, key_range, after, row_filter):
            yield row_key, self._visible(cells)

    def close(self) -> None:
        if self._opened is not None:
            self._opened[0].close()
            self._opened = None

    def __enter__(self) -> RowSource:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _cells(self, row: Any) -> list[Cell]:
        return self._visible([Cell(c.family, c.qualifier, c.timestamp_micros, c.value) for c in row.cells])

    def _visible(self, cells: list[Cell]) -> list[Cell]:
        """The cells a reader sees once GC has run, each column's newest only where ``latest_only`` (counters
        whole)."""
        if self._gc:
            cells = self._gc(cells)
        return self._newest(cells) if self._counters else cells

    def _newest(self, cells: list[Cell]) -> list[Cell]:
        """Each column's newest cell, but every cell of a counter (they add up)."""
        seen: set[tuple[str, bytes]] = set()
        newest = []
        for cell in sorted(cells, key=lambda c: (c.family, c.qualifier, -c.timestamp_micros)):
            if cell.family in self._counters or (cell.family, cell.qualifier) not in seen:
                newest.append(cell)
                seen.add((cell.family, cell.qualifier))
        return newest


def _datetime(micros: int) -> Any:
    from datetime import datetime, timedelta, timezone

    return datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(microseconds=micros)


def _read_piece(piece: tuple[int, tuple[bytes, bytes], str | None], source: RowSource, mark_done: bool) -> Iterator[Any]:
    """One key range's items in batches (after the row ``after``, base64, when given), then its done marker."""
    from ..run.batches import BATCH_ITEMS, Batch, SegmentDone

    index, key_range, after = piece
    batch: list[dict] = []
    with source:
        for item in source._decodable(key_range, None if after is None else base64.b64decode(after)):
            batch.append(item)
            if len(batch) >= BATCH_ITEMS:
                yield Batch(batch)
                batch = []
    if batch:
        yield Batch(batch)
    if mark_done:
        yield SegmentDone(index)


def _count_batches(element: Any) -> Any:
    return counted(element) if isinstance(element, list) else element
