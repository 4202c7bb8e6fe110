"""Where ddb2bt's live-scan runs wait, loopback against +20 ms per DynamoDB request: ``python -m
benchmarks.scan_timeline [--items N] [--rounds R] [--against <commit>]``.

The end-to-end section's two live-scan scenarios (``benchmarks.run.scenarios``: loopback with 4 segments, +20 ms with
8, in_memory; ``latency_proxy`` in front of dynalite only, the Bigtable emulator reached directly by both), ddb2bt's
side only (the hand-written script's rate is the same with and without the delay), in alternating rounds, each job
traced by :mod:`benchmarks.timeline` (every DynamoDB request, MutateRows flush, the writer's waits, the scan step's
caller, migrate's phases). With ``--against`` an archived tree runs each scenario too, the order rotating. Prints and
writes per job: the phases, the DynamoDB waiting before the first Scan, the requests in flight, each segment's
idle gaps between a reply and its next request, the caller's waits for pages, the writer's waits, the tail after
the last page. Docs: docs/PERFORMANCE.md ("Latency round 12").
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from pathlib import Path
from typing import Any

from .common import RESULTS, ROOT, log, machine, versions


def _outermost(events: list[list[Any]], kind: str) -> tuple[float, float] | None:
    found = [(start, end) for k, start, end, _ in events if k == kind]
    return (min(s for s, _ in found), max(e for _, e in found)) if found else None


def summarize(events: list[list[Any]], seconds: float, items: int) -> dict[str, Any]:
    """One job's timeline in figures (seconds from the job's start)."""
    ddb = [event for event in events if event[0] == "ddb"]
    scans = sorted((event for event in ddb if event[3]["op"] == "Scan"), key=lambda event: event[1])
    run = _outermost(events, "phase:pipeline.run")
    first_scan = scans[0][1] if scans else None
    out: dict[str, Any] = {"seconds": seconds, "items_per_s": items / seconds if seconds else None}
    for kind in ("phase:prepare", "phase:before_pipeline", "phase:build_pipeline", "phase:pipeline.run",
                 "phase:finish"):
        span = _outermost(events, kind)
        out[kind.split(":")[1]] = [round(span[0], 4), round(span[1], 4)] if span else None
    out["ddb_before_first_scan_s"] = sum(end - start for _, start, end, d in ddb if d["op"] != "Scan")
    out["non_scan_requests"] = [(d["op"], round(start, 4), round(end - start, 4)) for _, start, end, d in ddb
                                if d["op"] != "Scan"]
    out["first_scan_request_at"] = first_scan
    out["first_scan_from_run_start"] = first_scan - run[0] if scans and run else None
    out["first_page_at"] = min(end for _, _, end, _ in scans) if scans else None
    out["scan_requests"] = len(scans)
    durations = [end - start for _, start, end, _ in scans]
    out["scan_request_s"] = {"median": statistics.median(durations), "max": max(durations)} if durations else None
    if scans:
        span = max(end for _, _, end, _ in scans) - first_scan
        out["scan_span_s"] = span
        out["scan_in_flight_mean"] = sum(durations) / span if span else None
        out["last_page_at"] = max(end for _, _, end, _ in scans)
        out["after_last_page_s"] = (run[1] - out["last_page_at"]) if run else None
    gaps: list[float] = []
    by_segment: dict[Any, list[tuple[float, float]]] = {}
    for _, start, end, detail in scans:
        by_segment.setdefault(detail["segment"], []).append((start, end))
    for pages in by_segment.values():
        gaps += [later[0] - earlier[1] for earlier, later in zip(pages, pages[1:])]
    out["segment_page_gaps_s"] = {"count": len(gaps), "sum": sum(gaps), "median": statistics.median(gaps) if gaps
                                  else None, "max": max(gaps) if gaps else None}
    # the reader's handover: a segment's last reply to the next segment's first request in the same thread
    threads: dict[str, list[list[Any]]] = {}
    for event in scans:
        threads.setdefault(event[3]["thread"], []).append(event)
    handovers = [later[1] - earlier[2] for pages in threads.values() for earlier, later in zip(pages, pages[1:])
                 if later[3]["segment"] != earlier[3]["segment"]]
    out["handover_gaps_s"] = sorted(round(gap, 4) for gap in handovers)
    steps = [event for event in events if event[0] == "scan_next"]
    out["caller_waits_s"] = sum(end - start for _, start, end, _ in steps)
    out["caller_waits_before_first_page_s"] = (steps[0][2] - steps[0][1]) if steps else None
    for kind in ("close_sync", "settle", "mutate"):
        found = [end - start for k, start, end, _ in events if k == kind]
        out[kind] = {"count": len(found), "sum": sum(found), "max": max(found) if found else 0.0}
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scan_timeline", description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=30_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--against", default=None, help="a commit run beside the working tree")
    parser.add_argument("--output", type=Path, default=RESULTS / "scan-timeline.json")
    args = parser.parse_args(argv)

    from .io_paths import tree_of, tree_state
    from .latency_ab import live_scan
    from .run import scenarios

    results: dict[str, Any] = {"machine": machine(), "versions": versions(), "items": args.items,
                               "this": tree_state(), "against": args.against, "jobs": []}
    with live_scan(args.items) as live:
        trees = {"this": ROOT}
        if args.against:
            trees["against"] = tree_of(args.against, Path(live.tmp) / "against")
        benches = live.benches(args.items, trees)
        jobs = {name: sides["ddb2bt"] for name, sides in scenarios(benches["this"], live.proxy_endpoint).items()
                if name in ("loopback", "latency_20ms")}
        runs = [(name, side) for name in jobs for side in trees]
        for number in range(args.rounds):
            shift = number % len(runs)
            for name, side in runs[shift:] + runs[:shift]:
                bench = benches[side]
                path = Path(live.tmp) / f"timeline-{number}-{name}-{side}.json"
                bench.env["DDB2BT_BENCH_TIMELINE"] = str(path)
                job = dict(jobs[name])
                job["label"] = f"{job['label']} [{side}]"
                load_before = os.getloadavg()[0]
                result = bench.job(job.pop("kind"), **job)
                events = json.loads(path.read_text())["events"]
                summary = summarize(events, result["seconds"], result["items_read"])
                results["jobs"].append({"round": number, "scenario": name, "side": side,
                                        "loadavg": load_before, "summary": summary, "events": events})
                shown = {key: value for key, value in summary.items() if key != "non_scan_requests"}
                log(f"  {name} [{side}]: {json.dumps(shown, default=str)}")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(results, sort_keys=True) + "\n")
    table(results["jobs"])
    return results


FIELDS = ("items_per_s", "seconds", "first_scan_from_run_start", "ddb_before_first_scan_s", "scan_requests",
          "scan_in_flight_mean", "caller_waits_s", "after_last_page_s")


def table(jobs: list[dict[str, Any]]) -> None:
    """Per scenario and tree, the median of each figure over the rounds."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for job in jobs:
        groups.setdefault((job["scenario"], job["side"]), []).append(job["summary"])
    for (name, side), summaries in groups.items():
        figures = []
        for field in FIELDS:
            values = [s[field] for s in summaries if s.get(field) is not None]
            figures.append(f"{field} {statistics.median(values):.3f}" if values else f"{field} -")
        for kind in ("close_sync", "settle", "mutate"):
            figures.append(f"{kind} {statistics.median(s[kind]['sum'] for s in summaries):.3f}s/"
                           f"{statistics.median(s[kind]['count'] for s in summaries):.0f}")
        print(f"{name:>12} [{side}]: " + ", ".join(figures))


if __name__ == "__main__":
    main()
