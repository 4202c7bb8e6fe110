"""The parity use case: every declared access pattern, run on DynamoDB and, translated, on Bigtable; same items?

Keys come from a sample of the source (the partitions with the most items, condition operands picked from their sort
keys as migrate-plan does). Each pattern is tried as declared and in the other order, each once in one request and
once a page of one item at a time (pagination), and, when it has no limit, with limit 1 too. The Bigtable rows are
decoded back into items with the spec's decoder and compared with DynamoDB's item for item and in order. A pattern the
spec cannot serve is a failure too: parity is never claimed for what was not compared.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ..mappers.access import translate
from ..mappers.analysis.access_plan import decode_rows, example_cases
from ..mappers.attrvalue import to_export_json
from ..mappers.compiler import compile_spec
from ..mappers.decode import DecodeError, comparable, compile_decoder
from ..mappers.index_rows import index_targets
from ..mappers.analysis.plan import _types
from ..mappers.analysis.sample import analyse_sample
from ..pipelines.dynamodb.client import ClientSettings, make_client
from ..pipelines.access.reads import BigtableReader, dynamodb_items
from ..pipelines.bigtable.target import probe_target
from ..pipelines.sources import read_items
from .context import Step, announce, describe_source, load_spec, with_source_keys
from .options import RunOptions

if TYPE_CHECKING:
    from ..mappers.spec import MappingSpec
    from ..mappers.table import SourceDescription

DIFFERENCES_KEPT = 5


@dataclass
class PatternParity:
    name: str
    status: str
    """served, unservable or needs_index (then nothing was compared)."""
    reason: str = ""
    cases: int = 0
    same: int = 0
    differences: list[dict[str, Any]] = field(default_factory=list)
    """The first differing cases: the case, the items each side returned (DynamoDB JSON)."""

    @property
    def different(self) -> int:
        return self.cases - self.same

    @property
    def ok(self) -> bool:
        return self.status == "served" and self.cases > 0 and self.same == self.cases


@dataclass
class ParityResult:
    table: str | None
    target: str
    sample: int
    patterns: list[PatternParity]
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return bool(self.patterns) and all(p.ok for p in self.patterns)

    @property
    def cases(self) -> int:
        return sum(p.cases for p in self.patterns)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok, "source_table": self.table, "target_table": self.target, "sample_items": self.sample,
            "reconciliation": {
                "patterns_declared": len(self.patterns),
                "patterns_compared": sum(p.status == "served" for p in self.patterns),
                "patterns_not_served": sum(p.status != "served" for p in self.patterns),
                "cases_tried": self.cases, "cases_same": sum(p.same for p in self.patterns),
                "cases_different": sum(p.different for p in self.patterns),
            },
            "patterns": [{"name": p.name, "status": p.status, "reason": p.reason, "cases": p.cases, "same": p.same,
                          "different": p.different, "ok": p.ok, "differences": p.differences} for p in self.patterns],
            "seconds": round(self.seconds, 3),
        }  # fmt: skip


def variants(pattern: Any) -> list[tuple[str, Any, int | None]]:
    """(label, pattern, page size) to try: as declared and reversed, whole and a page of one item at a time."""
    if pattern.operation == "get_item":
        return [("as declared", pattern, None)]
    shapes = [("as declared", pattern), ("reversed", pattern.model_copy(update={"scan_index_forward": not pattern.scan_index_forward}))]
    if pattern.limit is None:
        shapes.append(("limit 1", pattern.model_copy(update={"limit": 1})))
    return [(f"{label}{', pages of 1' if page else ''}", shape, page) for label, shape in shapes for page in (None, 1)]


def check_parity(spec: MappingSpec | str | Path, sample: int = 200, partitions: int = 3,
                 options: RunOptions = RunOptions(), step: Step | None = None) -> ParityResult:  # fmt: skip
    """Run every declared pattern against both stores; differences are results, never exceptions."""

    started = time.monotonic()
    spec = load_spec(spec, options, writes=False)
    described = describe_source(spec)
    spec = with_source_keys(spec, described)
    if not spec.access_patterns:
        from ..mappers.errors import UsageError

        raise UsageError("the spec declares no access_patterns: add them (docs/ACCESS_PATTERNS.md) or run "
                         "`ddb2bt infer` for a draft")  # fmt: skip
    probe_target(spec.target, must_exist=True)  # a dead Bigtable fails here, in seconds (each read would wait 10 min)
    for index, index_target in index_targets(spec):  # an index in a table of its own: the same
        probe_target(index_target, must_exist=True, holds=index)
    announce(step, f"reading a sample of {sample} items from {spec.source.table}…")
    items = read_items(spec.source, sample)
    compiled = compile_spec(spec)
    types = _types(analyse_sample(items, [compiled.map_item(item) for item in items]))
    decoder = compile_decoder(spec, types)
    client = make_client(ClientSettings.from_source(spec.source))
    keys = (spec.source.partition_key or "", spec.source.sort_key)
    results: list[PatternParity] = []
    with BigtableReader(spec.target) as reader:
        for pattern in spec.access_patterns:
            pattern = _projected(pattern, spec, described)
            translation = translate(spec, pattern, types)
            found = PatternParity(pattern.name, translation.status, translation.reason)
            results.append(found)
            if not translation.served:
                continue
            announce(step, f"pattern {pattern.name}…")
            for partition, operands in example_cases(translation, items, most=partitions):
                for label, shape, page in variants(pattern):
                    shaped = replace(translation, spec_pattern=shape)
                    index_keys = (shape.index.partition_key, shape.index.sort_key) if shape.index else keys
                    want = dynamodb_items(client, spec.source.table or "", shape, index_keys, partition, operands, page)
                    read = shaped.read(partition, operands)
                    found.cases += 1
                    try:
                        got = shaped.finish(decode_rows(decoder, reader.rows(read), shaped.index_rows), partition,
                                            operands)  # fmt: skip
                    except DecodeError as err:  # a row the spec cannot read back: this case differs, say why
                        if len(found.differences) < DIFFERENCES_KEPT:
                            found.differences.append(_difference(label, partition, operands, want, [], str(err)))
                        continue
                    if _same(want, got, translation.unreturned) or (shape.index is not None and _same_but_ties(
                            want, got, translation.unreturned, index_keys,
                            None if shape.limit is None else lambda: dynamodb_items(
                                client, spec.source.table or "", shape.model_copy(update={"limit": None}), index_keys,
                                partition, operands))):  # fmt: skip
                        found.same += 1
                    elif len(found.differences) < DIFFERENCES_KEPT:
                        found.differences.append(_difference(label, partition, operands, want, got))
    return ParityResult(spec.source.table, spec.target.table, len(items), results, time.monotonic() - started)


def _projected(pattern: Any, spec: MappingSpec, described: SourceDescription | None) -> Any:
    """The pattern returning what DynamoDB returns for it: a query on a KEYS_ONLY or INCLUDE index that the spec
    does not carry as index rows (a local index served from the table's rows) returns the index's projected
    attributes only, while the table's rows hold every attribute. Without a projection of its own, the pattern
    projects to DescribeTable's (both sides then return those attributes)."""
    if pattern.index is None or pattern.projection or described is None:
        return pattern
    if any(index.name == pattern.index.name for index in spec.indexes):  # index rows hold the declared projection
        return pattern
    found = next((index for index in described.local_indexes + described.global_indexes
                  if index.name == pattern.index.name), None)  # fmt: skip
    if found is None or found.projection == "ALL":
        return pattern
    names = [described.partition_key, described.sort_key, found.partition_key, found.sort_key,
             *(found.projected_attributes if found.projection == "INCLUDE" else ())]  # fmt: skip
    return pattern.model_copy(update={"projection": list(dict.fromkeys(name for name in names if name))})


def _same_item(a: dict, b: dict, unreturned: frozenset[str] = frozenset()) -> bool:
    """DynamoDB's item `a` and Bigtable's `b`: an attribute the spec declares it does not return (`unreturned`) is
    compared only where Bigtable's item has it."""
    a = {name: value for name, value in a.items() if name in b or name not in unreturned}
    return set(a) == set(b) and all(comparable(a[name]) == comparable(b[name]) for name in a)


def _same(want: list[dict], got: list[dict], unreturned: frozenset[str] = frozenset()) -> bool:
    """Item for item, in order."""
    return len(want) == len(got) and all(_same_item(a, b, unreturned) for a, b in zip(want, got))


def _same_but_ties(want: list[dict], got: list[dict], unreturned: frozenset[str], keys: tuple[str, str | None],
                   everything: Callable[[], list[dict]] | None) -> bool:  # fmt: skip
    """An index query's answers that differ only where DynamoDB leaves the order open: items with equal index keys
    (a GSI without a sort key, ties on its sort key) come in an order DynamoDB does not specify (dynalite's is not the
    table key's, which index rows keep), and a limit may cut such a run of ties anywhere. Bigtable's answer is one
    DynamoDB could give when its index keys are DynamoDB's, one by one, and its items are distinct items DynamoDB
    holds under them: the whole query's (`everything`, read only when needed, given for a query with a limit), else
    `want`'s. A complete run then has exactly DynamoDB's items; only the run a limit cuts may hold others of its key
    (another answer DynamoDB could give); anything else, a changed attribute included, is still a difference."""
    names = [name for name in keys if name]

    def key(item: dict) -> tuple | None:
        return tuple(comparable(item[name]) for name in names) if all(name in item for name in names) else None

    if len(want) != len(got) or not names:
        return False
    ordered = [key(item) for item in want]
    if None in ordered or ordered != [key(item) for item in got]:  # a projection without the index keys: no ties known
        return False
    pool = everything() if everything is not None else want
    unused = list(pool)
    for item in got:
        match = next((i for i, candidate in enumerate(unused) if _same_item(candidate, item, unreturned)), None)
        if match is None:
            return False
        del unused[match]
    return True


def _difference(label: str, partition: dict, operands: list[dict], want: list[dict], got: list[dict],
                error: str | None = None) -> dict[str, Any]:  # fmt: skip

    def shown(items: list[dict]) -> list[Any]:
        return [{name: to_export_json(value) for name, value in item.items()} for item in items]

    return {"case": label, "partition": to_export_json(partition), "operands": [to_export_json(v) for v in operands],
            "dynamodb": shown(want), "bigtable": shown(got)} | ({"bigtable_error": error} if error else {})  # fmt: skip
