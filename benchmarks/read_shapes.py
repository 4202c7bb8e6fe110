"""Reading rows back from the emulator, by shape: the CPU per row of this process and of the emulator, alternating
passes. ``python -m benchmarks.read_shapes [--items N] [--passes P]``.

The benchmark's items (benchmarks/dataset.py) are mapped with benchmarks/spec.yaml and written once into the emulator;
then each pass reads every row back one way: ``keys``, validate's lookup (``RowLookup.rows`` over the row keys of a scan
page, 2,500 at a time, in the scan's order); ``range``, the rollback's read of the whole table as one key range
(``chunks.read_range``: responses joined in groups, read by ``_rows.c``'s ``range_rows``); ``range_py``, the same with
each group parsed by protobuf and merged in Python (as before round 11). Docs: docs/PERFORMANCE.md ("Validate round 11").
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import yaml

from .common import ROOT
from .measure import cpu_seconds

PAGE = 2500


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.read_shapes", description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--passes", type=int, default=4)
    args = parser.parse_args(argv)

    from google.cloud.bigtable import Client
    from google.cloud.bigtable.data import RowMutationEntry, SetCell

    from ddb2bt.mappers.compiler import compile_spec
    from ddb2bt.mappers.results import MappedRow
    from ddb2bt.mappers.spec import MappingSpec
    from ddb2bt.pipelines.bigtable import chunks
    from ddb2bt.pipelines.bigtable.read import RowLookup
    from ddb2bt.pipelines.bigtable.sink import Destination
    from ddb2bt.pipelines.local import servers as local_servers
    from ddb2bt.pipelines.run.collector import relax_young_gc

    from . import dataset

    raw = yaml.safe_load((ROOT / "benchmarks" / "spec.yaml").read_text())
    raw.pop("$schema", None)
    spec = MappingSpec.model_validate(raw)
    mapper = compile_spec(spec)
    rows = [row for item in dataset.generate(args.items) if isinstance(row := mapper.map_item(item), MappedRow)]
    keys = list(dict.fromkeys(row.row_key for row in rows))
    pages = [keys[start:start + PAGE] for start in range(0, len(keys), PAGE)]
    compiled_range = chunks._compiled_range  # noqa: SLF001
    with local_servers.bigtable_emulator() as emulator, \
            local_servers.patched_environ(local_servers.emulator_env(emulator.endpoint)):
        families = {cell.family for row in rows for cell in row.cells}
        Client(project="shapes", admin=True).instance("shapes").table("bench").create(
            column_families=dict.fromkeys(families))
        with RowLookup(Destination("shapes", "shapes", "bench")) as lookup:
            entries = [RowMutationEntry(row.row_key, [SetCell(c.family, c.qualifier, c.value, c.timestamp_micros)
                                                      for c in row.cells]) for row in rows]
            for start in range(0, len(entries), 1000):
                lookup.table.bulk_mutate_rows(entries[start:start + 1000])
            relax_young_gc()

            def by_keys() -> int:
                return sum(len(lookup.rows(page)) for page in pages)

            def by_range() -> int:
                return sum(1 for _row in chunks.read_range(lookup._client, lookup.table, (b"", b"")))  # noqa: SLF001

            def by_range_py() -> int:
                chunks._compiled_range = None  # noqa: SLF001
                try:
                    return by_range()
                finally:
                    chunks._compiled_range = compiled_range  # noqa: SLF001

            ways = {"keys": by_keys, "range": by_range, "range_py": by_range_py}
            figures: dict[str, list[dict]] = {name: [] for name in ways}
            for number in range(args.passes + 1):  # a first pass of each to warm up, not kept
                for name in (list(ways) if number % 2 == 0 else list(reversed(ways))):
                    load = Path("/proc/loadavg").read_text().split()[0]
                    server, wall, cpu = cpu_seconds(emulator.pid), time.perf_counter(), time.process_time()
                    read = ways[name]()
                    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
                    if read != len(keys):
                        raise SystemExit(f"{name}: {read} rows of {len(keys)}")
                    if number:
                        figures[name].append({"cpu_us": 1e6 * cpu / read, "wall_us": 1e6 * wall / read, "load": load,
                                              "emulator_us": 1e6 * (cpu_seconds(emulator.pid) - server) / read})
    for name, entries in figures.items():
        print(f"{name:9} CPU per row: ours " + ", ".join(f"{e['cpu_us']:.1f}" for e in entries)
              + f" (median {statistics.median(e['cpu_us'] for e in entries):.1f}), emulator "
              + ", ".join(f"{e['emulator_us']:.1f}" for e in entries)
              + f" (median {statistics.median(e['emulator_us'] for e in entries):.1f}); load "
              + ", ".join(e["load"] for e in entries))
    return figures


if __name__ == "__main__":
    main()
