"""validate's cost per item, this tree against another commit in alternating rounds:
``python -m benchmarks.validate_ab --against <commit> [--items N] [--rounds R] [--profile PATH]``.

The table (benchmarks/dataset.py, in dynalite) is migrated once, by this tree, into the emulator; then each round
runs one ``benchmarks.child`` validate job per tree (the section's job: the application's ``validate`` of
benchmarks/spec.yaml, in_memory, 4 segments, live scan) against that same table, and records the validation's
wall time (items/s, as the section counts it), its process's CPU (whole, and inside the ``validate`` call) and the
servers' CPU during it, per item. The other commit's tree is taken with ``git archive`` and put first on
``PYTHONPATH`` (:func:`benchmarks.io_paths.tree_of`). ``--profile PATH`` first runs one job of this tree under
pyinstrument (its text output there), ``--profile-migrate PATH`` one migrate job so. Docs: docs/PERFORMANCE.md
("Validate round 8", "Validate round 9").
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from .common import ROOT, log
from .io_paths import tree_of, tree_state
from .measure import cpu_seconds, own_cpu_split, summarize_py_spy
from .startup_ab import alternating, compiled, job_env


def _job(argv: list[str], env: dict[str, str], tree: str) -> dict:
    run = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True,
                         env={**env, "PYTHONPATH": os.pathsep.join(dict.fromkeys([tree, str(ROOT)]))})
    lines = [line for line in run.stdout.splitlines() if line.startswith("{")]
    if run.returncode or not lines:
        raise SystemExit(f"{tree}: {run.stderr[-3000:]}")
    return json.loads(lines[-1])


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.validate_ab", description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", required=True, help="the commit to compare with (e.g. main)")
    parser.add_argument("--items", type=int, default=30_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None, help="write the figures here too")
    parser.add_argument("--profile", type=Path, default=None, help="first one job of this tree under pyinstrument")
    parser.add_argument("--profile-migrate", type=Path, default=None, dest="profile_migrate",
                        help="first one migrate job of this tree under pyinstrument (its text output there): where "
                             "its main thread waits, beside --profile's validate")
    parser.add_argument("--py-spy", type=Path, default=None, dest="py_spy",
                        help="first one job of this tree under py-spy record --gil (every thread): its summary there")
    parser.add_argument("--migrate", action="store_true",
                        help="a migrate job of this tree (into a table of its own) in each round too")
    parser.add_argument("--variant", action="append", default=[], metavar="NAME:VAR=VALUE",
                        help="a validate job of this tree with VAR=VALUE in its environment, in each round too")
    args = parser.parse_args(argv)

    from ddb2bt.pipelines.local import servers as local_servers

    from . import dataset, load

    variants = dict(spec.split(":", 1) for spec in args.variant)
    figures: dict[str, list[dict]] = {name: [] for name in ("this", args.against, *variants)}
    if args.migrate:
        figures["migrate"] = []
    with tempfile.TemporaryDirectory(prefix="ddb2bt-validate-ab-") as tmp, local_servers.dynalite() as dynamo, \
            local_servers.bigtable_emulator() as emulator, local_servers.patched_environ(local_servers.FAKE_AWS_ENV):
        trees = {"this": str(ROOT), args.against: str(tree_of(args.against, Path(tmp) / "against")),
                 **{name: str(ROOT) for name in variants}, **({"migrate": str(ROOT)} if args.migrate else {})}
        for tree in trees.values():
            compiled(Path(tree))
        load.load_table(dynamo.endpoint, "bench", dataset.generate(args.items))
        env = job_env(emulator)
        where = {"endpoint": dynamo.endpoint, "table": "bench", "project": "validateab", "instance": "validateab",
                 "target": "bench", "segments": 4, "mode": "in_memory", "workers": 1}
        migrated = _job([sys.executable, "-m", "benchmarks.child",
                         json.dumps({"kind": "ddb2bt", **where, "run_dir": os.path.join(tmp, "migrate")})],
                        env, str(ROOT))
        if migrated["rows_written"] != args.items or not migrated["ok"]:
            raise SystemExit(f"migrate: {migrated['problems']}")
        if args.profile_migrate:
            _job([sys.executable, "-m", "benchmarks.child", json.dumps({
                "kind": "ddb2bt", **where, "target": "profiled", "run_dir": os.path.join(tmp, "migrate-profiled"),
                "profile": str(args.profile_migrate)})], env, str(ROOT))
            log(f"profile: {args.profile_migrate}")
        servers = {"dynalite": dynamo.pid, "emulator": emulator.pid}
        for number, (round_, name) in enumerate(alternating(trees, args.rounds, bool(args.profile or args.py_spy))):
            job = {"kind": "validate", **where, "run_dir": os.path.join(tmp, f"validate{number}")}
            job_env_ = dict(env)
            if name in variants:
                variable, value = variants[name].split("=", 1)
                job_env_[variable] = value
            if name == "migrate":
                job.update(kind="ddb2bt", target=f"m{number}")
            argv_ = [sys.executable, "-m", "benchmarks.child"]
            raw = Path(tmp, "py-spy.raw")
            if round_ < 0 and args.profile:
                job["profile"] = str(args.profile)
            elif round_ < 0:
                argv_ = [str(Path(sys.executable).with_name("py-spy")), "record", "--gil", "--threads", "--rate", "200",
                         "--format", "raw", "--output", str(raw), "--", *argv_]
            before = {server: cpu_seconds(pid) for server, pid in servers.items()}
            load_before = Path("/proc/loadavg").read_text().split()[0]
            times = os.times()
            result = _job([*argv_, json.dumps(job)], job_env_, trees[name])
            after = os.times()
            if result["items_read"] != args.items or result.get("differences") or result["problems"]:
                raise SystemExit(f"{name}: read {result['items_read']}, {result['differences']} differences, "
                                 f"problems {result['problems']}")
            if round_ < 0:
                if args.py_spy:
                    title = f"validate, this tree, {args.items} items, live scan"
                    args.py_spy.write_text("\n".join(summarize_py_spy(raw.read_text(), title=title, top=40, focus=focus)
                                                     for focus in (None, "_CompareFn.process", "RowLookup._read_keys")))
                log(f"profile: {args.profile or args.py_spy}")
                continue
            trace, n = result["own_cpu_trace"], args.items
            split = own_cpu_split(trace, n)  # a tree without validate's live counts has no steady state: None
            entry = {"steady_us": split["steady_us_per_item"], "startup_s": split.get("startup_s"),"items_per_s": n / result["seconds"], "seconds": result["seconds"],
                     "job_us": 1e6 * (after.children_user + after.children_system
                                      - times.children_user - times.children_system) / n,
                     "run_us": 1e6 * (trace["cpu_after_run_s"] - trace["cpu_before_run_s"]) / n,
                     **{f"{server}_us": 1e6 * (cpu_seconds(pid) - before[server]) / n
                        for server, pid in servers.items()},
                     "load": f"{load_before}-{Path('/proc/loadavg').read_text().split()[0]}"}
            figures[name].append(entry)
            log(f"round {round_} {name}: {entry['items_per_s']:,.0f} items/s ({entry['seconds']:.2f} s), CPU per "
                f"item: job {entry['job_us']:.0f} us (in the call {entry['run_us']:.0f}, steady "
                f"{entry['steady_us'] or 0:.1f}, start-up {entry['startup_s'] or 0:.2f} s), dynalite "
                f"{entry['dynalite_us']:.0f}, emulator {entry['emulator_us']:.0f} (load {entry['load']})")
    summary = {name: {key: statistics.median(known) if (known := [e[key] for e in entries if e[key] is not None]) else 0.0
                      for key in ("items_per_s", "job_us", "run_us", "steady_us", "startup_s", "dynalite_us",
                                  "emulator_us")}
               for name, entries in figures.items() if entries}
    ratios = [a["items_per_s"] / b["items_per_s"] for a, b in zip(figures["this"], figures[args.against])]
    if args.migrate:
        print("against migrate, per round: " + "; ".join(
            f"{name} " + ", ".join(f"{a['items_per_s'] / m['items_per_s']:.2f}" for a, m in zip(entries, figures["migrate"]))
            for name, entries in figures.items() if name != "migrate"))
    for name, medians in summary.items():
        print(f"{name:12} " + ", ".join(f"{key} {value:,.1f}" for key, value in medians.items()))
    print(f"this / {args.against} items/s per round: {', '.join(f'{r:.2f}' for r in ratios)}")
    record = {"against": args.against, "items": args.items, "rounds": figures, "summary": summary,
              "ratio_per_round": ratios, **tree_state()}
    if args.json:
        args.json.write_text(json.dumps(record, indent=1) + "\n")
    return record


if __name__ == "__main__":
    main()
