"""The rollback section: items/s of `rollback` (Bigtable → DynamoDB) against `migrate` on the same data.

``python -m benchmarks.rollback_section [--items N] [--writers W]`` starts its own dynalite and Bigtable emulator,
loads the benchmark dataset (benchmarks/dataset.py: customers, orders, lines, products, reviews, every DynamoDB
type, a few 100-300 KB items) into a table, migrates it with ``ddb2bt.app.migrate.migrate`` (DirectRunner,
in_memory, 4 segments, as the other sections run it), then rolls the Bigtable table back into an empty DynamoDB
table with ``ddb2bt.app.rollback.rollback``: once without the comparison (the write path alone, what the ratio
uses) and once whole (write and compare). Both directions map with one lossless spec
(benchmarks/rollback_spec.yaml: one row per item, every attribute in a ``ddb_json`` rest family), so both move
the same items; the whole rollback must compare every item equal. Goal: rollback items/s >= 0.8 x migrate's.
Also timed: loading the items with plain BatchWriteItem from 4 threads (benchmarks/load.py), the pace the DynamoDB
server itself allows, which bounds any rollback.
Figures go to ``benchmarks/results/rollback.json``. Sequential, in one process: the ratio, not the absolute
numbers, is what the shared cores allow to read.
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SPEC = HERE / "rollback_spec.yaml"
GOAL = 0.8


def log(message: str) -> None:
    import sys

    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def measure(items: int, writers: int, workdir: str) -> dict[str, Any]:
    from ddb2bt.app.migrate import migrate
    from ddb2bt.app.options import RunOptions
    from ddb2bt.app.rollback import RollbackRequest, rollback
    from ddb2bt.mappers.loader import load_spec
    from ddb2bt.pipelines import local_servers
    from ddb2bt.pipelines.dynamodb_client import ClientSettings, create_table, make_client

    from . import dataset
    from .load import load_table

    with local_servers.dynalite() as dynamo, local_servers.bigtable_emulator() as emulator, \
            local_servers.patched_environ(local_servers.emulator_env(emulator.endpoint)):
        generated = list(dataset.generate(items))
        log(f"loading {items:,} items into dynalite")
        began = time.perf_counter()
        load_table(dynamo.endpoint, "rbsource", generated)
        load_s = time.perf_counter() - began
        del generated
        data = load_spec(SPEC).model_dump(by_alias=True, exclude_none=True)
        data["source"].update(table="rbsource", endpoint_url=dynamo.endpoint)
        from ddb2bt.mappers.spec import MappingSpec

        spec = MappingSpec.model_validate(data)
        options = RunOptions(run_dir=f"{workdir}/migrate", total_segments=4,
                             beam_args=("--direct_running_mode=in_memory", "--direct_num_workers=1"))
        log("migrate")
        began = time.perf_counter()
        migrated = migrate(spec, options)
        migrate_s = time.perf_counter() - began
        assert migrated.ok and migrated.counters["items_read"] == items, migrated.problems
        client = make_client(ClientSettings(endpoint_url=dynamo.endpoint, region="us-east-1"))
        figures: dict[str, Any] = {"items": items, "writers": writers,
                                   "migrate": {"seconds": migrate_s, "items_per_s": items / migrate_s},
                                   "plain_load": {"seconds": load_s, "items_per_s": items / load_s}}
        for label, compare in (("rollback_write", False), ("rollback_whole", True)):
            create_table(client, f"rb{label}", "pk", "sk")
            log(label)
            began = time.perf_counter()
            result = rollback(spec, RollbackRequest(to_table=f"rb{label}", writers=writers, compare=compare),
                              RunOptions(run_dir=f"{workdir}/{label}"))
            seconds = time.perf_counter() - began
            assert result.ok and result.counters["items_written"] == items, result.problems
            assert not compare or (result.compared == items and result.differences == 0)
            figures[label] = {"seconds": seconds, "items_per_s": items / seconds}
            log(f"  {items / seconds:,.0f} items/s ({seconds:.1f} s)")
        figures["ratio_write"] = figures["rollback_write"]["items_per_s"] / figures["migrate"]["items_per_s"]
        figures["ratio_whole"] = figures["rollback_whole"]["items_per_s"] / figures["migrate"]["items_per_s"]
        figures["ratio_write_vs_plain_load"] = figures["rollback_write"]["items_per_s"] / (items / load_s)
        figures["goal"] = GOAL
        figures["meets_goal"] = figures["ratio_write"] >= GOAL
        return figures


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--output", default=str(HERE / "results" / "rollback.json"))
    args = parser.parse_args(argv)
    import warnings

    warnings.filterwarnings("ignore", message="Connecting to Bigtable emulator")  # deliberate, here
    with tempfile.TemporaryDirectory() as workdir:
        figures = measure(args.items, args.writers, workdir)
    figures.update(date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), python=platform.python_version(),
                   machine=platform.processor() or platform.machine())
    Path(args.output).write_text(json.dumps(figures, indent=2) + "\n")
    m, w, a = figures["migrate"], figures["rollback_write"], figures["rollback_whole"]
    print(f"plain load       {figures['plain_load']['items_per_s']:8,.0f} items/s  (BatchWriteItem, 4 threads: "
          "the DynamoDB server's pace)\n"
          f"migrate          {m['items_per_s']:8,.0f} items/s\n"
          f"rollback (write) {w['items_per_s']:8,.0f} items/s  {figures['ratio_write']:.2f}x migrate (goal >= {GOAL})\n"
          f"rollback (whole) {a['items_per_s']:8,.0f} items/s  {figures['ratio_whole']:.2f}x migrate (write + compare)")
    return figures


if __name__ == "__main__":
    main()
