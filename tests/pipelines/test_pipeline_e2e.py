"""The whole migration on DirectRunner: real DynamoDB servers (moto, dynalite) -> real Bigtable emulator."""

from __future__ import annotations

import json
import gzip
import os
import stat

import pytest

from ddb2bt.mappers.spec import MappingSpec
from ddb2bt.pipelines.run import checkpoint as ckpt
from ddb2bt.app.migrate import migrate
from ddb2bt.app.options import RunOptions
from ddb2bt.mappers.errors import UsageError
from ddb2bt.pipelines.dynamodb.export import ExportError
from ddb2bt.pipelines.pipeline import build_pipeline
from ddb2bt.pipelines.run.local_runner import new_pipeline

from .cells import expected_cells, read_cells
from .tables import dynamodb_calls, load_table

ITEMS = 40
BAD = {7, 19, 33}  # items without the required Price: map-stage dead letters
SKIPPED = {"meta#1", "meta#2"}


def make_items() -> list[dict]:
    items = []
    for i in range(ITEMS):
        item = {"pk": {"S": f"cat{i % 4}"}, "sk": {"S": f"item#{i:03d}"}, "Name": {"S": f"thing {i}"},
                "Img": {"B": bytes([i, 0, 255])}, "Tags": {"SS": ["a", f"t{i}"]}}
        if i not in BAD:
            item["Price"] = {"N": f"{i}.50"}
        items.append(item)
    items += [{"pk": {"S": "meta"}, "sk": {"S": key}} for key in SKIPPED]
    return items


def make_spec(table: str, endpoint: str, **source) -> MappingSpec:
    return MappingSpec.model_validate({
        "source": {"table": table, "endpoint_url": endpoint, "region": "us-east-1", **source},
        "target": {"table": table, "families": {"p": {"max_versions": 1}, "x": None}},
        "migration_time": "2024-01-01T00:00:00Z",
        "entities": [
            {"name": "meta", "match": {"pk": "meta"}, "action": "skip"},
            {"name": "product", "row_key": "{pk}#{sk}",
             "columns": [{"attribute": "Price", "family": "p", "encoding": "decimal", "required": True},
                         {"attribute": "Name", "family": "p"}],
             "rest": {"family": "x"}},
        ],
    })


def dead_letters(path: str) -> list[dict]:
    with open(path) as handle:
        return [json.loads(line) for line in handle]


@pytest.fixture(params=["moto_server", "dynalite"])
def dynamodb(request):
    return request.getfixturevalue(request.param)


def test_migration_end_to_end_and_rerun_is_identical(bigtable_env, dynamodb, unique_name, tmp_path):
    items = make_items()
    load_table(dynamodb.endpoint, unique_name, items)
    # no key names: they come from DescribeTable
    spec = make_spec(unique_name, dynamodb.endpoint)
    result = migrate(spec, RunOptions(run_dir=str(tmp_path / "run1"), total_segments=3))
    print(result.counters, result.problems)
    assert result.ok, result.problems
    c = result.counters
    assert (c["items_read"], c["rows_written"], c["dead_lettered"], c["skipped"]) == (len(items), ITEMS - 3, 3, 2)
    assert c["cells_written"] > 0 and c["bytes_written"] > 0

    full = spec.with_keys("pk", "sk")
    cells = read_cells(full.target)
    assert cells == expected_cells(full, items)

    letters = dead_letters(result.prepared.dead_letter)
    assert stat.S_IMODE(os.stat(result.prepared.dead_letter).st_mode) == 0o600
    assert sorted(letter["item"]["sk"]["S"] for letter in letters) == [f"item#{i:03d}" for i in sorted(BAD)]
    for letter in letters:
        assert letter["stage"] == "map" and letter["attribute"] == "Price" and letter["entity"] == "product"
        i = int(letter["item"]["sk"]["S"][5:])
        assert letter["item"]["Img"] == {"B": __import__("base64").b64encode(bytes([i, 0, 255])).decode()}
    assert ckpt.completed_segments(result.prepared.run_dir) == {0, 1, 2}

    again = migrate(spec, RunOptions(run_dir=str(tmp_path / "run2"), total_segments=2))
    assert again.ok and again.counters["rows_written"] == ITEMS - 3
    assert read_cells(full.target) == cells


def test_a_local_run_describes_its_source_once(bigtable_env, moto_server, unique_name, tmp_path, monkeypatch):
    """On this machine the scan's read rate comes from the description made while the run was prepared: DynamoDB
    is asked DescribeTable once (with DescribeTimeToLive, together) before the Scan pages, not again by the scan."""
    calls = dynamodb_calls(monkeypatch)
    load_table(moto_server.endpoint, unique_name, make_items())
    result = migrate(make_spec(unique_name, moto_server.endpoint), RunOptions(run_dir=str(tmp_path / "r"),
                                                                             total_segments=3))
    assert result.counters["items_read"] == ITEMS + len(SKIPPED)
    assert sorted(calls[:2]) == ["DescribeTable", "DescribeTimeToLive"]
    assert set(calls[2:]) == {"Scan"}, calls


def test_interrupted_run_resumes_to_complete(bigtable_env, moto_server, unique_name, tmp_path):
    items = make_items()
    load_table(moto_server.endpoint, unique_name, items)
    spec = make_spec(unique_name, moto_server.endpoint, partition_key="pk", sort_key="sk")
    run_dir, dead = str(tmp_path / "run"), str(tmp_path / "run" / "dead_letters.jsonl")
    # the first attempt gets through segments 0 and 1 of 4, then "dies"
    ckpt.Checkpoint.start(run_dir, ckpt.spec_hash(spec), 4, unique_name, resume=False)
    from ddb2bt.pipelines.bigtable.sink import ensure_table

    ensure_table(spec.target)
    with new_pipeline() as p:
        build_pipeline(p, spec, dead_letter=dead, run_dir=run_dir, total_segments=4, completed=frozenset({2, 3}))
    assert ckpt.completed_segments(run_dir) == {0, 1}

    with pytest.raises(ckpt.ResumeError, match="--resume"):
        migrate(spec, RunOptions(run_dir=run_dir))
    with pytest.raises(ckpt.ResumeError, match="used 4 scan segments"):
        migrate(spec, RunOptions(run_dir=run_dir, resume=True, total_segments=5))
    with pytest.raises(ckpt.ResumeError, match="spec changed"):
        migrate(spec.model_copy(update={"unmatched": "skip"}), RunOptions(run_dir=run_dir, resume=True))

    resumed = migrate(spec, RunOptions(run_dir=run_dir, resume=True))
    assert resumed.ok, resumed.problems
    assert ckpt.completed_segments(run_dir) == {0, 1, 2, 3}
    assert resumed.counters["items_read"] < len(items)  # only the segments left over were read
    assert read_cells(spec.target) == expected_cells(spec, items)
    assert len(dead_letters(resumed.prepared.dead_letter)) == len(BAD)  # both attempts' dead letters, once each


def test_refused_writes_and_unmatched_fail_mark_the_run(bigtable_env, moto_server, unique_name, tmp_path):
    items = [{"pk": {"S": "a"}, "sk": {"S": "1"}, "Price": {"N": "1"}},
             {"pk": {"S": "z"}, "sk": {"S": "2"}}]
    load_table(moto_server.endpoint, unique_name, items)
    spec = MappingSpec.model_validate({
        "source": {"table": unique_name, "endpoint_url": moto_server.endpoint, "region": "us-east-1",
                   "partition_key": "pk", "sort_key": "sk"},
        "target": {"table": unique_name, "families": {"p": None}},
        "migration_time": "2024-01-01T00:00:00Z", "unmatched": "fail",
        "entities": [{"name": "a", "match": {"pk": "a"}, "row_key": "{pk}", "columns": [
            {"attribute": "Price", "family": "p"}, {"attribute": "sk", "family": "gone"}]}],
    })
    from ddb2bt.pipelines.bigtable.sink import ensure_table

    ensure_table(spec.target)  # family "gone" is never created: Bigtable refuses that row
    result = migrate(spec, RunOptions(run_dir=str(tmp_path / "r"), total_segments=1), create_table=False)
    assert not result.ok
    assert any("unmatched: fail" in problem for problem in result.problems)
    stages = sorted((d["stage"], d["row_key"]) for d in dead_letters(result.prepared.dead_letter))
    assert stages == [("unmatched", None), ("write", "a")]
    assert result.counters["items_read"] == 2 and result.counters["dead_lettered"] == 2


def test_dataflow_dry_run_builds_offline(tmp_path, monkeypatch):
    """Dataflow's dry run touches nothing remote (no DescribeTable, no Bigtable, no GCS) and writes nothing."""
    monkeypatch.setenv("GCE_METADATA_HOST", "127.0.0.1:9")  # any metadata lookup fails fast instead of hanging
    monkeypatch.delenv("BIGTABLE_EMULATOR_HOST", raising=False)
    spec = make_spec("t", "http://127.0.0.1:9", total_segments=8)  # key names unknown: not read in a dry run
    result = migrate(spec, RunOptions(run_dir="gs://dummy-bucket/runs/t", project="dummy-project", instance="inst",
                                      beam_args=("--runner=DataflowRunner", "--region=us-central1",
                                                 "--temp_location=gs://dummy-bucket/tmp", "--dry_run=True",
                                                 "--sdk_container_image=example.org/ddb2bt:test")))
    assert result.state == "DRY_RUN" and not result.finished
    assert result.stages == ("Scan", "Map", "WriteToBigtable", "Persist")
    assert result.prepared.total_segments == 8
    assert any("key names" in assumption for assumption in result.prepared.assumptions)
    assert result.prepared.target == "Cloud Bigtable: projects/dummy-project/instances/inst/tables/t"


def test_dataflow_needs_shared_run_folder(tmp_path):
    spec = make_spec("t", "http://127.0.0.1:9", total_segments=8)
    with pytest.raises(UsageError, match="--run-dir .* cannot write a local folder"):
        migrate(spec, RunOptions(run_dir=str(tmp_path / "dry"), project="p", instance="i",
                                 beam_args=("--runner=DataflowRunner", "--dry_run=True")))
    assert not os.path.exists(tmp_path / "dry")


def test_export_source_and_sample(bigtable_env, unique_name, tmp_path):
    from .export_fixtures import write_export

    items = make_items()
    export_dir = write_export(tmp_path / "export", items, files=3, table=unique_name)
    data = make_spec(unique_name, "http://unused", partition_key="pk", sort_key="sk").model_dump(by_alias=True)
    data["source"]["export"] = {"path": export_dir}
    spec = MappingSpec.model_validate(data)
    result = migrate(spec, RunOptions(run_dir=str(tmp_path / "run")))
    assert result.ok, result.problems
    assert result.counters["items_read"] == len(items)
    assert read_cells(spec.target) == expected_cells(spec, items)
    assert ckpt.completed_segments(str(tmp_path / "run")) == {0, 1, 2}  # an export's data files, each stored
    assert result.segments_done == 3

    sample = migrate(spec, RunOptions(run_dir=str(tmp_path / "sample"), sample=5))
    assert sample.ok and sample.counters["items_read"] == 5
    assert not os.path.exists(tmp_path / "sample" / "checkpoint.json")  # a trial run keeps no checkpoint


def test_export_count_mismatch_fails_the_run(bigtable_env, unique_name, tmp_path):
    from .export_fixtures import write_export

    export_dir = write_export(tmp_path / "export", make_items()[:10], files=1, table=unique_name)
    summary = next((tmp_path / "export").rglob("manifest-summary.json"))
    data = json.loads(summary.read_text())
    data["itemCount"] += 1  # the export says one item more than its files hold
    summary.write_text(json.dumps(data))
    spec = make_spec(unique_name, "http://unused", partition_key="pk", sort_key="sk").model_dump(by_alias=True)
    spec["source"]["export"] = {"path": export_dir}
    result = migrate(MappingSpec.model_validate(spec), RunOptions(run_dir=str(tmp_path / "run")))
    assert not result.ok and any("export count mismatch" in problem for problem in result.problems)
    sources = [d for d in dead_letters(result.prepared.dead_letter) if d["stage"] == "source"]
    assert sources and all("should hold" in d["reason"] for d in sources)


def test_damaged_export_is_refused_before_writing(bigtable_env, unique_name, tmp_path):
    from .export_fixtures import write_export

    export_dir = write_export(tmp_path / "export", make_items()[:10], files=1, table=unique_name)
    data_file = next((tmp_path / "export").rglob("*.json.gz"))
    lines = gzip.decompress(data_file.read_bytes()).splitlines(keepends=True)
    data_file.write_bytes(gzip.compress(b"".join(lines[:-1])))  # one item lost in transit
    spec = make_spec(unique_name, "http://unused", partition_key="pk", sort_key="sk").model_dump(by_alias=True)
    spec["source"]["export"] = {"path": export_dir}
    with pytest.raises(ExportError, match="does not match its manifest MD5"):
        migrate(MappingSpec.model_validate(spec), RunOptions(run_dir=str(tmp_path / "run")))
    assert not (tmp_path / "run").exists()


def test_young_gc_is_relaxed_only_upwards():
    import gc

    from ddb2bt.pipelines.run.collector import MIDDLE_GC_THRESHOLD, YOUNG_GC_THRESHOLD, relax_young_gc

    saved = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        relax_young_gc()
        assert gc.get_threshold() == (YOUNG_GC_THRESHOLD, MIDDLE_GC_THRESHOLD, 10)
        gc.set_threshold(YOUNG_GC_THRESHOLD * 2, 5, 5)
        relax_young_gc()
        assert gc.get_threshold() == (YOUNG_GC_THRESHOLD * 2, 5, 5)
        gc.set_threshold(0)  # collector off: the user's choice stands
        relax_young_gc()
        assert gc.get_threshold()[0] == 0
    finally:
        gc.set_threshold(*saved)


def test_the_migrations_map_step_raises_the_young_threshold_further_and_never_lowers_one():
    import gc

    from ddb2bt.pipelines.pipeline import MapFn
    from ddb2bt.pipelines.run.collector import (MIDDLE_GC_THRESHOLD, MIGRATION_YOUNG_GC_THRESHOLD, YOUNG_GC_THRESHOLD,
                                                relax_young_gc)

    spec = make_spec("map_gc", "http://unused").model_dump(by_alias=True)
    saved = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        MapFn(spec, 0).setup()  # the class's own (validate's map step): as before
        assert gc.get_threshold() == (YOUNG_GC_THRESHOLD, MIDDLE_GC_THRESHOLD, 10)
        MapFn(spec, 0, young_gc=MIGRATION_YOUNG_GC_THRESHOLD).setup()  # the migration's: raised further
        assert gc.get_threshold() == (MIGRATION_YOUNG_GC_THRESHOLD, MIDDLE_GC_THRESHOLD, 10)
        relax_young_gc()  # and never lowered by another step's after it
        assert gc.get_threshold() == (MIGRATION_YOUNG_GC_THRESHOLD, MIDDLE_GC_THRESHOLD, 10)
        gc.set_threshold(MIGRATION_YOUNG_GC_THRESHOLD * 2, 5, 5)
        MapFn(spec, 0, young_gc=MIGRATION_YOUNG_GC_THRESHOLD).setup()
        assert gc.get_threshold() == (MIGRATION_YOUNG_GC_THRESHOLD * 2, 5, 5)
    finally:
        gc.set_threshold(*saved)


def test_the_migrations_pipeline_asks_for_the_migrations_threshold():
    from ddb2bt.pipelines.pipeline import MapFn, build_pipeline
    from ddb2bt.pipelines.run.collector import MIGRATION_YOUNG_GC_THRESHOLD
    from ddb2bt.pipelines.run.local_runner import new_pipeline

    p = new_pipeline()
    build_pipeline(p, make_spec("map_gc", "http://unused"), dead_letter="/unused", sample=[{"pk": {"S": "a"}}])
    found = [transform.transform.fn for transform in p.transforms_stack[0].parts
             if isinstance(getattr(transform.transform, "fn", None), MapFn)]
    assert [fn._young_gc for fn in found] == [MIGRATION_YOUNG_GC_THRESHOLD]
