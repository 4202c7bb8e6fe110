"""``Comparer.owner_line`` on the benchmark's rows, the pairs of templates settled at compile time against the loop
over every template, alternating passes in one process: ``python -m benchmarks.validate_owner_lines [--items N]
[--passes P] [--json PATH]``. CPU time per row (process time), every row a one-item group found as expected.
Docs: docs/PERFORMANCE.md ("Validate round 9").
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import yaml

from ddb2bt.mappers.compiler import compile_spec
from ddb2bt.mappers.results import MappedRow
from ddb2bt.mappers.spec import MappingSpec
from ddb2bt.mappers.validate.compare import Comparer

from . import dataset
from .common import ROOT
from .io_paths import tree_state


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.validate_owner_lines",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--passes", type=int, default=6)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    raw = yaml.safe_load((ROOT / "benchmarks" / "spec.yaml").read_text())
    raw.pop("$schema", None)
    spec = MappingSpec.model_validate(raw)
    compiled = compile_spec(spec)
    members = [(row, item) for item in dataset.generate(args.items)
               if isinstance(row := compiled.map_item(item), MappedRow)]
    settled = Comparer(spec, now_us=0, key_names=("pk", "sk"), decode_every=0)
    loop = Comparer(spec, now_us=0, key_names=("pk", "sk"), decode_every=0)
    loop._never_whole = frozenset()  # noqa: SLF001 - the loop alone, as on main before this round

    def one_pass(comparer: Comparer) -> float:
        start = time.process_time()
        for row, item in members:
            comparer.owner_line(row.row_key, (row, item), len(row.cells), extras=True, scan_order=True)
        return 1e6 * (time.process_time() - start) / len(members)

    figures: dict[str, list[float]] = {"settled": [], "loop": []}
    for number in range(args.passes):
        order = [("settled", settled), ("loop", loop)]
        for name, comparer in order if number % 2 == 0 else reversed(order):
            figures[name].append(one_pass(comparer))
    record = {"rows": len(members), "settled_entities": sorted(settled._never_whole),  # noqa: SLF001
              "us_per_row": figures, "median": {name: statistics.median(v) for name, v in figures.items()},
              "load": Path("/proc/loadavg").read_text().split()[0], **tree_state()}
    print(json.dumps({key: record[key] for key in ("rows", "settled_entities", "median", "load")}))
    if args.json:
        args.json.write_text(json.dumps(record, indent=1) + "\n")
    return record


if __name__ == "__main__":
    main()
