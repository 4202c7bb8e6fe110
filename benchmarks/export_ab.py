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
With ``--parse-rounds R`` it first times ways of parsing the export's lines (decompressed beforehand, so only the
parse is timed), in one process, R rounds in alternating order (:func:`parse_rounds`): the reader's own (one orjson
call per line, ``wire_json.loader_for``), and one orjson call per block of lines joined as a JSON array, exact (each
line's object marked, :func:`joined_block_items`) and not (the lines joined with commas: the idea's upper bound,
which accepts text the per-line reading refuses).

With ``--sources-rounds R`` it first runs this tree's ``benchmarks.child`` migrate job (in_memory, 4 segments, as
``benchmarks.owncpu_ab`` does) from the export and from a live Scan of the same items in dynalite, alternating, R
rounds (:func:`sources_rounds`): each job's steady own CPU per item (``measure.own_cpu_split``) and items/s, so the
export path's steady state is compared with the live one's at the same moments.
Docs: docs/PERFORMANCE.md ("Export round 6", "Export round 9").
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


_MARK = "\x00"
_MARKED = b'\n,{"\\u0000":0,'


def joined_block_items(block: bytes, count: int) -> list[Any] | None:
    """The ``Item`` of each of ``block``'s ``count`` JSON lines from one orjson call, exactly what parsing them one
    by one gives, or None (read the block line by line). The lines are joined into one array, each line's opening
    ``{`` given a first member ``"\\u0000": 0`` and a newline and comma before it; the array's value is the lines'
    exactly when it has ``count`` objects, each with the mark: a line that is not one whole value alone swallows the
    next line's mark or adds an element without one (a newline cannot be inside a string, and a line can only write
    the mark's key as ``\\u0000``, which a joined block never holds). Measured, not used (docs/PERFORMANCE.md)."""
    import orjson

    from ddb2bt.pipelines.dynamodb import wire_json

    if (block[:1] != b"{" or block.count(b"\n{") != count - 1 or b"\\u0000" in block
            or wire_json._may_hold_big_int(block)):
        return None
    try:
        records = orjson.loads(b'[{"\\u0000":0,' + block[1:].replace(b"\n{", _MARKED) + b"]")
        items = [record["Item"] for record in records if type(record) is dict and _MARK in record]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return None
    return items if len(items) == count == len(records) else None


def parse_rounds(export_dir: str, rounds: int) -> dict[str, Any]:
    """Process CPU per item of parsing the export's decompressed lines into items, per way and round, in one
    process with the pipeline's collector thresholds; the ways' items are checked equal first."""
    import gc
    import glob
    import time

    import orjson

    from ddb2bt.pipelines.dynamodb import export, wire_json

    blocks: list[bytes] = []
    for path in sorted(glob.glob(os.path.join(export_dir, "data", "*.gz"))):
        with open(path, "rb") as raw:
            blocks += export.line_blocks(export.GzipReader(fileobj=raw, mode="rb"))
    counts = [block.count(b"\n") + 1 for block in blocks]

    def per_line(block: bytes, _count: int) -> list[Any]:
        loads = wire_json.loader_for(block)
        return [loads(line)["Item"] for line in block.split(b"\n") if line.strip()]

    def inexact(block: bytes, _count: int) -> list[Any]:
        return [record["Item"] for record in orjson.loads(b"[" + block.replace(b"\n", b",") + b"]")]

    ways = {"per line (the reader's)": per_line, "joined, exact (marked)": joined_block_items,
            "joined, inexact (commas)": inexact}
    expected = [per_line(block, count) for block, count in zip(blocks, counts)]
    for name, way in ways.items():
        assert [way(block, count) for block, count in zip(blocks, counts)] == expected, name
    items = sum(counts)
    gc.set_threshold(50_000, 50, 10)  # the pipeline's (pipelines/run/collector.py)
    per_round: dict[str, list[float]] = {name: [] for name in ways}
    names = list(ways)
    for number in range(rounds):
        for name in names[number % len(names):] + names[:number % len(names)]:
            started = time.process_time()
            for block, count in zip(blocks, counts):
                ways[name](block, count)
            per_round[name].append((time.process_time() - started) / items * 1e6)
    base = per_round[names[0]]
    return {"cpu_us_per_item": per_round, "items": items, "blocks": len(blocks),
            "median": {name: statistics.median(v) for name, v in per_round.items()},
            "over_per_line": {name: {"median": statistics.median(r := [b / a for a, b in zip(base, v)]),
                                     "spread": [min(r), max(r)]} for name, v in per_round.items()},
            "loadavg": list(os.getloadavg())}


def sources_rounds(export_dir: str, items: int, rounds: int) -> dict[str, Any]:
    """This tree's steady own CPU per item and items/s migrating from the export and from a live Scan of the same
    items, in alternating rounds (the order reversed every other round)."""
    import sys

    from ddb2bt.pipelines.local import servers as local_servers

    from . import dataset, load
    from .measure import own_cpu_split
    from .startup_ab import child_result, job_env

    per_round: dict[str, list[dict[str, float]]] = {"export": [], "scan": []}
    with tempfile.TemporaryDirectory(prefix="ddb2bt-sources-") as tmp, local_servers.dynalite() as dynamo, \
            local_servers.bigtable_emulator() as emulator, local_servers.patched_environ(local_servers.FAKE_AWS_ENV):
        load.load_table(dynamo.endpoint, "bench", dataset.generate(items))
        env = job_env(emulator)
        for number in range(rounds):
            for source in ("export", "scan") if number % 2 == 0 else ("scan", "export"):
                job = {"kind": "ddb2bt", "endpoint": dynamo.endpoint, "table": "bench", "project": "sources",
                       "instance": "sources", "target": f"t{number}{source}", "segments": 4, "mode": "in_memory",
                       "workers": 1, "run_dir": os.path.join(tmp, f"run{number}{source}")}
                if source == "export":
                    job["export_dir"] = export_dir
                load_before = os.getloadavg()[0]
                result = child_result([sys.executable, "-m", "benchmarks.child", json.dumps(job)], env, str(ROOT),
                                      source, items)
                split = own_cpu_split(result["own_cpu_trace"], result["items_read"])
                per_round[source].append({"steady_us_per_item": split["steady_us_per_item"],
                                          "items_per_s": result["items_read"] / result["seconds"],
                                          "load": [load_before, os.getloadavg()[0]]})
                log(f"sources round {number} {source}: steady {split['steady_us_per_item']:.1f} us/item, "
                    f"{per_round[source][-1]['items_per_s']:,.0f} items/s (load {load_before:.1f})")
    gaps = [e["steady_us_per_item"] - s["steady_us_per_item"] for e, s in zip(per_round["export"], per_round["scan"])]
    return {"per_round": per_round,
            "median_steady_us_per_item": {source: statistics.median(r["steady_us_per_item"] for r in runs)
                                          for source, runs in per_round.items()},
            "export_minus_scan_us": {"per_round": gaps, "median": statistics.median(gaps)}}


def order(number: int) -> list[str]:
    """Round ``number``'s order: the sides rotated, so that none always runs first or last."""
    return [SIDES[(number + at) % len(SIDES)] for at in range(len(SIDES))]


def run_sides(args: argparse.Namespace, export_dir: str, rounds: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The reader rounds (if asked for), then the pipeline rounds into ``rounds``; returns the reader's figures."""
    from ddb2bt.pipelines.local import servers as local_servers

    env = {**os.environ, **local_servers.FAKE_AWS_ENV, "PYTHONPATH": str(ROOT)}
    env.pop("AWS_PROFILE", None)
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

    return reader


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
    parser.add_argument("--parse-rounds", type=int, default=0, help="first time ways of parsing the lines (one orjson "
                        "call per line, or per block), in one process, this many alternating rounds")
    parser.add_argument("--sources-rounds", type=int, default=0, help="first this tree's migrate from the export and "
                        "from a live Scan of the same items, this many alternating rounds")
    parser.add_argument("--no-pipeline", action="store_true", help="only the reader, parse and sources rounds")
    args = parser.parse_args(argv)

    from . import load

    export_dir, _ = load.cached_export(args.items, 8 if args.items >= 50_000 else 4)
    parsing = parse_rounds(export_dir, args.parse_rounds) if args.parse_rounds else None
    if parsing:
        log(f"parse alone: {json.dumps(parsing['median'])} us/item; over per line {parsing['over_per_line']}")
    sources = sources_rounds(export_dir, args.items, args.sources_rounds) if args.sources_rounds else None
    if sources:
        log(f"sources: {json.dumps(sources['median_steady_us_per_item'])} us/item steady; export - scan "
            f"{sources['export_minus_scan_us']}")
    rounds: list[dict[str, Any]] = []
    reader = run_sides(args, export_dir, rounds) if args.reader_rounds or not args.no_pipeline else None

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
           "after": args.after, "tree": tree_state(), "parse_alone": parsing, "sources": sources, "reader_alone": reader, "rounds": rounds,
           "summary": summary}
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(out, indent=2, sort_keys=True) + "\n")
    print(json.dumps(summary, indent=2))
    return out


if __name__ == "__main__":
    main()
