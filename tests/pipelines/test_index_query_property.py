"""Index queries through the emulator, as a property, against DynamoDB's documented index rules: generated items
whose GSI key attributes are sometimes absent, of another type than the index declares, empty, or longer than an
index key may be (DynamoDB's index key violations: such an item is in no index), written to the emulator as migrate
writes them (each item's row and its index rows), then every partition of the index queried through the pattern's
translation — the whole partition and `>=` a middle value, in both orders, with and without a limit. Bigtable's answer
must be exactly the items DynamoDB's index holds under that key, in index sort-key order.

No local server models the violations (dynalite accepts an empty GSI key; moto's backfill keeps an empty or
mistyped one), so the judge here is the rule as the developer guide states it ("Detecting and correcting index key
violations"): the item's index key values are of the declared types, non-empty, and at most 2048 bytes (partition
key) or 1024 (sort key)."""

from __future__ import annotations

import itertools
import os
from dataclasses import replace

import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from ddb2bt.mappers.access import holds, key_order, translate
from ddb2bt.mappers.analysis.access_plan import decode_rows
from ddb2bt.mappers.attrvalue import binary
from ddb2bt.mappers.compiler import compile_spec
from ddb2bt.mappers.decode import comparable, compile_decoder
from ddb2bt.mappers.spec import MappingSpec
from ddb2bt.pipelines.access.reads import BigtableReader
from ddb2bt.pipelines.bigtable.entries import to_mutation_entry
from ddb2bt.pipelines.bigtable.sink import ensure_table

from .roundtrip_cases import KEY_TEXT, NUMBER, SETTINGS

TABLES = itertools.count()
KIND = {"S": 0, "N": 1, "B": 2}


def index_value(kind: str) -> st.SearchStrategy[dict]:
    """Mostly a few values of the declared kind (so partitions hold several items), sometimes a violation."""
    good = {"S": st.sampled_from(["a", "b", "a\x00", "é"]).map(lambda s: {"S": s}),
            "N": st.sampled_from(["-1.5", "0", "2", "1E+3"]).map(lambda n: {"N": n}),
            "B": st.sampled_from([b"\x00", b"\x7f", b"\x80\x00"]).map(lambda b: {"B": b})}[kind]  # fmt: skip
    other = st.one_of(KEY_TEXT.map(lambda s: {"S": s}), NUMBER.map(lambda n: {"N": n}),
                      st.binary(min_size=1, max_size=3).map(lambda b: {"B": b})).filter(lambda v: kind not in v)  # fmt: skip
    empty = st.just({"S": ""} if kind == "S" else {"B": b""}) if kind != "N" else st.nothing()
    long = st.just({"S": "x" * 2049} if kind == "S" else {"B": b"x" * 2049}) if kind != "N" else st.nothing()
    return st.one_of(good, good, good, other, empty, long)


@st.composite
def cases(draw) -> tuple[str, str, list[dict]]:
    pk_kind, sk_kind = draw(st.sampled_from("SNB")), draw(st.sampled_from("SNB"))
    found = []
    for number in range(draw(st.integers(1, 12))):
        item = {"pk": {"S": f"p{number % 3}"}, "sk": {"S": f"s{number}"}, "n": {"N": str(number)}}
        if draw(st.integers(0, 5)):  # sparse: most items in the index, some not
            item["g"] = draw(index_value(pk_kind))
        if draw(st.integers(0, 5)):
            item["gs"] = draw(index_value(sk_kind))
        found.append(item)
    return pk_kind, sk_kind, found


def in_index(item: dict, pk_kind: str, sk_kind: str) -> bool:
    """DynamoDB's rule: both index keys present, of the declared types, non-empty, not longer than a key may be."""
    for name, kind, limit in (("g", pk_kind, 2048), ("gs", sk_kind, 1024)):
        value = item.get(name)
        if value is None or kind not in value:
            return False
        size = len(value["S"].encode()) if kind == "S" else len(binary(value["B"])) if kind == "B" else 1
        if not 0 < size <= limit:
            return False
    return True


def spec_for(name: str, pk_kind: str, sk_kind: str, patterns: list[dict]) -> MappingSpec:
    return MappingSpec.model_validate({
        "source": {"table": name, "partition_key": "pk", "sort_key": "sk"},
        "target": {"table": name, "families": {"d": {"max_versions": 1}, "i": {"max_versions": 1}}},
        "migration_time": "2024-01-01T00:00:00Z",
        "entities": [{"name": "e", "row_key": "{pk}#{sk}", "rest": {"family": "d", "encoding": "ddb_json"}}],
        "indexes": [{"name": "GSI1", "type": "global", "partition_key": "g", "sort_key": "gs",
                     "partition_key_type": pk_kind, "sort_key_type": sk_kind, "projection": {"type": "ALL"},
                     "family": "i", "target": {"prefix": "~gsi1#"}}],
        "access_patterns": patterns,
    })  # fmt: skip


@pytest.mark.servers
@settings(max_examples=int(os.environ.get("INDEX_EXAMPLES", 8)), phases=(Phase.explicit, Phase.reuse, Phase.generate),
          **SETTINGS)  # fmt: skip
@given(cases())
def test_index_queries_answer_as_dynamodbs_index_does(servers, case):
    from google.cloud.bigtable.data import BigtableDataClient

    pk_kind, sk_kind, items = case
    name = f"iq{os.getpid()}x{next(TABLES)}"
    index = {"name": "GSI1", "type": "global", "partition_key": "g", "sort_key": "gs"}
    patterns = [{"name": f"p{i}", "index": index, "scan_index_forward": forward, "limit": limit,
                 **({"sort_key": {"operator": ">="}} if ranged else {})}
                for i, (forward, limit, ranged) in enumerate(itertools.product([True, False], [None, 2], [False, True]))]
    spec = spec_for(name, pk_kind, sk_kind, patterns)
    ensure_table(spec.target)
    rows = [compile_spec(spec).map_item(item) for item in items]
    entries = [to_mutation_entry(row) for row in rows] + [to_mutation_entry(i) for row in rows for i in row.index_rows]
    with BigtableDataClient(project=spec.target.project) as client:
        client.get_table(spec.target.instance, name).bulk_mutate_rows(entries)

    indexed = [item for item in items if in_index(item, pk_kind, sk_kind)]
    types = {"pk": "S", "sk": "S", "g": pk_kind, "gs": sk_kind}
    decoder = compile_decoder(spec, types)
    partitions = {repr(comparable(item["g"])): item["g"] for item in items if "g" in item}
    with BigtableReader(spec.target) as reader:
        for pattern in spec.access_patterns:
            translation = translate(spec, pattern, types)
            for partition in partitions.values():
                members = sorted((item for item in indexed if comparable(item["g"]) == comparable(partition)),
                                 key=lambda item: key_order(item["gs"]))  # fmt: skip
                operands = [members[len(members) // 2]["gs"]] if members and pattern.sort_key else [{sk_kind: {
                    "S": "a", "N": "0", "B": b"\x7f"}[sk_kind]}] if pattern.sort_key else []  # fmt: skip
                if pattern.sort_key:
                    members = [item for item in members if holds(">=", operands, item["gs"])]
                if not pattern.scan_index_forward:
                    members.reverse()
                want = members[: pattern.limit] if pattern.limit else members
                if KIND.get(next(iter(partition))) is None or pk_kind not in partition:
                    want = []  # DynamoDB refuses a query with a mistyped key: nothing is what the index has for it
                shaped = replace(translation, spec_pattern=pattern)
                got = shaped.finish(decode_rows(decoder, reader.rows(shaped.read(partition, operands)),
                                                shaped.index_rows), partition, operands)  # fmt: skip
                # ties on the index sort key come in an order DynamoDB does not specify: compare keys in order, and
                # the items of each key as a set (a limit cutting a run of ties: any of them)
                assert [key_order(item["gs"]) for item in got] == [key_order(item["gs"]) for item in want], (
                    pattern.name, partition, operands)
                everything = {repr(sorted((k, comparable(v)) for k, v in item.items())) for item in indexed}
                assert all(repr(sorted((k, comparable(v)) for k, v in item.items())) in everything for item in got)
                assert len({repr(comparable(item["sk"])) for item in got}) == len(got)
