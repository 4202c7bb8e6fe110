"""The rollback section: items/s of `rollback` (Bigtable → DynamoDB) against `migrate` on the same data.

``python -m benchmarks.rollback_section [--items N] [--writers W] [--rounds R] [--ablation [NAME]]`` starts its own
dynalite and Bigtable emulator, loads the benchmark dataset (benchmarks/dataset.py: customers, orders, lines,
products, reviews, every DynamoDB type, a few 100-300 KB items) into a table, then runs R rounds, each: migrate it
with ``ddb2bt.app.migrate.migrate`` (DirectRunner, in_memory, 4 segments, as the other sections run it) into the
round's own Bigtable table, and roll that table back into empty DynamoDB tables with ``ddb2bt.app.rollback.rollback``:
once without the comparison (the write path alone, what the ratio uses) and once whole (write and compare). The
rounds alternate the two directions so that both see the machine's load as it comes and goes; each round's ratio
and the load average before each run are kept, and the median, minimum and maximum are reported. With
``--ablation`` every round also rolls back with each speed-up taken back (``ABLATIONS``; ``--ablation NAME``: that one),
which is what each buys (``rollback_write_round5_writer``: the writer as round 5 left it, its request bodies by
``json.dumps`` and every call through botocore's whole client; ``rollback_write_round7_writer``: every call after
the first through botocore's endpoint, as round 7 left it; ``rollback_write_session_send``: signed here but sent by
botocore's HTTP session rather than the writer's own connections; ``rollback_write_python_merge``: each group of a
range's responses parsed by protobuf and merged in Python, as before round 11).
Both directions map with one lossless spec (benchmarks/rollback_spec.yaml: one row per item, every attribute in a
``ddb_json`` rest family), so both move the same items; the whole rollback must compare every item equal. Goal:
rollback items/s >= 0.8 x migrate's. Also timed in every round: loading the items with plain BatchWriteItem from 4 threads
(benchmarks/load.py; boto3 serialises every value, which costs more client CPU than the rollback's writer does).
Also in every round: the rollback's own writer (``DynamoWriter``, raw bodies, 4 threads) putting the items already in
memory (``write_only``): what a rollback would cost if reading Bigtable and decoding cost nothing. Every run records
the CPU each side spent per item (``cpu_us_per_item``: this process and its workers, dynalite, the emulator; sampled
from /proc by process group), which the load moves much less than the items/s: on a machine whose cores are all busy
the items/s follow the CPU per item of all three together.
Figures go to ``benchmarks/results/rollback.json`` (its hand-written ``changes`` list is kept). In one process:
the ratio, not the absolute numbers, is what the shared cores allow to read.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import tempfile
import threading
import time
from pathlib import Path
from collections.abc import Iterator
from typing import Any

HERE = Path(__file__).resolve().parent
SPEC = HERE / "rollback_spec.yaml"
GOAL = 0.8
ABLATIONS = ("rollback_write_one_process", "rollback_write_two_processes", "rollback_write_botocore_requests", "rollback_write_every_sampled_range",
             "rollback_write_stdlib_json", "rollback_write_client_rows", "rollback_write_claims_unremembered",
             "rollback_write_sized_items", "rollback_write_stdlib_body", "rollback_write_client_layer",
             "rollback_write_round5_writer", "rollback_write_round7_writer", "rollback_write_session_send",
             "rollback_write_python_merge")
"""Each run in one process (``processes=1``) but ``rollback_write_two_processes``: a patch made here does not reach
worker processes, which a forkserver starts from fresh imports; compare them with ``rollback_write_one_process``."""


def log(message: str) -> None:
    import sys

    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def measure(items: int, writers: int, rounds: int, ablation: tuple[str, ...], also_writers: list[int], workdir: str) -> dict[str, Any]:
    from ddb2bt.app.migrate import migrate
    from ddb2bt.app.options import RunOptions
    from ddb2bt.app.rollback import RollbackRequest, rollback
    from ddb2bt.mappers.loader import load_spec
    from ddb2bt.mappers.spec import MappingSpec
    from ddb2bt.pipelines.local import servers as local_servers
    from ddb2bt.pipelines.dynamodb.client import ClientSettings, create_table, make_client

    from multiprocessing import forkserver

    from ddb2bt.mappers.attrvalue import with_bytes

    def with_bytes_item(item: dict) -> dict:
        return {name: with_bytes(value) for name, value in item.items()}

    from . import dataset
    from .load import load_table

    with local_servers.dynalite() as dynamo, local_servers.bigtable_emulator() as emulator, \
            local_servers.patched_environ(local_servers.emulator_env(emulator.endpoint)):
        groups = {"ddb2bt": os.getpgid(0), "dynalite": os.getpgid(dynamo.pid), "emulator": os.getpgid(emulator.pid)}
        generated = list(dataset.generate(items))
        log(f"loading {items:,} items into dynalite")
        began = time.perf_counter()
        load_table(dynamo.endpoint, "rbsource", generated)
        load_s = time.perf_counter() - began
        client = make_client(ClientSettings(endpoint_url=dynamo.endpoint, region="us-east-1"))
        decoded = [with_bytes_item(item) for item in generated]  # the decoder's form: B as bytes
        runs: list[dict[str, Any]] = []
        for number in range(rounds):
            # Each round migrates into its own Bigtable table and rolls back into fresh DynamoDB tables, so the
            # rounds do the same work; interleaving them exposes both sides to the same load.
            data = load_spec(SPEC).model_dump(by_alias=True, exclude_none=True)
            data["source"].update(table="rbsource", endpoint_url=dynamo.endpoint)
            data["target"]["table"] = f"rb{number}"
            spec = MappingSpec.model_validate(data)
            figures: dict[str, Any] = {"round": number + 1}
            log(f"round {number + 1}: migrate")
            load_before = os.getloadavg()[0]
            with CpuSampler(groups) as cpu:
                began = time.perf_counter()
                migrated = migrate(spec, RunOptions(run_dir=f"{workdir}/migrate{number}", total_segments=4,
                                                    beam_args=("--direct_running_mode=in_memory",
                                                               "--direct_num_workers=1")))
                seconds = time.perf_counter() - began
            assert migrated.ok and migrated.counters["items_read"] == items, migrated.problems
            figures["migrate"] = _figures(items, seconds, load_before, cpu)
            log(f"  {items / seconds:,.0f} items/s ({seconds:.1f} s) {_cpu_text(figures['migrate'])}")
            log(f"round {number + 1}: plain load")  # boto3's BatchWriteItem, as a user's own script would load
            load_before = os.getloadavg()[0]
            with CpuSampler(groups) as cpu:
                began = time.perf_counter()
                load_table(dynamo.endpoint, f"plain{number}", generated)
                seconds = time.perf_counter() - began
            figures["plain_load"] = _figures(items, seconds, load_before, cpu)
            log(f"  {items / seconds:,.0f} items/s ({seconds:.1f} s) {_cpu_text(figures['plain_load'])}")
            log(f"round {number + 1}: write only")  # the rollback's writer alone: a rollback's ceiling here
            create_table(client, f"wonly{number}", "pk", "sk")
            load_before = os.getloadavg()[0]
            with CpuSampler(groups) as cpu:
                began = time.perf_counter()
                _write_only(dynamo.endpoint, f"wonly{number}", decoded, writers)
                seconds = time.perf_counter() - began
            figures["write_only"] = _figures(items, seconds, load_before, cpu)
            log(f"  {items / seconds:,.0f} items/s ({seconds:.1f} s) {_cpu_text(figures['write_only'])}")
            variants: list[tuple[str, bool, str | None, int]] = [("rollback_write", False, None, writers),
                                                                 ("rollback_whole", True, None, writers)]
            if ablation:
                variants[1:1] = [(name, False, name, writers) for name in ablation]
            variants[1:1] = [(f"rollback_write_{more}_writers", False, None, more) for more in also_writers]
            for label, compare, undo, threads in variants:
                processes = 2 if undo == "rollback_write_two_processes" else 1 if undo is not None else None
                table = f"rb{label}{number}"
                create_table(client, table, "pk", "sk")
                log(f"round {number + 1}: {label}")
                # a fresh forkserver each time: a CLI run starts its own, and pays for its imports
                forkserver._forkserver._stop()  # noqa: SLF001
                load_before = os.getloadavg()[0]
                with CpuSampler(groups) as cpu, _undone(undo):
                    began = time.perf_counter()
                    # sized items: a write budget that never binds, so that every item's size is worked out
                    wcu = 1e12 if undo == "rollback_write_sized_items" else None
                    result = rollback(spec, RollbackRequest(to_table=table, writers=threads, processes=processes,
                                                            compare=compare, wcu=wcu),
                                      RunOptions(run_dir=f"{workdir}/{label}{number}"))
                    seconds = time.perf_counter() - began
                assert result.ok and result.counters["items_written"] == items, result.problems
                assert not compare or (result.compared == items and result.differences == 0)
                figures[label] = _figures(items, seconds, load_before, cpu)
                log(f"  {items / seconds:,.0f} items/s ({seconds:.1f} s) {_cpu_text(figures[label])}")
            figures["ratio_write"] = figures["rollback_write"]["items_per_s"] / figures["migrate"]["items_per_s"]
            figures["ratio_whole"] = figures["rollback_whole"]["items_per_s"] / figures["migrate"]["items_per_s"]
            figures["ratio_write_vs_plain_load"] = (figures["rollback_write"]["items_per_s"]
                                                    / figures["plain_load"]["items_per_s"])
            figures["ratio_write_vs_write_only"] = (figures["rollback_write"]["items_per_s"]
                                                    / figures["write_only"]["items_per_s"])
            figures["ratio_write_only_vs_migrate"] = (figures["write_only"]["items_per_s"]
                                                      / figures["migrate"]["items_per_s"])
            runs.append(figures)
        return {"items": items, "writers": writers, "rounds": runs,
                "first_load": {"seconds": load_s, "items_per_s": items / load_s},
                "summary": {name: _spread([run[name] if name.startswith("ratio") else run[name]["items_per_s"]
                                           for run in runs])
                            for name in ("migrate", "plain_load", "write_only", "rollback_write", "rollback_whole",
                                         "ratio_write", "ratio_whole", "ratio_write_vs_plain_load",
                                         "ratio_write_vs_write_only", "ratio_write_only_vs_migrate",
                                         *ablation,
                                         *(f"rollback_write_{more}_writers" for more in also_writers))},
                "cpu_us_per_item": {name: {side: _spread([run[name]["cpu_us_per_item"][side] for run in runs])
                                           for side in groups}
                                    for name in ("migrate", "plain_load", "write_only", "rollback_write",
                                                 "rollback_whole", *ablation)},
                "goal": GOAL}


@contextlib.contextmanager
def _undone(ablation: str | None) -> Iterator[None]:
    """The rollback with one of its speed-ups taken back (None: as it is), to measure what it buys."""
    from unittest import mock

    if ablation in (None, "rollback_write_one_process", "rollback_write_two_processes",
                    "rollback_write_sized_items"):  # request options (above)
        yield
    elif ablation == "rollback_write_botocore_requests":  # botocore validates and serialises every value again
        with mock.patch("ddb2bt.pipelines.dynamodb.sink.send_requests_raw", lambda client: None):
            yield
    elif ablation == "rollback_write_every_sampled_range":  # one ReadRows per key Bigtable samples
        with mock.patch("ddb2bt.pipelines.bigtable.rows.MAX_RANGES", 10 ** 9):
            yield
    elif ablation == "rollback_write_claims_unremembered":  # each cell's qualifier claimed anew, row after row
        with mock.patch("ddb2bt.mappers.decode.CLAIMS_KEPT", 0):
            yield
    elif ablation == "rollback_write_stdlib_json":  # DynamoDB JSON cells through json.loads
        with mock.patch("ddb2bt.pipelines.dynamodb.wire_json.loads", json.loads):
            yield
    elif ablation == "rollback_write_stdlib_body":  # BatchWriteItem bodies by json.dumps, as before round 6
        from ddb2bt.pipelines.dynamodb import sink

        def stdlib_body(params: dict) -> bytes:
            return json.dumps(params, default=sink._wire_json).encode("utf-8")  # noqa: SLF001

        with mock.patch.object(sink, "request_body", stdlib_body):
            yield
    elif ablation == "rollback_write_client_layer":  # every BatchWriteItem through botocore's whole client call
        with mock.patch("ddb2bt.pipelines.dynamodb.sink.batch_writer", lambda client: client.batch_write_item):
            yield
    elif ablation == "rollback_write_round5_writer":  # both of the above: the writer as round 5 left it
        with _undone("rollback_write_stdlib_body"), _undone("rollback_write_client_layer"):
            yield
    elif ablation == "rollback_write_round7_writer":  # every BatchWriteItem through botocore's endpoint (make_request)
        with mock.patch("ddb2bt.pipelines.dynamodb.sink._RawBatchWrite._direct", lambda self, body: None):
            yield
    elif ablation == "rollback_write_session_send":  # signed here, but sent by botocore's HTTP session (urllib3)
        with mock.patch("ddb2bt.pipelines.dynamodb.sink._Connections.of", lambda client, url: None):
            yield
    elif ablation == "rollback_write_python_merge":  # each group of responses parsed by protobuf, merged in Python
        from ddb2bt.pipelines.bigtable import chunks

        with mock.patch.object(chunks, "_compiled_range", None):
            yield
    elif ablation == "rollback_write_client_rows":  # the data client's Row merging, copied into our cells
        from ddb2bt.pipelines.bigtable import chunks

        with mock.patch.object(chunks, "read_range", _client_rows):
            yield
    else:
        raise ValueError(ablation)


def _client_rows(client: Any, table: Any, key_range: tuple[bytes, bytes], after: bytes | None = None,
                 row_filter: Any = None) -> Iterator[tuple[bytes, list]]:
    """``chunks.read_range`` as it was: the data client's ``read_rows_stream`` (its own row merging), copied."""
    from google.cloud.bigtable.data import ReadRowsQuery, RowRange

    from ddb2bt.mappers.results import Cell

    start, end = key_range
    if after is not None:
        span = RowRange(start_key=after, end_key=end or None, start_is_inclusive=False)
    else:
        span = RowRange(start_key=start or None, end_key=end or None)
    for row in table.read_rows_stream(ReadRowsQuery(row_ranges=span, row_filter=row_filter)):
        yield row.row_key, [Cell(c.family, c.qualifier, c.timestamp_micros, c.value) for c in row.cells]


def _write_only(endpoint: str, table: str, items: list[dict], writers: int) -> None:
    """The rollback's writer (raw BatchWriteItem bodies) from ``writers`` threads, 100 items a task as the rollback
    commits them, the items already decoded."""
    from concurrent.futures import ThreadPoolExecutor

    from ddb2bt.pipelines.dynamodb.client import ClientSettings, make_client
    from ddb2bt.pipelines.dynamodb.sink import DynamoWriter, WriteBudget, send_requests_raw

    client = make_client(ClientSettings(endpoint_url=endpoint, region="us-east-1"))
    send_requests_raw(client)
    writer = DynamoWriter(client, table, ("pk", "sk"), WriteBudget(None))
    with ThreadPoolExecutor(max_workers=writers) as pool:
        refused = [found for done in pool.map(writer.write, [items[at:at + 100] for at in range(0, len(items), 100)])
                   for found in done]
    assert not refused, refused[:1]


class CpuSampler:
    """CPU time (user + system) spent while inside by this process and its descendants (its worker processes and their
    forkserver), and by each server's process group (dynalite, the emulator), from /proc. Sampled every 0.25 s, so a
    process that ends between two samples loses at most its last quarter second."""

    def __init__(self, groups: dict[str, int]) -> None:
        self.groups = groups  # name -> process group; the one of this process stands for its descendants alone
        self.seconds: dict[str, float] = {}
        self._seen: dict[int, tuple[str, float]] = {}
        self._others: set[str] = set()
        self._tick = os.sysconf("SC_CLK_TCK")
        self._stop = threading.Event()

    def _sample(self) -> None:
        by_group = {group: name for name, group in self.groups.items()}
        found: dict[int, tuple[int, int, float]] = {}
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or pid in self._others:
                continue
            try:
                with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
                    fields = handle.read().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[2]) not in by_group:
                self._others.add(pid)
                continue
            found[int(pid)] = (int(fields[1]), int(fields[2]), (int(fields[11]) + int(fields[12])) / self._tick)
        mine = os.getpid()
        for pid, (parent, group, cpu) in found.items():
            if group == os.getpgid(0):  # another job of this shell can share the group: descendants only
                while parent not in (mine, 0, 1) and parent in found:
                    parent = found[parent][0]
                if pid != mine and parent != mine:
                    continue
            self._seen[pid] = (by_group[group], cpu)

    def _loop(self) -> None:
        while not self._stop.wait(0.25):
            self._sample()

    def __enter__(self) -> CpuSampler:
        self._sample()
        self._base = dict(self._seen)
        self._thread = threading.Thread(target=self._loop, name="cpu-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()
        self.seconds = {name: sum(cpu - self._base.get(pid, (name, 0.0))[1]
                                  for pid, (side, cpu) in self._seen.items() if side == name)
                        for name in self.groups}


def _figures(items: int, seconds: float, load_before: float, cpu: CpuSampler) -> dict[str, Any]:
    return {"seconds": seconds, "items_per_s": items / seconds, "load_before": load_before,
            "cpu_us_per_item": {name: used / items * 1e6 for name, used in cpu.seconds.items()}}


def _cpu_text(figures: dict[str, Any]) -> str:
    return "CPU µs/item: " + ", ".join(f"{name} {used:,.0f}" for name, used in figures["cpu_us_per_item"].items())


def _spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ablation", nargs="?", const="all",
                        help="also roll back with each speed-up taken back, in every round (what each one buys): "
                             f"all, or some of {', '.join(ABLATIONS)} separated by commas")
    parser.add_argument("--also-writers", type=int, action="append", default=[],
                        help="also roll back (write path) with this many writer threads, in every round")
    parser.add_argument("--output", default=str(HERE / "results" / "rollback.json"))
    args = parser.parse_args(argv)
    import warnings

    warnings.filterwarnings("ignore", message="Connecting to Bigtable emulator")  # deliberate, here
    with tempfile.TemporaryDirectory() as workdir:
        ablation = ABLATIONS if args.ablation == "all" else tuple(args.ablation.split(",")) if args.ablation else ()
        if unknown := set(ablation) - set(ABLATIONS):
            parser.error(f"unknown ablation {sorted(unknown)[0]}: one of {', '.join(ABLATIONS)}")
        figures = measure(args.items, args.writers, args.rounds, ablation, args.also_writers, workdir)
    summary = figures["summary"]
    figures["meets_goal"] = summary["ratio_write"]["median"] >= GOAL
    figures.update(date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), python=platform.python_version(),
                   machine=f"{platform.machine()}, {os.cpu_count()} cores shared with other jobs",
                   load_average_after=os.getloadavg())
    output = Path(args.output)
    if output.exists():  # the hand-written account of each change (and what did not pay) stays
        figures["changes"] = json.loads(output.read_text()).get("changes", [])
    output.write_text(json.dumps(figures, indent=2) + "\n")

    def line(name: str, unit: str = "items/s") -> str:
        got = summary[name]
        return f"{got['median']:9,.2f} {unit} (min {got['min']:,.2f}, max {got['max']:,.2f})"

    print(f"{len(figures['rounds'])} alternating rounds of {figures['items']:,} items; median (min, max)\n"
          f"plain load       {line('plain_load')}  (boto3 BatchWriteItem, 4 threads)\n"
          f"migrate          {line('migrate')}\n"
          f"rollback (write) {line('rollback_write')}\n"
          f"rollback (whole) {line('rollback_whole')}\n"
          f"ratio (write)    {line('ratio_write', 'x')}  goal >= {GOAL}\n"
          f"ratio (whole)    {line('ratio_whole', 'x')}\n"
          f"write/plain load {line('ratio_write_vs_plain_load', 'x')}\n"
          f"write only       {line('write_only')}  (the rollback's writer, items already decoded)\n"
          f"write/write only {line('ratio_write_vs_write_only', 'x')}\n"
          f"write only/migr. {line('ratio_write_only_vs_migrate', 'x')}")
    for name, sides in figures["cpu_us_per_item"].items():
        print(f"CPU µs/item {name:<36} " + ", ".join(f"{side} {got['median']:,.0f}" for side, got in sides.items()))
    for name in summary:
        if name.startswith("rollback_write_"):
            print(f"{name.removeprefix('rollback_write_'):<32} {line(name)}")
    return figures


if __name__ == "__main__":
    main()
