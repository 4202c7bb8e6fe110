"""The index rows section: the CPU index rows add to `migrate` per item.

``python -m benchmarks.index_section [--items N] [--rounds R]`` maps the benchmark dataset (benchmarks/dataset.py:
customers, orders, lines, products, reviews, every DynamoDB type) with benchmarks/spec.yaml as it is, and with the
same spec plus secondary indexes carried as index rows, and builds each row's mutation entry as the writer does
(``to_mutation_entry`` and its ``size()``, for the item's row and each of its index rows). Rounds alternate between
the variants, so that a noisy stretch of the shared machine hits each alike; CPU time of this process
(``time.process_time``), the fastest round per variant (the one the other processes disturbed least; the
median is recorded too, and the spread of each round's ratio to its own round without indexes). Variants:

* ``by_status``: a sparse GSI on the orders only (status, placed_at), INCLUDE [total]: the usual case;
* ``by_type``: a GSI every item is in (type, sk), KEYS_ONLY;
* ``by_type_all``: the same with projection ALL (every attribute again, as DynamoDB JSON): the worst case.

Goal: at most 30% more CPU per item than without indexes, for the usual case. Figures go to
``benchmarks/results/index_rows.json``.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
from pathlib import Path
from typing import Any

from .common import HERE, RESULTS, machine

GOAL = 0.30
INDEXES: dict[str, dict[str, Any]] = {
    "by_status": {"name": "by_status", "type": "global", "partition_key": "status", "sort_key": "placed_at",
                  "projection": {"type": "INCLUDE", "non_key_attributes": ["total"]}, "target": {"prefix": "~s#"}},
    "by_type": {"name": "by_type", "type": "global", "partition_key": "type", "sort_key": "sk",
                "projection": {"type": "KEYS_ONLY"}, "target": {"prefix": "~t#"}},
    "by_type_all": {"name": "by_type", "type": "global", "partition_key": "type", "sort_key": "sk",
                    "projection": {"type": "ALL"}, "target": {"prefix": "~t#"}},
}


def measure(n: int, rounds: int) -> dict[str, Any]:
    import os

    from ddb2bt.mappers.compiler import compile_spec
    from ddb2bt.mappers.loader import load_spec
    from ddb2bt.mappers.results import MappedRow
    from ddb2bt.mappers.spec import MappingSpec
    from ddb2bt.pipelines.bigtable.entries import to_mutation_entry

    from . import dataset

    items = list(dataset.generate(n))
    base = load_spec(HERE / "spec.yaml")
    variants = {}
    for label, index in {"none": None, **INDEXES}.items():  # every variant through the same dump and load
        data = base.model_dump(by_alias=True)
        data["target"]["families"]["i"] = {"max_versions": 1}
        data["indexes"] = [{**index, "family": "i"}] if index else []
        variants[label] = compile_spec(MappingSpec.model_validate(data))
    index_rows = {label: sum(len(r.index_rows) for r in map(compiled.map_item, items) if isinstance(r, MappedRow))
                  for label, compiled in variants.items()}  # fmt: skip

    def run(compiled: Any) -> None:
        map_item = compiled.map_item
        for item in items:
            row = map_item(item)
            if row.__class__ is MappedRow:
                to_mutation_entry(row).size()
                for index_row in row.index_rows:
                    to_mutation_entry(index_row).size()

    gc.collect()
    gc.freeze()
    spent: dict[str, list[float]] = {label: [] for label in variants}
    for _ in range(rounds):
        for label, compiled in variants.items():
            start = time.process_time()
            run(compiled)
            spent[label].append(time.process_time() - start)
    gc.unfreeze()
    best = {label: min(times) for label, times in spent.items()}
    median = {label: statistics.median(times) for label, times in spent.items()}
    return {
        "items": n, "rounds": rounds, "index_rows": index_rows,
        "cpu_us_per_item": {label: 1e6 * seconds / n for label, seconds in best.items()},
        "overhead": {label: best[label] / best["none"] - 1 for label in INDEXES},
        "overhead_median_rounds": {label: median[label] / median["none"] - 1 for label in INDEXES},
        "overhead_per_round_spread": {label: _spread([mine / none - 1 for mine, none in zip(spent[label], spent["none"])])
                                      for label in INDEXES},  # each round's variants ran side by side
        "goal": GOAL, "goal_met_usual_case": best["by_status"] / best["none"] - 1 <= GOAL,
        "load_average": os.getloadavg(), "machine": machine(),
    }


def _spread(ratios: list[float]) -> dict[str, float]:
    ordered = sorted(ratios)
    return {"min": ordered[0], "quartile_1": ordered[len(ordered) // 4], "median": statistics.median(ordered),
            "quartile_3": ordered[(3 * len(ordered)) // 4], "max": ordered[-1]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    result = measure(args.items, args.rounds)
    Path(RESULTS).mkdir(parents=True, exist_ok=True)
    (Path(RESULTS) / "index_rows.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
