"""multi_processing on N workers against in_memory on one: from how many items is it faster, on this machine?

``python -m benchmarks.modes [--sizes 50000,200000] [--rounds 2] [--workers 2]`` starts a Bigtable emulator and
migrates an export folder of each size (benchmarks/load.py's cache: 8 data files, 16 from 500,000 items; the files
are what the workers share out) with ``ddb2bt.app.migrate.migrate`` (benchmarks/child.py, a process per run) in both
DirectRunner modes. Each round runs both modes back to back, the order alternating between rounds, so that both see
the machine's load alike; the load average before and after every run is kept. Per size the figure is the median of
the rounds' ratios of wall time (the migrate call, pipeline start-up included: what a user waits for), with the
rounds' spread. Every run's own CPU is traced (``measure.own_cpu_split``); the fits of each mode's steady items/s
and its start-up wall time give where the two lines cross, if they do. An export source keeps DynamoDB's server
out of it: the emulator is the only server on the cores. Results: ``benchmarks/results/modes.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from .common import RESULTS, ROOT, Bench, log, machine, versions

MODES = ("in_memory", "multi_processing")


def crossover(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Where multi_processing's wall time line crosses in_memory's, from every run's steady fit.

    Each mode's line is wall(N) = start-up + N / steady items/s, with the medians over that mode's runs; the lines
    cross at N* = (start-up_mp - start-up_im) / (1/rate_im - 1/rate_mp) when multi_processing is faster per item.
    """
    fit: dict[str, dict[str, float]] = {}
    for mode in MODES:
        own = [run["own_cpu"] for run in runs if run["mode"] == mode and run.get("own_cpu", {}).get("steady_items_per_s")]
        if not own:
            return {"items": None, "why": f"no steady state measured for {mode}"}
        fit[mode] = {"steady_items_per_s": statistics.median(o["steady_items_per_s"] for o in own),
                     "startup_wall_s": statistics.median(o["startup_wall_s"] for o in own),
                     "steady_us_per_item": statistics.median(o["steady_us_per_item"] for o in own), "runs": len(own)}
    im, mp = fit["in_memory"], fit["multi_processing"]
    out: dict[str, Any] = {"fit": fit, "steady_rate_ratio": mp["steady_items_per_s"] / im["steady_items_per_s"]}
    if mp["steady_items_per_s"] <= im["steady_items_per_s"]:
        return out | {"items": None, "why": "multi_processing is not faster per item in steady state: no crossover"}
    gain = 1 / im["steady_items_per_s"] - 1 / mp["steady_items_per_s"]
    return out | {"items": max(0.0, (mp["startup_wall_s"] - im["startup_wall_s"]) / gain),
                  "why": "where the fitted wall-time lines cross"}


def summarize(size: int, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per size: each round's ratio in_memory seconds / multi_processing seconds (> 1: multi_processing faster)."""
    rounds: dict[int, dict[str, float]] = {}
    for run in runs:
        rounds.setdefault(run["round"], {})[run["mode"]] = run["seconds"]
    ratios = sorted(r["in_memory"] / r["multi_processing"] for r in rounds.values() if len(r) == 2)
    return {"items": size, "round_ratios": ratios, "median_ratio": statistics.median(ratios) if ratios else None,
            "spread": [ratios[0], ratios[-1]] if ratios else None,
            "items_per_s": {mode: statistics.median(r["items_per_s"] for r in runs if r["mode"] == mode)
                            for mode in MODES if any(r["mode"] == mode for r in runs)}}


def render(out: dict[str, Any]) -> str:
    lines = [f"multi_processing ({out['workers']} workers) vs in_memory, export folder, {out['machine']['cores']} cores"]
    for entry in out["sizes"]:
        rates = entry["items_per_s"]
        lines.append(f"  {entry['items']:>9,} items: in_memory {rates.get('in_memory', 0):>7,.0f} items/s, "
                     f"multi_processing {rates.get('multi_processing', 0):>7,.0f} items/s; wall ratio (im/mp) "
                     f"median {entry['median_ratio']:.2f}, rounds {', '.join(f'{r:.2f}' for r in entry['round_ratios'])}")
    cross = out["crossover"]
    for mode, fit in cross.get("fit", {}).items():
        lines.append(f"  {mode}: steady {fit['steady_items_per_s']:,.0f} items/s, {fit['steady_us_per_item']:.0f} us "
                     f"own CPU/item, start-up {fit['startup_wall_s']:.1f}s wall")
    where = f"{cross['items']:,.0f} items" if cross.get("items") is not None else "none"
    lines.append(f"  crossover: {where} ({cross['why']})")
    lines.append(f"  load average during the runs: {out['load_range'][0]:.1f}-{out['load_range'][1]:.1f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    from ddb2bt.pipelines.local import servers as local_servers

    from . import load

    parser = argparse.ArgumentParser(prog="python -m benchmarks.modes", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="50000,200000", help="comma-separated item counts")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2, help="multi_processing's direct_num_workers")
    parser.add_argument("--output", default=str(RESULTS / "modes.json"))
    args = parser.parse_args(argv)
    sizes = [int(size) for size in args.sizes.split(",")]
    out: dict[str, Any] = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "machine": machine(),
                           "versions": versions(), "workers": args.workers, "rounds": args.rounds, "sizes": []}
    env = {**os.environ, **local_servers.FAKE_AWS_ENV, "PYTHONPATH": str(ROOT)}
    env.pop("AWS_PROFILE", None)
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="ddb2bt-bench-") as workdir, local_servers.bigtable_emulator() as emulator, \
            local_servers.patched_environ(local_servers.emulator_env(emulator.endpoint)):
        env["BIGTABLE_EMULATOR_HOST"] = emulator.endpoint
        for size in sizes:
            export_dir, _ = load.cached_export(size, 16 if size >= 500_000 else 8)
            # no DynamoDB server: an export source never calls it (a call would fail on the discard port)
            bench = Bench(size, env, "http://127.0.0.1:9", "bench", export_dir, os.path.join(workdir, str(size)), None,
                          servers={"emulator": emulator.pid})
            mine = []
            for number in range(args.rounds):
                for mode in MODES if number % 2 == 0 else MODES[::-1]:
                    workers = 1 if mode == "in_memory" else args.workers
                    run = bench.job("ddb2bt", export_dir=export_dir, mode=mode, workers=workers,
                                    label=f"{mode} {size}")
                    own = run.get("own_cpu") or {}
                    mine.append({"round": number, "mode": mode, "seconds": run["seconds"],
                                 "process_wall_seconds": run["process_wall_seconds"],
                                 "items_per_s": run["items_per_s"], "load_1min": run["load_1min"],
                                 "own_cpu": own, "cpu_us_per_item": run.get("cpu_us_per_item"),
                                 "peak_rss_bytes": run["peak_rss_bytes"], "processes": run["processes"]})
            runs += mine
            out["sizes"].append(summarize(size, mine) | {"runs": mine})
            Path(args.output).write_text(json.dumps(out, indent=2, sort_keys=True) + "\n")  # a later size may fail
    loads = [value for run in runs for value in run["load_1min"]]
    out["load_range"] = [min(loads), max(loads)]
    out["crossover"] = crossover(runs)
    Path(args.output).write_text(json.dumps(out, indent=2, sort_keys=True) + "\n")
    print(render(out))
    log(f"written {args.output}")
    return out


if __name__ == "__main__":
    main()
