"""The catch-up's per-change work, this tree's modules against another commit's, side by side in one process:
``python -m benchmarks.catchup_side --against <commit> [--items N] [--rounds R] [--json PATH]``.

Between processes the same code moves ±10–15 % on the shared machine (docs/PERFORMANCE.md, "h/catchup8"), more
than a change of a few µs per change; in one process, alternating, it does not. The modules a change of the apply
path lives in (the compiler, the diff, the change entries, the export check) are loaded a second time from
``--against``'s tree (``git archive``) under other names, so that their relative imports resolve to this tree's
package: only valid where the two commits differ in those modules alone, which is checked first. Each round times,
for each side, over the benchmark's N changes: the export check of each parsed line (``check_record`` with its line),
the diff of each change (``_one_change``: the new image mapped, the old image's stale coordinates, the deletes), and
each change entry's bytes (``change_record``); process CPU per change, the collector off (the job freezes the kept
changes out of it), the sides alternating and their order reversed every other round; the median and the best
of the rounds per side, and in how many rounds this side was lower. Docs: docs/PERFORMANCE.md
("h/catchup9").
"""

from __future__ import annotations

import argparse
import gc
import glob
import gzip
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from types import ModuleType

from .common import ROOT, log
from .io_paths import tree_of

MODULES = {"compiler": "mappers/compiler.py", "changes": "mappers/changes.py", "entries": "pipelines/bigtable/entries.py",
           "incremental_export": "pipelines/dynamodb/incremental_export.py"}
NOT_RUN = ("pipelines/cutover/",)
"""Where the two trees may differ too: code the timed functions do not run (the apply step's bookkeeping, which
``benchmarks.catchup_ab --parts`` times between processes)."""


def _load(tree: Path, name: str, path: str) -> ModuleType:
    package = "ddb2bt." + ".".join(Path(path).parent.parts)
    spec = importlib.util.spec_from_file_location(f"{package}._side_{name}", tree / path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.catchup_side", description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", required=True)
    parser.add_argument("--items", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    changed = subprocess.run(["git", "diff", "--name-only", args.against, "--", *(
        str(p) for p in ("mappers", "pipelines", "app"))], cwd=ROOT, capture_output=True, text=True, check=True)
    others = set(changed.stdout.split()) - set(MODULES.values())
    others = {path for path in others if path.endswith(".py") and not path.startswith(NOT_RUN)}
    if others:
        raise SystemExit(f"{args.against} differs from this tree beyond {sorted(MODULES.values())}: {sorted(others)}")

    warnings.simplefilter("ignore")
    from ddb2bt.mappers import changes
    from ddb2bt.mappers import compiler
    from ddb2bt.pipelines.bigtable import entries
    from ddb2bt.pipelines.dynamodb import incremental_export
    from ddb2bt.pipelines.dynamodb.export_writer import write_incremental_export

    from .cutover import T0_US, _spec, workload

    with tempfile.TemporaryDirectory(prefix="ddb2bt-catchup-side-") as tmp:
        tree = tree_of(args.against, Path(tmp) / "against") / "ddb2bt"
        theirs = {name: _load(tree, name, path) for name, path in MODULES.items()}
        ours = {"compiler": compiler, "changes": changes, "entries": entries, "incremental_export": incremental_export}
        _items, records = workload(args.items)
        write_incremental_export(tmp, records, T0_US, T0_US + 3_600_000_000, files=4, table="bench")
        lines = []
        for path in sorted(glob.glob(os.path.join(tmp, "**", "*.json.gz"), recursive=True)):
            with gzip.open(path, "rb") as file:
                lines += [line.rstrip(b"\n") for line in file if line.strip()]
    import orjson

    parsed = [orjson.loads(line) for line in lines]
    spec = _spec("side", "/unused", None)
    sides = {}
    for label, modules in (("this", ours), (args.against, theirs)):
        compiled = modules["compiler"].compile_spec(spec, now_ms=T0_US // 1000)
        checked = [modules["incremental_export"].check_record(r, ("pk", "sk"), line) for r, line in zip(parsed, lines)]
        diffs = [modules["changes"]._one_change(compiled, change) for change in checked]
        rows = [(row.row_key, row.deletes + row.sets) for found in diffs for row in found.rows]
        sides[label] = (modules, compiled, checked, diffs, rows)
    this_side, their_side = sides["this"], sides[args.against]
    assert [tuple(c) for c in this_side[2]] == [tuple(c) for c in their_side[2]], "the checks' changes differ"
    assert [tuple(d) for d in this_side[3]] == [tuple(d) for d in their_side[3]], "the diffs differ"
    assert [this_side[0]["entries"].change_record(*row) for row in this_side[4]] == \
        [their_side[0]["entries"].change_record(*row) for row in their_side[4]], "the entries' bytes differ"

    def timed(label: str) -> dict[str, float]:
        modules, compiled, checked, _diffs, rows = sides[label]
        check, one_change, record = (modules["incremental_export"].check_record, modules["changes"]._one_change,
                                     modules["entries"].change_record)
        figures = {}
        started = time.process_time()
        for r, line in zip(parsed, lines):
            check(r, ("pk", "sk"), line)
        figures["check_us"] = (time.process_time() - started) / len(lines) * 1e6
        started = time.process_time()
        for change in checked:
            one_change(compiled, change)
        figures["diff_us"] = (time.process_time() - started) / len(lines) * 1e6
        started = time.process_time()
        for row_key, mutations in rows:
            record(row_key, mutations)
        figures["entry_us"] = (time.process_time() - started) / len(lines) * 1e6
        figures["total_us"] = figures["check_us"] + figures["diff_us"] + figures["entry_us"]
        return figures

    gc.disable()
    runs: list[dict] = []
    order = ["this", args.against]
    for round_ in range(args.rounds):
        for label in order if round_ % 2 == 0 else order[::-1]:
            figures = timed(label)
            runs.append({"side": label, "round": round_, **figures})
        pair = runs[-2:]
        log(f"round {round_}: " + ", ".join(f"{run['side']} {run['total_us']:.2f}" for run in pair)
            + f" µs per change (load {os.getloadavg()[0]:.1f})")
    gc.enable()
    out: dict = {"items": args.items, "rounds": args.rounds, "against": args.against, "runs": runs, "median": {}}
    for label in order:
        mine = [run for run in runs if run["side"] == label]
        out["median"][label] = {key: statistics.median(run[key] for run in mine)
                                for key in ("check_us", "diff_us", "entry_us", "total_us")}
    out["best"] = {label: {key: min(run[key] for run in runs if run["side"] == label)
                           for key in ("check_us", "diff_us", "entry_us", "total_us")} for label in order}
    totals = {label: [run["total_us"] for run in runs if run["side"] == label] for label in order}
    out["this_lower_in_rounds"] = sum(a < b for a, b in zip(totals["this"], totals[args.against]))
    out["ratio_this_over_against"] = statistics.median(a / b for a, b in zip(totals["this"], totals[args.against]))
    print(json.dumps({key: out[key] for key in ("median", "best", "this_lower_in_rounds",
                                                                  "ratio_this_over_against")},
                     indent=2))
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return out


if __name__ == "__main__":
    main()
