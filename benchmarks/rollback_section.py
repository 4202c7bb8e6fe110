"""The rollback section: items/s of `rollback` (Bigtable → DynamoDB) against `migrate` on the same data.

``python -m benchmarks.rollback_section [--items N] [--writers W] [--rounds R] [--ablation [NAME]]`` starts its own
dynalite and Bigtable emulator, loads the benchmark dataset (benchmarks/dataset.py: customers, orders, lines,
products, reviews, every DynamoDB type, a few 100-300 KB items) into a table, then runs R rounds, each: migrate it
with ``ddb2bt.app.migrate.migrate`` (DirectRunner, in_memory, 4 segments, as the other sections run it) into the
round's own Bigtable table, and roll that table back into empty DynamoDB tables with ``ddb2bt.app.rollback.rollback``:
once without the comparison (the write path alone, what the ratio uses) and once whole (write and compare). The
rounds alternate the two directions so that both see the machine's load as it comes and goes; each round's ratio
and the load average before each run are kept, and the median, minimum and maximum are reported. With
``--ablation`` every round also rolls back with each speed-up taken back (``ABLATIONS``; ``--ablation NAME``: that one),
which is what each buys.
Both directions map with one lossless spec (benchmarks/rollback_spec.yaml: one row per item, every attribute in a
``ddb_json`` rest family), so both move the same items; the whole rollback must compare every item equal. Goal:
rollback items/s >= 0.8 x migrate's. Also timed in every round: loading the items with plain BatchWriteItem from 4 threads
(benchmarks/load.py), the pace the DynamoDB server itself allows at that moment, which bounds any rollback.
Figures go to ``benchmarks/results/rollback.json`` (its hand-written ``changes`` list is kept). In one process:
the ratio, not the absolute numbers, is what the shared cores allow to read.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path
from collections.abc import Iterator
from typing import Any

HERE = Path(__file__).resolve().parent
SPEC = HERE / "rollback_spec.yaml"
GOAL = 0.8
ABLATIONS = ("rollback_write_one_process", "rollback_write_botocore_requests", "rollback_write_every_sampled_range")


def log(message: str) -> None:
    import sys

    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def measure(items: int, writers: int, rounds: int, ablation: tuple[str, ...], also_writers: list[int], workdir: str) -> dict[str, Any]:
    from ddb2bt.app.migrate import migrate
    from ddb2bt.app.options import RunOptions
    from ddb2bt.app.rollback import RollbackRequest, rollback
    from ddb2bt.mappers.loader import load_spec
    from ddb2bt.mappers.spec import MappingSpec
    from ddb2bt.pipelines.local import servers as local_servers
    from ddb2bt.pipelines.dynamodb.client import ClientSettings, create_table, make_client

    from multiprocessing import forkserver

    from . import dataset
    from .load import load_table

    with local_servers.dynalite() as dynamo, local_servers.bigtable_emulator() as emulator, \
            local_servers.patched_environ(local_servers.emulator_env(emulator.endpoint)):
        generated = list(dataset.generate(items))
        log(f"loading {items:,} items into dynalite")
        began = time.perf_counter()
        load_table(dynamo.endpoint, "rbsource", generated)
        load_s = time.perf_counter() - began
        client = make_client(ClientSettings(endpoint_url=dynamo.endpoint, region="us-east-1"))
        runs: list[dict[str, Any]] = []
        for number in range(rounds):
            # Each round migrates into its own Bigtable table and rolls back into fresh DynamoDB tables, so the
            # rounds do the same work; interleaving them exposes both sides to the same load.
            data = load_spec(SPEC).model_dump(by_alias=True, exclude_none=True)
            data["source"].update(table="rbsource", endpoint_url=dynamo.endpoint)
            data["target"]["table"] = f"rb{number}"
            spec = MappingSpec.model_validate(data)
            figures: dict[str, Any] = {"round": number + 1}
            log(f"round {number + 1}: migrate")
            load_before = os.getloadavg()[0]
            began = time.perf_counter()
            migrated = migrate(spec, RunOptions(run_dir=f"{workdir}/migrate{number}", total_segments=4,
                                                beam_args=("--direct_running_mode=in_memory",
                                                           "--direct_num_workers=1")))
            seconds = time.perf_counter() - began
            assert migrated.ok and migrated.counters["items_read"] == items, migrated.problems
            figures["migrate"] = {"seconds": seconds, "items_per_s": items / seconds, "load_before": load_before}
            log(f"  {items / seconds:,.0f} items/s ({seconds:.1f} s)")
            log(f"round {number + 1}: plain load")  # the DynamoDB server's pace at this moment: a rollback's ceiling
            load_before = os.getloadavg()[0]
            began = time.perf_counter()
            load_table(dynamo.endpoint, f"plain{number}", generated)
            seconds = time.perf_counter() - began
            figures["plain_load"] = {"seconds": seconds, "items_per_s": items / seconds, "load_before": load_before}
            log(f"  {items / seconds:,.0f} items/s ({seconds:.1f} s)")
            variants: list[tuple[str, bool, str | None, int]] = [("rollback_write", False, None, writers),
                                                                 ("rollback_whole", True, None, writers)]
            if ablation:
                variants[1:1] = [(name, False, name, writers) for name in ablation]
            variants[1:1] = [(f"rollback_write_{more}_writers", False, None, more) for more in also_writers]
            for label, compare, undo, threads in variants:
                processes = 1 if undo == "rollback_write_one_process" else None
                table = f"rb{label}{number}"
                create_table(client, table, "pk", "sk")
                log(f"round {number + 1}: {label}")
                # a fresh forkserver each time: a CLI run starts its own, and pays for its imports
                forkserver._forkserver._stop()  # noqa: SLF001
                load_before = os.getloadavg()[0]
                began = time.perf_counter()
                with _undone(undo):
                    result = rollback(spec, RollbackRequest(to_table=table, writers=threads, processes=processes,
                                                            compare=compare),
                                      RunOptions(run_dir=f"{workdir}/{label}{number}"))
                seconds = time.perf_counter() - began
                assert result.ok and result.counters["items_written"] == items, result.problems
                assert not compare or (result.compared == items and result.differences == 0)
                figures[label] = {"seconds": seconds, "items_per_s": items / seconds, "load_before": load_before}
                log(f"  {items / seconds:,.0f} items/s ({seconds:.1f} s)")
            figures["ratio_write"] = figures["rollback_write"]["items_per_s"] / figures["migrate"]["items_per_s"]
            figures["ratio_whole"] = figures["rollback_whole"]["items_per_s"] / figures["migrate"]["items_per_s"]
            figures["ratio_write_vs_plain_load"] = (figures["rollback_write"]["items_per_s"]
                                                    / figures["plain_load"]["items_per_s"])
            runs.append(figures)
        return {"items": items, "writers": writers, "rounds": runs,
                "first_load": {"seconds": load_s, "items_per_s": items / load_s},
                "summary": {name: _spread([run[name] if name.startswith("ratio") else run[name]["items_per_s"]
                                           for run in runs])
                            for name in ("migrate", "plain_load", "rollback_write", "rollback_whole", "ratio_write",
                                         "ratio_whole", "ratio_write_vs_plain_load",
                                         *ablation,
                                         *(f"rollback_write_{more}_writers" for more in also_writers))},
                "goal": GOAL}


@contextlib.contextmanager
def _undone(ablation: str | None) -> Iterator[None]:
    """The rollback with one of its speed-ups taken back (None: as it is), to measure what it buys."""
    from unittest import mock

    if ablation in (None, "rollback_write_one_process"):  # (the latter is a request option: processes=1)
        yield
    elif ablation == "rollback_write_botocore_requests":  # botocore validates and serialises every value again
        with mock.patch("ddb2bt.pipelines.dynamodb.sink.send_requests_raw", lambda client: None):
            yield
    elif ablation == "rollback_write_every_sampled_range":  # one ReadRows per key Bigtable samples
        with mock.patch("ddb2bt.pipelines.bigtable.rows.MAX_RANGES", 10 ** 9):
            yield
    else:
        raise ValueError(ablation)


def _spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ablation", nargs="?", const="all", choices=("all", *ABLATIONS),
                        help="also roll back with each speed-up taken back, in every round (what each one buys)")
    parser.add_argument("--also-writers", type=int, action="append", default=[],
                        help="also roll back (write path) with this many writer threads, in every round")
    parser.add_argument("--output", default=str(HERE / "results" / "rollback.json"))
    args = parser.parse_args(argv)
    import warnings

    warnings.filterwarnings("ignore", message="Connecting to Bigtable emulator")  # deliberate, here
    with tempfile.TemporaryDirectory() as workdir:
        ablation = ABLATIONS if args.ablation == "all" else (args.ablation,) if args.ablation else ()
        figures = measure(args.items, args.writers, args.rounds, ablation, args.also_writers, workdir)
    summary = figures["summary"]
    figures["meets_goal"] = summary["ratio_write"]["median"] >= GOAL
    figures.update(date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), python=platform.python_version(),
                   machine=f"{platform.machine()}, {os.cpu_count()} cores shared with other jobs",
                   load_average_after=os.getloadavg())
    output = Path(args.output)
    if output.exists():  # the hand-written account of each change (and what did not pay) stays
        figures["changes"] = json.loads(output.read_text()).get("changes", [])
    output.write_text(json.dumps(figures, indent=2) + "\n")

    def line(name: str, unit: str = "items/s") -> str:
        got = summary[name]
        return f"{got['median']:9,.2f} {unit} (min {got['min']:,.2f}, max {got['max']:,.2f})"

    print(f"{len(figures['rounds'])} alternating rounds of {figures['items']:,} items; median (min, max)\n"
          f"plain load       {line('plain_load')}  (BatchWriteItem, 4 threads: the server's pace)\n"
          f"migrate          {line('migrate')}\n"
          f"rollback (write) {line('rollback_write')}\n"
          f"rollback (whole) {line('rollback_whole')}\n"
          f"ratio (write)    {line('ratio_write', 'x')}  goal >= {GOAL}\n"
          f"ratio (whole)    {line('ratio_whole', 'x')}\n"
          f"write/plain load {line('ratio_write_vs_plain_load', 'x')}")
    for name in summary:
        if name.startswith("rollback_write_"):
            print(f"{name.removeprefix('rollback_write_'):<32} {line(name)}")
    return figures


if __name__ == "__main__":
    main()
