"""Measuring one job: its process tree's peak RSS, and the CPU it and each local server spent.

The servers (dynalite, the Bigtable emulator, the latency proxy) share the machine's cores with
the job, so CPU seconds per item, for the job and for each server, say where the time went and
what the ceiling on this machine is.
"""

from __future__ import annotations

import bisect
import json
import os
import re
import resource
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


class RssSampler(threading.Thread):
    """Peak of the summed RSS of a process and all its descendants, sampled every `interval` seconds."""

    def __init__(self, pid: int, interval: float = 0.05) -> None:
        super().__init__(daemon=True)
        import psutil

        self.root = psutil.Process(pid)
        self.interval, self.peak, self.samples = interval, 0, 0
        self.max_processes = 0
        self._halt = threading.Event()

    def run(self) -> None:
        import psutil

        while not self._halt.is_set():
            try:
                processes = [self.root, *self.root.children(recursive=True)]
            except psutil.Error:
                break
            total = 0
            for process in processes:
                try:
                    total += process.memory_info().rss
                except psutil.Error:
                    pass
            self.peak = max(self.peak, total)
            self.max_processes = max(self.max_processes, len(processes))
            self.samples += 1
            self._halt.wait(self.interval)

    def stop(self) -> None:
        self._halt.set()
        self.join()


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a live process and its descendants (0.0 once it is gone)."""
    import psutil

    total = 0.0
    try:
        root = psutil.Process(pid)
        for process in [root, *root.children(recursive=True)]:
            times = process.cpu_times()
            total += times.user + times.system + times.children_user + times.children_system
    except psutil.Error:
        pass
    return total


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_child(job: dict, env: dict[str, str], timeout: float = 1800,
              servers: dict[str, int] | None = None, py_spy: Path | None = None) -> dict[str, Any]:
    """Run one job in its own process; ``servers`` (name -> pid) get their CPU during the job counted too.

    With ``py_spy``, the job runs under ``py-spy record --gil`` (every thread and subprocess,
    sampled while holding the GIL, which is what bounds a Python pipeline) and a summary of
    where the samples fell is written there.
    """
    servers = servers or {}
    servers_before = {name: cpu_seconds(pid) for name, pid in servers.items()}
    job_before = _children_cpu()
    argv = [sys.executable, "-m", "benchmarks.child", json.dumps(job)]
    raw = py_spy.with_suffix(".raw") if py_spy else None
    if raw:
        argv = [str(Path(sys.executable).with_name("py-spy")), "record", "--gil", "--subprocesses", "--rate", "200",
                "--format", "raw", "--output", str(raw), "--", *argv]
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sampler = RssSampler(proc.pid)
    sampler.start()
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        sampler.stop()
    wall = time.perf_counter() - started
    cpu = {"job": _children_cpu() - job_before}  # the job and every process it waited for (SDK workers)
    cpu.update({name: cpu_seconds(pid) - servers_before[name] for name, pid in servers.items()})
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"job {job['kind']} failed ({proc.returncode}):\n{err[-4000:]}")
    result = json.loads(lines[-1])
    result.update(peak_rss_bytes=sampler.peak, rss_samples=sampler.samples, processes=sampler.max_processes,
                  process_wall_seconds=wall, load_1min=[load_before, os.getloadavg()[0]])
    result["items_per_s"] = result["items_read"] / result["seconds"] if result["seconds"] else 0.0
    result["cpu_seconds"] = cpu  # whole process lifetimes, interpreter start and imports included
    if raw and raw.exists():
        py_spy.write_text(summarize_py_spy(raw.read_text(), title=json.dumps(job)))
        raw.unlink()
    if result["items_read"]:
        result["cpu_us_per_item"] = {name: seconds / result["items_read"] * 1e6 for name, seconds in cpu.items()}
    trace = result.pop("own_cpu_trace", None)
    if trace:
        result["own_cpu"] = own_cpu_split(trace, result["items_read"])
    return result


OWN_CPU_HOW = ("CPU (user + system) of the job's own process and its descendants (the SDK workers of "
               "multi_processing; not the servers), sampled every 0.05 s by a thread of the job against the run's "
               "live item count (<run dir>/progress, summed over processes, rewritten every 0.1 s in a measured job); "
               "each new count is placed when its file was written, with the CPU up to then interpolated between "
               "samples. steady_us_per_item: least-squares slope of CPU over items between 10% and "
               "90% of the items (fallback: the first and last changed counts). start-up = the steady line at "
               "item 0 (interpreter, imports, spec, checks, pipeline construction, first element), split into "
               "before the run call and inside it; end = CPU after the last item beyond the line (drain, teardown). "
               "steady_items_per_s and startup_wall_s: the same fit of wall time over items")


def own_cpu_split(trace: dict[str, Any], items: int, low: float = 0.1, high: float = 0.9) -> dict[str, Any]:
    """Start-up, steady state and end of a job's own CPU, from :class:`benchmarks.child.CpuTrace`'s samples.

    ``trace``: ``cpu_at_main_s`` (interpreter start and the child's imports), ``cpu_before_run_s`` (also
    ddb2bt's imports and the spec), ``cpu_after_run_s`` and ``samples``: (time, CPU seconds, items read so far).
    Process CPU is counted from the process's start, so every figure is in seconds since then.
    """
    samples = trace["samples"]
    changed: list[tuple[float, float, int]] = []
    for sample in samples:
        if sample[2] > 0 and (not changed or sample[2] != changed[-1][2]):
            changed.append(_at_write(sample, samples) if len(sample) > 3 else tuple(sample[:3]))  # type: ignore[arg-type]
    window = [s for s in changed if low * items <= s[2] <= high * items]
    method = f"least-squares slope over {len(window)} samples between {low:.0%} and {high:.0%} of the items"
    if len(window) < 3:
        window = [s for s in changed if s[2] < items] or changed
        window = [window[0], window[-1]] if len(window) >= 2 else []
        method = "slope between the first and last changed item counts (too few samples in the window)"
    before, after = trace["cpu_before_run_s"], trace["cpu_after_run_s"]
    out: dict[str, Any] = {
        "items": items, "samples": len(trace["samples"]), "changed_samples": len(changed),
        "interpreter_s": trace["cpu_at_main_s"], "imports_and_spec_s": before - trace["cpu_at_main_s"],
        "total_s": after, "total_us_per_item": after / items * 1e6 if items else None,
        "first_items_seen": changed[0][2] if changed else None,
        "cpu_at_first_items_s": changed[0][1] if changed else None,
        "steady_us_per_item": None, "method": method, "how": OWN_CPU_HOW,
    }
    if len(window) < 2 or window[-1][2] == window[0][2]:
        out["method"] = "no steady state: fewer than two distinct item counts were seen during the run"
        return out
    xs = [float(s[2]) for s in window]
    ys = [s[1] for s in window]
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = (sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys))
             / sum((x - mean_x) ** 2 for x in xs))
    at_zero = mean_y - slope * mean_x
    out.update(steady_us_per_item=slope * 1e6, startup_s=at_zero, startup_in_run_s=at_zero - before,
               end_s=after - (at_zero + slope * items))
    # the same line in time: items/s in steady state, and when it started (wall seconds after the run call)
    ts = [s[0] for s in window]
    mean_t = sum(ts) / len(ts)
    per_item = (sum((x - mean_x) * (t - mean_t) for x, t in zip(xs, ts))
                / sum((x - mean_x) ** 2 for x in xs))
    if per_item > 0 and "run_started" in trace:
        out.update(steady_items_per_s=1 / per_item,
                   startup_wall_s=mean_t - per_item * mean_x - trace["run_started"])
    return out




def _at_write(sample: Sequence[float], samples: Sequence[Sequence[float]]) -> tuple[float, float, int]:
    """A sample's count placed when it was written (its fourth field), with the CPU spent up to then interpolated
    between the samples around that moment (the count can be up to one sampling interval older than the sample)."""
    written, items = sample[3], int(sample[2])
    times = [s[0] for s in samples]
    after = bisect.bisect_left(times, written)
    if after == 0 or after == len(samples):
        return written, sample[1], items
    (t0, cpu0), (t1, cpu1) = samples[after - 1][:2], samples[after][:2]
    share = (written - t0) / (t1 - t0) if t1 > t0 else 1.0
    return written, cpu0 + (cpu1 - cpu0) * share, items


_LINE = re.compile(r":\d+\)$")  # "f (file.py:12)" -> "f (file.py)": one line per function


def summarize_py_spy(raw: str, title: str = "", top: int = 40, focus: str | None = None) -> str:
    """Self and inclusive shares of the samples in py-spy's raw (collapsed stacks) output, per function.

    With ``focus`` (a function's name), only the stacks that pass through it count: one phase of a process that
    runs several (its own threads' samples, such as a writer's, are not under it and are left out).
    """
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = [_LINE.sub(")", frame) for frame in stack.split(";") if not frame.startswith("process ")]
        if focus and not any(frame.startswith(focus + " (") for frame in frames):
            continue
        frames = frames or ["(native)"]
        total += int(count)
        own[frames[-1]] += int(count)
        for frame in set(frames):
            inclusive[frame] += int(count)
    where = f", stacks through {focus}() only" if focus else ""
    lines = [f"py-spy --gil, {total} samples{where}: {title}", "", "-- self (where the GIL was held)"]
    lines += [f"{n / total:6.1%}  {frame}" for frame, n in own.most_common(top)]
    lines += ["", "-- inclusive"]
    lines += [f"{n / total:6.1%}  {frame}" for frame, n in inclusive.most_common(top)]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    """``python -m benchmarks.measure RAW OUT [--focus NAME] [--title T]``: summarize a py-spy raw file."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m benchmarks.measure", description=main.__doc__)
    parser.add_argument("raw")
    parser.add_argument("out")
    parser.add_argument("--focus", default=None, help="only stacks through this function (e.g. catch_up)")
    parser.add_argument("--title", default="")
    args = parser.parse_args(argv)
    Path(args.out).write_text(summarize_py_spy(Path(args.raw).read_text(), title=args.title, focus=args.focus))


if __name__ == "__main__":
    main()
