"""The catch-up's apply step takes a batch of one change per item (``OverlappedWrites.add_each``,
``ChangeApplier.prepare_each``): the same entries, bytes, owners, groups and counts as the
general path (``prepare`` of one group per change), over generated changes (inserts, modifies that switch entity, move timestamps or lose a
required attribute, removes, TTL deletes, skipped images), with and without index rows in a table of their own and
with an aggregate (counter) family."""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings, strategies as st

from ddb2bt.mappers.changes import Change, kind_of_change
from ddb2bt.mappers.compiler import compile_spec
from ddb2bt.mappers.spec import MappingSpec
from ddb2bt.pipelines.bigtable.sink import Destination, ensure_table
from ddb2bt.pipelines.cutover.change_sink import ChangeApplier, OverlappedWrites
from ddb2bt.pipelines.cutover.workload import make_spec, random_item

from .cells import expected_cells, read_cells

NOW_MS = 1_700_000_000_000


def _spec(variant: str) -> MappingSpec:
    spec = make_spec("fast-path", indexes=variant == "indexes")
    if variant != "counters":
        return spec
    data = spec.model_dump(mode="json", by_alias=True)
    data["target"]["families"]["n"] = {"aggregate": "sum"}
    post = next(entity for entity in data["entities"] if entity["name"] == "post")
    post["columns"].append({"attribute": "C", "family": "n", "encoding": "int64"})
    return MappingSpec.model_validate(data)


def _image(rng: random.Random, pk: str, sk: str) -> dict | None:
    roll = rng.random()
    if roll < 0.15:
        return None
    if roll < 0.2:  # skipped by the spec
        return {"pk": {"S": pk}, "sk": {"S": sk}, "kind": {"S": "meta"}}
    return random_item(rng, pk, sk)


def _changes(seed: int, count: int) -> list[Change]:
    rng, changes = random.Random(seed), []
    for number in range(count):
        pk, sk = f"p{number}", rng.choice(["post", "c#0", "c#1"])
        old, new = _image(rng, pk, sk), _image(rng, pk, sk)
        if old is None and new is None:
            new = random_item(rng, pk, sk)
        if old is not None and new is not None and rng.random() < 0.2:
            new = dict(old)  # an unchanged image (a write of the same item)
        ttl = new is None and rng.random() < 0.5
        changes.append(Change({"pk": {"S": pk}, "sk": {"S": sk}}, old, new, kind_of_change(old, new),
                              1_000 + number, "", ttl))
    return changes


def _entry(entry) -> tuple:
    entry.size()
    return type(entry), entry.row_key, entry.tuples, entry.size(), entry.wire, entry.data_bytes


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32), count=st.integers(1, 40),
       variant=st.sampled_from(["plain", "indexes", "counters"]))
def test_prepare_each_is_prepare_of_one_group_per_change(bigtable_env, seed, count, variant):
    spec = _spec(variant)
    applier = ChangeApplier(Destination.from_target(spec.target), compile_spec(spec, now_ms=NOW_MS))
    try:
        changes = _changes(seed, count)
        fast, general = applier.prepare_each(changes), applier.prepare([(change,) for change in changes])
    finally:
        applier.close()
    assert [_entry(entry) for entry in fast.entries] == [_entry(entry) for entry in general.entries]
    assert (fast.owners, fast.tables, fast.groups) == (general.owners, general.tables, general.groups)
    assert fast.outcome == general.outcome
    assert fast.outcome.read == count
    refused = {index: "refused" for index in range(0, len(fast.entries), 3)}  # some entries refused for good
    assert ChangeApplier.settle(fast, refused) == ChangeApplier.settle(general, refused)


def test_the_generated_changes_reach_every_branch(bigtable_env):
    """The property above is not vacuous: its changes give entries, deletes, index-table rows, counters, skips and
    dead letters."""
    spec, changes = _spec("indexes"), _changes(7, 200)
    applier = ChangeApplier(Destination.from_target(spec.target), compile_spec(spec, now_ms=NOW_MS))
    try:
        prepared = applier.prepare_each(changes)
    finally:
        applier.close()
    assert prepared.outcome.skipped and prepared.outcome.ttl_deletes and prepared.tables
    assert any(mapped.failures for mapped in prepared.groups)
    assert any(len(entry.tuples[0]) == 3 for entry in prepared.entries)  # a delete
    counters = _spec("counters")
    applier = ChangeApplier(Destination.from_target(counters.target), compile_spec(counters, now_ms=NOW_MS))
    try:
        prepared = applier.prepare_each(changes)
    finally:
        applier.close()
    assert any(len(mutation) == 5 for entry in prepared.entries for mutation in entry.tuples)  # an AddToCell


def test_add_each_drains_before_an_item_already_in_flight(bigtable_env, unique_name):
    """``add_each`` (the catch-up's step) keeps ``add``'s order rule: a change of an item already in flight, in the same
    batch or a later one, has everything before it written first; Bigtable ends as the changes applied in order."""
    spec = make_spec(unique_name)
    ensure_table(spec.target)
    applier = ChangeApplier(Destination.from_target(spec.target), compile_spec(spec, now_ms=NOW_MS))
    writes = OverlappedWrites(applier)

    def post(pk: str, **attributes: str) -> dict:
        item = {"pk": {"S": pk}, "sk": {"S": "post"}, "kind": {"S": "post"}, "Title": {"S": "t"}}
        return {**item, **{name: {"S": value} for name, value in attributes.items()}}

    def change(old: dict | None, new: dict | None, ttl: bool = False) -> Change:
        keys = {name: (new or old)[name] for name in ("pk", "sk")}  # type: ignore[index]
        return Change(keys, old, new, kind_of_change(old, new), 1, "", ttl)

    try:
        writes.add_each([change(None, post(f"p{n}", A="1")) for n in range(20)])
        assert writes.pending_entries == 20
        # in one batch: p21 (new), p7 again (A removed, B set), p22, then p7 once more (B removed, A set back): each
        # second change of p7 has what came before it written first
        writes.add_each([change(None, post("p21", A="1")), change(post("p7", A="1"), post("p7", B="2")),
                         change(None, post("p22")), change(post("p7", B="2"), post("p7", A="3"))])
        assert writes.pending_entries == 1  # only the last change of p7 waits
        writes.add_each([change(post("p3", A="1"), None, ttl=True)])
        assert writes.pending_entries == 2
        outcome = writes.drain()
    finally:
        applier.close()
    assert (outcome.read, outcome.applied, outcome.dead_lettered, outcome.skipped) == (25, 25, 0, 0)
    assert outcome.ttl_deletes == 1
    final = [post(f"p{n}", A="1") for n in range(20) if n not in (3, 7)] + [post("p7", A="3"), post("p21", A="1"),
                                                                             post("p22")]
    assert read_cells(spec.target) == expected_cells(spec, final, now_ms=NOW_MS)
