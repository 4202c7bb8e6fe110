"""The export scenario of ``benchmarks.run`` alone, this tree against another commit and the hand-written script in
alternating rounds: ``python -m benchmarks.export_ab --against <commit> [--after <commit>] [--items N] [--rounds R]``.

Each round runs the three jobs of the scenario (the baseline's export script; ddb2bt in_memory from the export, with
the other commit's tree first on ``PYTHONPATH``, as ``benchmarks.io_paths`` does; ddb2bt with ``--after``'s) on the same
export folder and Bigtable emulator, each in its own process, in an order that rotates from round to round. Per round:
each side's items/s, its ratio to the baseline of the same round, ddb2bt's own CPU per item in steady state
(``measure.own_cpu_split``) and the load. No DynamoDB server: the export scenario reads files.

With ``--reader-rounds R`` it first times the export reader alone (``sized_records`` over the folder's data files,
batched as the pipeline does) for both trees in one process, R rounds in alternating order: each tree is imported
under a name of its own (its imports are relative), so both see the same moments of a shared machine's load.
Docs: docs/PERFORMANCE.md ("Export round 6").
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
from pathlib import Path
from typing import Any

from .common import RESULTS, ROOT, Bench, log
from .io_paths import tree_of, tree_state

SIDES = ("baseline", "before", "after")


def reader_rounds(roots: dict[str, Path], export_dir: str, rounds: int) -> dict[str, Any]:
    """Process CPU (every thread) per item of reading the export's data files, per side and round, in one process."""
    import gc
    import glob
    import importlib
    import sys
    import time

    gc.set_threshold(50_000, 50, 10)  # the pipeline's (pipelines/run/collector.py)
    links = Path(tempfile.mkdtemp(prefix="ddb2bt-reader-ab-"))
    modules = {}
    for side, root in roots.items():
        (links / f"ddb2bt_{side}").symlink_to(root / "ddb2bt")
    sys.path.insert(0, str(links))
    for side in roots:
        modules[side] = importlib.import_module(f"ddb2bt_{side}.pipelines.dynamodb.export")
    files = sorted(glob.glob(os.path.join(export_dir, "data", "*.gz")))

    def one_pass(export: Any) -> float:
        started, count = time.process_time(), 0
        for path in files:
            for batch in export.file_batches(export.sized_records(path, lambda record: record["Item"], "an item")):
                count += len(batch)
        return (time.process_time() - started) / count * 1e6

    per_round: dict[str, list[float]] = {side: [] for side in roots}
    sides = list(roots)
    for number in range(rounds):
        for side in sides[number % 2:] + sides[:number % 2]:
            per_round[side].append(one_pass(modules[side]))
    ratios = [after / before for before, after in zip(per_round["before"], per_round["after"])]
    return {"cpu_us_per_item": per_round, "median": {side: statistics.median(v) for side, v in per_round.items()},
            "after_over_before": {"median": statistics.median(ratios), "spread": [min(ratios), max(ratios)]},
            "loadavg": list(os.getloadavg())}


def order(number: int) -> list[str]:
    """Round ``number``'s order: the sides rotated, so that none always runs first or last."""
    return [SIDES[(number + at) % len(SIDES)] for at in range(len(SIDES))]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", required=True, help="the commit to compare with (its tree is run as 'before')")
    parser.add_argument("--after", default="HEAD", help="the commit run as 'after' (default HEAD: the work tree's "
                        "uncommitted edits, made while the rounds run, cannot leak into them)")
    parser.add_argument("--items", type=int, default=30_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--output", default=str(RESULTS / "export-ab.json"))
    parser.add_argument("--reader-rounds", type=int, default=0, help="first time the export reader alone, in one "
                        "process, this many alternating rounds")
    parser.add_argument("--no-pipeline", action="store_true", help="only the reader rounds")
    args = parser.parse_args(argv)

    from ddb2bt.pipelines.local import servers as local_servers

    from . import load

    export_dir, _ = load.cached_export(args.items, 8 if args.items >= 50_000 else 4)
    env = {**os.environ, **local_servers.FAKE_AWS_ENV, "PYTHONPATH": str(ROOT)}
    env.pop("AWS_PROFILE", None)
    rounds: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="ddb2bt-export-ab-") as workdir, \
            local_servers.bigtable_emulator() as emulator, \
            local_servers.patched_environ(local_servers.emulator_env(emulator.endpoint)):
        env["BIGTABLE_EMULATOR_HOST"] = emulator.endpoint
        before_root = tree_of(args.against, Path(workdir) / "before")
        after_root = tree_of(args.after, Path(workdir) / "after")
        envs = {side: {**env, "PYTHONPATH": f"{root}{os.pathsep}{ROOT}"}
                for side, root in (("before", before_root), ("after", after_root))}
        reader = (reader_rounds({"before": before_root, "after": after_root}, export_dir, args.reader_rounds)
                  if args.reader_rounds else None)
        if reader:
            log(f"reader alone: {json.dumps(reader['median'])} us/item; after/before {reader['after_over_before']}")
        bench = Bench(args.items, env, "", "bench", export_dir, workdir, None, servers={"emulator": emulator.pid})
        for number in range(0 if args.no_pipeline else args.rounds):
            record: dict[str, Any] = {"round": number, "order": order(number), "loadavg_before": list(os.getloadavg())}
            for side in record["order"]:
                if side == "baseline":
                    bench.env = env
                    result = bench.job("baseline_export", export_dir=export_dir, label="baseline export")
                else:
                    bench.env = envs[side]
                    result = bench.job("ddb2bt", export_dir=export_dir, mode="in_memory", workers=1,
                                       label=f"ddb2bt export in_memory ({side})")
                record[side] = {"items_per_s": result["items_per_s"], "seconds": result["seconds"],
                                "own_cpu": result.get("own_cpu"), "cpu_seconds": result["cpu_seconds"],
                                "load_1min": result["load_1min"]}
            for side in ("before", "after"):
                record[side]["ratio"] = record[side]["items_per_s"] / record["baseline"]["items_per_s"]
            record["loadavg_after"] = list(os.getloadavg())
            rounds.append(record)
            log(f"round {number}: " + ", ".join(
                f"{side} {record[side]['items_per_s']:,.0f}/s" + (f" ({record[side]['ratio']:.2f}x)"
                                                                  if side != "baseline" else "")
                for side in SIDES) + f"; load {record['loadavg_before'][0]:.1f}")

    def median(side: str, pick: Any) -> float | None:
        values = [value for r in rounds if side in r and (value := pick(r[side])) is not None]
        return statistics.median(values) if values else None

    steady = lambda run: (run.get("own_cpu") or {}).get("steady_us_per_item")  # noqa: E731
    summary = {side: {"items_per_s": median(side, lambda run: run["items_per_s"]),
                      **({"ratio": median(side, lambda run: run["ratio"]),
                          "round_ratios": [r[side]["ratio"] for r in rounds],
                          "own_cpu_steady_us_per_item": median(side, steady),
                          "own_cpu_steady_per_round": [steady(r[side]) for r in rounds]}
                         if side != "baseline" else {})}
               for side in SIDES}
    out = {"how": __doc__, "items": args.items, "export_dir": export_dir, "against": args.against,
           "after": args.after, "tree": tree_state(), "reader_alone": reader, "rounds": rounds, "summary": summary}
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(out, indent=2, sort_keys=True) + "\n")
    print(json.dumps(summary, indent=2))
    return out


if __name__ == "__main__":
    main()
