"""What a rollback (Bigtable → DynamoDB through the spec's decoder) needs to know, without I/O.

- :func:`verdict`: whether every item can be rebuilt from the table, or which attributes cannot and why
  (the spec's losses, `mappers.decode.losses`), for `migrate-plan` and `rollback` alike.
- :func:`latest_only`: whether the decoder reads one cell version per column, so that a row an application
  rewrote after cutover (a second version of a cell) is read as its newest version.
- :func:`write_units`: what a put costs in write capacity (1 WCU per started KB of `sample.item_size`).
- :func:`requests`: items in BatchWriteItem requests of up to 25, no key twice in one request.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

from .decode import Loss, comparable, losses
from .analysis.sample import item_size
from .spec import EntitySpec, Layout, MappingSpec

BATCH_WRITE_LIMIT = 25
"""Put requests in one BatchWriteItem call (DynamoDB's limit)."""
WRITE_UNIT_BYTES = 1024


class Verdict(NamedTuple):
    """Whether a rollback gives back every item exactly; `losses` says what it cannot give back, and why."""

    losses: tuple[Loss, ...]

    @property
    def complete(self) -> bool:
        return not self.losses

    def lines(self) -> list[str]:
        if self.complete:
            return ["every item can be rebuilt from Bigtable (ddb2bt rollback gives back each item, types included)"]
        return [f"cannot be rebuilt: {loss.describe()}" for loss in self.losses]


def verdict(spec: MappingSpec) -> Verdict:
    """Every loss the spec causes (declared or not), but for attributes the entity's match fixes (`sk: Video` with
    `drop: [sk]`): a rollback puts those back from the match."""
    fixed = {entity.name: fixed_attributes(entity) for entity in spec.entities}
    return Verdict(tuple(loss for loss in losses(spec) if loss.attribute not in fixed.get(loss.entity, ())))


def fixed_attributes(entity: EntitySpec) -> set[str]:
    """Attributes every item of the entity has with one value, by its match (`equals`; as the decoder reads them)."""
    return {name for name, condition in entity.match.items()
            if condition.equals is not None and not isinstance(condition.equals, bool)}


def lost_keys(spec: MappingSpec, key_names: Sequence[str]) -> dict[str, Loss]:
    """Entity -> the loss of one of its key attributes (a lossy transform in the row key, versioning's sort key):
    its items cannot be put back under the key they had, so a rollback dead-letters them instead of inventing one."""
    found: dict[str, Loss] = {}
    for loss in verdict(spec).losses:
        if loss.attribute in key_names:
            found.setdefault(loss.entity, loss)
    return found


def text_only_attributes(spec: MappingSpec) -> list[str]:
    """Attributes some mapped entity keeps only as text — in its row key, a qualifier or a timestamp (template or
    attribute), not also as a column — sorted. Bigtable stores no DynamoDB type for them: the decoder types them as
    it is told (the table's keys from DescribeTable, others by `--type`), else as S. An N or BOOL attribute read back as
    S is a lossy rollback that its own comparison, decoding with the same types, would call equal."""
    from .templates import parse_template

    found: set[str] = set()
    for entity in spec.entities:
        if entity.action != "map":
            continue
        texts = set(parse_template(entity.key.template).attributes)
        stamps = [entity.timestamp] + [column.timestamp for column in entity.columns]
        for stamp in stamps:
            if stamp is not None and stamp.template:
                texts |= set(parse_template(stamp.template).attributes)
            elif stamp is not None and stamp.attribute:
                texts.add(stamp.attribute)
        for column in entity.columns:
            if column.qualifier is not None:
                texts |= set(parse_template(column.qualifier.template).attributes)
        found |= texts - {column.attribute for column in entity.columns} - set(entity.drop) - set(entity.lossy)
    return sorted(found)


def latest_only(spec: MappingSpec) -> bool:
    """Whether no entity reads several versions of one column (versioning, list layout, items told apart by
    timestamps): then only each column's newest version is read, and an application's later write of a cell
    replaces the migrated one as Bigtable readers see it."""
    for entity in spec.entities:
        if entity.action != "map":
            continue
        if entity.versioning or entity.ttl:
            return False
        if entity.timestamp is not None and entity.timestamp.template is not None:
            return False
        for column in entity.columns:
            if column.layout is Layout.list or (column.timestamp is not None and column.timestamp.template is not None):
                return False
    return True


def write_units(item: dict) -> int:
    """Write capacity units a put of this item costs (standard writes: one per started kilobyte)."""
    return max(1, -(-item_size(item) // WRITE_UNIT_BYTES))


def key_of(item: dict, key_names: Sequence[str]) -> tuple | None:
    """The item's primary key in a comparable form; None when a key attribute is missing."""
    try:
        return tuple((name, comparable(item[name])) for name in key_names)
    except KeyError:
        return None


def requests(items: Iterable[dict], key_names: Sequence[str]) -> list[list[dict]]:
    """Items in groups of up to 25 where no key repeats (DynamoDB refuses a request naming one key twice); an item
    whose key repeats goes into a later group, after the one it repeats, so the later item still wins."""
    groups: list[list[dict]] = []
    keys: list[set] = []
    for item in items:
        key = key_of(item, key_names)
        place = len(groups)
        for index in range(len(groups) - 1, -1, -1):  # after the last group holding this key
            if key in keys[index]:
                break
            if len(groups[index]) < BATCH_WRITE_LIMIT:
                place = index
        if place == len(groups):
            groups.append([])
            keys.append(set())
        groups[place].append(item)
        keys[place].add(key)
    return groups
