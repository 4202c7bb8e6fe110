"""One measured job in its own process (so its memory is its own): ``python -m benchmarks.child '<json>'``.

Jobs: ``baseline_scan``, ``baseline_export`` (benchmarks/baseline.py), ``ddb2bt``
(``ddb2bt.app.migrate.migrate`` with the given source, segments, writer flow control and
DirectRunner options) and ``validate`` (``ddb2bt.app.validate.validate`` of the migrated table). The last stdout
line is a JSON object: counts, ``seconds`` (the migration only: imports and interpreter start
are left out for both sides alike) and, for ddb2bt, the run's counters and problems.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from pathlib import Path

SPEC = Path(__file__).resolve().parent / "spec.yaml"


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
    start = time.perf_counter()
    result = migrate(spec, options, now_ms=job.get("now_ms"))
    seconds = time.perf_counter() - start
    counters = result.counters
    return {"items_read": counters["items_read"], "rows_written": counters["rows_written"],
            "failed": counters["dead_lettered"], "seconds": seconds, "ok": result.ok, "problems": result.problems,
            "state": result.state, "dead_letter_lines": result.dead_letter_lines,
            "run_dir": result.prepared.run_dir, "dead_letter": result.prepared.dead_letter, "counters": counters}


def run_validate(job: dict) -> dict:
    """ddb2bt's validate use case on the table the previous job migrated (read only)."""
    from ddb2bt.app.options import RunOptions
    from ddb2bt.app.validate import validate

    beam_args = (f"--direct_running_mode={job.get('mode', 'in_memory')}",
                 f"--direct_num_workers={job.get('workers', 1)}")
    options = RunOptions(run_dir=job["run_dir"], total_segments=job.get("segments"), beam_args=beam_args)
    start = time.perf_counter()
    result = validate(bench_spec(job), options, now_ms=job.get("now_ms"))
    seconds = time.perf_counter() - start
    return {"items_read": result.totals.get("items_read", 0), "rows_written": 0, "seconds": seconds,
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
