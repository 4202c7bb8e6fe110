"""The compiled encoders (mappers/_json.c) against the Python functions, in the mapper:
``python -m benchmarks.compiled_ab [--items N] [--rounds R]``. The benchmark spec is compiled three times: with the
module, with its ``json_bytes`` alone (what main compiled before round 10) and without it, the same rows asserted,
then ``map_item`` runs over the items in alternating rounds (thread CPU, the data set gc-frozen; docs/PERFORMANCE.md
"JSON cells compiled", "Own CPU round 10")."""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import time
from pathlib import Path

HERE = Path(__file__).parent


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.compiled_ab", description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--json", type=Path, default=None, help="write the figures here too")
    args = parser.parse_args(argv)

    from ddb2bt.mappers import encodings
    from ddb2bt.mappers.compiler import compile_spec
    from ddb2bt.mappers.loader import load_spec

    from . import dataset

    if encodings._compiled_json is None:
        raise SystemExit("mappers/_json.c is not built here: nothing to compare")
    specs = {"compiled": compile_spec(load_spec(HERE / "spec.yaml"))}
    saved = encodings._compiled, encodings._compiled_json
    try:
        encodings._compiled = None  # json_bytes alone: the compiled set of main 60c3d3d (round 9)
        specs["json_only"] = compile_spec(load_spec(HERE / "spec.yaml"))
        encodings._compiled_json = None
        specs["python"] = compile_spec(load_spec(HERE / "spec.yaml"))
    finally:
        encodings._compiled, encodings._compiled_json = saved
    items = list(dataset.generate(args.items))
    rows = [specs["python"].map_item(item) for item in items]
    assert all([spec.map_item(item) for item in items] == rows for spec in specs.values())
    gc.collect()
    gc.freeze()
    us: dict[str, list[float]] = {name: [] for name in specs}
    load_before = os.getloadavg()
    for number in range(args.rounds):
        for name in (list(specs) if number % 2 == 0 else list(specs)[::-1]):
            map_item = specs[name].map_item
            started = time.thread_time()
            for item in items:
                map_item(item)
            us[name].append((time.thread_time() - started) / len(items) * 1e6)
    gc.unfreeze()
    found = {"items": args.items, "load_before": load_before, "load_after": os.getloadavg(),
             **{name: {"median_us_per_item": statistics.median(values), "rounds": values} for name, values in us.items()},
             "json_only_over_compiled_per_round": [a / b for a, b in zip(us["json_only"], us["compiled"])]}
    print(f"map_item: python {found['python']['median_us_per_item']:.1f}, json_bytes only "
          f"{found['json_only']['median_us_per_item']:.1f}, compiled {found['compiled']['median_us_per_item']:.1f} us per "
          f"item (median of {args.rounds} alternating rounds; load {load_before[0]:.1f}); json_bytes only / compiled per "
          f"round {', '.join(f'{ratio:.2f}' for ratio in found['json_only_over_compiled_per_round'])}")
    if args.json:
        args.json.write_text(json.dumps(found, indent=2) + "\n")
    return found


if __name__ == "__main__":
    main()
