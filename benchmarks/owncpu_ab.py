"""ddb2bt's own steady CPU per item of a migrate run, this tree against another commit in alternating rounds:
``python -m benchmarks.owncpu_ab --against <commit> [--items N] [--rounds R] [--source scan|export]``.

Each round runs one ``benchmarks.child`` ddb2bt job per tree (the same job as ``make bench``'s: the application's
``migrate`` of benchmarks/spec.yaml, in_memory, 4 segments) on the same dynalite table (or export) and emulator,
and reads the job's own CPU split (``measure.own_cpu_split``: the slope of its CPU over its items between 10 % and
90 % of them, start-up apart), the figure of issue 24's "own CPU per item". The other commit's tree is taken with
``git archive`` and put first on ``PYTHONPATH`` (:func:`benchmarks.io_paths.tree_of`), both byte-compiled first.
``--profile PATH`` first runs one job of this tree under ``py-spy record --gil`` and writes the summary of the
samples of its steady part (the stacks through the runner's bundles and the writer's threads) there, headed by
where those samples go (:func:`where_it_goes`: mapper, scan pages, writer, entries, batcher, requests, Beam).
Docs: docs/PERFORMANCE.md ("Own CPU round 6").
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from .common import ROOT, log
from .io_paths import tree_of, tree_state
from .measure import own_cpu_split, summarize_py_spy
from .startup_ab import alternating, child_result, compiled, job_env


# Where a sample's CPU goes: the first of these parts one of whose marks is in one of its stack's frames (an encoder's
# or the JSON encoder's frames under the mapper count as the mapper's, the batcher's under the writer as the batcher's).
# The runner's bundles' other samples are Beam's work around the steps; a thread of ddb2bt's own (the scan's readers,
# the batcher's closes and requests) is counted by its frames too.
_PARTS = (
    ("steps' set-up and teardown (once per run)", ("BundleProcessor.__init__", ".setup (", ".teardown (")),
    ("MutateRows requests (grpc, answers)", ("bigtable/mutate.py", "grpc/", "raw_answers.py", "api_core/")),
    ("client batcher (append, flow control)", ("mutations_batcher.py",)),
    ("entries (objects; heads and stamps not yet cached)", ("bigtable/entries.py",)),
    ("mapper", ("<specialised", "mappers/")),
    ("writer per row and tallies", ("bigtable/sink.py",)),
    ("scan pages (requests, JSON)", ("dynamodb/scan.py", "wire_json.py", "botocore/", "urllib3/")),
    ("map step's batch work", ("MapFn.process",)),
    ("dead letters, savepoints (Persist)", ("_PersistFn", "checkpoint.py", "dead_letters.py")),
)


def where_it_goes(raw: str, focus: str = "FnApiRunner._run_bundle") -> str:
    """The samples of the run's work (through ``focus``, or on a thread of ddb2bt's own: the scan's readers, the
    batcher's closes and requests), split into :data:`_PARTS` and Beam's work around the steps."""
    parts: dict[str, int] = {name: 0 for name, _ in _PARTS}
    beam_work = total = 0
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = stack.split(";")
        ours = any(name in frames[0] for name in ("ddb2bt-", "ThreadPoolExecutor", "Thread-"))
        if not ours and not any(frame.startswith(focus + " (") for frame in frames):
            continue
        total += int(count)
        found = next((name for name, marks in _PARTS if any(mark in frame for frame in frames for mark in marks)), None)
        if found:
            parts[found] += int(count)
        else:
            beam_work += int(count)
    lines = [f"-- where it goes ({total} samples: the bundles' stacks and ddb2bt's own threads)"]
    lines += [f"{n / max(total, 1):6.1%}  {name}" for name, n in sorted(parts.items(), key=lambda p: -p[1])]
    lines.append(f"{beam_work / max(total, 1):6.1%}  Beam's work around the steps (per element, per bundle)")
    return "\n".join(lines) + "\n"


def built_modules(tree: Path) -> list[Path]:
    """This tree's built C extensions (pipelines/bigtable/_wire) copied into an archived ``tree`` whose C source is the
    same: ``git archive`` takes no build, and without it the archived tree would run the Python fallback, so the
    comparison would measure the extension, not the change. The copies made."""
    copied = []
    for source in (ROOT / "pipelines").rglob("*.c"):
        theirs = tree / "ddb2bt" / source.relative_to(ROOT)
        if tree == ROOT or not theirs.is_file() or theirs.read_bytes() != source.read_bytes():
            continue
        for module in source.parent.glob(f"{source.stem}.*.so"):
            shutil.copy2(module, theirs.parent / module.name)
            copied.append(theirs.parent / module.name)
    return copied


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.owncpu_ab", description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", required=True, help="the commit to compare with (e.g. main)")
    parser.add_argument("--this", default=None, help="a commit to measure instead of the working tree")
    parser.add_argument("--items", type=int, default=30_000)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--source", choices=("scan", "export"), default="scan")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here too")
    parser.add_argument("--profile", type=Path, default=None,
                        help="first one job of this tree under py-spy --gil, the summary of its bundles here")
    args = parser.parse_args(argv)

    from ddb2bt.pipelines.local import servers as local_servers

    from . import dataset, load

    export_dir = load.cached_export(args.items, 4)[0] if args.source == "export" else None
    steady: dict[str, list[float]] = {"this": [], args.against: []}
    loads: list[str] = []
    with tempfile.TemporaryDirectory(prefix="ddb2bt-owncpu-") as tmp, local_servers.dynalite() as dynamo, \
            local_servers.bigtable_emulator() as emulator, local_servers.patched_environ(local_servers.FAKE_AWS_ENV):
        trees = {"this": str(tree_of(args.this, Path(tmp) / "this")) if args.this else str(ROOT),
                 args.against: str(tree_of(args.against, Path(tmp) / "against"))}
        for tree in trees.values():
            compiled(Path(tree))
            built_modules(Path(tree))
        if export_dir is None:
            load.load_table(dynamo.endpoint, "bench", dataset.generate(args.items))
        env = job_env(emulator)
        runs = alternating(trees, args.rounds, bool(args.profile))
        for number, (round_, name) in enumerate(runs):
            job = {"kind": "ddb2bt", "endpoint": dynamo.endpoint, "table": "bench", "project": "owncpu",
                   "instance": "owncpu", "target": f"t{number}", "segments": 4, "mode": "in_memory", "workers": 1,
                   "run_dir": os.path.join(tmp, f"run{number}")}
            if export_dir:
                job["export_dir"] = export_dir
            argv_ = [sys.executable, "-m", "benchmarks.child", json.dumps(job)]
            raw = Path(tmp, "profile.raw")
            if round_ < 0:
                argv_ = [str(Path(sys.executable).with_name("py-spy")), "record", "--gil", "--threads", "--rate", "200",
                         "--format", "raw", "--output", str(raw), "--", *argv_]
            load_before = Path("/proc/loadavg").read_text().split()[0]
            result = child_result(argv_, env, trees[name], name, args.items)
            split = own_cpu_split(result["own_cpu_trace"], result["items_read"])
            loads.append(f"{load_before}-{Path('/proc/loadavg').read_text().split()[0]}")
            if round_ < 0:
                summary = summarize_py_spy(raw.read_text(), title=f"this tree, {args.items} items, {args.source}, "
                                           f"steady {split['steady_us_per_item']:.1f} us/item", top=60,
                                           focus="FnApiRunner._run_bundle")
                args.profile.write_text(where_it_goes(raw.read_text()) + "\n" + summary)
                args.profile.with_suffix(".raw").write_text(raw.read_text())
                log(f"profile: {args.profile}")
                continue
            steady[name].append(split["steady_us_per_item"])
            log(f"round {round_} {name}: steady {split['steady_us_per_item']:.1f} us/item, start-up "
                f"{split['startup_s']:.2f} s CPU, {result['items_read'] / result['seconds']:.0f} items/s "
                f"(load {loads[-1]})")
    summary = {name: {"median": statistics.median(v), "min": min(v), "max": max(v), "rounds": [round(x, 1) for x in v]}
               for name, v in steady.items() if v}
    pairs = [b / a for a, b in zip(steady["this"], steady[args.against])]
    for name, figures in summary.items():
        print(f"{name:12} steady own CPU {figures['median']:.1f} us/item ({figures['min']:.1f}-{figures['max']:.1f})")
    if pairs:
        print(f"{args.against} / this per round: {', '.join(f'{p:.2f}' for p in pairs)}; load {', '.join(loads)}")
    record = {"this": args.this or "the working tree", "against": args.against, "items": args.items,
              "source": args.source, "summary": summary, "ratio_per_round": pairs, "load": loads,
              "unit": "steady own CPU us per item (measure.own_cpu_split)", **tree_state()}
    if args.json:
        args.json.write_text(json.dumps(record, indent=1) + "\n")
    return record


if __name__ == "__main__":
    main()
