"""The garbage collector's share of a migration, variants side by side: ``python -m benchmarks.gc_ab``.

``python -m benchmarks.gc_ab [--items N] [--rounds R] [--variants a,b,...] [--source export|scan] [--json PATH]``

Each run migrates the benchmark's export (``load.cached_export``), or with ``--source scan`` the same items scanned
live from dynalite (4 segments), into the emulator with ``benchmarks.child`` in a
fresh process, in_memory; the variants alternate within each round. A prelude run before the child installs a
``gc.callbacks`` hook that, from the map step's setup on (``relax_young_gc``, which the prelude wraps), adds up the
collector's CPU time, its collections and the objects it found unreachable per generation; it also sets the
variant:

* ``current``: the tree as it is;
* ``middle10``: the middle generation's threshold back at 10 (before ``MIDDLE_GC_THRESHOLD``);
* ``cycle``: the client's finished MutateRows operations left as cyclic garbage (before
  ``raw_answers.free_finished_operations``), with the middle threshold at 10 too;
* ``tree:<commit>``: that commit's packages (``io_paths.tree_of``) first on ``PYTHONPATH``, as they are: the whole
  path of another revision against this one (its collector's figures are counted the same way).

The collector's time is measured directly, so it is far less moved by the machine's load than the run's steady
CPU per item, which is reported beside it (``measure.own_cpu_split``) with the peak RSS. Docs: docs/PERFORMANCE.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from .common import ROOT, log

PRELUDE = r'''
import atexit, gc, os, resource, sys, time
state = {"on": False, "start": 0.0, "seconds": [0.0] * 3, "collections": [0] * 3, "collected": [0] * 3, "cpu": 0.0}
def hook(phase, info):
    if not state["on"]:
        return
    if phase == "start":
        state["start"] = time.process_time()
    else:
        g = info["generation"]
        state["seconds"][g] += time.process_time() - state["start"]
        state["collections"][g] += 1
        state["collected"][g] += info["collected"]
gc.callbacks.append(hook)
import ddb2bt.pipelines.pipeline as pipeline
import ddb2bt.pipelines.bigtable.sink as sink
variant = os.environ["DDB2BT_GC_VARIANT"]
relax = pipeline.relax_young_gc
if variant == "cycle":
    sink.free_finished_operations = lambda: None
def relaxed(*young):
    relax(*young)
    if variant in ("middle10", "cycle"):
        young, _middle, old = gc.get_threshold()
        gc.set_threshold(young, 10, old)
    state["on"], state["cpu"] = True, time.process_time()
pipeline.relax_young_gc = relaxed
def report():
    record = {k: state[k] for k in ("seconds", "collections", "collected")}
    record["cpu_after_setup"] = time.process_time() - state["cpu"]
    record["maxrss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    sys.stderr.write("GC_AB " + json.dumps(record) + "\n")
import json
atexit.register(report)
'''


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gc_ab", description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=30_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--variants", default="cycle,middle10,current",
                        help="comma-separated: current, middle10, cycle, tree:<commit>")
    parser.add_argument("--source", choices=("export", "scan"), default="export")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)

    from ddb2bt.pipelines.local import servers as local_servers

    from . import dataset, load
    from .measure import own_cpu_split

    from .io_paths import tree_of

    variants = args.variants.split(",")
    export_dir = load.cached_export(args.items, 4)[0] if args.source == "export" else None
    runs: list[dict] = []
    with local_servers.bigtable_emulator() as emulator, local_servers.patched_environ(local_servers.FAKE_AWS_ENV), \
            tempfile.TemporaryDirectory(prefix="ddb2bt-gc-trees-") as trees, contextlib.ExitStack() as stack:
        source: dict = {"export_dir": export_dir}
        if export_dir is None:
            dynamo = stack.enter_context(local_servers.dynalite())
            load.load_table(dynamo.endpoint, "bench", dataset.generate(args.items))
            source = {"endpoint": dynamo.endpoint, "table": "bench", "segments": 4}
        env = {**os.environ, **local_servers.FAKE_AWS_ENV, **local_servers.emulator_env(emulator.endpoint)}
        paths = {variant: str(tree_of(variant[5:], Path(trees) / variant[5:])) for variant in variants
                 if variant.startswith("tree:")}
        for round_ in range(args.rounds):
            for variant in variants if round_ % 2 == 0 else list(reversed(variants)):
                with tempfile.TemporaryDirectory(prefix="ddb2bt-gc-") as tmp:
                    job = {"kind": "ddb2bt", "project": "gc", "instance": "gc", "target": f"t{round_}-{len(runs)}",
                           "run_dir": tmp + "/run", "mode": "in_memory", "workers": 1, **source}
                    code = PRELUDE + ("import runpy\nsys.argv = ['child', " + repr(json.dumps(job)) + "]\n"
                                      "runpy.run_module('benchmarks.child', run_name='__main__')\n")
                    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                                          env={**env, "DDB2BT_GC_VARIANT": variant, **(
                                              {"PYTHONPATH": os.pathsep.join([paths[variant], str(ROOT)])}
                                              if variant in paths else {})})
                    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
                    gc_lines = [line for line in done.stderr.splitlines() if line.startswith("GC_AB ")]
                    if done.returncode or not lines or not gc_lines:
                        raise SystemExit(f"{variant}: {done.stderr[-3000:]}")
                    result = json.loads(lines[-1])
                    record = json.loads(gc_lines[-1][len("GC_AB "):])
                    split = own_cpu_split(result["own_cpu_trace"], result["items_read"])
                    record.update(variant=variant, round=round_, items=result["items_read"],
                                  steady_us_per_item=split["steady_us_per_item"],
                                  load_1min=os.getloadavg()[0])
                    runs.append(record)
                    log(f"round {round_} {variant}: collector {sum(record['seconds']):.3f} s "
                        f"({record['collections']}, unreachable {record['collected']}), steady "
                        f"{record['steady_us_per_item']:.1f} µs/item, peak {record['maxrss_mib']:.0f} MiB "
                        f"(load {record['load_1min']:.1f})")
    summary = {}
    for variant in variants:
        mine = [run for run in runs if run["variant"] == variant]
        summary[variant] = {
            "collector_s": [round(sum(run["seconds"]), 3) for run in mine],
            "collector_us_per_item_median": statistics.median(sum(run["seconds"]) for run in mine) / args.items * 1e6,
            "steady_us_per_item": [round(run["steady_us_per_item"], 1) for run in mine],
            "peak_rss_mib": [round(run["maxrss_mib"]) for run in mine]}
        print(variant, json.dumps(summary[variant]))
    record = {"items": args.items, "rounds": args.rounds, "source": args.source, "summary": summary, "runs": runs}
    if args.json:
        args.json.write_text(json.dumps(record, indent=1) + "\n")
    return record


if __name__ == "__main__":
    main()
