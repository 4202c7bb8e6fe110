"""What every benchmark section shares: where results go, the target's names, the machine and versions,
and :class:`Bench`, which runs one job in a child process against the local servers."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .measure import run_child

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
PROJECT, INSTANCE = "bench-project", "bench-instance"


def machine() -> dict[str, Any]:
    import psutil

    model = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu_model": model, "cores": os.cpu_count(), "ram_bytes": psutil.virtual_memory().total,
            "platform": platform.platform(), "python": platform.python_version()}


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for name in ("ddb2bt", "apache-beam", "google-cloud-bigtable", "boto3", "botocore", "grpcio", "protobuf",
                 "pydantic", "psutil", "pyinstrument"):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = None
    try:
        found["git_commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                             text=True, check=False).stdout.strip() or None
    except OSError:
        found["git_commit"] = None
    return found


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class Bench:
    def __init__(self, n: int, env: dict[str, str], dynamodb_endpoint: str, table: str, export_dir: str,
                 workdir: str, profile: str | None, servers: dict[str, int] | None = None) -> None:
        self.n, self.env, self.endpoint, self.table = n, env, dynamodb_endpoint, table
        self.servers = dict(servers or {})
        self.export_dir, self.workdir, self.profile = export_dir, workdir, profile
        self.runs = 0

    def reset_target(self) -> str:
        """Drop and recreate the Bigtable table, with the spec's families."""
        from google.cloud.bigtable import Client

        from ddb2bt.pipelines.bigtable.sink import ensure_table

        from .child import bench_spec

        spec = bench_spec({"project": PROJECT, "instance": INSTANCE, "target": "bench", "endpoint": self.endpoint})
        table = Client(project=PROJECT, admin=True).instance(INSTANCE).table("bench")
        if table.exists():
            table.delete()
        ensure_table(spec.target)
        return "bench"

    def job(self, kind: str, **extra: Any) -> dict[str, Any]:
        self.runs += 1
        target = self.reset_target()
        job = {"kind": kind, "endpoint": extra.pop("endpoint", self.endpoint), "table": self.table,
               "project": PROJECT, "instance": INSTANCE, "target": target,
               "run_dir": os.path.join(self.workdir, f"run{self.runs}"), **extra}
        label = extra.pop("label", kind)
        job.pop("label", None)
        slug = "".join(ch if ch.isalnum() else "-" for ch in label)
        py_spy = RESULTS / f"py-spy-{self.runs:02d}-{slug}.txt" if self.profile == "py-spy" else None
        if self.profile == "pyinstrument":
            job["profile"] = str(RESULTS / f"profile-{self.runs:02d}-{slug}.txt")
        log(f"run {self.runs}: {label} {json.dumps({k: v for k, v in job.items() if k in ('segments', 'mode', 'workers', 'export_dir')})}")
        result = run_child(job, self.env, servers=self.servers, py_spy=py_spy)
        expected = extra.get("expected", self.n)
        if result["items_read"] != expected or result["rows_written"] != expected:
            raise RuntimeError(f"{label}: read {result['items_read']}, wrote {result['rows_written']}, "
                               f"expected {expected}: {result.get('problems')}")
        if kind == "ddb2bt" and not result.get("ok", True):
            raise RuntimeError(f"{label}: run not OK: {result.get('problems')}")
        result["label"] = label
        per_item = ", ".join(f"{name} {us:.0f}" for name, us in result.get("cpu_us_per_item", {}).items())
        log(f"  {result['items_per_s']:,.0f} items/s ({result['seconds']:.1f}s, peak RSS "
            f"{result['peak_rss_bytes'] / 2**20:,.0f} MiB over {result['processes']} processes; "
            f"CPU us/item: {per_item})")
        return result
