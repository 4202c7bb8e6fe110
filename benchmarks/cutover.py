"""Cutover speed: changes/s applied from an incremental export and from the stream, vs `migrate`'s items/s.

``python -m benchmarks.cutover [--items N] [--rounds R]`` (defaults 20,000 and 3). Same data
(benchmarks/dataset.py), same spec (benchmarks/spec.yaml), same machine and runner (DirectRunner, in_memory,
one worker), in one run, after an untimed warm-up of both (imports, first clients): R alternating rounds of
migrate then catch-up, each into a table of its own, timed as each call's wall time (the collector's CPU time in
each, from ``gc.callbacks``, beside it); the ratio is per round
(the same load for both) and its median is the figure; the ratio of process CPU (this process: Beam,
mapping, the client's threads; not the emulator), which the machine's load moves less, is given next to
it. Then, once:

* **migrate**: the backfill from a full export folder of N items (``ddb2bt.app.migrate.migrate``);
* **catch-up**: an incremental export of N changes (every item modified: its counter changed, one
  attribute removed, so each change both sets and deletes cells) applied by ``ddb2bt.app.cutover.catch_up``;
* **tail**: the same N changes read from moto_server's DynamoDB Streams and applied by the tail
  (``pipelines.stream_tail``), timed from the first GetRecords to caught up (loading moto is not timed).
  moto answers GetRecords slowly (~5 s per 1,000 records, all in moto's own serialisation), so the
  tail's figure is its own work (mapping and writing: the run's time minus the time spent waiting
  for GetRecords); the end-to-end rate against moto is reported next to it.

A change maps two images and writes deletes as well as cells, so it costs more than an item; the goal
is a ratio ≥ 1.0 (issue 24) of migrate's items/s. Results go to ``benchmarks/results/cutover.json`` and into
``latest.json`` under ``cutover`` when run from ``benchmarks.run --cutover``.
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
PROJECT, INSTANCE = "bench-project", "bench-instance"
GOAL = 1.0  # issue 24: catch-up at least as fast as migrate (the tail is held to the same)
T0_US = 1_714_564_800_000_000  # the full export's exportTime (load.write_export_stream's)


COUNTERS = {"customer": "loyalty_points", "order": "line_count", "line": "qty", "product": "stock",
            "review": "helpful_votes"}
"""The attribute a change sets, per entity: a counter, as an application's updates typically do."""


def modified(item: dict[str, Any], number: int) -> dict[str, Any]:
    """The item after a change: one attribute given a new value, and one attribute removed.

    The changed attribute is the entity's counter (:data:`COUNTERS`, a mapped column); the removed one
    is the last of the others by name (in this dataset tier, status, weight_kg, title and verified:
    optional columns), so each change both sets and deletes cells. Until 2026-11-22 the change *added*
    an attribute (``bench_rev``, a rest cell) instead of changing one: the new image then mapped to one
    cell more than the item, which no user's typical update does.
    """
    new = copy.deepcopy(item)
    counter = COUNTERS[item["type"]["S"]]
    new[counter] = {"N": str(1_000_000 + number)}  # the dataset's counters stay far below a million
    spare = sorted(name for name in new if name not in ("pk", "sk", "type", "total", counter))
    del new[spare[-1]]
    return new


def workload(n: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The dataset's first ``n`` items, and each one's change as an incremental export's record (:func:`modified`)."""
    from . import dataset

    items = list(dataset.generate(n))
    changes = [{"Metadata": {"WriteTimestampMicros": {"N": str(T0_US + number * 1000)}},
                "Keys": {"pk": item["pk"], "sk": item["sk"]}, "OldImage": item, "NewImage": modified(item, number)}
               for number, item in enumerate(items)]
    return items, changes


def _spec(table: str, export_dir: str | None, endpoint: str | None) -> Any:
    from ddb2bt.mappers.loader import load_spec
    from ddb2bt.mappers.spec import MappingSpec

    data = load_spec(HERE / "spec.yaml").model_dump(by_alias=True, exclude_none=True)
    # an export's catch-up must be of the table its backfill export is of (load.write_export_stream's "bench")
    data["source"].update(table="bench" if export_dir else table, endpoint_url=endpoint)
    if export_dir:
        data["source"]["export"] = {"path": export_dir}
    data["target"].update(project=PROJECT, instance=INSTANCE, table=table)
    return MappingSpec.model_validate(data)


def _options(run_dir: str) -> Any:
    from ddb2bt.app.options import RunOptions

    return RunOptions(run_dir=run_dir, beam_args=("--direct_running_mode=in_memory", "--direct_num_workers=1"))


class CollectorClock:
    """The garbage collector's CPU time (``time.thread_time`` around each collection, from ``gc.callbacks``: the load
    does not inflate it as it does wall time) and its full collections while entered: how much of a round's CPU the
    collector takes (a full collection walks every object of the process)."""

    def __init__(self) -> None:
        self.seconds, self.full, self._started = 0.0, 0, 0.0

    def __enter__(self) -> CollectorClock:
        gc.callbacks.append(self._hook)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._hook)

    def _hook(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.thread_time()
            return
        self.seconds += time.thread_time() - self._started
        self.full += info["generation"] == 2


def median_round(rounds: list[dict[str, Any]]) -> tuple[float, dict[str, Any], float]:
    """The median of the rounds' catch-up/migrate ratios (with an even count, the mean of the middle two, not the
    upper one), the round nearest to it (whose rates are shown), and the median of their process CPU ratios."""
    ratio = statistics.median(r["ratio"] for r in rounds)
    return ratio, min(rounds, key=lambda r: abs(r["ratio"] - ratio)), statistics.median(r["cpu_ratio"] for r in rounds)


def run(n: int, rounds: int = 3, tail: bool = True) -> dict[str, Any]:
    import boto3

    from ddb2bt.app.cutover import catch_up
    from ddb2bt.app.migrate import migrate
    from ddb2bt.pipelines.local import servers as local_servers
    from ddb2bt.pipelines.cutover.change_sink import ChangeSink
    from ddb2bt.pipelines.dynamodb.client import put_items
    from ddb2bt.pipelines.cutover.tail import TailRun, TailState
    from ddb2bt.pipelines.dynamodb.stream import StreamChanges
    from ddb2bt.pipelines.dynamodb.export_writer import write_incremental_export

    from . import load

    items, changes = workload(n)
    out: dict[str, Any] = {"items": n, "goal_ratio": GOAL, "rounds": []}
    with tempfile.TemporaryDirectory(prefix="ddb2bt-cutover-bench-") as work, \
            local_servers.bigtable_emulator() as emulator, local_servers.moto_server() as moto, \
            local_servers.patched_environ(local_servers.emulator_env(emulator.endpoint)):
        export_dir = load.write_export_stream(os.path.join(work, "full"), iter(items), n, 4)
        window = write_incremental_export(os.path.join(work, "inc"), changes, T0_US, T0_US + 3_600_000_000, files=4,
                                          table="bench")
        small = load.write_export_stream(os.path.join(work, "warm-full"), iter(items[:200]), 200, 1)
        small_window = write_incremental_export(os.path.join(work, "warm-inc"), changes[:200], T0_US,
                                                T0_US + 3_600_000_000, table="bench")
        warm = _spec("cutover-warm", small, None)
        assert migrate(warm, _options(os.path.join(work, "warm"))).ok
        assert catch_up(warm, small_window, _options(os.path.join(work, "warm"))).ok
        for number in range(rounds):
            spec = _spec(f"cutover-{number}", export_dir, None)
            run_dir = os.path.join(work, f"run-{number}")
            load_before = os.getloadavg()[0]
            started, cpu = time.perf_counter(), time.process_time()
            with CollectorClock() as migrate_gc:
                result = migrate(spec, _options(run_dir))
            migrate_s, migrate_cpu = time.perf_counter() - started, time.process_time() - cpu
            assert result.ok, result.problems
            started, cpu = time.perf_counter(), time.process_time()
            with CollectorClock() as catch_up_gc:
                caught = catch_up(spec, window, _options(run_dir))
            catch_up_s, catch_up_cpu = time.perf_counter() - started, time.process_time() - cpu
            assert caught.ok and caught.counters["changes_applied"] == n, (caught.problems, caught.counters)
            out["rounds"].append({"load_1min": [load_before, os.getloadavg()[0]],
                                  "migrate_items_per_s": n / migrate_s, "catch_up_changes_per_s": n / catch_up_s,
                                  "ratio": migrate_s / catch_up_s, "cpu_ratio": migrate_cpu / catch_up_cpu,
                                  "migrate_cpu_us_per_item": migrate_cpu / n * 1e6,
                                  "catch_up_cpu_us_per_change": catch_up_cpu / n * 1e6,
                                  "migrate_gc_s": migrate_gc.seconds, "migrate_gc_full": migrate_gc.full,
                                  "catch_up_gc_s": catch_up_gc.seconds, "catch_up_gc_full": catch_up_gc.full})
        ratio, middle, cpu_ratio = median_round(out["rounds"])
        out["migrate"] = {"items_per_s": middle["migrate_items_per_s"]}
        out["catch_up"] = {"changes_per_s": middle["catch_up_changes_per_s"], "ratio_vs_migrate": ratio,
                           "cpu_ratio_vs_migrate": cpu_ratio,
                           "cells_set": caught.counters["cells_set"], "cells_deleted": caught.counters["cells_deleted"]}
        if not tail:
            out["catch_up"]["meets_goal"] = out["catch_up"]["ratio_vs_migrate"] >= GOAL
            return out

        client = boto3.client("dynamodb", endpoint_url=moto.endpoint, region_name="us-east-1")
        client.create_table(TableName="cutover", BillingMode="PAY_PER_REQUEST",
                            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"},
                                       {"AttributeName": "sk", "KeyType": "RANGE"}],
                            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                                  {"AttributeName": "sk", "AttributeType": "S"}])
        put_items(client, "cutover", items)  # before the stream: the tail sees only the modifications
        client.update_table(TableName="cutover", StreamSpecification={"StreamEnabled": True,
                                                                      "StreamViewType": "NEW_AND_OLD_IMAGES"})
        put_items(client, "cutover", [change["NewImage"] for change in changes])
        sink = ChangeSink(spec, result.prepared.now_ms, os.path.join(work, "tail", "dead.jsonl"))
        source = StreamChanges("cutover", client, boto3.client("dynamodbstreams", endpoint_url=moto.endpoint,
                                                               region_name="us-east-1"))
        tail = TailRun(os.path.join(work, "tail"), source, sink, until_idle_s=0.5, poll_s=0.05)
        arn = client.describe_table(TableName="cutover")["Table"]["LatestStreamArn"]
        # Timed to the last applied page, and GetRecords' time up to it: the idle polls that end the run are in
        # neither (subtracting a nominal idle wait from the whole run let those polls make the tail's own time < 0).
        applied = {}
        apply = tail.applier.apply

        def timed_apply(groups):
            outcome = apply(groups)
            applied.update(at=time.perf_counter(), stream_seconds=tail.stream_seconds)
            return outcome

        tail.applier.apply = timed_apply
        started = time.perf_counter()
        tail.run(TailState(arn, 0))
        tail.close()
        assert tail.outcome.applied == n and applied, tail.outcome.counters()
        seconds = applied["at"] - started
        own = seconds - applied["stream_seconds"]
        out["tail"] = {"seconds": seconds, "end_to_end_changes_per_s": n / seconds,
                       "get_records_seconds": applied["stream_seconds"], "changes_per_s": n / own}
    out["tail"]["ratio_vs_migrate"] = out["tail"]["changes_per_s"] / out["migrate"]["items_per_s"]
    for phase in ("catch_up", "tail"):
        out[phase]["meets_goal"] = out[phase]["ratio_vs_migrate"] >= GOAL
    return out


def catch_up_alone(n: int, rounds: int) -> dict[str, Any]:
    """The catch-up by itself (``--alone``): one backfill, then ``rounds`` timed catch-ups of the same export (after
    an untimed one), each from a copy of the run folder as the backfill left it, into the same table (a catch-up
    applied again writes the same cells). Each round's process CPU per change, in a process that runs nothing else:
    for comparing two versions of the catch-up in alternating processes, where migrate beside it only adds noise."""
    import shutil

    from ddb2bt.app.cutover import catch_up
    from ddb2bt.app.migrate import migrate
    from ddb2bt.pipelines.dynamodb.export_writer import write_incremental_export
    from ddb2bt.pipelines.local import servers as local_servers

    from . import load

    items, changes = workload(n)
    out: dict[str, Any] = {"items": n, "alone": True, "rounds": []}
    with tempfile.TemporaryDirectory(prefix="ddb2bt-cutover-bench-") as work, \
            local_servers.bigtable_emulator() as emulator, \
            local_servers.patched_environ(local_servers.emulator_env(emulator.endpoint)):
        export_dir = load.write_export_stream(os.path.join(work, "full"), iter(items), n, 4)
        window = write_incremental_export(os.path.join(work, "inc"), changes, T0_US, T0_US + 3_600_000_000, files=4,
                                          table="bench")
        spec = _spec("cutover-alone", export_dir, None)
        backfilled = os.path.join(work, "backfill")
        assert migrate(spec, _options(backfilled)).ok
        for number in range(rounds + 1):
            run_dir = os.path.join(work, f"run-{number}")
            shutil.copytree(backfilled, run_dir)
            load_before = os.getloadavg()[0]
            started, cpu = time.perf_counter(), time.process_time()
            caught = catch_up(spec, window, _options(run_dir))
            seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
            assert caught.ok and caught.counters["changes_applied"] == n, (caught.problems, caught.counters)
            if number:  # the first one warms up (imports, first clients)
                out["rounds"].append({"load_1min": load_before, "catch_up_changes_per_s": n / seconds,
                                      "catch_up_cpu_us_per_change": cpu / n * 1e6})
    return out


def render(out: dict[str, Any]) -> str:
    if out.get("alone"):
        return "\n".join([f"catch-up alone ({out['items']:,} changes, DirectRunner in_memory, 1 worker)", *(
            f"  round {number}: {r['catch_up_changes_per_s']:,.0f} changes/s, {r['catch_up_cpu_us_per_change']:,.0f} µs "
            f"of process CPU per change (load {r['load_1min']:.1f})" for number, r in enumerate(out["rounds"]))])
    return "\n".join([
        f"cutover ({out['items']:,} items / changes, DirectRunner in_memory, 1 worker)",
        *(f"  round {number}: migrate {r['migrate_items_per_s']:,.0f} items/s, catch-up {r['catch_up_changes_per_s']:,.0f} "
          f"changes/s, {r['ratio']:.2f}x, process CPU {r['cpu_ratio']:.2f}x "
          f"({r['migrate_cpu_us_per_item']:,.0f} / {r['catch_up_cpu_us_per_change']:,.0f} µs), collector CPU "
          f"{r.get('migrate_gc_s', 0):.2f} / {r.get('catch_up_gc_s', 0):.2f} s "
          f"({r.get('migrate_gc_full', 0)} / {r.get('catch_up_gc_full', 0)} full) "
          f"(load {r['load_1min'][0]:.1f}-{r['load_1min'][1]:.1f})"
          for number, r in enumerate(out["rounds"])),
        "  the median of the rounds (rates: the round nearest it):",
        f"  migrate (full export)  {out['migrate']['items_per_s']:>9,.0f} items/s",
        f"  catch-up (incremental) {out['catch_up']['changes_per_s']:>9,.0f} changes/s  "
        f"{out['catch_up']['ratio_vs_migrate']:.2f}x migrate (goal ≥ {GOAL}); process CPU per change "
        f"{out['catch_up']['cpu_ratio_vs_migrate']:.2f}x",
        *([] if "tail" not in out else [
        f"  tail (stream)          {out['tail']['changes_per_s']:>9,.0f} changes/s  "
        f"{out['tail']['ratio_vs_migrate']:.2f}x migrate (goal ≥ {GOAL}); with moto's GetRecords "
        f"{out['tail']['end_to_end_changes_per_s']:,.0f}/s"]),
    ])


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cutover", description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3, help="alternating migrate / catch-up rounds")
    parser.add_argument("--no-tail", action="store_true", help="migrate and catch-up only (no stream tail against moto)")
    parser.add_argument("--alone", action="store_true",
                        help="the catch-up by itself: --rounds catch-ups of one export, CPU per change (no migrate rounds)")
    parser.add_argument("--output", default=str(RESULTS / "cutover.json"))
    args = parser.parse_args(argv)
    out = catch_up_alone(args.items, args.rounds) if args.alone else run(args.items, args.rounds, tail=not args.no_tail)
    Path(args.output).write_text(json.dumps(out, indent=2, sort_keys=True) + "\n")
    print(render(out))
    return out


if __name__ == "__main__":
    main()
