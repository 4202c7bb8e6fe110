"""Folded rows in the plan: every cell of a row several items write, versions newest first, explained."""

from ddb2bt.mappers.analysis.plan import build_plan
from ddb2bt.mappers.spec import MappingSpec

NOW_MS = 1_700_000_000_000


def plan_for(max_versions, timestamp):
    spec = MappingSpec.model_validate({
        "source": {"table": "T", "partition_key": "pk", "sort_key": "sk"},
        "target": {"table": "t", "families": {"f": {"max_versions": max_versions}}},
        "migration_time": "2024-01-01T00:00:00Z",
        "entities": [{"name": "reading", "row_key": "{pk}", "timestamp": timestamp,
                      "columns": [{"attribute": "v", "family": "f", "qualifier": "value"}], "drop": ["sk", "at"]}],
    })  # fmt: skip
    items = [{"pk": {"S": "dev1"}, "sk": {"S": f"r{i}"}, "v": {"S": f"value {i}"}, "at": {"N": str(1_700_000_000 + i)}}
             for i in range(3)] + [{"pk": {"S": "dev2"}, "sk": {"S": "r0"}, "v": {"S": "alone"}, "at": {"N": "1700000000"}}]
    return build_plan(spec, items, now_ms=NOW_MS)


def test_a_row_of_three_readings_keeps_two_versions():
    (row,) = plan_for(2, {"attribute": "at"}).folded_rows  # dev2 has one item: not folded
    assert row.row_key == "dev1" and [(i.number, i.entity, i.key) for i in row.items] == [
        (1, "reading", "pk=dev1, sk=r0"), (2, "reading", "pk=dev1, sk=r1"), (3, "reading", "pk=dev1, sk=r2")]
    assert [(c.column, c.version, c.versions, c.value, c.item) for c in row.cells] == [
        ("f:value", 1, 3, "value 2", 3), ("f:value", 2, 3, "value 1", 2), ("f:value", 3, 3, "value 0", 1)]
    assert row.versions == ("f:value holds 3 versions, written by items #3, #2, #1, each at its own time (reading: "
                            "attribute at); a read returns the newest first. Family f keeps at most 2 versions: GC drops "
                            "the 1 oldest.",)


def test_cells_at_one_time_replace_each_other():
    (row,) = plan_for(5, None).folded_rows  # every cell at the migration time
    assert "(reading: migration_time)" in row.versions[0]
    assert "Only 1 distinct timestamp: cells of one column at one time replace each other, so 2 of them will not be " \
           "kept." in row.versions[0]
