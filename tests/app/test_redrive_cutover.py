"""A cutover's backfill redriven through a fixed spec: the timeline goes on with that spec (app/redrive.py), so its
tail, catch-ups and cutover-status (which maps the backfill's dead letters again) use the spec that maps them."""

from __future__ import annotations

from ddb2bt.app.redrive import _cutover_goes_on_with
from ddb2bt.app.redrive_folder import cutover_of, record
from ddb2bt.mappers.spec import MappingSpec
from ddb2bt.pipelines.cutover import timeline as tl
from ddb2bt.pipelines.run.checkpoint import spec_hash

SPEC = {"source": {"table": "T", "partition_key": "pk"}, "target": {"table": "t", "families": {"d": {}}},
        "entities": [{"name": "item", "row_key": "{pk}", "columns": [{"attribute": "A", "family": "d"}]}]}


def spec(required: bool) -> MappingSpec:
    data = {**SPEC, "entities": [{**SPEC["entities"][0],
                                  "columns": [{"attribute": "A", "family": "d", "required": required}]}]}
    return MappingSpec.model_validate(data)


def test_a_fixed_spec_is_recorded_in_the_cutovers_timeline(tmp_path):
    folder = str(tmp_path)
    assert spec_hash(spec(True)) != spec_hash(spec(False))
    tl.save(folder, tl.Timeline("scan", 1, 1, 1, spec=spec(True).model_dump(mode="json", by_alias=True)))
    _cutover_goes_on_with(folder, spec(False))
    saved = tl.peek(folder)
    assert spec_hash(MappingSpec.model_validate(saved.spec)) == spec_hash(spec(False))


def test_a_folder_without_a_cutover_gets_no_timeline(tmp_path):
    _cutover_goes_on_with(str(tmp_path), spec(False))
    assert list(tmp_path.iterdir()) == []


def test_a_redrive_of_a_cutovers_backfill_letters_leads_its_own_redrive_back_to_the_cutover(tmp_path):
    """Its still-failing letters are images as old as the backfill's: a redrive of them reads the items again too."""
    cutover, redrive, again, plain = (str(tmp_path / name) for name in ("run", "redrive", "again", "plain"))
    tl.save(cutover, tl.Timeline("scan", 1, 1, 1, spec=spec(False).model_dump(mode="json", by_alias=True)))
    record(redrive, cutover + "/dead_letters.jsonl", None, 1, "T", cutover=cutover_of(cutover))
    record(again, redrive + "/dead_letters.jsonl", None, 1, "T", cutover=cutover_of(redrive))
    record(plain, "runs/x/dead_letters.jsonl", None, 1, "T", cutover=cutover_of(str(tmp_path / "x")))
    assert (cutover_of(cutover), cutover_of(redrive), cutover_of(again), cutover_of(plain)) == (
        cutover, cutover, cutover, None)
