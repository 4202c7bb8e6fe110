"""Smoke test of the benchmarks: the quick mode's mapper part (no servers, no timing assertions)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

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
    focused = summarize_py_spy(raw, title="job", focus="scan")
    assert "6 samples, stacks through scan() only: job" in focused
    assert "100.0%  loads (json)" in focused and "map (c.py)" not in focused


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
    assert round_["catch_up_cpu_us_per_change"] > 0 and round_["migrate_cpu_us_per_item"] > 0
    assert round_["migrate_gc_s"] >= 0 and round_["catch_up_gc_s"] >= 0 and round_["migrate_gc_full"] >= 0
    assert "collector" in cutover.render(out)


def test_cutover_catch_up_alone_times_each_catch_up_after_one_untimed(tmp_path):
    """`--alone`: one backfill, then the same export caught up again from a copy of its run folder, round by round
    (each run asserts that every change was applied)."""
    from benchmarks import cutover

    out = cutover.main(["--alone", "--items", "100", "--rounds", "2", "--output", str(tmp_path / "alone.json")])
    assert len(out["rounds"]) == 2 and all(r["catch_up_cpu_us_per_change"] > 0 for r in out["rounds"])
    assert "catch-up alone (100 changes" in cutover.render(out)


def _trace(samples, before=1.5, after=None, at_main=0.3):
    return {"cpu_at_main_s": at_main, "cpu_before_run_s": before,
            "cpu_after_run_s": samples[-1][1] if after is None else after, "samples": samples}


def test_own_cpu_split_separates_start_up_steady_state_and_end():
    """A synthetic run: 2.5 s of CPU before the first item (1.5 s of it before the run call), then 30 us per item,
    then 0.4 s of drain; counts repeat between progress writes, which must not bend the slope."""
    from benchmarks.measure import own_cpu_split

    n = 100_000
    samples = [(0.0, 1.6, 0), (0.1, 2.0, 0)]
    for step in range(1, 21):
        items = step * 5_000
        cpu = 2.5 + 30e-6 * items
        samples += [(10 + step, cpu, items), (10 + step + 0.1, cpu + 0.05, items), (10 + step + 0.2, cpu + 0.1, items)]
    split = own_cpu_split(_trace(samples, after=2.5 + 30e-6 * n + 0.4) | {"run_started": 8.0}, n)
    assert round(split["steady_us_per_item"], 6) == 30.0
    assert round(split["startup_s"], 6) == 2.5 and round(split["startup_in_run_s"], 6) == 1.0
    assert round(split["interpreter_s"], 6) == 0.3 and round(split["imports_and_spec_s"], 6) == 1.2
    assert round(split["end_s"], 6) == 0.4
    assert round(split["total_us_per_item"], 3) == round((2.5 + 3.0 + 0.4) / n * 1e6, 3)
    assert split["changed_samples"] == 20 and split["first_items_seen"] == 5_000
    assert round(split["steady_items_per_s"], 6) == 5_000 and round(split["startup_wall_s"], 6) == 2.0
    assert "least-squares" in split["method"] and split["how"]


def test_own_cpu_split_places_each_count_when_it_was_written():
    """A 3-second run at 10,000 items/s and 30 us per item whose counts are written every 0.5 s and sampled at
    irregular moments: placed beside the sample's CPU, the counts' lags bend the slope; placed when they were written,
    with the CPU interpolated there, the slope is exact."""
    import random

    from benchmarks.measure import own_cpu_split

    def cpu(t):  # the process's CPU: 2.5 s before the first item, then 30 us per item
        return 2.5 + 30e-6 * 10_000 * (t - 1.0)

    rng, samples, t = random.Random(7), [], 1.0
    while t < 4.0:
        written = round((t - 1.0) // 0.5 * 0.5 + 1.0, 9)  # the newest count's write time
        samples.append((t, cpu(t), round(10_000 * (written - 1.0)), written))
        t += rng.uniform(0.05, 0.35)
    n = samples[-1][2]
    split = own_cpu_split(_trace(samples), n)
    assert abs(split["steady_us_per_item"] - 30.0) < 1e-6
    beside_the_sample = own_cpu_split(_trace([sample[:3] for sample in samples]), n)
    assert abs(beside_the_sample["steady_us_per_item"] - 30.0) > 1.0  # what the placement corrects


def test_own_cpu_split_falls_back_to_the_ends_then_says_there_is_no_steady_state():
    from benchmarks.measure import own_cpu_split

    few = [(0, 2.0, 0), (1, 3.0, 1_000), (2, 3.2, 9_950), (3, 3.4, 10_000)]  # one sample inside 10-90 %
    split = own_cpu_split(_trace(few, before=1.0), 10_000)
    assert round(split["steady_us_per_item"], 6) == round(0.2 / 8_950 * 1e6, 6)
    assert "first and last" in split["method"]
    none = own_cpu_split(_trace([(0, 2.0, 0), (1, 3.0, 10_000)]), 10_000)
    assert none["steady_us_per_item"] is None and "no steady state" in none["method"]
    assert none["total_us_per_item"] == 300.0


def test_modes_ratio_per_round_and_crossover_of_the_fitted_lines():
    """Synthetic runs: in_memory 5,000 items/s after 3 s, multi_processing 8,000 items/s after 9 s: the lines cross at
    (9 - 3) / (1/5000 - 1/8000) = 80,000 items; each round's ratio is in_memory's seconds over multi_processing's."""
    from benchmarks import modes

    def run(number, mode, seconds, rate, startup):
        return {"round": number, "mode": mode, "seconds": seconds, "items_per_s": 100_000 / seconds,
                "own_cpu": {"steady_items_per_s": rate, "startup_wall_s": startup, "steady_us_per_item": 150.0}}

    runs = [run(0, "in_memory", 23.0, 5_000, 3.0), run(0, "multi_processing", 21.5, 8_000, 9.0),
            run(1, "multi_processing", 23.0, 8_000, 9.0), run(1, "in_memory", 20.7, 5_000, 3.0)]
    summary = modes.summarize(100_000, runs)
    assert summary["round_ratios"] == [20.7 / 23.0, 23.0 / 21.5]
    assert summary["spread"] == [20.7 / 23.0, 23.0 / 21.5]
    cross = modes.crossover(runs)
    assert round(cross["items"]) == 80_000 and cross["steady_rate_ratio"] == 1.6
    slower = [dict(r, own_cpu=dict(r["own_cpu"], steady_items_per_s=4_000)) if r["mode"] == "multi_processing" else r
              for r in runs]
    assert modes.crossover(slower)["items"] is None and "no crossover" in modes.crossover(slower)["why"]


def _job_result(label, items_per_s, steady=None, startup=None):
    own = {"steady_us_per_item": steady, "startup_s": startup} if steady is not None else None
    return {"label": label, "items_per_s": items_per_s, "own_cpu": own}


def test_end_to_end_rounds_alternate_the_order_and_report_the_median_ratio_and_its_spread():
    """Synthetic jobs (no servers, nothing timed): three rounds of two scenarios; the baseline runs first in rounds
    0 and 2 and second in round 1, every scenario's pair runs back to back, and each scenario's figures come from its
    own rounds."""
    jobs = {"loopback": {"baseline": {"kind": "baseline_scan", "label": "b"}, "ddb2bt": {"kind": "ddb2bt", "label": "d"}},
            "export": {"baseline": {"kind": "baseline_export", "label": "be"},
                       "ddb2bt": {"kind": "ddb2bt", "label": "de"}}}
    rates = {"b": [1000, 1000, 2000], "d": [3000, 2000, 7000], "be": [500, 500, 500], "de": [1000, 2000, 1500]}
    steady = {"d": [40.0, 30.0, 50.0], "de": [20.0, 25.0, 30.0]}
    calls = []

    def fake(job):
        label = job["label"]
        calls.append(label)
        number = sum(call == label for call in calls) - 1
        own = steady.get(label)
        return _job_result(label, rates[label][number], own[number] if own else None, 3.0 if own else None)

    pairs, load, failed = run.alternate(jobs, 3, fake)
    assert calls == ["b", "d", "be", "de", "d", "b", "de", "be", "b", "d", "be", "de"]
    assert [entry["order"] for entry in load] == [["baseline", "ddb2bt"], ["ddb2bt", "baseline"],
                                                  ["baseline", "ddb2bt"]]
    assert all(len(entry["loadavg_before"]) == 3 and len(entry["loadavg_after"]) == 3 for entry in load)
    assert failed == []
    loop = run.summarize_rounds(pairs["loopback"])
    assert loop["round_ratios"] == [3.0, 2.0, 3.5] and loop["ratio"] == 3.0 and loop["spread"] == [2.0, 3.5]
    assert loop["items_per_s"] == {"baseline": 1000, "ddb2bt": 3000}
    assert loop["by_order"] == {"baseline_first": 3.25, "ddb2bt_first": 2.0}  # rounds 0 and 2, round 1
    shown: list[str] = []
    no_own_cpu = [pair | {"ddb2bt": pair["ddb2bt"] | {"own_cpu": None}} for pair in pairs["loopback"]]
    run._scenario_rows(shown, "{} {} {} {} {}", "loopback", loop | {"pairs": no_own_cpu})
    assert any("ddb2bt first 2.00, baseline first 3.25" in line for line in shown), shown
    assert loop["own_cpu_steady_us_per_item"] == {"median": 40.0, "per_round": [40.0, 30.0, 50.0]}
    export = run.summarize_rounds(pairs["export"])
    assert export["ratio"] == 3.0 and export["spread"] == [2.0, 4.0]
    assert export["own_cpu_steady_us_per_item"]["median"] == 25.0


def test_a_failed_run_drops_only_its_rounds_pair_and_the_verdicts_read_the_medians():
    from benchmarks import run as bench_run

    jobs = {"loopback": {"baseline": {"label": "b"}, "ddb2bt": {"label": "d"}},
            "export": {"baseline": {"label": "be"}, "ddb2bt": {"label": "de"}},
            "latency_20ms": {"baseline": {"label": "bf"}, "ddb2bt": {"label": "df"}}}
    rates = {"b": 1000, "d": 2500, "be": 1000, "de": 3100, "bf": 100, "df": 400}
    seen = []

    def run(job):
        seen.append(job["label"])
        if job["label"] == "d" and seen.count("d") == 2:
            raise RuntimeError("ddb2bt in_memory: run not OK")
        return _job_result(job["label"], rates[job["label"]], 36.0 if job["label"] == "d" else None, 2.0)

    pairs, load, failed = bench_run.alternate(jobs, 2, run)
    assert [pair["round"] for pair in pairs["loopback"]] == [0] and len(pairs["export"]) == 2
    assert failed == [{"round": 1, "scenario": "loopback", "side": "ddb2bt", "error": "ddb2bt in_memory: run not OK"}]
    assert seen == ["b", "d", "be", "de", "bf", "df", "d", "de", "be", "df", "bf"]  # round 1's "b" never ran
    e2e = {name: bench_run.summarize_rounds(done) | {"pairs": done} for name, done in pairs.items()}
    verdicts = bench_run.e2e_verdicts(e2e)
    assert verdicts["e2e_loopback_ratio"]["value"] == 2.5 and not verdicts["e2e_loopback_ratio"]["met"]
    assert verdicts["e2e_export_ratio"]["value"] == 3.1 and verdicts["e2e_export_ratio"]["met"]
    assert verdicts["e2e_export_ratio"]["spread"] == [3.1, 3.1]
    assert verdicts["e2e_latency_ratio"]["value"] == 4.0 and verdicts["e2e_latency_ratio"]["met"]
    assert verdicts["own_cpu_us_per_item"]["value"] == 36.0 and not verdicts["own_cpu_us_per_item"]["met"]
    empty = bench_run.summarize_rounds([])
    assert empty["by_order"] == {"ddb2bt_first": None, "baseline_first": None}
    assert empty["ratio"] is None and empty["spread"] is None and empty["own_cpu_steady_us_per_item"]["median"] is None


def test_ab_jobs_alternate_the_trees_order_each_round_and_profile_this_tree_first():
    """benchmarks.owncpu_ab and startup_ab: A, B then B, A, so that neither tree always runs first (or second) on a
    machine whose load drifts; a profiled job of this tree before the measured rounds."""
    from benchmarks.startup_ab import alternating

    trees = {"this": "/tree/this", "main": "/tree/main"}
    assert alternating(trees, 3, False) == [(0, "this"), (0, "main"), (1, "main"), (1, "this"), (2, "this"),
                                            (2, "main")]
    assert alternating(trees, 1, True) == [(-1, "this"), (0, "this"), (0, "main")]


def test_compiled_ab_maps_the_same_rows_both_ways_and_times_each():
    from benchmarks import compiled_ab
    from ddb2bt.mappers import encodings

    if encodings._compiled_json is None:
        pytest.skip("mappers/_json.c not built here")
    found = compiled_ab.main(["--items", "200", "--rounds", "2"])
    assert len(found["compiled"]["rounds"]) == len(found["python"]["rounds"]) == 2
    assert encodings._compiled_json is not None  # put back after the spec compiled without it


def test_an_archived_tree_gets_this_trees_built_extensions_only_for_the_same_c_source(tmp_path):
    """The *_ab benchmarks' other tree comes from ``git archive`` (no build): ``tree_of`` copies in the built modules
    of the same C source, so both trees run the compiled functions; a tree whose C source differs gets its own source
    compiled, and this tree itself nothing."""
    from benchmarks.common import ROOT
    from benchmarks.io_paths import built_modules, tree_of

    def modules(root: Path) -> list[Path]:
        return sorted(path for folder in ("mappers", "pipelines") for path in (root / folder).rglob("*.so"))

    built = modules(ROOT)
    if len(built) < 4:  # _wire, _json, _rows, _cells
        pytest.skip("the C extensions are not built in this tree")
    tree = tree_of("HEAD", tmp_path / "same")
    found = modules(tree / "ddb2bt")
    assert [path.relative_to(tree / "ddb2bt") for path in found] == [path.relative_to(ROOT) for path in built]
    assert all(path.read_bytes() == module.read_bytes() for path, module in zip(found, built))
    other = tmp_path / "other" / "ddb2bt" / "mappers"
    other.mkdir(parents=True)
    (other / "_json.c").write_text('#include <Python.h>\nstatic struct PyModuleDef module = {PyModuleDef_HEAD_INIT, '
                                   '"_json", NULL, 0, NULL, NULL, NULL, NULL, NULL};\n'
                                   "PyMODINIT_FUNC PyInit__json(void) { return PyModule_Create(&module); }\n")
    made = built_modules(tmp_path / "other")
    assert made == list(other.glob("*.so")) and [path.name for path in made] == [built[0].name]
    assert made[0].read_bytes() != built[0].read_bytes()
    assert built_modules(ROOT) == []


def test_the_catch_ups_ratio_is_the_median_of_its_rounds_even_when_they_are_even():
    """Four rounds 0.81, 0.98, 0.90, 1.33: the median is 0.94 (the mean of the middle two), not the upper 0.98."""
    from benchmarks.cutover import median_round

    rounds = [{"ratio": ratio, "cpu_ratio": cpu} for ratio, cpu in ((0.81, 0.75), (0.98, 0.96), (0.90, 0.87),
                                                                   (1.33, 1.16))]
    ratio, middle, cpu = median_round(rounds)
    assert round(ratio, 3) == 0.94 and middle["ratio"] in (0.90, 0.98) and round(cpu, 3) == 0.915
    assert median_round(rounds[:3])[:2] == (0.90, rounds[2])


def test_scan_timeline_summarizes_a_jobs_requests_and_waits():
    """benchmarks/scan_timeline.py's figures from a job's events: the DynamoDB waiting before the first Scan, the
    requests in flight, each segment's gaps between pages, a reader's handover, the waits, the tail."""
    from benchmarks.scan_timeline import summarize

    def scan(start, end, segment, thread, first=False):
        return ["ddb", start, end, {"thread": thread, "op": "Scan", "segment": segment, "first": first}]

    events = [
        ["phase:prepare", 0.0, 0.3, {"thread": "main"}],
        ["ddb", 0.1, 0.15, {"thread": "t", "op": "DescribeTimeToLive", "segment": None, "first": True}],
        ["ddb", 0.1, 0.16, {"thread": "main", "op": "DescribeTable", "segment": None, "first": True}],
        ["phase:pipeline.run", 0.5, 3.0, {"thread": "main"}],
        ["phase:pipeline.run", 0.6, 2.9, {"thread": "main"}],  # Beam's run calling run again: the outer one counts
        scan(1.0, 1.5, 0, "r1", True), scan(1.0, 1.4, 1, "r2", True),
        scan(1.6, 2.0, 0, "r1"),  # segment 0: a gap of 0.1 between its pages
        scan(1.45, 2.5, 2, "r2", True),  # reader r2 goes on to segment 2, 0.05 after segment 1's last reply
        ["scan_next", 0.9, 1.5, {"thread": "main", "value": "Batch"}],
        ["scan_next", 1.6, 1.7, {"thread": "main", "value": "SegmentAt"}],
        ["close_sync", 2.0, 2.25, {"thread": "main", "out": 1}],
        ["settle", 1.8, 1.85, {"thread": "main", "out": 1}],
        ["mutate", 1.55, 1.75, {"thread": "w", "entries": 100}],
    ]
    found = summarize(events, 2.5, 5000)
    assert found["items_per_s"] == 2000
    assert found["pipeline.run"] == [0.5, 3.0]
    assert round(found["ddb_before_first_scan_s"], 3) == 0.11
    assert (found["first_scan_request_at"], found["first_page_at"], found["last_page_at"]) == (1.0, 1.4, 2.5)
    assert round(found["first_scan_from_run_start"], 3) == 0.5 and round(found["after_last_page_s"], 3) == 0.5
    assert found["scan_requests"] == 4 and round(found["scan_in_flight_mean"], 3) == round(2.35 / 1.5, 3)
    assert found["segment_page_gaps_s"]["count"] == 1 and round(found["segment_page_gaps_s"]["sum"], 3) == 0.1
    assert found["handover_gaps_s"] == [0.05]
    assert round(found["caller_waits_s"], 3) == 0.7 and round(found["caller_waits_before_first_page_s"], 3) == 0.6
    assert (found["close_sync"]["count"], round(found["close_sync"]["sum"], 3)) == (1, 0.25)
    assert (found["settle"]["count"], found["mutate"]["count"]) == (1, 1)
