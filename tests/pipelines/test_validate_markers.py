"""The compare step holds a segment's done marker back while the lookup of the segment's last rows runs (so that it
overlaps the next segment's scan and map), and still emits every line and figure of a segment before its marker:
Persist finishes a segment's part files and marks it done when the marker arrives, so anything of the segment
after it would be lost to a resumed run, and anything of the next segment before it counted twice."""

from __future__ import annotations

import json

import pytest

from ddb2bt.mappers.compiler import compile_spec
from ddb2bt.mappers.spec import MappingSpec
from ddb2bt.pipelines.bigtable.sink import Destination
from ddb2bt.pipelines.run.batches import Batch, SegmentDone
from ddb2bt.pipelines.run.dead_letters import DeadLetter
from ddb2bt.pipelines.validate.pipeline import Found, Tally, _CompareFn

SPEC = {
    "source": {"table": "Orders", "partition_key": "pk", "sort_key": "sk"},
    "target": {"table": "orders", "families": {"o": {}}},
    "migration_time": "2024-01-01T00:00:00Z",
    "entities": [{"name": "order", "row_key": "{pk}", "columns": [{"attribute": "total", "family": "o"}],
                  "drop": ["sk"]}],
}


def batch(*pks: str) -> Batch:
    compiled = compile_spec(MappingSpec.model_validate(SPEC))
    items = [{"pk": {"S": pk}, "sk": {"S": "order"}, "total": {"S": "1"}} for pk in pks]
    return Batch([(compiled.map_item(item), item) for item in items])


@pytest.mark.servers
def test_each_segments_lines_and_figures_come_before_its_marker(bigtable_env, unique_name):
    from google.cloud.bigtable import Client

    Client(project="markers", admin=True).instance("i").table(unique_name).create(column_families={"o": None})
    spec = {**SPEC, "target": {**SPEC["target"], "table": unique_name, "project": "markers", "instance": "i"}}
    compare = _CompareFn(spec, Destination("markers", "i", unique_name), 0, repair=False, extras=True,
                         scan_order=True, collect_keys=False)
    compare.setup()
    compare.start_bundle()
    stream = [batch("a1", "a2"), Tally(2, 0), batch("a3", "a3"), Tally(3, 1), SegmentDone(0),
              DeadLetter({"pk": {"S": "x"}}, "map", "bad"), batch("b1"), Tally(2, 0), SegmentDone(1),
              batch("c1"), Tally(1, 0)]
    out = []
    try:
        for element in stream:
            out.extend(compare.process(element))
        out.extend(windowed.value for windowed in compare.finish_bundle())
    finally:
        compare.teardown()

    segments: list[dict] = [{"rows": [], "figures": {}}]
    for element in out:
        if isinstance(element, SegmentDone):
            assert element.segment == len(segments) - 1
            segments.append({"rows": [], "figures": {}})
        elif isinstance(element, Found):
            lines = [json.loads(line) for line in element.differences]
            segments[-1]["rows"] += [line["row_key"] for line in lines if line["kind"] == "missing_row"]
            for name, count in element.stats:
                segments[-1]["figures"][name] = segments[-1]["figures"].get(name, 0) + count
    assert [sorted(segment["rows"]) for segment in segments] == [["a1", "a2", "a3", "a3"], ["b1"], ["c1"]]
    assert [{name: segment["figures"].get(name, 0) for name in ("items_read", "skipped", "not_mapped", "items_compared")}
            for segment in segments] == [
        {"items_read": 5, "skipped": 1, "not_mapped": 0, "items_compared": 4},
        {"items_read": 2, "skipped": 0, "not_mapped": 1, "items_compared": 1},
        {"items_read": 1, "skipped": 0, "not_mapped": 0, "items_compared": 1}]
