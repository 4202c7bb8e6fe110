"""The writer's batchers, one per page, with and without pools kept across them, in alternating rounds:
``python -m benchmarks.batcher_pages [--pages N] [--page-items N] [--rounds R] [--json PATH]``.

What a migration's writer does with its batchers (``pipelines/bigtable/sink.py``): a batcher per Scan page, the
page's entries appended, the batcher closed in the background while the next page's are appended, here against the
emulator with the benchmark's mapped rows (their entries made once and appended again each page, so that the
batcher's own work is what differs). ``lent`` opens each batcher with the writer's :class:`.mutate.Pools` (threads
kept across pages), ``own`` as before (each batcher starts its own). Per round and variant: the process's CPU per
item (every thread's: the pools' and the requests' work are in other threads), the threads started, and the
emulator's cells (the same every way). One process; the variants alternate, their order swapped each round.
Docs: docs/PERFORMANCE.md ("Own CPU round 12").
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .common import HERE, log
from .io_paths import tree_state


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.batcher_pages", description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=40)
    parser.add_argument("--page-items", type=int, default=2_000)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)

    from google.cloud.bigtable.data import BigtableDataClient

    from ddb2bt.mappers.compiler import compile_spec
    from ddb2bt.mappers.loader import load_spec
    from ddb2bt.pipelines.bigtable.entries import entry_maker
    from ddb2bt.pipelines.bigtable.mutate import Pools
    from ddb2bt.pipelines.bigtable.sink import FlowControl, close_batcher, ensure_table, open_batcher
    from ddb2bt.pipelines.local import servers as local_servers
    from ddb2bt.pipelines.run.collector import relax_young_gc

    from . import dataset

    spec = load_spec(HERE / "spec.yaml")
    compiled = compile_spec(spec)
    rows = [row for row in map(compiled.map_item, dataset.generate(args.page_items)) if row is not None]
    started = [0]
    start = threading.Thread.start

    def counted(self: threading.Thread) -> None:
        started[0] += 1
        start(self)

    threading.Thread.start = counted  # type: ignore[method-assign]
    figures: dict[str, list[float]] = {"own": [], "lent": []}
    threads: dict[str, list[int]] = {"own": [], "lent": []}
    loads: list[str] = []
    with local_servers.bigtable_emulator() as emulator, \
            local_servers.patched_environ(local_servers.emulator_env(emulator.endpoint)):
        target = spec.target
        ensure_table(target)
        relax_young_gc()
        flow = FlowControl()
        with BigtableDataClient(project=target.project) as client:
            table = client.get_table(target.instance, target.table)
            make = entry_maker(frozenset(name for name, policy in target.families.items() if policy.aggregate))
            entries = [make(row) for row in rows]

            def pages(pools: Pools | None) -> tuple[float, int]:
                closer = ThreadPoolExecutor(max_workers=1)
                before, cpu = started[0], time.process_time()
                closing = None
                for _page in range(args.pages):
                    batcher = open_batcher(table, flow, pools)
                    for entry in entries:
                        batcher.append(entry)
                    if closing is not None:
                        assert closing.result() == []
                    closing = closer.submit(close_batcher, batcher)
                assert closing is not None and closing.result() == []
                if pools is not None:
                    pools.shutdown()
                closer.shutdown(wait=True)
                cpu = time.process_time() - cpu
                return cpu / (args.pages * len(entries)) * 1e6, started[0] - before

            pages(None)  # warm: the first requests, the channel
            for round_ in range(args.rounds):
                order = ("own", "lent") if round_ % 2 == 0 else ("lent", "own")
                load_before = Path("/proc/loadavg").read_text().split()[0]
                for name in order:
                    us, count = pages(Pools() if name == "lent" else None)
                    figures[name].append(us)
                    threads[name].append(count)
                loads.append(f"{load_before}-{Path('/proc/loadavg').read_text().split()[0]}")
                log(f"round {round_}: own {figures['own'][-1]:.2f} us/item ({threads['own'][-1]} threads), "
                    f"lent {figures['lent'][-1]:.2f} ({threads['lent'][-1]} threads); load {loads[-1]}")
    threading.Thread.start = start  # type: ignore[method-assign]
    summary = {name: {"median": statistics.median(v), "min": min(v), "max": max(v), "rounds": [round(x, 3) for x in v],
                      "threads_started": threads[name]} for name, v in figures.items()}
    ratios = [own / lent for own, lent in zip(figures["own"], figures["lent"])]
    print(f"own  {summary['own']['median']:.2f} us/item, lent {summary['lent']['median']:.2f}; own/lent per round "
          f"{', '.join(f'{r:.2f}' for r in ratios)}; load {', '.join(loads)}")
    record = {"pages": args.pages, "page_items": len(entries), "summary": summary, "ratio_per_round": ratios,
              "load": loads, "unit": "process CPU us per item appended (all threads)", **tree_state()}
    if args.json:
        args.json.write_text(json.dumps(record, indent=1) + "\n")
    return record


if __name__ == "__main__":
    main()
