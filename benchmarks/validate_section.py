"""The validate section: items/s of `validate` against `migrate` on the same data, and validate's peak RSS.

``python -m benchmarks.validate_section [--items N] [--memory-items M] [--rounds R]`` runs it alone (it starts its
own servers); ``benchmarks.run`` calls :func:`validate_section` with its own ``Bench``.

For each source (the live table in dynalite, the export folder) ddb2bt migrates into a fresh
table, then validates that table (``ddb2bt.app.validate.validate``, as the CLI runs it, in the
same DirectRunner configuration, no repair, no target scan) in a process of its own. Validate
must find 0 differences; its items/s over migrate's is the ratio (goal >= 1.5, issue 24). Memory: peak RSS
of a validation at N items and at M items (the live table for N; the export for M, which also
shows what a source without scan order costs: every row's claims go through the rows pass).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from .common import INSTANCE, PROJECT, RESULTS, Bench, log, machine, versions
from .measure import run_child

TARGETS = {"validate_ratio": 1.5, "validate_memory_max_bytes": 1 << 30}
CONFIG = {"mode": "in_memory", "workers": 1, "segments": 4}


def validate_job(bench: Any, label: str, expected: int, **extra: Any) -> dict[str, Any]:
    """Validate the table the previous job migrated (same target, no reset); must find nothing."""
    bench.runs += 1
    job = {"kind": "validate", "endpoint": extra.pop("endpoint", bench.endpoint), "table": bench.table,
           "project": extra.pop("project"), "instance": extra.pop("instance"), "target": "bench",
           "run_dir": os.path.join(bench.workdir, f"validate{bench.runs}"), **extra}
    log(f"run {bench.runs}: {label}")
    slug = "".join(ch if ch.isalnum() else "-" for ch in label)
    py_spy = RESULTS / f"py-spy-{bench.runs:02d}-{slug}.txt" if bench.profile == "py-spy" else None
    result = run_child(job, bench.env, servers=bench.servers, py_spy=py_spy)
    if result["items_read"] != expected or result["differences"] or result["problems"]:
        raise RuntimeError(f"{label}: read {result['items_read']} of {expected}, {result['differences']} "
                           f"differences, problems {result['problems']}")
    result["label"] = label
    log(f"  {result['items_per_s']:,.0f} items/s ({result['seconds']:.1f}s, peak RSS "
        f"{result['peak_rss_bytes'] / 2**20:,.0f} MiB)")
    return result


def validate_section(bench: Any, project: str, instance: str, *, small_export: str | None = None,
                     big_export: str | None = None, big_n: int | None = None, rounds: int = 1) -> dict[str, Any]:
    """Migrate then validate, live scan and export; the big export's validation for memory at ``big_n`` items.

    With ``rounds`` > 1 each source is measured in that many alternating migrate/validate pairs (the load of
    a shared machine moves between rounds, both sides alike); the ratio is the median of the rounds' ratios.
    """
    where = {"project": project, "instance": instance}
    section: dict[str, Any] = {"config": CONFIG, "rounds": rounds}
    pairs = [("live scan", {})]
    if small_export:
        pairs.append(("export", {"export_dir": small_export}))
    for name, source in pairs:
        measured = []
        for _ in range(rounds):
            migrated = bench.job("ddb2bt", label=f"migrate ({name})", **CONFIG, **source)
            checked = validate_job(bench, f"validate ({name})", bench.n, **where, **CONFIG, **source)
            measured.append({"migrate": migrated, "validate": checked,
                             "ratio": checked["items_per_s"] / migrated["items_per_s"],
                             "cpu_ratio": cpu_ratio(migrated, checked)})
        median = statistics.median(pair["ratio"] for pair in measured)
        middle = min(measured, key=lambda pair: abs(pair["ratio"] - median))
        cpu_ratios = [pair["cpu_ratio"] for pair in measured if pair["cpu_ratio"] is not None]
        section[name.replace(" ", "_")] = {**middle, "ratio": median, "round_ratios": [pair["ratio"] for pair in measured],
                                           "cpu_ratio": statistics.median(cpu_ratios) if cpu_ratios else None,
                                           "round_cpu_ratios": cpu_ratios, "own_cpu": own_cpu_summary(measured),
                                           "rounds": measured if rounds > 1 else None}
    section["memory"] = {"small": {"items": bench.n, "peak_rss_bytes": section["live_scan"]["validate"]["peak_rss_bytes"],
                                   "source": "live scan"}}
    if big_export and big_n:
        bench.job("ddb2bt", export_dir=big_export, expected=big_n, label=f"migrate {big_n} (export)", **CONFIG)
        big = validate_job(bench, f"validate {big_n} (export)", big_n, export_dir=big_export, **where, **CONFIG)
        section["memory"]["big"] = {"items": big_n, "peak_rss_bytes": big["peak_rss_bytes"], "source": "export",
                                    "run": big}
    return section


def cpu_ratio(migrated: dict[str, Any], checked: dict[str, Any]) -> float | None:
    """Migrate's CPU per item in its whole process over validate's (above 1: validate costs less per item). The
    load of a shared machine moves it much less than items/s (docs/PERFORMANCE.md)."""
    ours, theirs = checked.get("cpu_us_per_item", {}).get("job"), migrated.get("cpu_us_per_item", {}).get("job")
    return theirs / ours if ours and theirs else None


OWN_CPU_FIGURES = ("steady_us_per_item", "startup_s", "startup_in_run_s", "steady_items_per_s", "startup_wall_s")


def own_cpu_summary(measured: list[dict[str, Any]]) -> dict[str, Any]:
    """Each side's own CPU split into start-up and steady state (``measure.own_cpu_split``: both runs keep live item
    counts in ``<run dir>/progress``), per round and the median; and ``steady_rate_ratio``, validate's steady items/s
    over migrate's per round: the ratio the items/s ratio tends to on a table large enough for start-up not to
    count."""
    out: dict[str, Any] = {}
    for side in ("migrate", "validate"):
        splits = [pair[side].get("own_cpu") or {} for pair in measured]
        out[side] = {}
        for figure in OWN_CPU_FIGURES:
            values = [split.get(figure) for split in splits]
            known = [value for value in values if value is not None]
            out[side][figure] = {"median": statistics.median(known) if known else None, "per_round": values}
    rates = []
    for pair in measured:
        ours, theirs = ((pair[side].get("own_cpu") or {}).get("steady_items_per_s") for side in ("validate", "migrate"))
        rates.append(ours / theirs if ours and theirs else None)
    known = [rate for rate in rates if rate is not None]
    out["steady_rate_ratio"] = {"median": statistics.median(known) if known else None, "per_round": rates}
    return out


def verdicts(section: dict[str, Any]) -> dict[str, Any]:
    ratio = section["live_scan"]["ratio"]
    goal = TARGETS["validate_ratio"]
    found = {"validate_ratio": {"value": ratio, "target": f">= {goal}", "met": ratio >= goal}}
    peaks = [entry["peak_rss_bytes"] for entry in section["memory"].values()]
    found["validate_memory_peak"] = {"value": max(peaks), "target": "< 1 GiB",
                                     "met": max(peaks) < TARGETS["validate_memory_max_bytes"]}
    return found


def render(section: dict[str, Any]) -> list[str]:
    row = "{:<44} {:>14} {:>14} {:>8}"
    lines = [row.format("validate vs migrate (items/s)", "migrate", "validate", "ratio")]
    for name in ("live_scan", "export"):
        if name in section:
            pair = section[name]
            lines.append(row.format(f"  {name.replace('_', ' ')}", f"{pair['migrate']['items_per_s']:,.0f}",
                                    f"{pair['validate']['items_per_s']:,.0f}", f"{pair['ratio']:.2f}"))
            if len(pair.get("round_ratios") or ()) > 1:
                lines.append(f"    rounds (median above): {', '.join(f'{r:.2f}' for r in pair['round_ratios'])}")
            if pair.get("cpu_ratio") is not None:
                lines.append(f"    CPU per item, migrate's over validate's (whole processes): {pair['cpu_ratio']:.2f} "
                             f"(rounds {', '.join(f'{r:.2f}' for r in pair['round_cpu_ratios'])})")
            own = pair.get("own_cpu") or {}
            for side in ("migrate", "validate"):
                steady, startup = ((own.get(side) or {}).get(figure, {}).get("median")
                                   for figure in ("steady_us_per_item", "startup_s"))
                if steady is not None and startup is not None:
                    lines.append(f"    own CPU, {side}: steady {steady:.1f} us/item, start-up {startup:.2f} s (medians)")
            rate = (own.get("steady_rate_ratio") or {}).get("median")
            if rate is not None:
                lines.append(f"    steady items/s, validate's over migrate's (start-up apart): {rate:.2f}")
    for size, entry in section["memory"].items():
        lines.append(row.format(f"  validate peak RSS, {entry['items']:,} items ({entry['source']})", "",
                                f"{entry['peak_rss_bytes'] / 2**20:,.0f} MiB", ""))
    return lines


def main(argv: list[str] | None = None) -> dict[str, Any]:
    from ddb2bt.pipelines.local import servers as local_servers

    from . import dataset, load

    parser = argparse.ArgumentParser(prog="python -m benchmarks.validate_section", description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--memory-items", type=int, default=None, help="the big export's items (default: none)")
    parser.add_argument("--rounds", type=int, default=1, help="alternating migrate/validate pairs per source "
                        "(the ratio is their median)")
    parser.add_argument("--live-only", action="store_true", help="the live scan only (no export pair)")
    parser.add_argument("--profile", choices=("py-spy",), default=None,
                        help="every job under py-spy (results/py-spy-*.txt); its figures are not comparable")
    parser.add_argument("--output", default=str(RESULTS / "validate.json"))
    args = parser.parse_args(argv)
    n = args.items
    root = Path(__file__).resolve().parent.parent
    results: dict[str, Any] = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "machine": machine(),
                               "versions": versions(), "items": n, "memory_items": args.memory_items}
    small_export, _ = load.cached_export(n, 8 if n >= 50_000 else 4)
    big_export = load.cached_export(args.memory_items, 16)[0] if args.memory_items else None
    env = {**os.environ, **local_servers.FAKE_AWS_ENV, "PYTHONPATH": str(root)}
    env.pop("AWS_PROFILE", None)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ddb2bt-bench-") as workdir, \
            local_servers.dynalite() as dynamo, local_servers.bigtable_emulator() as emulator, \
            local_servers.patched_environ(local_servers.emulator_env(emulator.endpoint)):
        env["BIGTABLE_EMULATOR_HOST"] = emulator.endpoint
        log(f"loading {n:,} items into dynalite")
        load.load_table(dynamo.endpoint, "bench", dataset.generate(n))
        bench = Bench(n, env, dynamo.endpoint, "bench", small_export, workdir, args.profile,
                      servers={"dynalite": dynamo.pid, "emulator": emulator.pid})
        results["validate"] = validate_section(bench, PROJECT, INSTANCE,
                                               small_export=None if args.live_only else small_export,
                                               big_export=big_export, big_n=args.memory_items, rounds=args.rounds)
    results["load_average"] = os.getloadavg()
    results["targets"] = verdicts(results["validate"])
    results["total_seconds"] = time.perf_counter() - started
    Path(args.output).write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    print("\n".join(render(results["validate"])))
    for name, verdict in results["targets"].items():
        shown = f"{verdict['value'] / 2**20:,.0f} MiB" if name.endswith("peak") else f"{verdict['value']:.2f}"
        print(f"target {name}: {shown} ({verdict['target']}): {'met' if verdict['met'] else 'NOT met'}")
    return results


if __name__ == "__main__":
    main()
