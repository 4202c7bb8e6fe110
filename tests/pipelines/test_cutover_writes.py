"""The change writers against the Bigtable emulator: the catch-up's overlapped writes (the client's batcher) and the
tail's waited ones; an item's changes never in flight together; an entry Bigtable refuses is a dead letter."""

from __future__ import annotations

from ddb2bt.mappers.changes import Change, kind_of_change
from ddb2bt.mappers.compiler import compile_spec
from ddb2bt.mappers.spec import MappingSpec
from ddb2bt.pipelines.bigtable.sink import Destination, ensure_table
from ddb2bt.pipelines.cutover.change_sink import ChangeApplier, OverlappedWrites

from .cells import expected_cells, read_cells
from ddb2bt.pipelines.cutover.workload import make_spec

NOW_MS = 1_700_000_000_000


def post(pk: str, **attributes: str) -> dict:
    item = {"pk": {"S": pk}, "sk": {"S": "post"}, "kind": {"S": "post"}, "Title": {"S": "t"}}
    item.update({name: {"S": value} for name, value in attributes.items()})
    return item


def comment(pk: str, sk: str, text: str) -> dict:
    return {"pk": {"S": pk}, "sk": {"S": sk}, "kind": {"S": "comment"}, "Text": {"S": text},
            "At": {"N": "1600000000000"}}


def change(old: dict | None, new: dict | None) -> Change:
    keys = {name: (new or old)[name] for name in ("pk", "sk")}  # type: ignore[index]
    return Change(keys, old, new, kind_of_change(old, new), 1)


def test_overlapped_writes_drain_before_an_item_already_in_flight(bigtable_env, unique_name):
    spec = make_spec(unique_name)
    ensure_table(spec.target)
    applier = ChangeApplier(Destination.from_target(spec.target), compile_spec(spec, now_ms=NOW_MS))
    writes = OverlappedWrites(applier)
    try:
        first = [(change(None, post(f"p{n}", A="1")),) for n in range(50)]
        writes.add(first)
        assert writes.pending_entries == 50
        # p7 again (an attribute removed, one added), and p3 expired by TTL: everything in flight is written
        # first, then only these two are pending.
        expired = change(post("p3", A="1"), None)._replace(ttl=True)
        writes.add([(change(post("p7", A="1"), post("p7", B="2")),), (expired,)])
        assert writes.pending_entries == 2
        outcome = writes.drain()
    finally:
        applier.close()
    assert (outcome.read, outcome.applied, outcome.dead_lettered, outcome.skipped) == (52, 52, 0, 0)
    assert outcome.ttl_deletes == 1  # applied like any delete, and counted
    assert outcome.cells_deleted == 1 + 2  # x:A of p7's first version; p3's d:Title and x:A
    final = [post(f"p{n}", A="1") for n in range(50) if n not in (3, 7)] + [post("p7", B="2")]
    assert read_cells(spec.target) == expected_cells(spec, final, now_ms=NOW_MS)


def test_an_entry_bigtable_refuses_is_a_dead_letter_the_others_are_applied(bigtable_env, unique_name):
    """Comments go to family 'gone', which the table lacks: Bigtable refuses their entries for good."""
    spec = make_spec(unique_name)
    ensure_table(spec.target)  # families d, c, x
    data = spec.model_dump(mode="json", by_alias=True)
    data["target"]["families"]["gone"] = None
    comment_entity = next(entity for entity in data["entities"] if entity["name"] == "comment")
    comment_entity["columns"][0]["family"] = "gone"
    compiled = compile_spec(MappingSpec.model_validate(data), now_ms=NOW_MS)
    changes = [(change(None, post("p1", A="1")),), (change(None, comment("p1", "c#1", "hi")),),
               (change(None, post("p2")),)]
    for overlapped in (True, False):
        applier = ChangeApplier(Destination.from_target(spec.target), compiled)
        try:
            if overlapped:
                writes = OverlappedWrites(applier)
                writes.add(changes)
                outcome = writes.drain()
            else:
                outcome = applier.apply(changes)
        finally:
            applier.close()
        assert (outcome.read, outcome.applied, outcome.dead_lettered) == (3, 2, 1), overlapped
        (letter,) = outcome.dead_letters
        assert letter.stage == "write" and letter.reason.startswith("Bigtable refused the change")
        assert letter.item["Keys"] == {"pk": {"S": "p1"}, "sk": {"S": "c#1"}}  # the whole change record
        assert letter.item["NewImage"]["Text"] == {"S": "hi"}
    assert read_cells(spec.target) == expected_cells(spec, [post("p1", A="1"), post("p2")], now_ms=NOW_MS)
