"""One measured job in its own process (so its memory is its own): ``python -m benchmarks.child '<json>'``.

Jobs: ``baseline_scan``, ``baseline_export`` (benchmarks/baseline.py), ``ddb2bt``
(``ddb2bt.app.migrate.migrate`` with the given source, segments, writer flow control and
DirectRunner options) and ``validate`` (``ddb2bt.app.validate.validate`` of the migrated table). The last stdout
line is a JSON object: counts, ``seconds`` (the migration only: imports and interpreter start
are left out for both sides alike) and, for ddb2bt, the run's counters and problems.

For ``ddb2bt`` and ``validate`` jobs, ``own_cpu`` traces the CPU of this process and its descendants (the SDK
workers of ``multi_processing``; never the servers, which the parent started) against the run's live item count
(``<run dir>/progress``), so that start-up and steady state can be told apart (``measure.own_cpu_split``).
"""

from __future__ import annotations

import json
import logging
import os
import resource
import sys
import threading
import time
from pathlib import Path

SPEC = Path(__file__).resolve().parent / "spec.yaml"


def _self_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


CPU_AT_MAIN = _self_cpu()  # the interpreter's start and this module's imports, before any of ddb2bt is imported


class CpuTrace(threading.Thread):
    """Every ``interval`` seconds: (seconds, own CPU seconds, items read, seconds when that count was written) of
    this process tree during a run.

    The item count is the run's live totals (``pipelines/run/progress.py``: each mapping process rewrites its totals
    every :data:`PROGRESS_SECONDS` here, the first batch at once), summed over the processes; the newest file's
    modification time says when the count was true, so that ``measure.own_cpu_split`` can put each count beside the
    CPU spent up to that moment (interpolated between samples) instead of beside a sample taken up to an interval
    later (at ~10,000 items/s that lag is hundreds of items and, with a handful of counts in a short run, moved the
    steady slope by ±20 % from one round to the next). Reading the files and the CPU costs this thread a few
    hundredths of a millisecond per sample.
    """

    def __init__(self, run_dir: str, interval: float = 0.05, refresh: int = 20) -> None:
        super().__init__(daemon=True)
        self.folder = os.path.join(run_dir, "progress")
        self.interval, self.refresh = interval, refresh
        self.samples: list[tuple[float, float, int, float]] = []
        self._halt = threading.Event()
        self._descendants: list = []

    def cpu(self) -> float:
        """This process's CPU (``process_time``: nanoseconds, where ``os.times`` counts 10 ms ticks) and its
        descendants'. Finding the descendants walks every process of the machine (~3 ms), so it is done every
        ``refresh`` samples; reading a known one's CPU is cheap."""
        import psutil

        if len(self.samples) % self.refresh == 0:
            self._descendants = psutil.Process().children(recursive=True)
        times = os.times()
        total = time.process_time() + times.children_user + times.children_system
        for process in self._descendants:
            try:
                spent = process.cpu_times()
            except psutil.Error:  # gone: once waited for, its CPU is in its parent's children_* times
                continue
            total += spent.user + spent.system + spent.children_user + spent.children_system
        return total

    def progress(self) -> tuple[int, float]:
        """Items read so far over every process's file, and when the newest of them was written (perf_counter
        seconds). Each file is read through one descriptor, its time and content together (a writer replaces a
        file whole, ``os.replace``)."""
        items, newest = 0, 0.0
        try:
            paths = [entry.path for entry in os.scandir(self.folder) if entry.name.endswith(".json")]
        except OSError:
            paths = []
        for path in paths:
            try:
                with open(path, "rb") as handle:
                    written = os.fstat(handle.fileno()).st_mtime
                    items += json.loads(handle.read()).get("items_read", 0)
            except (OSError, ValueError):  # replaced under us: counted at the next sample
                continue
            newest = max(newest, written)
        return items, time.perf_counter() - (time.time() - newest) if newest else 0.0

    def sample(self) -> None:
        items, written = self.progress()
        now = time.perf_counter()
        self.samples.append((now, self.cpu(), items, min(written, now) if written else now))

    def run(self) -> None:
        while not self._halt.wait(self.interval):
            self.sample()

    def stop(self) -> None:
        self._halt.set()
        self.join()
        self.sample()


PROGRESS_SECONDS = 0.1  # the run's progress files rewritten this often in a measured job (ddb2bt's default: 0.5)


def traced(job: dict, call):
    """``call()`` with its CPU traced; returns (its result, seconds, the ``own_cpu`` record)."""
    from .measure import cpu_seconds

    from ddb2bt.pipelines.run import progress

    progress.WRITE_SECONDS = PROGRESS_SECONDS  # more counts to fit (this process's writers; ~10 small files a second)
    trace = CpuTrace(job["run_dir"])
    cpu_before = cpu_seconds(os.getpid())
    start = time.perf_counter()
    trace.start()
    try:
        result = call()
    finally:
        trace.stop()
    seconds = time.perf_counter() - start
    record = {"cpu_at_main_s": CPU_AT_MAIN, "cpu_before_run_s": cpu_before, "cpu_after_run_s": cpu_seconds(os.getpid()),
              "run_started": start, "samples": trace.samples}
    return result, seconds, record


def bench_spec(job: dict):
    """benchmarks/spec.yaml pointed at this run's source and target."""
    from ddb2bt.mappers.loader import load_spec
    from ddb2bt.mappers.spec import MappingSpec

    data = load_spec(SPEC).model_dump(by_alias=True, exclude_none=True)
    data["source"].update(table=job.get("table", "bench"), endpoint_url=job.get("endpoint"))
    if job.get("export_dir"):
        data["source"]["export"] = {"path": job["export_dir"]}
    data["target"].update(project=job["project"], instance=job["instance"], table=job["target"])
    return MappingSpec.model_validate(data)


def run_ddb2bt(job: dict) -> dict:
    """ddb2bt's application layer (``migrate``), as the CLI runs it: prepare (checks) + execute."""
    from ddb2bt.app.migrate import migrate
    from ddb2bt.app.options import FLOW_NAMES, RunOptions

    spec = bench_spec(job)
    beam_args = [f"--direct_running_mode={job.get('mode', 'in_memory')}",
                 f"--direct_num_workers={job.get('workers', 1)}"]
    flow = dict(job.get("flow") or {})  # writer flow control: RunOptions' flush_limit_mutation_count etc.
    unknown = set(flow) - set(FLOW_NAMES)
    if unknown:
        raise SystemExit(f"unknown flow option(s) {sorted(unknown)}; known: {', '.join(FLOW_NAMES)}")
    options = RunOptions(run_dir=job["run_dir"], total_segments=job.get("segments"), **flow,
                         beam_args=tuple(beam_args))
    timeline = os.environ.get("DDB2BT_BENCH_TIMELINE")  # benchmarks/scan_timeline.py: where the run waits
    if timeline:
        from . import timeline as requests_trace

        requests_trace.install()
    result, seconds, own_cpu = traced(job, lambda: migrate(spec, options, now_ms=job.get("now_ms")))
    if timeline:
        requests_trace.write(timeline)
    counters = result.counters
    return {"items_read": counters["items_read"], "rows_written": counters["rows_written"],
            "failed": counters["dead_lettered"], "seconds": seconds, "ok": result.ok, "problems": result.problems,
            "state": result.state, "dead_letter_lines": result.dead_letter_lines,
            "run_dir": result.prepared.run_dir, "dead_letter": result.prepared.dead_letter, "counters": counters,
            "own_cpu_trace": own_cpu}


def run_validate(job: dict) -> dict:
    """ddb2bt's validate use case on the table the previous job migrated (read only)."""
    from ddb2bt.app.options import RunOptions
    from ddb2bt.app.validate import validate

    beam_args = (f"--direct_running_mode={job.get('mode', 'in_memory')}",
                 f"--direct_num_workers={job.get('workers', 1)}")
    options = RunOptions(run_dir=job["run_dir"], total_segments=job.get("segments"), beam_args=beam_args)
    result, seconds, own_cpu = traced(job, lambda: validate(bench_spec(job), options, now_ms=job.get("now_ms")))
    return {"own_cpu_trace": own_cpu, "items_read": result.totals.get("items_read", 0), "rows_written": 0, "seconds": seconds,
            "differences": result.differences, "counts": result.counts, "problems": result.problems,
            "totals": result.totals, "counters": result.counters}


def run(job: dict) -> dict:
    from . import baseline

    kind = job["kind"]
    if kind == "baseline_scan":
        return baseline.migrate_scan(job["endpoint"], job["table"], job["project"], job["instance"], job["target"])
    if kind == "baseline_export":
        return baseline.migrate_export(job["export_dir"], job["project"], job["instance"], job["target"])
    if kind == "ddb2bt":
        return run_ddb2bt(job)
    if kind == "validate":
        return run_validate(job)
    raise SystemExit(f"unknown job kind {kind!r}")


def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    job = json.loads(sys.argv[1])
    if job.get("profile"):
        from pyinstrument import Profiler

        profiler = Profiler(interval=0.002)
        profiler.start()
        result = run(job)
        profiler.stop()
        Path(job["profile"]).write_text(profiler.output_text(unicode=False, color=False, show_all=False))
    else:
        result = run(job)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
