"""Where a measured migrate waits: a per-request timeline of one ``ddb2bt`` job, for the benchmark child only.

``benchmarks/child.py`` installs it when ``DDB2BT_BENCH_TIMELINE`` names a file (``benchmarks/scan_timeline.py`` sets it
per job); nothing of ddb2bt imports it. It wraps, in the child's process and for the run only:

* every DynamoDB call (``botocore``'s ``BaseClient._make_api_call``: DescribeTable, DescribeTimeToLive, each Scan page
  with its segment and whether it is the segment's first page), its thread, start and end;
* every MutateRows request the writer's batchers send (``_execute_mutate_rows``: one flush, its entries);
* the writer's waits in the bundle's thread: the synchronous close at a segment's done marker (``_close``) and the
  wait for the batcher closed behind the page before (``_settle_closing``);
* the scan step's caller: each time the fused pipeline asked the scan for its next element, how long until it came
  (``_ScanSegmentFn.process``'s generator), the rest being the map and write of what it gave;
* the phases of ``migrate``: prepare, before the pipeline, building it, ``pipeline.run``, the finish.

Written as one JSON object (``{"events": [[kind, start, end, {...}], ...]}``, seconds from the job's start) when the
job ends. The wrapping costs a few µs per request or page, the same for every job it is installed in.
"""

from __future__ import annotations

import functools
import json
import threading
import time
from typing import Any

EVENTS: list[list[Any]] = []
_ORIGIN = [0.0]


def _now() -> float:
    return time.perf_counter() - _ORIGIN[0]


def _record(kind: str, start: float, detail: dict[str, Any] | None = None) -> None:
    EVENTS.append([kind, start, _now(), {"thread": threading.current_thread().name, **(detail or {})}])


def _timed(kind: str, function: Any, detail: Any = None) -> Any:
    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = _now()
        try:
            return function(*args, **kwargs)
        finally:
            _record(kind, start, detail(*args, **kwargs) if detail else None)
    return wrapper


def _timed_generator(kind: str, function: Any) -> Any:
    """A generator method whose every step (the time until its next value) is an event."""
    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        steps = function(*args, **kwargs)
        while True:
            start = _now()
            try:
                value = next(steps)
            except StopIteration:
                _record(kind, start, {"end": True})
                return
            _record(kind, start, {"value": type(value).__name__})
            yield value
    return wrapper


def _drained(kind: str, function: Any) -> Any:
    """A generator method run to its end at once (as the writer's close and settle are used), timed as one event."""
    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = _now()
        out = list(function(*args, **kwargs))
        _record(kind, start, {"out": len(out)})
        yield from out
    return wrapper


def install() -> None:
    """Wrap what the timeline records; the events' zero is when it is installed, right before the job starts."""
    from botocore.client import BaseClient

    from ddb2bt.app import migrate
    from ddb2bt.pipelines.bigtable import mutate, sink
    from ddb2bt.pipelines.dynamodb import scan

    def call_detail(_client: Any, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        return {"op": operation, "segment": params.get("Segment"), "first": "ExclusiveStartKey" not in params}

    BaseClient._make_api_call = _timed("ddb", BaseClient._make_api_call, call_detail)  # type: ignore[method-assign]
    batcher = mutate.batcher_class()
    batcher._execute_mutate_rows = _timed(  # type: ignore[method-assign]
        "mutate", batcher._execute_mutate_rows, lambda _self, batch, _metric: {"entries": len(batch)})
    sink._WriteFn._close = _drained("close_sync", sink._WriteFn._close)  # type: ignore[method-assign]
    sink._WriteFn._settle_closing = _drained("settle", sink._WriteFn._settle_closing)  # type: ignore[method-assign]
    scan._ScanSegmentFn.process = _timed_generator("scan_next", scan._ScanSegmentFn.process)  # type: ignore[method-assign]
    for name in ("prepare", "_before_pipeline", "build_pipeline", "_finish"):
        setattr(migrate, name, _timed(f"phase:{name.strip('_')}", getattr(migrate, name)))
    from apache_beam import Pipeline

    Pipeline.run = _timed("phase:pipeline.run", Pipeline.run)  # type: ignore[method-assign]
    _ORIGIN[0] = time.perf_counter()  # after the imports above: the job's clock starts next


def write(path: str) -> None:
    with open(path, "w") as handle:
        json.dump({"events": EVENTS}, handle)
