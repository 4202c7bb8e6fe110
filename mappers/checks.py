"""Whole-spec checks that one field cannot make alone; each problem comes with its field path.

Shape errors are pydantic's job (spec.py); these catch a family used but not declared, an entity
that can never match, a key template naming an attribute items may not have, and the like.
:func:`sample_findings` adds what only a mapped sample can show: a spec that maps nothing.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Sequence
from typing import NamedTuple

from .analysis.causes import group_causes
from .decode import undeclared
from .results import ItemError, MapResult
from .spec import Condition, Encoding, EntitySpec, Layout, MappingSpec
from .spelling import did_you_mean
from .templates import Placeholder, parse_template

Problem = tuple[tuple, str]


def format_path(path: tuple[str | int, ...]) -> str:
    """`("entities", 2, "row_key")` -> `entities[2].row_key`."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def check_spec(spec: MappingSpec) -> list[Problem]:
    problems: list[Problem] = []
    seen_names: dict[str, int] = {}
    for index, entity in enumerate(spec.entities):
        at = ("entities", index)
        if entity.name in seen_names:
            problems.append((at + ("name",), f"entity name {entity.name!r} is already used by entities[{seen_names[entity.name]}]"))
        seen_names.setdefault(entity.name, index)
        problems += _families(spec, entity, at)
        problems += _reachability(spec.entities, index, at)
        problems += _key_attributes(spec, entity, at)
        problems += _delimited(entity, at)
        problems += _ttl(spec, entity, at)
        problems += _duplicate_columns(entity, at)
        problems += _counters(spec, entity, at)
        if entity.versioning and not (entity.versioning.attribute or spec.source.sort_key):
            problems.append((at + ("versioning", "attribute"), "name the versioned attribute: the table has no sort key declared"))
    return problems + undeclared(spec)


def _families(spec: MappingSpec, entity: EntitySpec, at: tuple) -> list[Problem]:
    declared = spec.target.families

    def not_declared(family: str) -> str:
        guess = did_you_mean(family, declared)
        return (f"family {family!r} is not declared; {guess + ' Otherwise, ' if guess else ''}declare it under target.families "
                f"(declared: {', '.join(declared)})")

    problems = [
        (at + ("columns", j, "family"), not_declared(column.family))
        for j, column in enumerate(entity.columns)
        if column.family not in declared
    ]
    if entity.rest and entity.rest.family not in declared:
        problems.append((at + ("rest", "family"), not_declared(entity.rest.family)))
    return problems


# --------------------------------------------------------------------------- reachability


def _implies(stronger: Condition, weaker: Condition) -> bool:
    """Whether every value satisfying `stronger` also satisfies `weaker` (conservative: False when unsure)."""
    if weaker.exists is False or stronger.exists is False:
        return weaker.exists is False and stronger.exists is False
    if weaker.equals is not None and stronger.equals != weaker.equals:
        return False
    if weaker.prefix is not None:
        known = stronger.equals if isinstance(stronger.equals, str) else stronger.prefix
        if known is None or not known.startswith(weaker.prefix):
            return False
    if weaker.regex is not None:
        if not (isinstance(stronger.equals, str) and re.search(weaker.regex, stronger.equals)) and stronger.regex != weaker.regex:
            return False
    return True


def _contradiction(condition: Condition) -> str | None:
    equals = condition.equals if isinstance(condition.equals, str) else None
    if equals is not None and condition.prefix is not None and not equals.startswith(condition.prefix):
        return f"equals {equals!r} does not start with prefix {condition.prefix!r}"
    if equals is not None and condition.regex is not None and not re.search(condition.regex, equals):
        return f"equals {equals!r} does not match regex {condition.regex!r}"
    return None


def _reachability(entities: list[EntitySpec], index: int, at: tuple) -> list[Problem]:
    entity = entities[index]
    for attribute, condition in entity.match.items():
        reason = _contradiction(condition)
        if reason:
            return [(at + ("match", attribute), f"this entity can never match: {reason}")]
    for earlier_index in range(index):
        earlier = entities[earlier_index]
        if all(
            attribute in entity.match and _implies(entity.match[attribute], condition)
            for attribute, condition in earlier.match.items()
        ):
            what = "matches every item" if not earlier.match else "matches every item this one would"
            return [
                (
                    at + ("match",),
                    f"this entity can never match: entities[{earlier_index}] ({earlier.name!r}) comes first and {what}; "
                    "reorder the entities or narrow the earlier match",
                )
            ]
    return []


# --------------------------------------------------------------------------- keys and templates


def _guaranteed(entity: EntitySpec, spec: MappingSpec) -> set[str]:
    keys = {key for key in (spec.source.partition_key, spec.source.sort_key) if key}
    required = {name for name, condition in entity.match.items() if condition.exists is not False}
    required |= {column.attribute for column in entity.columns if column.required}
    return keys | required


def _key_attributes(spec: MappingSpec, entity: EntitySpec, at: tuple) -> list[Problem]:
    if spec.source.partition_key is None or entity.row_key is None:
        return []  # key names come from DescribeTable; the pipeline checks again once they are known
    guaranteed = _guaranteed(entity, spec)
    problems = []
    for attribute in parse_template(entity.key.template).attributes:
        if attribute not in guaranteed:
            keys = ", ".join(sorted(key for key in (spec.source.partition_key, spec.source.sort_key) if key))
            problems.append(
                (
                    at + ("row_key",),
                    f"row_key uses {{{attribute}}}, which is not a key attribute of the table ({keys}) "
                    f"and not required by this entity's match; fix the name or add match: {{{_yaml_key(attribute)}: "
                    "{exists: true}}",
                )
            )
    return problems


def _delimited(entity: EntitySpec, at: tuple) -> list[Problem]:
    if entity.row_key is None:
        return []
    pieces = parse_template(entity.key.template).pieces
    for before, after in zip(pieces, pieces[1:]):
        if isinstance(before, Placeholder) and isinstance(after, Placeholder):
            return [
                (
                    at + ("row_key",),
                    f"{{{before.attribute}}} and {{{after.attribute}}} touch; separate them with the delimiter "
                    f"{entity.key.delimiter!r} so that the key can be read back",
                )
            ]
    return []


def _ttl(spec: MappingSpec, entity: EntitySpec, at: tuple) -> list[Problem]:
    if entity.ttl is None:
        return []
    families = {column.family for column in entity.columns} | ({entity.rest.family} if entity.rest else set())
    return [
        (
            at + ("ttl",),
            f"family {family!r} has no max_age GC rule; TTL data needs one so that Bigtable drops it on time",
        )
        for family in sorted(families)
        if family in spec.target.families and spec.target.families[family].max_age is None
        and not spec.target.families[family].aggregate  # said by _counters
    ]


def _duplicate_columns(entity: EntitySpec, at: tuple) -> list[Problem]:
    seen: dict[tuple[str, str], int] = {}
    problems = []
    for j, column in enumerate(entity.columns):
        if column.layout in (Layout.set, Layout.map) or (column.qualifier and not parse_template(column.qualifier.template).is_literal):
            continue
        qualifier = column.qualifier.template if column.qualifier else column.attribute
        target = (column.family, qualifier)
        if target in seen and entity.columns[seen[target]].attribute != column.attribute:
            problems.append(
                (at + ("columns", j), f"{column.family}:{qualifier} is already written by columns[{seen[target]}]; pick another qualifier")
            )
        seen.setdefault(target, j)
    return problems


def _counters(spec: MappingSpec, entity: EntitySpec, at: tuple) -> list[Problem]:
    """An aggregate family takes only counters: Bigtable adds whatever is written there (a SetCell too), so each of
    its cells must be one item's Int64, rewritten whole (DeleteFromColumn + AddToCell) by every writer."""
    aggregate = {name for name, policy in spec.target.families.items() if policy.aggregate}
    if not aggregate:
        return []
    problems = []
    if entity.rest and entity.rest.family in aggregate:
        problems.append((at + ("rest", "family"), f"family {entity.rest.family!r} is an aggregate (counters only): "
                                                  "rest cannot write there; give rest a plain family"))
    counters = [(j, column) for j, column in enumerate(entity.columns) if column.family in aggregate]
    for j, column in counters:
        where = at + ("columns", j)
        if column.encoding is not Encoding.int64:
            problems.append((where + ("encoding",), f"{column.attribute!r} is in aggregate family {column.family!r}: "
                                                    "a counter is encoding: int64"))
        elif column.layout is not Layout.cell:
            problems.append((where + ("layout",), f"{column.attribute!r} is in aggregate family {column.family!r}: "
                                                  "a counter is one cell (layout: cell)"))
        elif column.timestamp is not None and column.timestamp.template is not None:
            problems.append((where + ("timestamp",), "a counter cannot take its timestamp from a template: writing it "
                                                     "replaces every cell of its column"))
    if counters and entity.ttl:
        problems.append((at + ("ttl",), "ttl expires cells by a max_age GC rule, which an aggregate family cannot "
                                        "have: give the counters an entity without ttl"))
    elif counters and entity.versioning:
        problems.append((at + ("versioning",), "versioning keeps one cell per version, and a counter is rewritten "
                                               "whole: give the counters an entity without versioning"))
    elif counters and entity.timestamp is not None and entity.timestamp.template is not None:
        problems.append((at + ("timestamp",), "items told apart by timestamp templates share columns, and a counter "
                                              "is rewritten whole: take the timestamp from an attribute or leave it"))
    return problems


# --------------------------------------------------------------------------- what a mapped sample shows


class SampleFinding(NamedTuple):
    """A spec that cannot work on this data, shown by the sample: the fields of a plan lint of severity error."""

    code: str
    """Stable identifier: `timestamp-attribute-absent`, `entity-dead-letters-all` or `no-entity-matches`."""
    where: str
    """Spec path, as in the spec errors (`entities[1].timestamp.attribute`)."""
    message: str


def sample_findings(spec: MappingSpec, items: Sequence[dict], results: Sequence[MapResult]) -> list[SampleFinding]:
    """Problems of `spec` that the sample `items` and their `results` (``map_item`` of each) show.

    A timestamp attribute that no item of its entity has, an entity that dead-letters every item
    it matched, and a spec that matches no item at all: each would make a run that migrates
    nothing. Entities the sample does not reach are not judged.
    """
    matched: dict[str | None, list[tuple[dict, MapResult]]] = defaultdict(list)
    for item, result in zip(items, results):
        matched[result.entity].append((item, result))
    findings = []
    for index, entity in enumerate(spec.entities):
        mine = matched.get(entity.name)
        if not mine or entity.action != "map":
            continue
        seen = {name for item, _ in mine for name in item}
        for path, attribute in _timestamp_attributes(entity, ("entities", index)):
            if attribute not in seen:
                findings.append(SampleFinding("timestamp-attribute-absent", format_path(path), (
                    f"none of the {len(mine)} sampled items of entity {entity.name!r} has the timestamp attribute "
                    f"{attribute!r}, so every one would be dead-lettered; {_spelling_hint(attribute, seen)}")))  # fmt: skip
        errors = [result for _, result in mine if isinstance(result, ItemError)]
        if len(errors) == len(mine):
            causes = group_causes(errors)
            findings.append(SampleFinding("entity-dead-letters-all", format_path(("entities", index)), (
                f"all {len(mine)} sampled items of this entity would be dead-lettered "
                f"({'; '.join(cause.line() for cause in causes[:3])})")))  # fmt: skip
    if items and len(matched.get(None, ())) == len(items):
        seen = {name for item in items for name in item}
        findings.append(SampleFinding("no-entity-matches", "entities", (
            f"no entity matches any of the {len(items)} sampled items; check the match conditions ({_listed(seen)})")))  # fmt: skip
    return findings


def _timestamp_attributes(entity: EntitySpec, at: tuple) -> list[tuple[tuple, str]]:
    """(path, attribute) of every timestamp read from an attribute, the entity's and its columns'."""
    found = [(at + ("timestamp", "attribute"), entity.timestamp.attribute)] if entity.timestamp and entity.timestamp.attribute else []
    found += [
        (at + ("columns", j, "timestamp", "attribute"), column.timestamp.attribute)
        for j, column in enumerate(entity.columns)
        if column.timestamp and column.timestamp.attribute
    ]
    return found


def _spelling_hint(attribute: str, seen: set[str]) -> str:
    return did_you_mean(attribute, sorted(seen)) or _listed(seen)


def _listed(attributes: set[str], most: int = 20) -> str:
    names = sorted(attributes)
    return f"attributes in the sample: {', '.join(names[:most])}" + (", ..." if len(names) > most else "")


def _yaml_key(name: str) -> str:
    """``name`` as a key of a YAML flow mapping that reads back as ``name``: plain where that is safe, else quoted
    (``a:b`` plain would not read as the attribute a:b)."""
    return name if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.\-]*", name) else json.dumps(name, ensure_ascii=False)
