"""CPU per item of the migration's I/O paths, this tree against another commit in alternating rounds:
``python -m benchmarks.io_paths --against <commit> [--items N] [--rounds R]``.

Three paths, each timed in a process of its own (process CPU time, every thread, the best of three passes):

* **scan**: a one-segment Scan of the table through ``scan_client`` (HTTP, botocore, the page's items parsed);
* **export**: the export's data files read line by line (``sized_records``: gzip and the JSON of each line);
* **write**: the benchmark's mapped rows through the sink's ``_WriteFn`` into the emulator (entries, the client's
  batcher and MutateRows calls, the per-batch tallies).

The other commit's tree is taken with ``git archive`` and put first on ``PYTHONPATH`` (as ``ddb2bt``), so both
sides run in the same venv against the same servers and data. Docs: docs/PERFORMANCE.md (issue 24).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import warnings
from io import BytesIO
from pathlib import Path
from typing import Any

from .common import ROOT, log

PACKAGES = ("app", "cli", "mappers", "pipelines", "templates")
PATHS = ("scan", "export", "write")


def tree_of(commit: str, into: Path) -> Path:
    """``commit``'s packages as an importable ``ddb2bt`` under ``into``."""
    archive = subprocess.run(["git", "archive", commit, *PACKAGES], cwd=ROOT, capture_output=True, check=True).stdout
    package = into / "ddb2bt"
    package.mkdir(parents=True)
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(package, filter="data")
    (package / "__init__.py").touch()
    built_modules(into)
    return into


def built_modules(tree: Path) -> list[Path]:
    """This tree's built C extensions (pyproject.toml's ext-modules: every ``*.c`` under mappers/ and pipelines/) copied
    into an archived ``tree`` wherever its C source is the same, and the archived tree's own source compiled where it
    is not (:func:`compile_module`): ``git archive`` takes no build, and without them the archived tree would run the
    Python functions, so a comparison would measure the extensions, not the change. The modules made."""
    copied = []
    for source in [path for folder in ("mappers", "pipelines") for path in (ROOT / folder).rglob("*.c")]:
        theirs = tree / "ddb2bt" / source.relative_to(ROOT)
        if tree == ROOT or not theirs.is_file():
            continue
        if theirs.read_bytes() != source.read_bytes():
            copied.append(compile_module(theirs))
            continue
        for module in source.parent.glob(f"{source.stem}.*.so"):
            shutil.copy2(module, theirs.parent / module.name)
            copied.append(theirs.parent / module.name)
    return copied


def compile_module(source: Path) -> Path:
    """An archived tree's C source built beside it as setuptools builds it (the interpreter's compiler and flags)."""
    import sysconfig

    target = source.with_name(source.stem + sysconfig.get_config_var("EXT_SUFFIX"))
    compiler = (sysconfig.get_config_var("CC") or "cc").split()
    flags = (sysconfig.get_config_var("CFLAGS") or "").split() + (sysconfig.get_config_var("CCSHARED") or "").split()
    subprocess.run([*compiler, *flags, "-shared", f"-I{sysconfig.get_paths()['include']}", str(source), "-o", str(target)],
                   check=True, capture_output=True)
    return target


def tree_state() -> dict[str, Any]:
    """The commit of this tree and whether tracked files differ from it, for a result file."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout

    return {"commit": git("rev-parse", "--short", "HEAD").strip(),
            "dirty": bool(git("status", "--porcelain", "--untracked-files=no"))}


def child(job: dict) -> dict[str, float]:
    """CPU µs per item of each path, in this process."""
    warnings.simplefilter("ignore")
    from ddb2bt.pipelines.dynamodb.export import sized_records
    from ddb2bt.pipelines.dynamodb.scan import ClientSettings, scan_client, scan_pages

    def best(run) -> float:
        times = []
        for _ in range(3):
            start = time.process_time()
            count = run()
            times.append((time.process_time() - start) / count * 1e6)
        return min(times)

    client = scan_client(ClientSettings(region="us-east-1", endpoint_url=job["dynamodb"]))
    files = sorted(glob.glob(os.path.join(job["export_dir"], "data", "*.json.gz")))
    out = {"scan": best(lambda: sum(len(page.items) for page in scan_pages(client, job["table"]))),
           "export": best(lambda: sum(1 for f in files for _ in sized_records(f, lambda r: r["Item"], "an item")))}
    out["write"] = _write(job, best)
    return out


def _write(job: dict, best) -> float:
    from ddb2bt.mappers.compiler import compile_spec
    from ddb2bt.mappers.loader import load_spec
    from ddb2bt.pipelines.bigtable import sink
    from ddb2bt.pipelines.local import servers as local_servers

    from . import dataset

    spec = load_spec(Path(__file__).parent / "spec.yaml")
    compiled = compile_spec(spec)
    pairs = [(compiled.map_item(item), item) for item in dataset.generate(job["items"])]
    with local_servers.patched_environ(local_servers.emulator_env(job["emulator"])):
        target = spec.target.model_copy(update={"project": "io", "instance": "io", "table": job["target"]})
        sink.ensure_table(target)
        fn = sink._WriteFn(sink.Destination.from_target(target), sink.FlowControl())
        fn.setup()

        def write() -> int:
            fn.start_bundle()
            for start in range(0, len(pairs), 1000):
                list(fn.process(pairs[start:start + 1000]))
            list(fn.finish_bundle())
            return len(pairs)

        try:
            return best(write)
        finally:
            fn.teardown()


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.io_paths", description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", required=True, help="the commit to compare with (e.g. HEAD~3)")
    parser.add_argument("--this", default=None, help="a commit to measure instead of the working tree")
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--json", type=Path, default=None, help="write the figures here too")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return {}

    from ddb2bt.pipelines.local import servers as local_servers

    from . import dataset, load

    export_dir, _ = load.cached_export(args.items, 4)
    found: dict[str, dict[str, list[float]]] = {"this": {p: [] for p in PATHS}, args.against: {p: [] for p in PATHS}}
    loads = []
    with tempfile.TemporaryDirectory(prefix="ddb2bt-io-") as tmp, local_servers.dynalite() as dynamo, \
            local_servers.bigtable_emulator() as emulator, local_servers.patched_environ(local_servers.FAKE_AWS_ENV):
        trees = {"this": str(tree_of(args.this, Path(tmp) / "this")) if args.this else str(ROOT),
                 args.against: str(tree_of(args.against, Path(tmp)))}
        load.load_table(dynamo.endpoint, "bench", dataset.generate(args.items))
        for round_ in range(args.rounds):
            for name in trees if round_ % 2 == 0 else list(reversed(trees)):
                job = {"dynamodb": dynamo.endpoint, "emulator": emulator.endpoint, "table": "bench",
                       "export_dir": export_dir, "items": args.items, "target": f"t{round_}{len(loads)}"}
                env = {**os.environ, **local_servers.FAKE_AWS_ENV,
                       "PYTHONPATH": os.pathsep.join(dict.fromkeys([trees[name], str(ROOT)]))}
                run = subprocess.run([sys.executable, "-m", "benchmarks.io_paths", "--against", args.against,
                                      "--child", json.dumps(job)], cwd=ROOT, env=env, capture_output=True, text=True)
                if run.returncode:
                    raise SystemExit(f"{name}: {run.stderr[-3000:]}")
                result = json.loads(run.stdout.splitlines()[-1])
                loads.append(float(Path("/proc/loadavg").read_text().split()[0]))
                for path in PATHS:
                    found[name][path].append(result[path])
                log(f"round {round_} {name}: " + ", ".join(f"{p} {result[p]:.1f}" for p in PATHS)
                    + f" µs/item (load {loads[-1]})")
    summary = {name: {path: {"median": statistics.median(values), "min": min(values), "max": max(values)}
                      for path, values in paths.items()} for name, paths in found.items()}
    for path in PATHS:
        this, other = summary["this"][path], summary[args.against][path]
        print(f"{path:7} {args.against}: {other['median']:.1f} ({other['min']:.1f}-{other['max']:.1f})  this: "
              f"{this['median']:.1f} ({this['min']:.1f}-{this['max']:.1f}) µs/item")
    print(f"load average during the runs: {min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} cores")
    record = {"this": args.this or "the working tree", "against": args.against, "items": args.items, "rounds_run": args.rounds, "summary": summary,
              "rounds": found, "load": loads, "unit": "process CPU µs per item, best of 3 passes per round",
              **tree_state()}
    if args.json:
        args.json.write_text(json.dumps(record, indent=1) + "\n")
    return record


if __name__ == "__main__":
    main()
