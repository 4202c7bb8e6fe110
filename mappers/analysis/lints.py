"""Row-key and schema lints (docs/EXAMPLES.md §1): what the spec and a mapped sample say about the design.

Each lint is a pure function of the spec and the sample and returns `Lint`s whose message says what
to change. Errors are things Bigtable refuses or the spec forbids (a run would fail); warnings are
designs that work but hurt (hot tablets, unbounded rows, keys that cannot be range-scanned); infos
are worth knowing. Data-driven lints stay quiet on tiny samples, where a pattern is not evidence.
"""

from __future__ import annotations

import re
from collections import Counter
from datetime import timedelta
from collections.abc import Callable, Iterable
from typing import Literal

from pydantic import BaseModel, ConfigDict

from .. import limits
from .causes import group_causes
from ..compiler import consumed_attributes
from ..decode import SharedCells, shared_cells, undeclared
from ..results import ItemError, MappedRow
from .estimates import HotspotReport
from .sample import Sample, readable_bytes
from ..spec import EntitySpec, Layout, MappingSpec
from ..templates import Placeholder, parse_template
from ..units import duration_text

Severity = Literal["error", "warning", "info"]


class Lint(BaseModel):
    model_config = ConfigDict(frozen=True)
    severity: Severity
    code: str
    """Stable identifier, e.g. `key-starts-with-timestamp` (for docs and for silencing in tooling)."""
    message: str
    """What is wrong and what to do about it."""
    where: str
    """Spec path (`entities[2].row_key`, `target.families.SKU`) or `sample`."""


MIN_KEYS = 8
"""Distinct keys needed before a pattern in key values (sequence, padding) counts as evidence."""
MAJORITY = 0.8
"""Share of keys that must show a pattern for it to be reported."""
FAMILIES_NEAR = int(limits.FAMILIES_WARN * 0.8)
LONG_FAMILY_NAME = 12
LONG_ROW_KEY = limits.ROW_KEY_MAX_BYTES // 4

_ISO_DATE = re.compile(r"^(19|20|21)\d\d-?(0[1-9]|1[0-2])-?(0[1-9]|[12]\d|3[01])([T _]|$)")
_EPOCH_RANGES = {10: (946_684_800, 4_102_444_800)}  # seconds 2000..2100; ms and us are the same scaled
_EPOCH_RANGES[13] = (_EPOCH_RANGES[10][0] * 1000, _EPOCH_RANGES[10][1] * 1000)
_EPOCH_RANGES[16] = (_EPOCH_RANGES[13][0] * 1000, _EPOCH_RANGES[13][1] * 1000)
_SEQUENTIAL = re.compile(r"^([A-Za-z_.-]*?)(\d+)$")
_HASH_HEX = {32: "an MD5 digest in hex", 40: "a SHA-1 digest in hex", 64: "a SHA-256 digest in hex"}
_HEX = re.compile(r"^[0-9a-fA-F]+$")
_BASE64 = re.compile(r"^(?=.*[A-Z])(?=.*[a-z])(?=.*\d)[A-Za-z0-9+/_-]{22,44}={0,2}$")
_BASE64_LENGTHS = {22, 24, 27, 28, 43, 44}
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[1-8][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$", re.I)
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[A-Za-z]{2,}$")
_PHONE = re.compile(r"^(\+\d{8,15}|\+?\d{1,3}?[ .-]?\(?\d{2,4}\)?[ .-]\d{3,4}[ .-]\d{3,4})$")
_PII_NAME = re.compile(
    r"e[-_]?mail|ssn|social[-_]?security|phone|mobile|msisdn|passport|tax[-_]?id|national[-_]?id|"
    r"birth|dob|(first|last|full|given|family|sur)[-_]?name|address|ip[-_]?addr",
    re.I,
)


def _lint(severity: Severity, code: str, where: str, message: str) -> Lint:
    return Lint(severity=severity, code=code, message=message, where=where)


# --------------------------------------------------------------------------- key shapes


def _segments(entity: EntitySpec, sample: Sample) -> list[list[str]]:
    """Each distinct key of the entity, as text split on its delimiter, salt bucket removed."""
    delimiter = entity.key.delimiter
    seen = dict.fromkeys(sample.keys_by_entity.get(entity.name, ()))
    split = [key.decode(errors="replace").split(delimiter) for key in seen]
    return [parts[1:] or [""] for parts in split] if entity.key.salt_buckets else split


def _first_transforms(entity: EntitySpec) -> tuple[str, ...]:
    first = parse_template(entity.key.template).pieces[0]
    return tuple(call.name for call in first.transforms) if isinstance(first, Placeholder) else ()


def looks_like_timestamp(text: str) -> bool:
    """ISO dates (2023-09-10..., 20230910) and epoch seconds/ms/us between 2000 and 2100."""
    if _ISO_DATE.match(text):
        return True
    bounds = _EPOCH_RANGES.get(len(text))
    return bool(bounds and text.isascii() and text.isdigit() and bounds[0] <= int(text) <= bounds[1])


def _hash_kind(value: str) -> str | None:
    """Which digest a key segment looks like, if any (hex of MD5/SHA lengths, or base64 of them)."""
    if _HEX.match(value):
        return _HASH_HEX.get(len(value))
    if len(value) in _BASE64_LENGTHS and _BASE64.match(value):
        return "a base64 digest"
    return None


def _share(values: list[str], test: Callable[[str], object]) -> float:
    return sum(1 for value in values if test(value)) / len(values) if values else 0.0


def _example(values: Iterable[str], limit: int = 3) -> str:
    return ", ".join(repr(value) for value in list(dict.fromkeys(values))[:limit])


def lint_key_start(entity: EntitySpec, where: str, sample: Sample) -> Iterable[Lint]:
    if entity.key.salt_buckets:  # the key starts with a stable bucket: writes of one time spread over the buckets
        return
    firsts = [parts[0] for parts in _segments(entity, sample)]
    transforms = _first_transforms(entity)
    if {"epoch_ms", "epoch_s", "reverse_timestamp"} & set(transforms) or (
        firsts and _share(firsts, looks_like_timestamp) >= MAJORITY
    ):
        yield _lint("error", "key-starts-with-timestamp", where,
            f"row keys of entity {entity.name!r} start with a timestamp ({_example(firsts) or entity.key.template}): "
            "every write lands on the tablet holding the newest time, one node takes the whole load. Put a "
            "high-cardinality value first (device#metric#timestamp); reverse the timestamp only if newest-first "
            "reads matter, and still not at the start.")  # fmt: skip
        return
    numbered = [found for value in firsts if (found := _SEQUENTIAL.match(value))]
    distinct = {int(found.group(2)) for found in numbered}
    # A sequence is one new id per key; a few ids repeated across many keys (tenants, shards) is a prefix.
    if "reverse" in transforms or len(distinct) < max(MIN_KEYS, MAJORITY * len(firsts)):
        return
    ordered = [int(found.group(2)) for found in numbered]
    dense = max(distinct) - min(distinct) + 1 <= 4 * len(distinct)
    increasing = all(a < b for a, b in zip(ordered, ordered[1:]))
    if dense or increasing:
        yield _lint("warning", "key-starts-with-sequential-id", where,
            f"row keys of entity {entity.name!r} start with what looks like a sequential id "
            f"({len(distinct)} values from {min(distinct)} to {max(distinct)}): new ids all land at the end of the "
            "key space, on one tablet. Reverse the id ({attr|reverse}), put a higher-cardinality value first, "
            "or salt the key (row_key.salt_buckets).")  # fmt: skip


def lint_key_segments(entity: EntitySpec, where: str, sample: Sample) -> Iterable[Lint]:
    """Hashed, UUID, unpadded-number and PII-looking values, per key segment position."""
    keys = _segments(entity, sample)
    for position in range(max((len(parts) for parts in keys), default=0)):
        values = [parts[position] for parts in keys if len(parts) > position]
        if not values:
            continue
        label = f"segment {position + 1} of entity {entity.name!r} keys"
        kind, count = Counter(map(_hash_kind, values)).most_common(1)[0]
        if kind and count >= MAJORITY * len(values):
            yield _lint("warning", "key-hashed", where,
                f"{label} look like {kind} ({_example(values, 1)}): hashed keys lose ordering (no prefix or "
                "range reads) and are unreadable in Key Visualizer. Keep the readable value; if writes must be "
                "spread, salt a short prefix (row_key.salt_buckets) instead.")  # fmt: skip
        elif _share(values, _UUID.match) >= MAJORITY:
            yield _lint("info", "key-uuid", where,
                f"{label} are random UUIDs: writes spread well, but only point lookups are efficient. "
                "If the application reads ranges, lead the key with the value it ranges over.")  # fmt: skip
        digits = [value for value in values if value.isascii() and value.isdigit()]
        widths = {len(value) for value in digits}
        if len(digits) >= 2 and len(digits) >= MAJORITY * len(values) and len(widths) > 1:
            short, wide = min(digits, key=len), max(digits, key=len)
            yield _lint("warning", "key-unpadded-number", where,
                f"{label} hold numbers of different widths ({short!r}, {wide!r}): as bytes {short!r} sorts after "
                f"{wide!r} when its first digit is larger. Zero-pad them ({{attr|pad({max(widths)})}} or wider) "
                "or use {attr|sortable_number}.")  # fmt: skip
        if _share(values, lambda v: bool(_EMAIL.match(v) or _PHONE.match(v))) >= MAJORITY:
            yield _lint("warning", "key-pii", where,
                f"{label} look like e-mail addresses or phone numbers: row keys travel into logs, monitoring and "
                "Key Visualizer. Key on an opaque id and keep the personal data in a column.")  # fmt: skip


def lint_key_template(entity: EntitySpec, where: str, sample: Sample) -> Iterable[Lint]:
    names = [name for name in parse_template(entity.key.template).attributes if _PII_NAME.search(name)]
    if names:
        yield _lint("warning", "key-pii", where,
            f"the row key of entity {entity.name!r} uses {', '.join(map(repr, names))}, which sounds like personal "
            "data: row keys travel into logs, monitoring and Key Visualizer. Key on an opaque id instead.")  # fmt: skip
    long_keys = [key for key in dict.fromkeys(sample.keys_by_entity.get(entity.name, ())) if len(key) > LONG_ROW_KEY]
    if long_keys:
        yield _lint("warning", "key-long", where,
            f"{len(long_keys)} sampled keys of entity {entity.name!r} exceed {LONG_ROW_KEY} bytes (longest "
            f"{max(map(len, long_keys))}; the limit is {limits.ROW_KEY_MAX_BYTES}): long keys cost memory and "
            "storage in every cell. Shorten the literal parts or drop redundant attributes from the key.")  # fmt: skip


# --------------------------------------------------------------------------- schema


def lint_families(spec: MappingSpec, sample: Sample, ttl_attribute: str | None) -> Iterable[Lint]:
    count = len(spec.target.families)
    if count > limits.FAMILIES_WARN:
        yield _lint("error", "too-many-families", "target.families",
            f"{count} column families; Bigtable advises at most ~{limits.FAMILIES_WARN} per table. Merge families "
            "that share a GC policy and are read together; use qualifiers (or a map layout) for the variety.")  # fmt: skip
    elif count >= FAMILIES_NEAR:
        yield _lint("warning", "many-families", "target.families",
            f"{count} column families, close to the ~{limits.FAMILIES_WARN} Bigtable advises. Merge families that "
            "share a GC policy; qualifiers are free, families are not.")  # fmt: skip
    for name in spec.target.families:
        if len(name) > LONG_FAMILY_NAME:
            yield _lint("warning", "long-family-name", f"target.families.{name}",
                f"family name {name!r} is {len(name)} characters; it is stored with every cell. "
                "Use a short name (a few letters).")  # fmt: skip


def lint_unbounded_rows(spec: MappingSpec, sample: Sample, ttl_attribute: str | None) -> Iterable[Lint]:
    """A keep-all family that items fold into (or list layouts write to) grows with every write."""
    keep_all = {name for name, policy in spec.target.families.items() if policy.max_versions is None and policy.max_age is None}
    writers: Counter[tuple[bytes, str]] = Counter()
    for row in sample.mapped:
        for family in {cell.family for cell in row.cells}:
            writers[(row.row_key, family)] += 1
    for family in sorted(keep_all):
        lists = [c.attribute for e in spec.entities for c in e.columns if c.family == family and c.layout is Layout.list]
        folded = [(key, n) for (key, fam), n in writers.items() if fam == family and n > 1]
        versions = [n for (key, fam, _), n in sample.cells_per_column.items() if fam == family and n > 1]
        if not (lists or folded or versions):
            continue
        evidence = (
            f"list layout for {', '.join(map(repr, lists))}" if lists
            else f"{max(n for _, n in folded)} items write into row {readable_bytes(max(folded, key=lambda p: p[1])[0])!r}"
            if folded else f"up to {max(versions)} cells per column in one row"
        )
        yield _lint("warning", "unbounded-row-growth", f"target.families.{family}",
            f"family {family!r} keeps every cell (no GC rule) and rows grow with every write ({evidence}). Give it a "
            "GC rule (max_versions: N or max_age: 30d), or write a new row per event (entity#reverse_timestamp) "
            f"before rows approach the advised {limits.ROW_WARN_BYTES // 1024**2} MB.")  # fmt: skip


def lint_sizes(spec: MappingSpec, sample: Sample, ttl_attribute: str | None) -> Iterable[Lint]:
    big_rows = {key: size for key, size in sample.row_sizes.items() if size > limits.ROW_WARN_BYTES}
    if big_rows:
        key, size = max(big_rows.items(), key=lambda pair: pair[1])
        severity: Severity = "error" if size > limits.ROW_MAX_BYTES else "warning"
        yield _lint(severity, "row-too-large", "sample",
            f"{len(big_rows)} sampled rows exceed {limits.ROW_WARN_BYTES // 1024**2} MB (largest {readable_bytes(key)!r}: "
            f"{size / 1024**2:.0f} MB; hard limit {limits.ROW_MAX_BYTES // 1024**2} MB). Split the row key (add a "
            "time bucket or the sort key) or add a GC rule that bounds the row.")  # fmt: skip
    big_cells = [size for size in sample.cell_sizes if size > limits.CELL_WARN_BYTES]
    if big_cells:
        yield _lint("warning", "cell-too-large", "sample",
            f"{len(big_cells)} sampled cells exceed {limits.CELL_WARN_BYTES // 1024**2} MB (largest "
            f"{max(big_cells) / 1024**2:.1f} MB; hard limit {limits.CELL_MAX_BYTES // 1024**2} MB): large cells slow "
            "every read of their row. Keep large blobs in Cloud Storage and store the object name.")  # fmt: skip
    wide = [len(row.cells) for row in sample.mapped if len(row.cells) > limits.MUTATIONS_PER_ENTRY_MAX // 2]
    if wide:
        yield _lint("warning", "many-mutations", "sample",
            f"{len(wide)} sampled items produce over {limits.MUTATIONS_PER_ENTRY_MAX // 2:,} cells each (max "
            f"{max(wide):,}; one MutateRows entry allows {limits.MUTATIONS_PER_ENTRY_MAX:,}). Pack the collection "
            "into one cell (layout: json) or split it across rows.")  # fmt: skip


def uses_default_time(entity: EntitySpec) -> bool:
    """Whether some of the entity's cells take the default time (migration_time, else the run's "now")."""
    if entity.action != "map" or entity.ttl or entity.timestamp:
        return False
    return entity.rest is not None or any(column.timestamp is None for column in entity.columns)


def lint_time_and_ttl(spec: MappingSpec, sample: Sample, ttl_attribute: str | None) -> Iterable[Lint]:
    relying = [entity.name for entity in spec.entities if uses_default_time(entity)]
    if spec.migration_time is None and relying:
        yield _lint("warning", "migration-time-unset", "migration_time",
            f"entities {', '.join(map(repr, relying))} write cells at the run's start time, so a re-run writes new "
            "versions instead of identical cells (and max_versions GC may drop the first run's). Set a fixed "
            "migration_time (e.g. '2024-01-01T00:00:00Z', the planned cut-over) to make re-runs idempotent.")  # fmt: skip
    carried = set()
    for index, entity in enumerate(spec.entities):
        if entity.ttl:
            carried.add(entity.ttl.attribute)
            yield _lint("info", "ttl-as-gc", f"entities[{index}].ttl",
                f"entity {entity.name!r} carries DynamoDB TTL ({entity.ttl.attribute!r}) as cell timestamps that "
                "max_age GC removes; GC runs at compaction, so expired cells may be read for a while. Filter reads "
                "by timestamp range if they must never be seen.")  # fmt: skip
    if ttl_attribute and ttl_attribute not in carried:
        mapped_somewhere = any(ttl_attribute in consumed_attributes(e) or e.rest for e in spec.entities if e.action == "map")
        what = "is copied as a plain column" if mapped_somewhere else "is not migrated"
        yield _lint("warning", "ttl-not-carried", "entities",
            f"the table expires items by TTL attribute {ttl_attribute!r}, which {what}: in Bigtable these items "
            f"never expire. Add ttl: {{attribute: {ttl_attribute}}} to the entities that have it, with a max_age "
            "family.")  # fmt: skip


def lint_sample_outcomes(spec: MappingSpec, sample: Sample, ttl_attribute: str | None) -> Iterable[Lint]:
    unmatched = sample.unmatched
    if unmatched:
        severities: dict[str, Severity] = {"fail": "error", "dead_letter": "warning", "skip": "info"}
        severity = severities[spec.unmatched]
        outcome = {"fail": "fails the run", "dead_letter": "dead-letters them", "skip": "skips them"}[spec.unmatched]
        keys = [key for key in (spec.source.partition_key, spec.source.sort_key) if key]
        shown = "; ".join(list(dict.fromkeys(_identify(item, keys) for item, _ in unmatched))[:2])
        yield _lint(severity, "unmatched-items", "entities",
            f"{len(unmatched)} of {len(sample.items)} sampled items match no entity (e.g. {shown}); "
            f"unmatched: {spec.unmatched} {outcome}. Add an entity for them (action: skip to leave them out).")  # fmt: skip
    # An entity whose every sampled item fails is a plan error of its own (entity-dead-letters-all): not twice.
    matched = Counter(result.entity for result in sample.results)
    failed = Counter(error.entity for _, error in sample.errors)
    errors = [error for _, error in sample.errors if error.stage != "unmatched" and failed[error.entity] < matched[error.entity]]
    if errors:
        causes = group_causes(errors)
        top = "; ".join(cause.line() for cause in causes[:5]) + (
            f"; and {len(causes) - 5} more causes" if len(causes) > 5 else "")
        yield _lint("warning", "items-dead-lettered", "sample",
            f"{len(errors)} of {len(sample.items)} sampled items would be dead-lettered, for {len(causes)} "
            f"cause{'s' * (len(causes) != 1)}: {top}. Fix the spec "
            "(columns, drop, rest, transforms) or the data before the full run.")  # fmt: skip


def lint_shared_rows(spec: MappingSpec, sample: Sample, ttl_attribute: str | None) -> Iterable[Lint]:
    """Entities that can land in one row and write qualifiers that can meet there (the certain case is a loss)."""
    index = {entity.name: i for i, entity in enumerate(spec.entities)}
    for shared in shared_cells(spec):
        if shared.certain:
            continue
        yield _lint("warning", "shared-cells", f"entities[{index[shared.later.name]}]",
            f"entities {shared.earlier.name!r} and {shared.later.name!r} can write the same row, and "
            f"{shared.first.describe()} can meet {shared.second.describe()}: where an item of each lands in one row, "
            "cells with the same timestamp overwrite each other (migrate-plan's sample shows the ones it meets as "
            f"cell-collision){_read_back(shared)}. Give them different families, or row keys that start "
            "differently.")  # fmt: skip


def _read_back(shared: SharedCells) -> str:
    """What reading such a row back (rollback, parity) makes of a rest cell: a column claims before any rest, and the
    first entity's rest before a later one's (mappers.decode)."""
    if shared.first.kind == shared.second.kind == "rest":
        return (f", and read back, every attribute {shared.later.name!r} keeps in rest becomes an attribute of "
                f"{shared.earlier.name!r}'s item there (a rollback would put it back on the wrong item)")
    if "rest" in (shared.first.kind, shared.second.kind):
        return ", and read back, a rest cell there that the other's column claims becomes that column's value"
    return ""


def _identify(item: dict, keys: list[str]) -> str:
    """An item's key values when it has them, else its attribute names (enough to find it, no payload)."""
    present = [f"{key} {next(iter(item[key].values()))!r}" for key in keys if key in item and item[key]]
    return ", ".join(present) if present else "attributes " + ", ".join(sorted(item))


def lint_hotspots(hotspots: Iterable[HotspotReport]) -> list[Lint]:
    return [_lint("warning", "key-prefix-skew", "sample", f"{report.dimension}: {report.finding}") for report in hotspots if report.flagged]


ENTITY_RULES = (lint_key_start, lint_key_segments, lint_key_template)
SPEC_RULES = (lint_families, lint_unbounded_rows, lint_sizes, lint_time_and_ttl, lint_sample_outcomes, lint_shared_rows)


def lint(spec: MappingSpec, sample: Sample, *, ttl_attribute: str | None = None, hotspots: Iterable[HotspotReport] = ()) -> tuple[Lint, ...]:
    """All lints, errors first; `ttl_attribute` is the source table's TTL attribute (DescribeTimeToLive)."""
    found: list[Lint] = []
    for index, entity in enumerate(spec.entities):
        if entity.action == "map":
            for rule in ENTITY_RULES:
                found.extend(rule(entity, f"entities[{index}].row_key", sample))
    for spec_rule in SPEC_RULES:
        found.extend(spec_rule(spec, sample, ttl_attribute))
    found.extend(lint_hotspots(hotspots))
    order = {"error": 0, "warning": 1, "info": 2}
    return tuple(sorted(found, key=lambda item: order[item.severity]))



# --------------------------------------------------------------------------- the data against GC, collisions, losses


def lint_data(spec: MappingSpec, sample: Sample, now_us: int) -> list[Lint]:
    """Sampled cells that GC would drop at the planned run time, and cells two sampled items both write."""
    found: list[Lint] = []
    writers: dict[tuple, int] = {}
    per_column: Counter[tuple[bytes, str, bytes]] = Counter()
    old: dict[tuple[str, bytes], int] = {}
    collisions: dict[tuple[str, bytes], list] = {}  # (family, qualifier) -> [count, first example]
    for index, result in enumerate(sample.results):
        if not isinstance(result, MappedRow):
            continue
        for family, qualifier, micros, _ in result.cells:
            first = writers.setdefault((result.row_key, family, qualifier, micros), index)
            if first != index:
                seen = collisions.setdefault((family, qualifier), [0, (first, index, result.row_key, micros)])
                seen[0] += 1
            per_column[(result.row_key, family, qualifier)] += 1
            policy = spec.target.families.get(family)
            if policy is not None and policy.max_age is not None and micros < now_us - policy.max_age // timedelta(microseconds=1):
                old.setdefault((family, qualifier), micros)
    for (family, qualifier), (count, (first, index, row_key, micros)) in list(collisions.items())[:5]:
        found.append(_lint("error", "cell-collision", "sample",
            f"{count} sampled cell{'s' if count > 1 else ''} of {family}:{readable_bytes(qualifier)} overwrite one "
            f"another item wrote (e.g. sampled items {first + 1} and {index + 1} both write "
            f"{readable_bytes(row_key)!r} {family}:{readable_bytes(qualifier)} at {micros} us). Make the qualifier "
            "or the row key include what tells the items apart (or give them distinct timestamps)."))  # fmt: skip
    for (family, qualifier), micros in list(old.items())[:5]:
        age = spec.target.families[family].max_age
        found.append(_lint("error", "gc-drops-cells", f"target.families.{family}",
            f"cells of {family}:{readable_bytes(qualifier)} are timestamped {micros} us, older than the family's "
            f"max_age ({duration_text(age) if age else age}) at the planned run time: GC removes them at the next "
            "compaction. Raise max_age, or give the column newer timestamps (migration_time, or a timestamp "
            "attribute)."))  # fmt: skip
    too_many: dict[tuple[str, bytes], list] = {}  # (family, qualifier) -> [rows, most cells, that row]
    for (row_key, family, qualifier), count in per_column.items():
        policy = spec.target.families.get(family)
        if policy is not None and policy.max_versions is not None and count > policy.max_versions:
            seen = too_many.setdefault((family, qualifier), [0, count, row_key])
            seen[0] += 1
            if count > seen[1]:
                seen[1:] = [count, row_key]
    for (family, qualifier), (rows, count, row_key) in list(too_many.items())[:5]:
        versions = spec.target.families[family].max_versions
        found.append(_lint("error", "gc-drops-versions", f"target.families.{family}",
            f"{rows} sampled row{'s' if rows > 1 else ''} get more {family}:{readable_bytes(qualifier)} cells than the "
            f"family keeps (max_versions {versions}; e.g. {count} in {readable_bytes(row_key)!r}): GC drops the oldest "
            "(list elements, versions, folded items). Raise max_versions or store the values elsewhere (layout "
            "json, a qualifier per item)."))  # fmt: skip
    return found


def lint_losses(spec: MappingSpec, round_trips: Iterable[tuple[str, str]] = ()) -> list[Lint]:
    """Undeclared losses are errors; `round_trips` ((entity, difference) from decoding sampled items) too."""
    found = [_lint("error", "undeclared-loss", ".".join(map(str, path)), message) for path, message in undeclared(spec)]
    # One finding per cause: the differences of many items, told apart only by their values, are one.
    causes = group_causes(ItemError(difference, entity, stage="round-trip") for entity, difference in round_trips)
    for cause in causes[:10]:
        found.append(_lint("error", "round-trip", "sample",
            f"sampled items do not read back: {cause.line()}. Declare the attribute in lossy (or change the "
            "transform or encoding)."))  # fmt: skip
    return found
