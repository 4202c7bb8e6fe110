"""The catch-up against migrate, this tree against another commit in alternating processes:
``python -m benchmarks.catchup_ab --against <commit> [--this <commit>] [--items N] [--rounds R] [--alone]``.

Each round runs ``python -m benchmarks.cutover --items N --rounds 1 --no-tail`` (migrate then catch-up of the same
data in one process, after an untimed warm-up of both) once per tree, the order reversed every other round, the other
commit's tree taken with ``git archive`` and put first on ``PYTHONPATH`` (:func:`benchmarks.io_paths.tree_of`), both
byte-compiled first. ``--alone``: ``benchmarks.cutover --alone --rounds 1`` instead (the catch-up by itself, its CPU per
change). ``--parts``: instead, in each process the CPU of three parts alone, best of 5 in one process: the export's
check (``check_export`` of N changes, nothing kept) per change, the change entries' bytes (a ``MutationsEntry``
made and sized for the rows of N changes' diffs) per entry, and the apply step's own work per change without I/O
(each change's in-flight key, ``item_key``, then the apply's prepare of the batch, one group per change, and every
entry's size, as the step hands them to the batcher; the collector as the job has it). Per process: the catch-up /
migrate ratio of items/s and of process CPU, the CPU per change and per item, the load before and after. Between
processes the same code moves ±15 % at any load: compare a change of a few per cent alternating in one process.
Docs: docs/PERFORMANCE.md ("h/catchup7", "h/catchup8").
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
    parser.add_argument("--parts", action="store_true", help="the check and the entries alone, CPU per change / entry")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--json", type=Path, default=None, help="write the figures here too")
    args = parser.parse_args(argv)
    if args.child:
        return _parts(args.child, args.items)

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
            if args.parts:
                command = [sys.executable, "-m", "benchmarks.catchup_ab", "--against", "-", "--items",
                           str(args.items), "--child", str(output)]
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
                                                        "catch_up_cpu_us_per_change", "check_cpu_us_per_change",
                                                        "entry_cpu_us", "apply_cpu_us_per_change") if key in figures)
                + f" (load {figures['load']})")
    out: dict = {"items": args.items, "rounds": args.rounds, "alone": args.alone, "runs": runs, "median": {}}
    for name in trees:
        mine = [run for run in runs if run["tree"] == name]
        out["median"][name] = {key: statistics.median(run[key] for run in mine)
                               for key in ("ratio", "cpu_ratio", "migrate_cpu_us_per_item", "catch_up_cpu_us_per_change",
                                           "check_cpu_us_per_change", "entry_cpu_us", "apply_cpu_us_per_change")
                               if key in mine[0]}
    print(json.dumps(out["median"], indent=2))
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return out


def _parts(output: str, n: int) -> dict:
    """In this process (the tree first on PYTHONPATH): the check's CPU per change, the entries' per entry and the
    apply step's per change (without I/O)."""
    import gc
    import time
    import warnings

    warnings.simplefilter("ignore")
    from ddb2bt.mappers.changes import Change, diff, item_key
    from ddb2bt.mappers.compiler import compile_spec
    from ddb2bt.pipelines.bigtable.entries import mutations_entry_class
    from ddb2bt.pipelines.cutover import change_sink
    from ddb2bt.pipelines.dynamodb.export_writer import write_incremental_export
    from ddb2bt.pipelines.dynamodb.export import sized_records
    from ddb2bt.pipelines.dynamodb.incremental_export import check_export, parse_record, read_incremental_manifest
    from ddb2bt.pipelines.run.collector import relax_young_gc

    from .cutover import T0_US, _spec, workload

    _items, changes = workload(n)
    compiled = compile_spec(_spec("parts", "/unused", None), now_ms=T0_US // 1000)
    rows = [(row.row_key, row.deletes + row.sets) for change in changes
            for row in diff(compiled, Change(change["Keys"], change["OldImage"], change["NewImage"], "MODIFY",
                                             T0_US)).rows]
    entry = mutations_entry_class()
    with tempfile.TemporaryDirectory(prefix="ddb2bt-catchup-parts-") as tmp:
        write_incremental_export(tmp, changes, T0_US, T0_US + 3_600_000_000, files=4, table="bench")
        manifest = read_incremental_manifest(tmp)
        kept: list[Change] = []
        applier = object.__new__(change_sink.ChangeApplier)  # prepare needs the compiled spec alone, no client
        applier._compiled, applier._counters = compiled, frozenset()
        for data_file in manifest.files:
            kept += [change for _size, change in sized_records(data_file.path, parse_record, "a change record")]
        # the collector as the catch-up's job has it: the kept changes frozen (check_export's gc.freeze), the young
        # generation relaxed (the apply step's setup); otherwise its full collections walk the 10,000 changes
        relax_young_gc()
        gc.collect()
        gc.freeze()

        def apply() -> None:
            {item_key(change.keys, ()) for change in kept}
            prepared = applier.prepare([(change,) for change in kept])
            for entry in prepared.entries:
                entry.size()

        check, entries, applies = [], [], []
        for _ in range(5):
            gc.collect()
            started = time.process_time()
            assert check_export(manifest, ("pk", "sk")) == n
            check.append((time.process_time() - started) / n * 1e6)
            started = time.process_time()
            for row_key, mutations in rows:
                entry(row_key, mutations).size()
            entries.append((time.process_time() - started) / len(rows) * 1e6)
            gc.collect()
            started = time.process_time()
            apply()
            applies.append((time.process_time() - started) / n * 1e6)
        gc.unfreeze()
    figures = {"check_cpu_us_per_change": min(check), "entry_cpu_us": min(entries),
               "apply_cpu_us_per_change": min(applies),
               "load_1min": os.getloadavg()[0]}
    Path(output).write_text(json.dumps({"rounds": [figures]}))
    return figures


if __name__ == "__main__":
    main()
