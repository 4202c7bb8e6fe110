"""`validate` as a Beam run against the real servers: every kind of difference, a repair round, an export source,
a random sample; the target checked cell by cell after a repair. The kill -9 + --resume test is in
test_validate_resume.py."""

from __future__ import annotations

import json
import os
import stat

import boto3
import pytest

from ddb2bt.app.migrate import migrate
from ddb2bt.app.options import RunOptions
from ddb2bt.app.validate import validate
from ddb2bt.mappers.spec import MappingSpec
from ddb2bt.pipelines.dynamodb.client import create_table, put_items

from .cells import drop_rows, expected_cells, read_cells
from .tables import dynamodb_calls

TS = 1_704_067_200_000_000  # 2024-01-01, the spec's migration_time
ORDERS = 12
SEGMENTS = 3


def make_spec(table: str, endpoint: str | None, export: str | None = None) -> MappingSpec:
    """Orders: the order, its lines (qualifier = SKU) and its tags (kept in another partition) fold into one row."""
    source = {"export": {"path": export}} if export else {"table": table, "endpoint_url": endpoint,
                                                          "region": "us-east-1"}
    return MappingSpec.model_validate({
        "source": {**source, "partition_key": "pk", "sort_key": "sk"},
        "target": {"table": table, "families": {"o": {}, "line": {"max_versions": 1}, "tag": {}}},
        "migration_time": "2024-01-01T00:00:00Z",
        "entities": [
            {"name": "order", "match": {"sk": "order"}, "row_key": "{pk}",
             "columns": [{"attribute": "total", "family": "o", "encoding": "decimal"},
                         {"attribute": "note", "family": "o"}], "drop": ["sk"]},
            {"name": "line", "match": {"sk": {"prefix": "line#"}}, "row_key": "{pk}",
             "columns": [{"attribute": "qty", "family": "line", "qualifier": "{sku}", "encoding": "decimal"}],
             "drop": ["sk"]},
            {"name": "tag", "match": {"pk": {"prefix": "tag#"}}, "row_key": "{order}",
             "columns": [{"attribute": "label", "family": "tag", "qualifier": "{sk}"}], "drop": ["pk"]},
        ],
    })


def make_items(collision: bool) -> list[dict]:
    items = []
    for n in range(ORDERS):
        order = f"o{n:02d}"
        items.append({"pk": {"S": order}, "sk": {"S": "order"}, "total": {"N": f"{n}.50"}, "note": {"S": f"n{n}"}})
        for i, sku in enumerate(("hat", "cap", "scarf")[: 1 + n % 3]):
            items.append({"pk": {"S": order}, "sk": {"S": f"line#{i}"}, "sku": {"S": sku}, "qty": {"N": str(i + 1)}})
        # the order's tags live in a partition of their own: its row is folded from items far apart in the scan
        items.append({"pk": {"S": f"tag#{order}"}, "sk": {"S": "colour"}, "order": {"S": order}, "label": {"S": "red"}})
    if collision:  # two lines of one SKU on order o07: one (row, family, qualifier, timestamp) for two items
        items.append({"pk": {"S": "o07"}, "sk": {"S": "line#9"}, "sku": {"S": "hat"}, "qty": {"N": "9"}})
    return items


def load(endpoint: str, table: str, items: list[dict]) -> None:
    client = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1")
    create_table(client, table, "pk", "sk")
    put_items(client, table, items)


def mutate(spec: MappingSpec, row_key: bytes, *mutations) -> None:
    from google.cloud.bigtable.data import BigtableDataClient

    with BigtableDataClient(project=spec.target.project) as client:
        client.get_table(spec.target.instance, spec.target.table).mutate_row(row_key, list(mutations))


def tamper(spec: MappingSpec) -> None:
    """One of each: a deleted row, deleted cells, a changed value, an extra cell and version, an extra row. The row
    is dropped, not emptied: the repair writes it again, and the emulator may lose a write into an emptied row."""
    from google.cloud.bigtable.data import DeleteRangeFromColumn, SetCell

    drop_rows(spec.target, [b"o02"])
    mutate(spec, b"o04", DeleteRangeFromColumn("line", b"cap"))
    mutate(spec, b"o03", SetCell("o", b"total", b"99", TS))
    mutate(spec, b"o05", SetCell("line", b"gloves", b"1", TS))  # o05 has lines hat, cap, scarf and a tag
    mutate(spec, b"o06", SetCell("o", b"note", b"old note", TS - 1000))
    mutate(spec, b"o08", DeleteRangeFromColumn("tag", b"colour"))  # the tag's group is far from the order's
    mutate(spec, b"zz-orphan", SetCell("o", b"total", b"1", TS))


@pytest.fixture
def orders(bigtable_env, moto_server, unique_name, tmp_path):
    def make(collision: bool) -> tuple[MappingSpec, list[dict]]:
        items = make_items(collision)
        load(moto_server.endpoint, unique_name, items)
        spec = make_spec(unique_name, moto_server.endpoint)
        result = migrate(spec, RunOptions(run_dir=str(tmp_path / "migrate"), total_segments=SEGMENTS))
        assert result.ok, result.problems
        return spec, items

    return make


def records(path: str) -> list[dict]:
    with open(path) as handle:
        return [json.loads(line) for line in handle]


def test_every_kind_of_difference(orders, tmp_path):
    spec, items = orders(collision=True)
    clean = validate(spec, RunOptions(run_dir=str(tmp_path / "clean"), total_segments=SEGMENTS))
    # the collision is there from the start (and the item it overwrote reads back wrong); the folded rows (tags far
    # away in the scan) compare clean
    assert clean.counts == {"collision": 1, "different_attribute": 1}, clean.first
    assert [(r["item_key"]["sk"]["S"], r["expected"], r["found"]) for r in clean.first
            if r["kind"] == "different_attribute"] == [("line#0", {"N": "1"}, {"N": "9"})]
    assert clean.totals["items_read"] == len(items) and clean.totals["items_compared"] == len(items)
    assert clean.totals["cells_expected"] == len(items) + ORDERS  # orders write 2 cells; counted before de-dup
    tamper(spec)

    result = validate(spec, RunOptions(run_dir=str(tmp_path / "v"), total_segments=SEGMENTS), target_scan=True)
    assert not result.ok and result.problems == []
    assert result.counts == {"collision": 1, "missing_row": 5, "missing_cell": 2, "different_value": 1,
                             "extra_cell": 1, "extra_version": 1, "extra_row": 1, "different_attribute": 6}
    assert stat.S_IMODE(os.stat(result.prepared.differences).st_mode) == 0o600
    found = {(r["kind"], r["row_key"], (r.get("column") or {}).get("qualifier"), r.get("attribute")): r
             for r in records(result.prepared.differences)}
    order = {"pk": {"S": "o03"}, "sk": {"S": "order"}}
    different = found[("different_value", "o03", "total", None)]
    assert (different["item_key"], different["expected"], different["found"]) == (order, "3.5", "99")  # decimal: canonical text
    assert different["column"] == {"family": "o", "qualifier": "total", "timestamp_micros": TS}
    assert found[("different_attribute", "o03", None, "total")]["expected"] == {"N": "3.50"}
    assert found[("different_attribute", "o03", None, "total")]["found"] == {"N": "99"}
    assert found[("missing_cell", "o04", "cap", None)]["item_key"] == {"pk": {"S": "o04"}, "sk": {"S": "line#1"}}
    # the decoder: qty is gone, and so is the sku its qualifier held
    assert found[("different_attribute", "o04", None, "qty")]["found"] is None
    assert found[("different_attribute", "o04", None, "sku")]["expected"] == {"S": "cap"}
    # o08's tag cell is missing; the order's group (which owns the rest of the row) makes no extras of it
    assert found[("missing_cell", "o08", "colour", None)]["item_key"] == {"pk": {"S": "tag#o08"}, "sk": {"S": "colour"}}
    assert not [key for key in found if key[0].startswith("extra") and key[1] == "o08"]
    assert {k[1] for k in found if k[0] == "missing_row"} == {"o02"}  # the order, its 3 lines and its tag
    assert found[("extra_cell", "o05", "gloves", None)]["found"] == "1"
    assert found[("extra_version", "o06", "note", None)]["found"] == "old note"
    assert found[("extra_version", "o06", "note", None)]["item_key"] == {"pk": {"S": "o06"}, "sk": {"S": "order"}}
    assert ("extra_row", "zz-orphan", None, None) in found
    collision = found[("collision", "o07", "hat", None)]
    assert [key["sk"]["S"] for key in collision["items"]] == ["line#0", "line#9"]
    assert collision["expected"] == ["1", "9"] and collision["found"] == "9"


def test_repair_then_validate_finds_nothing_and_other_items_cells_survive(orders, tmp_path):
    spec, items = orders(collision=False)
    tamper(spec)
    before = read_cells(spec.target)

    looked = validate(spec, RunOptions(run_dir=str(tmp_path / "look"), total_segments=SEGMENTS), target_scan=True)
    assert looked.counts and read_cells(spec.target) == before  # without --repair nothing is written

    repaired = validate(spec, RunOptions(run_dir=str(tmp_path / "repair"), total_segments=SEGMENTS), repair=True,
                        target_scan=True)
    assert repaired.problems == [], repaired.problems
    # what it found is what it repaired; a row whose groups are far apart (o02's tag) may be found missing by the
    # first group and then, once that group repaired it, lacking cells (and attributes) by the second
    shifting = ("missing_row", "missing_cell", "different_attribute")
    assert {kind: n for kind, n in repaired.counts.items() if kind not in shifting} == {
        kind: n for kind, n in looked.counts.items() if kind not in shifting}
    # o02 (the order group's whole row, and its tag's group apart), o04's and o08's missing cells, o03's value
    assert repaired.totals["repair_rows"] == 5 and repaired.counters["rows_written"] == 5
    assert repaired.totals["repair_deletes"] == 3  # the extra cell, the extra version, the orphan row's cell
    assert repaired.counters["cells_deleted"] == 3

    again = validate(spec, RunOptions(run_dir=str(tmp_path / "again"), total_segments=SEGMENTS), target_scan=True)
    assert again.ok and again.counts == {}, again.first
    # cell by cell: exactly what one clean migration writes, so the shared rows kept every other item's cells
    assert read_cells(spec.target) == expected_cells(spec, items)
    assert before[b"o05"] != read_cells(spec.target)[b"o05"]
    assert [c for c in before[b"o05"] if c[1] != b"gloves"] == read_cells(spec.target)[b"o05"]


def test_an_export_source_and_a_random_sample(bigtable_env, moto_server, unique_name, tmp_path):
    from google.cloud.bigtable.data import SetCell

    from .export_fixtures import write_export

    items = make_items(collision=False)
    export = write_export(tmp_path / "export", items, files=3)
    spec = make_spec(unique_name, None, export=export)
    assert migrate(spec, RunOptions(run_dir=str(tmp_path / "m"))).ok
    mutate(spec, b"o03", SetCell("o", b"total", b"99", TS))

    result = validate(spec, RunOptions(run_dir=str(tmp_path / "v")))
    assert result.counts == {"different_value": 1, "different_attribute": 1}
    assert result.totals["items_compared"] == len(items) and result.problems == []

    sampled = validate(spec, RunOptions(run_dir=str(tmp_path / "s"), sample=10))
    assert sampled.totals["items_read"] == 10 and sampled.problems == []
    assert set(sampled.counts) <= {"different_value", "different_attribute"}  # never extras: other items not read


def test_live_progress_is_kept_as_migrate_keeps_it(orders, tmp_path):
    """A local validation keeps live totals in `<run dir>/progress`, the files migrate's run keeps (items and Scan
    pages read, dead letters, skipped, summed over processes): what a user's progress and the benchmark's CPU fit
    read while it runs. They count what the comparison counts, and `progress` shows items read before any part is
    finished."""
    from dataclasses import replace

    from ddb2bt.app import validate as use_case
    from ddb2bt.pipelines.run.progress import Reporter, read_progress

    spec, items = orders(collision=False)
    migrated = read_progress(str(tmp_path / "migrate" / "progress"))
    run_dir = tmp_path / "v"
    (run_dir / "progress").mkdir(parents=True)
    (run_dir / "progress" / "old-attempt.json").write_text('{"items_read": 999}')  # an earlier attempt's: forgotten
    result = validate(spec, RunOptions(run_dir=str(run_dir), total_segments=SEGMENTS))
    assert result.ok, (result.counts, result.problems)
    live = read_progress(str(run_dir / "progress"))
    assert live["items_read"] == result.totals["items_read"] == len(items)
    assert live["skipped"] == result.totals.get("skipped", 0) and live["dead_lettered"] == result.totals.get("not_mapped", 0)
    assert live["pages_read"] >= SEGMENTS
    assert {name: live[name] for name in ("items_read", "pages_read", "dead_lettered", "skipped")} == {
        name: migrated[name] for name in ("items_read", "pages_read", "dead_lettered", "skipped")}

    # while it runs: no part finished yet, the map step's count is the figure shown
    fresh = replace(result.prepared, run_dir=str(tmp_path / "running"))
    assert use_case.progress(fresh)["items_read"] == 0
    Reporter(str(tmp_path / "running" / "progress")).add({"items_read": 7}, check_stop=False)
    assert use_case.progress(fresh)["items_read"] == 7
    # a dry run keeps none
    assert use_case.progress(replace(fresh, dry_run=True))["items_read"] == 0


def test_a_local_validate_describes_its_source_once(orders, tmp_path, monkeypatch):
    """As a local migrate: the scan's read rate comes from the description made while the validation was prepared,
    so DynamoDB is asked DescribeTable once (with DescribeTimeToLive, together) before the Scan pages, not again in
    the scan's setup."""
    spec, items = orders(False)
    calls = dynamodb_calls(monkeypatch)
    result = validate(spec, RunOptions(run_dir=str(tmp_path / "validate"), total_segments=SEGMENTS))
    assert result.totals["items_read"] == len(items) and result.counts == {}, (result.totals, result.counts)
    assert sorted(calls[:2]) == ["DescribeTable", "DescribeTimeToLive"], calls
    assert set(calls[2:]) == {"Scan"}, calls
