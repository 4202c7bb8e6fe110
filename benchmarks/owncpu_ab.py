"""ddb2bt's own steady CPU per item of a migrate run, this tree against another commit in alternating rounds:
``python -m benchmarks.owncpu_ab --against <commit> [--items N] [--rounds R] [--source scan|export]``.

Each round runs one ``benchmarks.child`` ddb2bt job per tree (the same job as ``make bench``'s: the application's
``migrate`` of benchmarks/spec.yaml, in_memory, 4 segments) on the same dynalite table (or export) and emulator,
and reads the job's own CPU split (``measure.own_cpu_split``: the slope of its CPU over its items between 10 % and
90 % of them, start-up apart), the figure of issue 24's "own CPU per item". The other commit's tree is taken with
``git archive`` and put first on ``PYTHONPATH`` (:func:`benchmarks.io_paths.tree_of`), both byte-compiled first.
``--profile PATH`` first runs one job of this tree under ``py-spy record --gil`` and writes the summary of the
samples of its steady part (the stacks through the runner's bundles and the writer's threads) there.
Docs: docs/PERFORMANCE.md ("Own CPU round 6").
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

from .common import ROOT, log
from .io_paths import tree_of, tree_state
from .measure import own_cpu_split, summarize_py_spy
from .startup_ab import alternating, child_result, compiled, job_env


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.owncpu_ab", description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", required=True, help="the commit to compare with (e.g. main)")
    parser.add_argument("--this", default=None, help="a commit to measure instead of the working tree")
    parser.add_argument("--items", type=int, default=30_000)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--source", choices=("scan", "export"), default="scan")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here too")
    parser.add_argument("--profile", type=Path, default=None,
                        help="first one job of this tree under py-spy --gil, the summary of its bundles here")
    args = parser.parse_args(argv)

    from ddb2bt.pipelines.local import servers as local_servers

    from . import dataset, load

    export_dir = load.cached_export(args.items, 4)[0] if args.source == "export" else None
    steady: dict[str, list[float]] = {"this": [], args.against: []}
    loads: list[str] = []
    with tempfile.TemporaryDirectory(prefix="ddb2bt-owncpu-") as tmp, local_servers.dynalite() as dynamo, \
            local_servers.bigtable_emulator() as emulator, local_servers.patched_environ(local_servers.FAKE_AWS_ENV):
        trees = {"this": str(tree_of(args.this, Path(tmp) / "this")) if args.this else str(ROOT),
                 args.against: str(tree_of(args.against, Path(tmp) / "against"))}
        for tree in trees.values():
            compiled(Path(tree))
        if export_dir is None:
            load.load_table(dynamo.endpoint, "bench", dataset.generate(args.items))
        env = job_env(emulator)
        runs = alternating(trees, args.rounds, bool(args.profile))
        for number, (round_, name) in enumerate(runs):
            job = {"kind": "ddb2bt", "endpoint": dynamo.endpoint, "table": "bench", "project": "owncpu",
                   "instance": "owncpu", "target": f"t{number}", "segments": 4, "mode": "in_memory", "workers": 1,
                   "run_dir": os.path.join(tmp, f"run{number}")}
            if export_dir:
                job["export_dir"] = export_dir
            argv_ = [sys.executable, "-m", "benchmarks.child", json.dumps(job)]
            raw = Path(tmp, "profile.raw")
            if round_ < 0:
                argv_ = [str(Path(sys.executable).with_name("py-spy")), "record", "--gil", "--threads", "--rate", "200",
                         "--format", "raw", "--output", str(raw), "--", *argv_]
            load_before = Path("/proc/loadavg").read_text().split()[0]
            result = child_result(argv_, env, trees[name], name, args.items)
            split = own_cpu_split(result["own_cpu_trace"], result["items_read"])
            loads.append(f"{load_before}-{Path('/proc/loadavg').read_text().split()[0]}")
            if round_ < 0:
                summary = summarize_py_spy(raw.read_text(), title=f"this tree, {args.items} items, {args.source}, "
                                           f"steady {split['steady_us_per_item']:.1f} us/item", top=60,
                                           focus="FnApiRunner._run_bundle")
                args.profile.write_text(summary)
                args.profile.with_suffix(".raw").write_text(raw.read_text())
                log(f"profile: {args.profile}")
                continue
            steady[name].append(split["steady_us_per_item"])
            log(f"round {round_} {name}: steady {split['steady_us_per_item']:.1f} us/item, start-up "
                f"{split['startup_s']:.2f} s CPU, {result['items_read'] / result['seconds']:.0f} items/s "
                f"(load {loads[-1]})")
    summary = {name: {"median": statistics.median(v), "min": min(v), "max": max(v), "rounds": [round(x, 1) for x in v]}
               for name, v in steady.items() if v}
    pairs = [b / a for a, b in zip(steady["this"], steady[args.against])]
    for name, figures in summary.items():
        print(f"{name:12} steady own CPU {figures['median']:.1f} us/item ({figures['min']:.1f}-{figures['max']:.1f})")
    if pairs:
        print(f"{args.against} / this per round: {', '.join(f'{p:.2f}' for p in pairs)}; load {', '.join(loads)}")
    record = {"this": args.this or "the working tree", "against": args.against, "items": args.items,
              "source": args.source, "summary": summary, "ratio_per_round": pairs, "load": loads,
              "unit": "steady own CPU us per item (measure.own_cpu_split)", **tree_state()}
    if args.json:
        args.json.write_text(json.dumps(record, indent=1) + "\n")
    return record


if __name__ == "__main__":
    main()
