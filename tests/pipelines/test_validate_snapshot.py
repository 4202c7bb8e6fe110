"""Changes after the validated snapshot (`validate --as-of`), against the real servers: a migration's run folder
records its backfill's start; items changed in DynamoDB after it are counted apart, not as differences, while a
change that its cells' timestamps do not reveal stays a difference; --repair leaves the later changes alone."""

from __future__ import annotations

import json
import time

import boto3
import pytest

from ddb2bt.app.migrate import migrate
from ddb2bt.app.options import RunOptions
from ddb2bt.app.validate import validate
from ddb2bt.cli.commands.validate import as_json, render
from ddb2bt.mappers.spec import MappingSpec
from ddb2bt.pipelines.dynamodb.client import create_table, put_items
from ddb2bt.pipelines.cutover.timeline import us_to_iso

OLD_MS = 1_704_067_200_000  # 2024-01-01: every item's `updated` before the backfill


def make_spec(table: str, endpoint: str) -> MappingSpec:
    """Documents folded into one row per pk (qualifier = sk), each cell at its item's `updated` time."""
    return MappingSpec.model_validate({
        "source": {"table": table, "endpoint_url": endpoint, "region": "us-east-1", "partition_key": "pk",
                   "sort_key": "sk"},
        "target": {"table": table, "families": {"d": {}}},
        "migration_time": "2024-01-01T00:00:00Z",
        "entities": [{"name": "doc", "row_key": "{pk}", "timestamp": {"attribute": "updated", "format": "epoch_ms"},
                      "columns": [{"attribute": "text", "family": "d", "qualifier": "{sk}"}]}],
    })


def doc(pk: str, sk: str, text: str, updated_ms: int) -> dict:
    return {"pk": {"S": pk}, "sk": {"S": sk}, "text": {"S": text}, "updated": {"N": str(updated_ms)}}


@pytest.mark.servers
def test_changes_after_the_backfill_are_not_differences(bigtable_env, moto_server, unique_name, tmp_path):
    client = boto3.client("dynamodb", endpoint_url=moto_server.endpoint, region_name="us-east-1")
    create_table(client, unique_name, "pk", "sk")
    put_items(client, unique_name, [doc(f"p{n}", sk, f"{n}{sk}", OLD_MS + n) for n in range(4) for sk in "ab"])
    spec = make_spec(unique_name, moto_server.endpoint)
    backfill = str(tmp_path / "migrate")
    assert migrate(spec, RunOptions(run_dir=backfill, total_segments=2)).ok  # records its start: the watermark

    time.sleep(0.01)
    later_ms = int(time.time() * 1000)
    put_items(client, unique_name, [
        doc("p1", "a", "edited", later_ms),  # changed after the backfill, and its timestamp says so
        doc("p9", "a", "new", later_ms),  # created after the backfill
        doc("p2", "b", "tampered", OLD_MS + 2),  # changed by a writer that kept the old `updated`: undetectable
    ])

    plain = validate(spec, RunOptions(run_dir=str(tmp_path / "plain"), total_segments=2))
    assert {"missing_cell", "extra_version", "missing_row", "different_value"} <= set(plain.counts)
    assert plain.after_snapshot == {}

    result = validate(spec, RunOptions(run_dir=str(tmp_path / "v"), total_segments=2), as_of=backfill)
    assert result.problems == [] and not result.ok
    assert result.counts == {"different_value": 1, "different_attribute": 1}  # p2/b only
    assert result.after_snapshot == {"missing_cell": 1, "extra_version": 1, "missing_row": 1}
    assert {(r["kind"], r["row_key"]) for r in result.first} == {("different_value", "p2"), ("different_attribute", "p2")}
    assert result.prepared.snapshot.startswith(f"{backfill}: its backfill, scan of {unique_name} started ")
    shown = "\n".join(render(result, "spec.yaml"))
    assert "changed after the snapshot (not differences): 3 (1 extra version, 1 missing cell, 1 missing row" in shown
    assert "DIFFERENT: 1 different value, 1 different attribute" in shown
    document = json.loads(json.dumps(as_json(result)))  # --format json
    assert document["after_snapshot"] == result.after_snapshot and document["counts"] == result.counts
    assert document["snapshot"]["after_us"] == result.prepared.after_us and document["ok"] is False

    # the rows pass as a Beam job (--target-scan): a row only the target has, written after the snapshot (an item
    # the tail wrote and the source has deleted since, say), is no difference either
    from google.cloud.bigtable.data import BigtableDataClient, SetCell

    with BigtableDataClient(project=spec.target.project) as bigtable:
        bigtable.get_table(spec.target.instance, spec.target.table).mutate_row(
            b"p7", [SetCell("d", b"a", b"gone since", later_ms * 1000)])
    scanned = validate(spec, RunOptions(run_dir=str(tmp_path / "scan"), total_segments=2), as_of=backfill,
                       target_scan=True)
    assert scanned.problems == [] and scanned.counts == result.counts
    assert scanned.after_snapshot == {**result.after_snapshot, "extra_row": 1}

    # a snapshot after the changes: they are differences again
    after = validate(spec, RunOptions(run_dir=str(tmp_path / "after"), total_segments=2),
                     as_of=us_to_iso((later_ms + 1) * 1000))
    assert after.after_snapshot == {} and after.counts == plain.counts

    # --repair rewrites p2/b and leaves what changed after the snapshot to the cutover's catch-up or tail
    repaired = validate(spec, RunOptions(run_dir=str(tmp_path / "r"), total_segments=2), as_of=backfill, repair=True)
    assert repaired.problems == [] and repaired.totals["repair_rows"] == 1
    assert repaired.counters.get("cells_deleted", 0) == 0
    again = validate(spec, RunOptions(run_dir=str(tmp_path / "again"), total_segments=2), as_of=backfill)
    assert again.ok and again.counts == {} and again.after_snapshot == result.after_snapshot


def test_the_snapshot_of_a_run_folder_is_its_timeline_else_its_backfill(tmp_path):
    """An export backfill's snapshot is its exportTime; once catch-ups applied changes, where the timeline ends."""
    from ddb2bt.app.validate import snapshot_time
    from ddb2bt.pipelines.cutover import timeline as tl

    from .export_fixtures import EXPORT_TIME, write_export

    export = write_export(tmp_path / "export", [doc("p1", "a", "x", OLD_MS)], files=1)
    data = make_spec("docs", "http://unused").model_dump(by_alias=True, exclude_none=True)
    data["source"] = {"export": {"path": export}, "partition_key": "pk", "sort_key": "sk"}
    spec = MappingSpec.model_validate(data)
    run_dir = tmp_path / "migrate"
    run_dir.mkdir()
    micros, where = snapshot_time(str(run_dir), spec)
    assert micros == tl.iso_to_us(EXPORT_TIME) and "its backfill, full export" in where

    tl.save(str(run_dir), tl.Timeline("export", micros, OLD_MS, micros + 5_000_000))
    assert snapshot_time(str(run_dir), spec) == (micros + 5_000_000, f"{run_dir}: its timeline applied every change "
                                                 f"up to {tl.us_to_iso(micros + 5_000_000)}")
    assert snapshot_time("2025-01-01T00:00:00Z", spec)[0] == tl.iso_to_us("2025-01-01T00:00:00Z")


def test_rows_found_with_not_one_matching_cell_is_never_ok():
    """Whatever excused the differences (a "now" other than the run's, say), a run that found rows and matched none
    of their cells validated nothing: a problem, so exit 1, never "OK"."""
    from ddb2bt.app.validate import reconcile

    read = {"items_read": 3, "items_compared": 3}
    nothing = reconcile({**read, "rows_found": 3, "cells_expected": 9, "cells_matched": 0}, read, read, sample=False)
    assert len(nothing) == 1 and nothing[0].startswith("not one expected cell matched in the 3 rows found")
    assert reconcile({**read, "rows_found": 3, "cells_expected": 9, "cells_matched": 1}, read, read, sample=False) == []
    assert reconcile({**read, "rows_found": 0, "cells_expected": 9, "cells_matched": 0}, read, read, sample=False) == []
