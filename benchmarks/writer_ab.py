"""The writer's per-row work alone, this tree against another commit in alternating rounds:
``python -m benchmarks.writer_ab --against <commit> [--items N] [--rounds R] [--json PATH]``.

What ``_WriteFn.process`` and ``_settle`` do per row, without Beam, servers or requests: make each mapped row's
entry with its bytes (``entry_maker``, then ``size()`` where that tree's writer still asks it), append it to the
batcher (limits high enough that nothing is flushed, no timer), the client's flow control over them as a flush
runs it (in the batcher's thread: ``len(entry.mutations)`` and ``size()`` of each entry), the ``pending`` bookkeeping, and the tallies of a
closed batcher (cells, bytes, index rows, overwrites: ``_tallies``, or the loop and ``_overwritten`` before it).
Each round runs one child process per tree (the other commit's tree from ``git archive`` with this tree's built C
extension, :func:`benchmarks.io_paths.built_modules`), thread CPU per row of each part, median of 9 passes, the collector's
thresholds of a run (``relax_young_gc``).
Docs: docs/PERFORMANCE.md ("Writer round 9").
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

PARTS = ("entry", "append", "flow", "pending", "tallies")


def child(items: int) -> dict[str, float]:
    """µs of thread CPU per row of each part, in this process (the ``ddb2bt`` first on ``sys.path``)."""
    import gc
    import time

    os.environ.setdefault("BIGTABLE_EMULATOR_HOST", "127.0.0.1:9")  # no request is ever sent
    from google.cloud.bigtable.data import BigtableDataClient

    from ddb2bt.mappers.compiler import compile_spec
    from ddb2bt.mappers.loader import load_spec
    from ddb2bt.mappers.results import MappedRow
    from ddb2bt.pipelines.bigtable import sink
    from ddb2bt.pipelines.bigtable.entries import entry_maker
    from ddb2bt.pipelines.bigtable.mutate import batcher_class

    from . import dataset
    from .common import HERE

    from ddb2bt.pipelines.run.collector import relax_young_gc

    relax_young_gc()  # the collector's thresholds of a run (pipelines/run/collector.py)
    compiled = compile_spec(load_spec(HERE / "spec.yaml"))
    rows = [row for row in map(compiled.map_item, dataset.generate(items)) if row is not None]
    make = entry_maker()
    sized = not hasattr(sink, "_tallies")  # that tree's writer asks size() itself
    client = BigtableDataClient(project="p")
    table = client.get_table("i", "t")
    entries: list = []

    def entry() -> None:
        entries.clear()
        add = entries.append
        for row in rows:
            made = make(row)
            if sized:
                made.size()
            add(made)

    def append() -> None:
        batcher = batcher_class()(table, flush_interval=None, flush_limit_mutation_count=10**12,
                                  flush_limit_bytes=10**15)
        add = batcher.append
        for made in entries:
            add(made)
        batcher._staged_entries = []
        batcher.close()

    def flow() -> None:  # the client's flow control as a flush runs it (in the batcher's thread), limits not reached
        from google.cloud.bigtable.data._sync_autogen.mutations_batcher import _FlowControl

        control = _FlowControl(10**12, 10**15)
        for batch in control.add_to_flow(entries):
            control.remove_from_flow(batch)

    pending: dict = {}

    def bookkeeping() -> None:
        pending.clear()
        for made, row in zip(entries, rows):
            pending[id(made)] = (made, row, row)
            if row.__class__ is not MappedRow:
                continue
            for _index_row in row.index_rows:
                pass

    def tallies() -> None:
        if not sized:
            sink._tallies(pending.values(), {})
            return
        cells = written = index_rows = 0
        main = []
        for made, row, _item in pending.values():
            cells += len(row.cells)
            data = made.data_bytes
            if data is None:
                data = sum(len(cell[1]) + len(cell[3]) for cell in row.cells)
            written += len(row.row_key) + data
            if row.__class__ is MappedRow:
                main.append(row)
            else:
                index_rows += 1
                if row.table is None:
                    main.append(row)
        sink._overwritten(main, {})

    found = {}
    for name, run in zip(PARTS, (entry, append, flow, bookkeeping, tallies)):
        times = []
        for _ in range(9):
            gc.collect()
            start = time.thread_time()
            run()
            times.append((time.thread_time() - start) / len(rows) * 1e6)
        found[name] = statistics.median(times)
    client.close()
    return found


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.writer_ab", description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", required=True)
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        print(json.dumps(child(args.child)))
        return {}
    found: dict[str, list[dict[str, float]]] = {"this": [], args.against: []}
    loads = []
    with tempfile.TemporaryDirectory(prefix="ddb2bt-writer-") as tmp:
        trees = {"this": str(ROOT), args.against: str(tree_of(args.against, Path(tmp) / "against"))}
        for round_ in range(args.rounds):
            order = list(trees) if round_ % 2 == 0 else list(trees)[::-1]
            for name in order:
                env = {**os.environ, "PYTHONPATH": os.pathsep.join([trees[name], str(ROOT)])}
                before = Path("/proc/loadavg").read_text().split()[0]
                out = subprocess.run([sys.executable, "-m", "benchmarks.writer_ab", "--against", args.against,
                                      "--child", str(args.items)], cwd=tmp, env=env, capture_output=True,
                                     text=True, check=True).stdout
                found[name].append(json.loads(out.strip().splitlines()[-1]))
                loads.append(f"{before}-{Path('/proc/loadavg').read_text().split()[0]}")
                log(f"round {round_} {name}: " + ", ".join(f"{k} {v:.2f}" for k, v in found[name][-1].items())
                    + f" us/row (load {loads[-1]})")
    totals = {name: [sum(r.values()) for r in rounds] for name, rounds in found.items()}
    result = {"this": "the working tree", "against": args.against, "items": args.items,
              "unit": "thread CPU us per row", "parts": found, "totals": totals,
              "median": {name: statistics.median(values) for name, values in totals.items()},
              "ratio_per_round": [a / b for a, b in zip(totals[args.against], totals["this"])], "load": loads,
              **tree_state()}
    for name, values in totals.items():
        print(f"{name:12} writer per row {statistics.median(values):.2f} us ({min(values):.2f}-{max(values):.2f})")
    print(f"{args.against} / this per round: " + ", ".join(f"{r:.2f}" for r in result["ratio_per_round"]))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
