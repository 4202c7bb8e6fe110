"""The catch-up against migrate, this tree against another commit in alternating processes:
``python -m benchmarks.catchup_ab --against <commit> [--this <commit>] [--items N] [--rounds R] [--alone]``.

Each round runs ``python -m benchmarks.cutover --items N --rounds 1 --no-tail`` (migrate then catch-up of the same
data in one process, after an untimed warm-up of both) once per tree, the order reversed every other round, the other
commit's tree taken with ``git archive`` and put first on ``PYTHONPATH`` (:func:`benchmarks.io_paths.tree_of`), both
byte-compiled first. ``--alone``: ``benchmarks.cutover --alone --rounds 1`` instead (the catch-up by itself, its CPU per
change). Per process: the catch-up / migrate ratio of items/s and of process CPU, the CPU per change and per item, the
load before and after. Docs: docs/PERFORMANCE.md ("h/catchup7").
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
from .io_paths import tree_of
from .startup_ab import alternating, compiled


def _load() -> str:
    return Path("/proc/loadavg").read_text().split()[0]


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.catchup_ab", description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", required=True, help="the commit to compare with (e.g. main)")
    parser.add_argument("--this", default=None, help="a commit to measure instead of the working tree")
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--alone", action="store_true", help="the catch-up by itself (no migrate beside it)")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here too")
    args = parser.parse_args(argv)

    runs: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="ddb2bt-catchup-ab-") as tmp:
        this = str(tree_of(args.this, Path(tmp) / "this")) if args.this else str(ROOT)
        trees = {"this": this, args.against: str(tree_of(args.against, Path(tmp) / "against"))}
        for tree in trees.values():
            compiled(Path(tree))
        for round_, name in alternating(trees, args.rounds, False):
            output = Path(tmp, f"{round_}-{len(runs)}.json")
            command = [sys.executable, "-m", "benchmarks.cutover", "--items", str(args.items), "--rounds", "1",
                       "--output", str(output), *(["--alone"] if args.alone else ["--no-tail"])]
            before = _load()
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(dict.fromkeys([trees[name], str(ROOT)]))}
            done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
            if done.returncode:
                raise SystemExit(f"{name}: {done.stderr[-3000:]}")
            figures = json.loads(output.read_text())["rounds"][0]
            figures.update(tree=name, round=round_, load=f"{before}-{_load()}")
            runs.append(figures)
            log(f"round {round_} {name}: " + ", ".join(
                f"{key} {figures[key]:.2f}" for key in ("ratio", "cpu_ratio", "migrate_cpu_us_per_item",
                                                        "catch_up_cpu_us_per_change") if key in figures)
                + f" (load {figures['load']})")
    out: dict = {"items": args.items, "rounds": args.rounds, "alone": args.alone, "runs": runs, "median": {}}
    for name in trees:
        mine = [run for run in runs if run["tree"] == name]
        out["median"][name] = {key: statistics.median(run[key] for run in mine)
                               for key in ("ratio", "cpu_ratio", "migrate_cpu_us_per_item",
                                           "catch_up_cpu_us_per_change") if key in mine[0]}
    print(json.dumps(out["median"], indent=2))
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return out


if __name__ == "__main__":
    main()
