"""Compare what a spec maps the source to with what Bigtable holds, cell by cell and item by item: pure, no client.

The unit is a *row group*: the source items that map to one row key, compared together against
that row as read from Bigtable (`Comparer.compare`). Each expected cell is counted before
de-duplication, so two items (or two sources of one item) producing the same
`(row, family, qualifier, timestamp)` are a `collision`, never silently one cell. Each item is
also read back through the spec's decoder (`mappers.decode`) from the cells the row holds for
it, and compared with the source item attribute by attribute, declared losses aside.

Cells of the row that no item of the group produces may belong to items of another group of
the same row (a row folded from items far apart in the source): the group reports them as a
`Candidate`, and `resolve_row` decides over every candidate of a row which cells are extra and
which cells several groups claim (collisions across groups).

Garbage collection is allowed for: a cell that its family's `max_versions` (counted over the
cells seen in that column) or `max_age` may already have removed is neither missing nor extra.

The records (differences, candidates) are in `mappers/validate/records.py`, the decoder's side in
`mappers/validate/decode.py`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from datetime import timedelta
from typing import Any, NamedTuple

from ..attrvalue import AttributeValueError, key_text, to_export_json
from ..decode import Decoder, DecodeError
from ..results import Cell, MappedRow
from ..spec import GcPolicy, MappingSpec
from ..templates import Placeholder
from ..timestamps import parse_timestamp
from .decode import DecoderCache
from .records import (CELL_KINDS, KINDS, Candidate, CellKey, Difference, bytes_from_json, bytes_json,
                               count_kinds, describe_counts)

__all__ = ["CELL_KINDS", "KINDS", "Candidate", "CellKey", "Comparer", "Difference", "GroupResult", "bytes_from_json",
           "bytes_json", "collectable", "count_kinds", "describe_counts", "resolve_row", "spec_times",
           "times_from_items"]

Item = dict
Member = tuple[MappedRow, Item]
"""One item of a row group and the row it maps to."""


def _python_same_cells(found: list[Cell], expected: tuple[Cell, ...]) -> bool:
    return set(found) == set(expected)  # cells are (family, qualifier, ts, value)


_compiled_same_cells: Callable[[list[Cell], tuple[Cell, ...]], bool | None] | None
try:
    from ._cells import same_cells as _compiled_same_cells
except ImportError:  # not built (no C compiler where the package was installed): the sets, same answer
    _compiled_same_cells = None


def same_cells(found: list[Cell], expected: tuple[Cell, ...]) -> bool:
    """Whether ``found`` and ``expected`` hold the same cells (as sets). The compiled module ``_cells.c`` compares
    them item by item where the cells are plain (str, bytes and ints: every row read back and every mapped row),
    which builds and hashes no set: the two sets were a third of the compare step (docs/PERFORMANCE.md,
    "Validate round 10"); anything else, and every install without a C compiler, compares the sets."""
    if _compiled_same_cells is not None:
        same = _compiled_same_cells(found, expected)
        if same is not None:
            return same
    return _python_same_cells(found, expected)


class GroupResult(NamedTuple):
    """What comparing one row group found."""

    differences: list[Difference]
    fixes: list[Cell]
    """Cells to write so that the row holds what the group maps to (missing or different, not collided)."""
    candidate: Candidate | None
    """Set when the row holds cells the group does not produce."""
    cells_expected: int
    """Counted before de-duplication: a collision counts every producer."""
    cells_matched: int
    row_found: bool
    not_decoded: int = 0
    """Items the decoder could not read back because of losses their entity declares: compared cell by cell only."""
    decoded: int = 0
    """Items read back through the decoder (see `Comparer`'s decode_every)."""


# --------------------------------------------------------------------------- garbage collection


def collectable(key: CellKey, column_times: Iterable[int], policy: GcPolicy | None, now_us: int) -> bool:
    """Whether GC may already have dropped this cell: older than max_age, or not among the newest max_versions."""
    if policy is None:
        return False
    _, _, ts = key
    too_old = policy.max_age is not None and ts < now_us - policy.max_age // timedelta(microseconds=1)
    too_many = policy.max_versions is not None and sum(1 for t in column_times if t > ts) >= policy.max_versions
    if policy.max_age is not None and policy.max_versions is not None and policy.combine == "intersection":
        return too_old and too_many
    return too_old or too_many


def _column_times(keys: Iterable[CellKey]) -> dict[tuple[str, bytes], list[int]]:
    times: dict[tuple[str, bytes], list[int]] = defaultdict(list)
    for family, qualifier, ts in keys:
        times[(family, qualifier)].append(ts)
    return times


# --------------------------------------------------------------------------- what a cell's timestamp tells


def times_from_items(spec: MappingSpec) -> bool:
    """Whether some cell's timestamp comes from its item (an attribute or a template), which can tell a change
    after the snapshot; cells at migration_time, a fixed time or the run's "now" cannot."""
    stamps = [entity.timestamp for entity in spec.entities] + [
        column.timestamp for entity in spec.entities for column in entity.columns]
    return any(stamp is not None and stamp.fixed is None for stamp in stamps)


def spec_times(spec: MappingSpec, now_us: int) -> frozenset[int]:
    """The timestamps cells take from the spec, not from their item: the run's "now", ``migration_time``, fixed
    times. Such a timestamp says nothing of when an item was written, so it never marks a change after a snapshot."""
    times = {now_us}
    if spec.migration_time is not None:
        times.add(int(spec.migration_time.timestamp() * 1000) * 1000)
    stamps = [entity.timestamp for entity in spec.entities] + [
        column.timestamp for entity in spec.entities for column in entity.columns]
    times.update(parse_timestamp(stamp.fixed.isoformat(), "iso8601") for stamp in stamps
                 if stamp is not None and stamp.fixed is not None)
    return frozenset(times)


# --------------------------------------------------------------------------- one row group


class Comparer:
    """Compares row groups for one spec: GC rules, "now", how items are named, and the decoder.

    `key_names` are the source's key attributes, partition key first (the item key in every
    record). `decode_every`: which items go through the decoder: every item whose cells differ,
    and of the items whose cells all match (which read back as the spec maps them: what is checked
    there is the spec's round trip, not the target), one in ``decode_every``; 1 is every item, 0 none.
    `after_us`: the validated snapshot's time (the watermark); see `changed_after`.
    """

    def __init__(self, spec: MappingSpec, *, now_us: int, key_names: tuple[str, ...] = (), decode_every: int = 1,
                 after_us: int | None = None):
        self.families: Mapping[str, GcPolicy | None] = spec.target.families
        self.now_us, self.key_names, self.after_us = now_us, key_names, after_us
        self._untold = spec_times(spec, now_us)
        """Timestamps that are no write time (see `spec_times`): never a change after the snapshot."""
        self.decoders = DecoderCache(spec) if decode_every else None
        self.decode_every, self._matching = decode_every, 0
        entities = (self.decoders.probe if self.decoders else Decoder(spec)).entities
        self._readers = [(entity, _literal_prefix(entity), _literals(entity)) for entity in entities]
        """Each entity's row key reader, the bytes every row key of it starts with and the other literal bytes every
        row key of it holds (cheap first tests: reading a row key of another entity raises, which costs more)."""
        partition = key_names[0] if key_names else None
        self._revealing = {entity.name for entity in entities if partition in entity.key.attributes
                           and partition not in entity.key.lossy and not entity.key.problem}
        """Entities whose row keys give the partition key back exactly (templates are injective)."""
        self._never_whole = _never_whole(entities, partition)
        """Entities whose rows are never whole rows, settled once per pair of templates (see `_never_whole`)."""

    def whole_row(self, row_key: bytes, members: list[Member]) -> bool:
        """Whether no item outside one partition can map to this row, so a scan gives all its items together.

        True when the group's items share one partition key value and every entity whose row key
        template reads this row key gives that value back from it (exactly: no lossy transform).
        """
        if not self.key_names:
            return False
        never_whole = self._never_whole
        partition = self.key_names[0]
        if len(members) == 1:  # most groups: the same answers as below, without the sets
            row, item = members[0]
            if row.entity in never_whole:
                return False  # what the loop below finds for this row key, settled from the templates alone
            try:
                text = key_text(item[partition])
            except (KeyError, AttributeValueError):
                return False
            maker = row.entity if row.entity in self._revealing else None
        else:
            if never_whole and any(row.entity in never_whole for row, _item in members):
                return False
            try:
                texts = {key_text(item[partition]) for _row, item in members}
            except (KeyError, AttributeValueError):
                return False
            if len(texts) != 1:
                return False
            (text,) = texts
            made_by = {row.entity for row, _item in members}
            maker = next(iter(made_by)) if len(made_by) == 1 and made_by <= self._revealing else None
        for entity, prefix, literals in self._readers:
            if entity.name == maker or not row_key.startswith(prefix):
                continue  # the one entity that made it, which gives the value back; or never this entity's row key
            if literals and not all(literal in row_key for literal in literals):
                continue
            try:
                revealed = entity.key_values(row_key)
            except (DecodeError, UnicodeDecodeError, ValueError):
                continue  # this entity's rows never have this key
            reader = entity.key
            if reader.problem or partition in reader.lossy or revealed.get(partition) != text:
                return False
        return True

    def item_key(self, item: Item) -> Any:
        if not self.key_names:
            return None
        return {name: to_export_json(item[name]) for name in self.key_names if name in item}

    def compare(self, row_key: bytes, members: list[Member], actual: Iterable[Cell] | None, *,
                extras: bool = True, scan_order: bool = False, missing_claims: bool = True) -> GroupResult:
        """The group's differences against ``actual`` (the row's cells; None: no such row).

        ``extras`` False (a sample: other items of the row were not read) leaves unclaimed cells
        alone. Otherwise a candidate for `resolve_row` says what the group claims when the row holds
        cells the group does not produce; when it does not, but items elsewhere in the source may
        map to the row (not ``scan_order`` (a live scan) with `whole_row`), a short one says that
        the group owns the row. A missing row's claims go there too (``missing_claims``: with
        --repair, whose rewrite another group of the row may read), unless the group is whole.
        """
        if len(members) == 1 and actual is not None:
            same = self._same(row_key, members[0], actual, extras=extras, scan_order=scan_order)
            if same is not None:
                return same
        producers: dict[CellKey, list[tuple[bytes, int]]] = {}
        cells_expected = 0
        for index, (row, _item) in enumerate(members):
            cells_expected += len(row.cells)
            for cell in row.cells:
                producers.setdefault((cell.family, cell.qualifier, cell.timestamp_micros), []).append((cell.value, index))
        keys = _LazyKeys(self.item_key, members)
        have = {} if actual is None else {(c.family, c.qualifier, c.timestamp_micros): c.value for c in actual}
        differences = [self._collision(row_key, key, made, keys, have.get(key))
                       for key, made in producers.items() if len(made) > 1]
        changed = self.changed_after(members, actual)
        if actual is None:
            differences += [Difference("missing_row", row_key, keys[i], after_snapshot=i in changed)
                            for i in range(len(members))]
            fixes = [Cell(*key, made[0][0]) for key, made in producers.items()
                     if len(made) == 1 and made[0][1] not in changed]
            shared = extras and missing_claims and not (scan_order and self.whole_row(row_key, members))
            return GroupResult(differences, fixes, self._candidate(row_key, producers, keys, (), have) if shared
                               else None, cells_expected, 0, False)

        times: dict[tuple[str, bytes], list[int]] = {}

        def gc_may_drop(key: CellKey) -> bool:
            if self.families.get(key[0]) is None:
                return False
            if not times:
                times.update(_column_times(set(producers) | set(have)))
            return collectable(key, times[key[:2]], self.families[key[0]], self.now_us)

        fixes, matched, gone = [], 0, set()
        for key, made in producers.items():
            if len(made) > 1:
                continue  # a collision: reported above; which value is right is the spec's to say
            value, index = made[0]
            found = have.get(key)
            if found is None:
                if gc_may_drop(key):
                    matched += 1  # gone by the family's GC rule, as the spec asked
                    gone.add(key)
                elif index in changed:  # not a difference: the snapshot predates it, a catch-up or tail applies it
                    differences.append(Difference("missing_cell", row_key, keys[index], *key, value, None,
                                                  after_snapshot=True))
                else:
                    differences.append(Difference("missing_cell", row_key, keys[index], *key, value, None))
                    fixes.append(Cell(*key, value))
            elif found != value:
                differences.append(Difference("different_value", row_key, keys[index], *key, value, found,
                                              after_snapshot=index in changed))
                if index not in changed:
                    fixes.append(Cell(*key, value))
            else:
                matched += 1
        not_decoded = decoded = 0
        if self.decoders is not None:
            differing = {index for key, made in producers.items()
                         if len(made) > 1 or key not in have or have[key] != made[0][0] for _, index in made}
            for index, (row, item) in enumerate(members):
                if index in changed:
                    continue  # its cells' differences are reported as changes after the snapshot already
                if index not in differing:
                    self._matching += 1
                    if self._matching % self.decode_every:
                        continue
                own = [Cell(c.family, c.qualifier, c.timestamp_micros, have[k] if k in have else c.value)
                       for c in row.cells if (k := (c.family, c.qualifier, c.timestamp_micros)) in have or k in gone]
                read_back = self.decoders.differences(item, row.entity, row_key, own)
                if read_back is None:
                    not_decoded += 1
                    continue
                decoded += 1
                differences += [Difference("different_attribute", row_key, keys[index], attribute=name,
                                           expected=want, found=got) for name, want, got in read_back]
        candidate = None
        if extras:
            unclaimed = tuple(Cell(*key, value) for key, value in have.items()
                              if key not in producers and not gc_may_drop(key))
            if unclaimed:
                candidate = self._candidate(row_key, producers, keys, unclaimed, have)
            elif not (scan_order and self.whole_row(row_key, members)):  # others may write here: say we own it
                candidate = Candidate(row_key, owns_all=True, owner=keys[0], cells=len(have))
        return GroupResult(differences, fixes, candidate, cells_expected, matched, True, not_decoded, decoded)

    def changed_after(self, members: list[Member], actual: Iterable[Cell] | None) -> frozenset[int]:
        """The members that changed after the snapshot (``after_us``), as far as cell timestamps tell.

        A member changed when a cell it maps to is newer than the snapshot (its timestamp comes from
        the item, e.g. an ``UpdatedAt`` attribute, and says the item was written since), or when the
        row holds a version newer than the snapshot in a column the member writes (a catch-up or
        tail applied a later image). Cells at a time of the spec's (the run's "now", ``migration_time``,
        a fixed time: `spec_times`) tell nothing, and neither do newer versions in their columns: an
        expected cell at the validation's own "now" is no change of the item's.
        """
        after, untold = self.after_us, self._untold
        if after is None:
            return frozenset()
        newer = {(c.family, c.qualifier) for c in actual or () if c.timestamp_micros > after}
        return frozenset(index for index, (row, _item) in enumerate(members)
                         if any(c.timestamp_micros not in untold
                                and (c.timestamp_micros > after or (c.family, c.qualifier) in newer)
                                for c in row.cells))

    def plain_match(self, members: list[Member], actual: list[Cell] | None) -> int:
        """The cells of a group with no difference to report, counted; -1 when it needs `compare`.

        No difference: one item, whose row holds exactly its cells, and whose turn to be read back
        through the decoder (one in ``decode_every`` of the matching items) has not come. `compare`
        finds nothing else for such a group, through more objects; its owner line is `owner_line`'s.
        """
        if actual is None or len(members) != 1:
            return -1
        cells = members[0][0].cells
        if len(actual) != len(cells) or not same_cells(actual, cells):
            return -1
        if self.decoders is not None and (self._matching + 1) % self.decode_every == 0:
            return -1  # this one is read back: `compare` counts it and does so
        self._matching += self.decoders is not None
        return len(cells)

    def _same(self, row_key: bytes, member: Member, actual: Iterable[Cell], *, extras: bool,
              scan_order: bool) -> GroupResult | None:
        """The common case fast: one item, and its row holds exactly its cells (else None: the general path)."""
        row, item = member
        found = actual if isinstance(actual, list) else list(actual)
        if len(found) != len(row.cells) or not same_cells(found, row.cells):
            return None
        decoded = not_decoded = 0
        differences: list[Difference] = []
        if self.decoders is not None:
            self._matching += 1
            if self._matching % self.decode_every == 0:
                read_back = self.decoders.differences(item, row.entity, row_key, list(row.cells))
                if read_back is None:
                    not_decoded = 1
                else:
                    decoded = 1
                    key = self.item_key(item) if read_back else None
                    differences = [Difference("different_attribute", row_key, key, attribute=name, expected=want,
                                              found=got) for name, want, got in read_back]
        candidate = self.owner_line(row_key, member, len(found), extras=extras, scan_order=scan_order)
        return GroupResult(differences, [], candidate, len(row.cells), len(row.cells), True, not_decoded, decoded)

    def owner_line(self, row_key: bytes, member: Member, cells: int, *, extras: bool,
                   scan_order: bool) -> Candidate | None:
        """The short candidate of a one-item group that produces every cell of its row (``cells``), unless nothing
        else can write there (a sample, or a whole row in scan order: see `whole_row`)."""
        if not self.owner_needed(row_key, member, extras=extras, scan_order=scan_order):
            return None
        return Candidate(row_key, owns_all=True, owner=self.item_key(member[1]), cells=cells)

    def owner_needed(self, row_key: bytes, member: Member, *, extras: bool, scan_order: bool) -> bool:
        """Whether `owner_line` gives a line (the caller may then write it without the Candidate)."""
        return extras and not (scan_order and self.whole_row(row_key, [member]))

    @staticmethod
    def _candidate(row_key: bytes, producers: dict[CellKey, list[tuple[bytes, int]]], keys: _LazyKeys,
                   unclaimed: tuple[Cell, ...], have: Mapping[CellKey, bytes]) -> Candidate:
        return Candidate(row_key, tuple((key, made[0][0], keys[made[0][1]], key in have)
                                        for key, made in producers.items()), unclaimed)

    @staticmethod
    def _collision(row_key: bytes, key: CellKey, made: list[tuple[bytes, int]], keys: _LazyKeys,
                   found: bytes | None) -> Difference:
        return Difference("collision", row_key, keys[made[0][1]], *key, [value for value, _ in made], found,
                          items=tuple(keys[index] for _, index in made))


class _LazyKeys:
    """Item keys of a group's members, built only for the members a record names (most rows have none)."""

    def __init__(self, item_key: Any, members: list[Member]):
        self._item_key, self._members = item_key, members
        self._keys: dict[int, Any] = {}

    def __getitem__(self, index: int) -> Any:
        if index not in self._keys:
            self._keys[index] = self._item_key(self._members[index][1])
        return self._keys[index]


def resolve_row(candidates: list[Candidate], after_us: int | None = None) -> tuple[list[Difference], list[Cell]]:
    """Over every candidate of one row: cells no group produces (extra, to delete) and cells several groups produce.

    An unclaimed cell in a column some group writes at another timestamp is an `extra_version`,
    else an `extra_cell`. A group that owns every cell of the row leaves nothing extra, and every
    cell another group finds there and claims too is a collision with it. With a snapshot time
    ``after_us``, an extra cell newer than it, or in a column some group writes at a time newer
    than it (the version the item had before it changed), is a change after the snapshot: marked
    so, and never deleted.
    """
    owners = [candidate for candidate in candidates if candidate.owns_all]
    claiming = [candidate for candidate in candidates if not candidate.owns_all]
    row_key = candidates[0].row_key
    claimed: dict[CellKey, dict[int, tuple[bytes, Any]]] = defaultdict(dict)
    for group, candidate in enumerate(claiming):
        for key, value, item_key, _held in candidate.claims:
            claimed[key].setdefault(group, (value, item_key))
    differences = [
        Difference("collision", row_key, producers[min(producers)][1], *key,
                   [value for value, _ in producers.values()], None,
                   items=tuple(item_key for _, item_key in producers.values()))
        for key, producers in claimed.items() if len(producers) > 1
    ]
    if owners:
        differences += [Difference("collision", row_key, item_key, *key, [value], None, items=(item_key, owners[0].owner))
                        for candidate in claiming for key, value, item_key, held in candidate.claims if held]
        if sum(1 for owner in owners if owner.cells) > 1:  # two groups, each producing every cell of the row
            differences.append(Difference("collision", row_key, owners[0].owner,
                                          items=tuple(owner.owner for owner in owners)))
        return differences, []
    columns: dict[tuple[str, bytes], Any] = {}
    for (family, qualifier, _ts), producers in claimed.items():
        columns.setdefault((family, qualifier), next(iter(producers.values()))[1])
    extra: dict[CellKey, Cell] = {}
    for candidate in claiming:
        for cell in candidate.unclaimed:
            key = (cell.family, cell.qualifier, cell.timestamp_micros)
            if key not in claimed:
                extra.setdefault(key, cell)
    newer = set() if after_us is None else {key[:2] for key in claimed if key[2] > after_us}
    deletions = []
    for key, cell in sorted(extra.items()):
        owner = columns.get(key[:2])
        kind = "extra_version" if (key[0], key[1]) in columns else "extra_cell"
        later = after_us is not None and (key[2] > after_us or key[:2] in newer)
        differences.append(Difference(kind, row_key, owner, *key, None, cell.value, after_snapshot=later))
        if not later:
            deletions.append(cell)
    return differences, deletions


def _literals(entity: Any) -> tuple[bytes, ...]:
    """The template's literal texts after its first piece: each is in every row key of the entity, verbatim (values
    are rendered between them; a salt only comes before them)."""
    return tuple(piece.encode() for piece in entity.key.pieces[1:] if isinstance(piece, str) and piece)


def _literal_prefix(entity: Any) -> bytes:
    """What every row key of the entity starts with: the template's leading text (nothing when salted)."""
    first = entity.key.pieces[0] if entity.key.pieces else ""
    return b"" if entity.spec.row_key.salt_buckets or not isinstance(first, str) else first.encode()


TOTAL_INVERSES = frozenset({"strip_prefix", "strip_suffix"})
"""Transforms whose inverse reads any text, never raises, and gives back a value the transform renders as that very
text (``strip_prefix('P')`` is undone by prepending P): a reader of such a placeholder reads any text after its
literal."""


def _never_whole(entities: list[Any], partition: str | None) -> frozenset[str]:
    """Entities M whose every row key another entity's template R also reads, giving back a partition value other
    than the item's: for those rows `whole_row`'s loop always ends in False, so the pair is settled here once.

    The pattern (the benchmark's customer and order keys, ``cust#{pk|strip_prefix('CUST#')}`` and
    ``cust#{pk|strip_prefix('CUST#')}#order#…``): R's template is a literal L and the partition key's placeholder
    with transforms T whose inverses never raise (`TOTAL_INVERSES`), nothing after it; M's template starts with
    the same L and the same placeholder, followed by non-empty literal text. R then reads any row key of M: it
    starts with L, and the rest, M's rendering of the value followed by that text, is undone by T's inverses
    without fail. The value v it gives back renders under T as that whole rest; v equal to the item's value would
    render as M's rendering alone, which is shorter. So R reads a different value and the row is not whole.
    Salted keys are left to the loop (the salt comes before the literal).
    """
    if partition is None:
        return frozenset()
    settled = set()
    for reader in entities:
        pieces = reader.key.pieces
        if (len(pieces) != 2 or not isinstance(pieces[0], str) or not pieces[0] or reader.spec.row_key.salt_buckets
                or not isinstance(pieces[1], Placeholder) or pieces[1].attribute != partition
                or not all(call.name in TOTAL_INVERSES for call in pieces[1].transforms)):
            continue
        for maker in entities:
            theirs = maker.key.pieces
            if (maker.name != reader.name and not maker.spec.row_key.salt_buckets and len(theirs) > 2
                    and theirs[:2] == pieces and isinstance(theirs[2], str) and theirs[2]):
                settled.add(maker.name)
    return frozenset(settled)
