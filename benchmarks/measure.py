"""Measuring one job: its process tree's peak RSS, and the CPU it and each local server spent.

The servers (dynalite, the Bigtable emulator, the latency proxy) share the machine's cores with
the job, so CPU seconds per item, for the job and for each server, say where the time went and
what the ceiling on this machine is.
"""

from __future__ import annotations

import json
import re
import resource
import subprocess
import sys
import threading
import time
from collections import Counter
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
                  process_wall_seconds=wall)
    result["items_per_s"] = result["items_read"] / result["seconds"] if result["seconds"] else 0.0
    result["cpu_seconds"] = cpu  # whole process lifetimes, interpreter start and imports included
    if raw and raw.exists():
        py_spy.write_text(summarize_py_spy(raw.read_text(), title=json.dumps(job)))
        raw.unlink()
    if result["items_read"]:
        result["cpu_us_per_item"] = {name: seconds / result["items_read"] * 1e6 for name, seconds in cpu.items()}
    return result




_LINE = re.compile(r":\d+\)$")  # "f (file.py:12)" -> "f (file.py)": one line per function


def summarize_py_spy(raw: str, title: str = "", top: int = 40) -> str:
    """Self and inclusive shares of the samples in py-spy's raw (collapsed stacks) output, per function."""
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = [_LINE.sub(")", frame) for frame in stack.split(";") if not frame.startswith("process ")]
        frames = frames or ["(native)"]
        total += int(count)
        own[frames[-1]] += int(count)
        for frame in set(frames):
            inclusive[frame] += int(count)
    lines = [f"py-spy --gil, {total} samples: {title}", "", "-- self (where the GIL was held)"]
    lines += [f"{n / total:6.1%}  {frame}" for frame, n in own.most_common(top)]
    lines += ["", "-- inclusive"]
    lines += [f"{n / total:6.1%}  {frame}" for frame, n in inclusive.most_common(top)]
    return "\n".join(lines) + "\n"
