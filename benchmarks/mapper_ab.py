"""The mapper of a git revision against the working tree's, side by side: ``python -m benchmarks.mapper_ab``.

``python -m benchmarks.mapper_ab [--base REV] [--items N] [--rounds R] [--json PATH]``

The mapper section of ``benchmarks.run`` compares ddb2bt's ``map_item`` + ``to_mutation_entry`` with the floor
(boto3's ``TypeDeserializer`` plus the client's own ``RowMutationEntry``/``SetCell``). On a shared machine a
change to the mapper is only measured when both mappers run in the same process in alternating rounds, so this
script loads ``mappers/`` as it is at ``--base`` (from git, under another package name) next to the working tree's,
checks that both give the same rows for the benchmark's data set, and times, in each round: the base mapper, the
working tree's mapper and the floor (each: map + entry over every item). It prints and (with ``--json``) writes
each round's ratios, their median and spread, and the machine's load.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .common import HERE, ROOT, machine, versions


def load_base_mappers(revision: str, into: Path) -> Any:
    """``mappers/`` at `revision` as the package ``ddb2bt_base.mappers`` (its imports are relative)."""
    package = into / "ddb2bt_base"
    (package / "mappers").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", revision, "mappers"], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(package)], input=archive, check=True)
    sys.path.insert(0, str(into))
    return importlib.import_module("ddb2bt_base.mappers")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default="479a72b", help="git revision of the mapper to compare with")
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--json", type=Path, default=None, help="write the figures here too")
    args = parser.parse_args(argv)

    from boto3.dynamodb.types import TypeDeserializer
    from google.cloud.bigtable.data import RowMutationEntry, SetCell

    from ddb2bt.mappers.compiler import compile_spec
    from ddb2bt.mappers.loader import load_spec
    from ddb2bt.pipelines.bigtable.entries import to_mutation_entry

    from . import dataset

    with tempfile.TemporaryDirectory() as scratch:
        load_base_mappers(args.base, Path(scratch))
        base_compiler = importlib.import_module("ddb2bt_base.mappers.compiler")
        base_loader = importlib.import_module("ddb2bt_base.mappers.loader")
        base = base_compiler.compile_spec(base_loader.load_spec(HERE / "spec.yaml"))
    work = compile_spec(load_spec(HERE / "spec.yaml"))
    items = list(dataset.generate(args.items))
    rows = [work.map_item(item) for item in items]
    different = sum(tuple(a) != tuple(b) for a, b in zip(rows, (base.map_item(item) for item in items)))
    to_mutation_entry(rows[0])  # imports the client before any timing

    def mapper(compiled: Any):
        def run() -> None:
            map_item, convert = compiled.map_item, to_mutation_entry
            for item in items:
                convert(map_item(item))
        return run

    def floor() -> None:
        deserialize = TypeDeserializer().deserialize
        for item, row in zip(items, rows):
            {name: deserialize(value) for name, value in item.items()}
            RowMutationEntry(row.row_key, [SetCell(f, q, v, ts) for f, q, ts, v in row.cells])

    gc.collect()
    gc.freeze()  # the data set lives through every timing: fair to all three
    functions = (("base", mapper(base)), ("work", mapper(work)), ("floor", floor))
    times: dict[str, list[float]] = {name: [] for name, _ in functions}
    load_before = os.getloadavg()
    for round_index in range(args.rounds):
        order = functions if round_index % 2 == 0 else functions[::-1]  # alternate who goes first
        for name, function in order:
            start = time.thread_time()  # CPU time: on a loaded machine, waiting for a core is not the mapper's
            function()
            times[name].append(time.thread_time() - start)
    load_after = os.getloadavg()
    gc.unfreeze()

    def spread(values: list[float]) -> dict[str, float]:
        ordered = sorted(values)
        return {"median": ordered[len(ordered) // 2], "min": ordered[0], "max": ordered[-1]}

    result = {
        "what": f"map_item + to_mutation_entry over {args.items:,} benchmark items: mappers/ at {args.base} (base) "
                "and in the working tree (work), and the floor (TypeDeserializer + RowMutationEntry/SetCell), "
                f"{args.rounds} alternating rounds in one process, data set gc-frozen; times are the thread's CPU "
                "time (time.thread_time), not wall time",
        "items": args.items, "rows_different": different,
        "us_per_item": {name: spread([t / args.items * 1e6 for t in spent]) for name, spent in times.items()},
        "work_vs_floor": spread([f / w for w, f in zip(times["work"], times["floor"])]),
        "base_vs_floor": spread([f / b for b, f in zip(times["base"], times["floor"])]),
        "work_vs_base": spread([b / w for w, b in zip(times["work"], times["base"])]),
        "round_ratios_work_vs_floor": [round(f / w, 3) for w, f in zip(times["work"], times["floor"])],
        "loadavg_before": load_before, "loadavg_after": load_after,
        "machine": machine(), "versions": versions(),
    }
    for key in ("us_per_item", "work_vs_floor", "base_vs_floor", "work_vs_base"):
        print(key, json.dumps(result[key]))
    print("rows different:", different, " load:", load_before, "->", load_after)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 1 if different else 0


if __name__ == "__main__":
    sys.exit(main())
