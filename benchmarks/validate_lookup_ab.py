"""validate's lookup and plain comparison alone, alternating passes in one process: the compiled reader of ReadRows
answers (``_rows.c``) and comparison of cells (``_cells.c``) both ("compiled"), the reader alone ("rows"), and
neither (protobuf's parse, the Python merge and two sets: "python"). ``python -m benchmarks.validate_lookup_ab
[--items N] [--passes P] [--json PATH]``.

The benchmark's items (benchmarks/dataset.py) are mapped with benchmarks/spec.yaml and written once into the
emulator; each pass looks their rows up as validate's compare step does (``RowLookup.rows`` over a scan page's
keys, 2,500 at a time, the collector relaxed as in that step) and matches each row against its item's cells
(``Comparer.plain_match``). Figures: the process's CPU per row (every thread: the lookup's included; the emulator's
not, given apart) and wall time. Docs: docs/PERFORMANCE.md ("Validate round 10").
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import yaml

from .common import ROOT
from .io_paths import tree_state
from .measure import cpu_seconds

PAGE = 2500


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.validate_lookup_ab",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--passes", type=int, default=6)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)

    from google.cloud.bigtable import Client
    from google.cloud.bigtable.data import RowMutationEntry, SetCell

    from ddb2bt.mappers.compiler import compile_spec
    from ddb2bt.mappers.results import MappedRow
    from ddb2bt.mappers.spec import MappingSpec
    from ddb2bt.mappers.validate import compare
    from ddb2bt.mappers.validate.compare import Comparer
    from ddb2bt.pipelines.bigtable import chunks
    from ddb2bt.pipelines.bigtable.read import RowLookup
    from ddb2bt.pipelines.bigtable.sink import Destination
    from ddb2bt.pipelines.local import servers as local_servers
    from ddb2bt.pipelines.run.collector import relax_young_gc

    from . import dataset

    compiled_rows, compiled_cells = chunks._compiled_rows, compare._compiled_same_cells  # noqa: SLF001
    if compiled_rows is None or compiled_cells is None:
        raise SystemExit("pipelines/bigtable/_rows.c or mappers/validate/_cells.c is not built: pip install -e . again")
    raw = yaml.safe_load((ROOT / "benchmarks" / "spec.yaml").read_text())
    raw.pop("$schema", None)
    spec = MappingSpec.model_validate(raw)
    mapper = compile_spec(spec)
    members = [(row, item) for item in dataset.generate(args.items)
               if isinstance(row := mapper.map_item(item), MappedRow)]
    groups: dict[bytes, list] = {}
    for row, item in members:
        groups.setdefault(row.row_key, []).append((row, item))
    pages = [list(groups)[start:start + PAGE] for start in range(0, len(groups), PAGE)]
    ways = {"compiled": (compiled_rows, compiled_cells), "rows": (compiled_rows, None), "python": (None, None)}
    figures: dict[str, list[dict]] = {name: [] for name in ways}
    with local_servers.bigtable_emulator() as emulator, \
            local_servers.patched_environ(local_servers.emulator_env(emulator.endpoint)):
        project, instance, table = "lookupab", "lookupab", "bench"
        families = {cell.family for row, _item in members for cell in row.cells}
        Client(project=project, admin=True).instance(instance).table(table).create(
            column_families=dict.fromkeys(families))
        with RowLookup(Destination(project, instance, table)) as lookup:
            entries = [RowMutationEntry(row.row_key, [SetCell(c.family, c.qualifier, c.value, c.timestamp_micros)
                                                      for c in row.cells]) for row, _item in members]
            for start in range(0, len(entries), 1000):
                lookup.table.bulk_mutate_rows(entries[start:start + 1000])
            relax_young_gc()
            comparer = Comparer(spec, now_us=0, key_names=("pk", "sk"), decode_every=0)
            for number in range(args.passes + 1):  # a first pass of each to warm up, not kept
                order = list(ways) if number % 2 == 0 else list(reversed(ways))
                for name in order:
                    chunks._compiled_rows, compare._compiled_same_cells = ways[name]  # noqa: SLF001
                    load = Path("/proc/loadavg").read_text().split()[0]
                    server, wall, cpu = cpu_seconds(emulator.pid), time.perf_counter(), time.process_time()
                    matched = 0
                    for page in pages:
                        found = lookup.rows(page)
                        for key in page:
                            matched += comparer.plain_match(groups[key], found.get(key)) >= 0
                    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
                    if matched != len(groups):
                        raise SystemExit(f"{name}: {matched} of {len(groups)} rows as expected")
                    if number:
                        figures[name].append({"cpu_us": 1e6 * cpu / len(groups), "wall_us": 1e6 * wall / len(groups),
                                              "emulator_us": 1e6 * (cpu_seconds(emulator.pid) - server) / len(groups),
                                              "load": load})
            chunks._compiled_rows, compare._compiled_same_cells = compiled_rows, compiled_cells  # noqa: SLF001
    median = {name: {key: statistics.median(entry[key] for entry in entries)
                     for key in ("cpu_us", "wall_us", "emulator_us")} for name, entries in figures.items()}
    record = {"rows": len(groups), "passes": figures, "median": median, "cpus": os.cpu_count(), **tree_state()}
    for name, entries in figures.items():
        print(f"{name:9} CPU per row " + ", ".join(f"{entry['cpu_us']:.1f}" for entry in entries)
              + f" us (median {median[name]['cpu_us']:.1f}), wall median {median[name]['wall_us']:.1f} us, load "
              + ", ".join(entry["load"] for entry in entries))
    if args.json:
        args.json.write_text(json.dumps(record, indent=1) + "\n")
    return record


if __name__ == "__main__":
    main()
