"""Smoke test of the benchmarks: the quick mode's mapper part (no servers, no timing assertions)."""

from __future__ import annotations

import json

from benchmarks import baseline, dataset, run
from ddb2bt.mappers.compiler import compile_spec
from ddb2bt.mappers.loader import load_spec
from ddb2bt.mappers.results import MappedRow
from ddb2bt.mappers.attrvalue import to_export_json


def test_quick_mapper_run_writes_every_field(tmp_path):
    out = tmp_path / "latest.json"
    run.main(["--quick", "--mapper-only", "--mapper-items", "2000", "--output", str(out)])
    results = json.loads(out.read_text())
    for key in ("date", "machine", "versions", "config", "mapper", "targets"):
        assert key in results
    assert {"cpu_model", "cores", "ram_bytes"} <= set(results["machine"])
    assert results["versions"]["apache-beam"] and results["versions"]["google-cloud-bigtable"]
    mapper = results["mapper"]
    for key in ("ddb2bt_items_per_s", "floor_items_per_s", "ratio_vs_floor", "baseline_translate_items_per_s"):
        assert mapper[key] > 0
    assert mapper["equivalent"] and mapper["equivalence_mismatches"] == 0 and mapper["items"] == 2000
    assert "mapper_ratio" in results["targets"]


def test_baseline_and_ddb2bt_write_the_same_cells():
    compiled = compile_spec(load_spec(run.HERE / "spec.yaml"))
    items = list(dataset.generate(3000))
    kinds = {item["type"]["S"] for item in items}
    assert kinds == {"customer", "order", "line", "product", "review"}
    for item in items:
        for form in (item, to_export_json(item)):  # boto3 wire format (B bytes) and export form (B base64)
            row = compiled.map_item(form)
            assert isinstance(row, MappedRow), row
            key, cells = baseline.translate(form)
            assert row.row_key == key
            assert sorted(row.cells) == sorted(cells)


def test_dataset_is_deterministic_and_has_large_items():
    first = [to_export_json(item) for item in dataset.generate(300)]
    assert first == [to_export_json(item) for item in dataset.generate(300)]
    assert first != [to_export_json(item) for item in dataset.generate(300, seed=1)]
    sizes = [len(json.dumps(to_export_json(item))) for item in dataset.generate(21_000)
             if item["type"]["S"] == "product"]
    assert max(sizes) >= 100_000 and sum(size >= 100_000 for size in sizes) <= 5
    assert all(8 <= len(item) - 3 <= 15 for item in dataset.generate(400))  # 8-15 attributes besides keys and type


def test_py_spy_summary_shares_self_and_inclusive_samples():
    from benchmarks.measure import summarize_py_spy

    raw = ("process 1:\"python\";main (a.py:1);scan (b.py:2);loads (json:3) 4\n"
           "process 1:\"python\";main (a.py:1);scan (b.py:7);loads (json:3) 2\n"
           "process 1:\"python\";main (a.py:1);map (c.py:4) 3\n"
           "process 1:\"python\" 1\n")
    text = summarize_py_spy(raw, title="job")
    self_part, inclusive_part = text.split("-- inclusive")
    assert "10 samples: job" in text
    assert " 60.0%  loads (json)" in self_part and " 30.0%  map (c.py)" in self_part
    assert " 10.0%  (native)" in self_part
    assert " 90.0%  main (a.py)" in inclusive_part and " 60.0%  scan (b.py)" in inclusive_part


def test_cutover_section_runs_end_to_end_on_a_few_changes(tmp_path):
    """The cutover benchmark on 300 changes, one round (real emulator and moto_server): every figure filled in,
    every change applied by the catch-up and by the tail (the run asserts those counts itself)."""
    from benchmarks import cutover

    out = cutover.main(["--items", "300", "--rounds", "1", "--output", str(tmp_path / "cutover.json")])
    (round_,) = out["rounds"]
    assert round_["migrate_items_per_s"] > 0 and round_["catch_up_changes_per_s"] > 0 and round_["cpu_ratio"] > 0
    assert out["catch_up"]["cells_deleted"] > 0 and out["catch_up"]["cells_set"] > out["catch_up"]["cells_deleted"]
    assert out["tail"]["changes_per_s"] > 0 and out["tail"]["get_records_seconds"] > 0
    assert json.loads((tmp_path / "cutover.json").read_text())["items"] == 300
