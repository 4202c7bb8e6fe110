"""The start-up CPU of a migrate run, this tree against another commit in alternating rounds:
``python -m benchmarks.startup_ab --against <commit> [--items N] [--rounds R] [--source scan|export]``.

Each round runs one ``benchmarks.child`` ddb2bt job per tree (the same job as ``make bench``'s: the application's
``migrate`` of benchmarks/spec.yaml, in_memory) on a small table, so that the run's CPU is mostly its start-up, and
reads the job's own CPU split: the interpreter (``interpreter_s``), the imports and the spec (``imports_and_spec_s``),
and the whole ``migrate`` call (``run_s``: checks, table probe, pipeline construction, the few items, teardown).
The other commit's tree is taken with ``git archive`` and put first on ``PYTHONPATH`` (as ``ddb2bt``,
:func:`benchmarks.io_paths.tree_of`), so both sides run in the same venv against the same servers and data.
Docs: docs/PERFORMANCE.md ("Start-up (h/startup)").
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from .common import ROOT, log
from .io_paths import PACKAGES, tree_of, tree_state

FIGURES = ("interpreter_s", "imports_and_spec_s", "run_s", "total_s")
# What a migrate run imports, in the order it first needs it, grouped by whose it is (``--imports``)
IMPORT_GROUPS = (
    ("apache_beam", ("apache_beam",)),
    ("pydantic, yaml", ("pydantic", "pydantic.fields", "yaml")),
    ("ddb2bt.mappers.spec", ("ddb2bt.mappers.spec",)),
    ("ddb2bt: the rest of a migrate run's modules", ("ddb2bt.app.migrate", "ddb2bt.pipelines.pipeline",
                                                    "ddb2bt.mappers.loader")),
    ("google.cloud.bigtable (the run's first Bigtable call)", ("google.cloud.bigtable.data",)),
)


def import_costs() -> dict[str, float]:
    """CPU seconds of each group of :data:`IMPORT_GROUPS`, imported in order in this (fresh) process."""
    import importlib
    import resource

    def cpu() -> float:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime

    out = {"interpreter": cpu()}
    for name, modules in IMPORT_GROUPS:
        before = cpu()
        for module in modules:
            importlib.import_module(module)
        out[name] = cpu() - before
    return out


def client_costs() -> float:
    """CPU seconds of the AWS clients a live-scan migrate makes, made in this (fresh) process in the run's order."""
    import resource

    from ddb2bt.pipelines.dynamodb.aws import s3_beam_args
    from ddb2bt.pipelines.dynamodb.client import ClientSettings, make_client
    from ddb2bt.pipelines.dynamodb.scan import scan_client

    from ddb2bt.mappers.spec import SourceSpec

    def cpu() -> float:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime

    source = SourceSpec(table="bench", endpoint_url="http://127.0.0.1:9", region="us-east-1")
    settings = ClientSettings.from_source(source)
    import boto3  # noqa: F401  (imported by Beam before a run: not the clients' cost)

    before = cpu()
    s3_beam_args([], source)  # runner_for: Beam's S3 endpoint
    make_client(settings)  # prepare: the source's DescribeTable
    scan_client(settings)  # the scan DoFn's setup: its client, and the one its read budget describes the table with
    make_client(settings)
    return cpu() - before


def compiled(tree: Path) -> None:
    """Bytecode for ``tree``'s ddb2bt, as an installed package has it (pip compiles at install): without it, and
    with PYTHONDONTWRITEBYTECODE set, every process would compile ddb2bt's sources again."""
    import compileall

    folders = [tree / "ddb2bt"] if (tree / "ddb2bt").is_dir() else [tree / name for name in PACKAGES if name != "templates"]
    for folder in folders:
        compileall.compile_dir(str(folder), quiet=1)


def job_env(emulator: Any) -> dict[str, str]:
    """The environment of a ``benchmarks.child`` job against the local servers (no AWS profile of the user's)."""
    from ddb2bt.pipelines.local import servers as local_servers

    env = {**os.environ, **local_servers.FAKE_AWS_ENV, **local_servers.emulator_env(emulator.endpoint)}
    env.pop("AWS_PROFILE", None)
    return env


def alternating(trees: dict[str, str], rounds: int, profile: bool) -> list[tuple[int, str]]:
    """(round, tree) of each job: the trees in turn, their order reversed every other round; a round -1 of this
    tree first when a profile is asked."""
    runs = [(-1, "this")] if profile else []
    return runs + [(round_, name) for round_ in range(rounds)
                   for name in (trees if round_ % 2 == 0 else list(reversed(trees)))]


def child_result(argv: list[str], env: dict[str, str], tree: str, name: str, items: int) -> dict:
    """Run one ``benchmarks.child`` job (``argv``) with ``tree`` first on PYTHONPATH; its result, checked: every item
    read and the run ok."""
    run = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True,
                         env={**env, "PYTHONPATH": os.pathsep.join(dict.fromkeys([tree, str(ROOT)]))})
    lines = [line for line in run.stdout.splitlines() if line.startswith("{")]
    if run.returncode or not lines:
        raise SystemExit(f"{name}: {run.stderr[-3000:]}")
    result = json.loads(lines[-1])
    if result["items_read"] != items or not result["ok"]:
        raise SystemExit(f"{name}: read {result['items_read']} of {items}: {result['problems']}")
    return result


def figures(trace: dict) -> dict[str, float]:
    """The CPU split of one job's ``own_cpu_trace`` (benchmarks/child.py ``traced``)."""
    out = {"interpreter_s": trace["cpu_at_main_s"],
           "imports_and_spec_s": trace["cpu_before_run_s"] - trace["cpu_at_main_s"],
           "run_s": trace["cpu_after_run_s"] - trace["cpu_before_run_s"]}
    out["total_s"] = sum(out.values())
    return out


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.startup_ab", description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", required=True, help="the commit to compare with (e.g. main)")
    parser.add_argument("--this", default=None,
                        help="a commit (or a folder holding a `ddb2bt` tree, e.g. an experiment) to measure instead of the "
                             "working tree (which may then change during the run)")
    parser.add_argument("--items", type=int, default=2_000)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--source", choices=("scan", "export"), default="scan")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here too")
    parser.add_argument("--imports", action="store_true",
                        help="only print the CPU of each group of a migrate run's imports in this process, as JSON")
    parser.add_argument("--clients", action="store_true",
                        help="only print the CPU of the AWS clients a live-scan run makes, in this process, as JSON")
    parser.add_argument("--profile", type=Path, default=None,
                        help="first one job of this tree under pyinstrument (benchmarks/child.py), its text here")
    args = parser.parse_args(argv)
    if args.imports:
        print(json.dumps(import_costs()))
        return {}
    if args.clients:
        print(json.dumps(client_costs()))
        return {}

    from ddb2bt.pipelines.local import servers as local_servers

    from . import dataset, load

    export_dir = load.cached_export(args.items, 4)[0] if args.source == "export" else None
    found: dict[str, dict[str, list[float]]] = {"this": {f: [] for f in FIGURES},
                                                args.against: {f: [] for f in FIGURES}}
    loads: list[float] = []
    imports: dict[str, list[dict[str, float]]] = {"this": [], args.against: []}
    with tempfile.TemporaryDirectory(prefix="ddb2bt-startup-") as tmp, local_servers.dynalite() as dynamo, \
            local_servers.bigtable_emulator() as emulator, local_servers.patched_environ(local_servers.FAKE_AWS_ENV):
        this = (args.this if args.this and Path(args.this, "ddb2bt").is_dir()
                else str(tree_of(args.this, Path(tmp) / "this")) if args.this else str(ROOT))
        trees = {"this": this, args.against: str(tree_of(args.against, Path(tmp) / "against"))}
        for tree in trees.values():
            compiled(Path(tree))
        load.load_table(dynamo.endpoint, "bench", dataset.generate(args.items))
        env = job_env(emulator)
        runs = alternating(trees, args.rounds, bool(args.profile))
        for number, (round_, name) in enumerate(runs):
            job = {"kind": "ddb2bt", "endpoint": dynamo.endpoint, "table": "bench", "project": "startup",
                   "instance": "startup", "target": f"t{number}", "segments": 2,
                   "run_dir": os.path.join(tmp, f"run{number}")}
            if export_dir:
                job["export_dir"] = export_dir
            if round_ < 0:
                job["profile"] = str(args.profile.resolve())
            result = child_result([sys.executable, "-m", "benchmarks.child", json.dumps(job)], env, trees[name], name,
                                  args.items)
            if round_ < 0:
                log(f"profile of this tree's job: {args.profile}")
                continue
            loads.append(float(Path("/proc/loadavg").read_text().split()[0]))
            split = figures(result["own_cpu_trace"])
            costs = subprocess.run([sys.executable, "-m", "benchmarks.startup_ab", "--against", "-", "--imports"],
                                   cwd=ROOT, env={**env, "PYTHONPATH": os.pathsep.join(dict.fromkeys([trees[name], str(ROOT)]))},
                                   capture_output=True, text=True, check=True)
            imports[name].append(json.loads(costs.stdout.splitlines()[-1]))
            for figure, value in split.items():
                found[name][figure].append(value)
            log(f"round {round_} {name}: " + ", ".join(f"{f} {split[f]:.2f}" for f in FIGURES)
                + f" s CPU (load {loads[-1]})")
    summary = {name: {f: {"median": statistics.median(v), "min": min(v), "max": max(v)} for f, v in per.items()}
               for name, per in found.items()}
    for figure in FIGURES:
        this, other = summary["this"][figure], summary[args.against][figure]
        print(f"{figure:19} {args.against}: {other['median']:.2f} ({other['min']:.2f}-{other['max']:.2f})  this: "
              f"{this['median']:.2f} ({this['min']:.2f}-{this['max']:.2f}) s CPU")
    print(f"load average during the runs: {min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} cores")
    record = {"this": args.this or "the working tree", "against": args.against, "items": args.items,
              "source": args.source, "rounds_run": args.rounds,
              "summary": summary, "rounds": found, "load": loads, "imports": imports,
              "imports_median": {name: {group: statistics.median(r[group] for r in runs) for group in runs[0]}
                                 for name, runs in imports.items() if runs},
              "unit": "CPU seconds of the job's process (benchmarks/child.py's split), per round",
              **tree_state()}
    if args.json:
        args.json.write_text(json.dumps(record, indent=1) + "\n")
    return record


if __name__ == "__main__":
    main()
