"""Parallel Scan of a live DynamoDB table, as plain Python iterators and as a Beam source.

Why it looks the way it does:

* Items stay exactly as the low-level client returns them (wire format, numbers as text).
* Every page is paginated by ``ExclusiveStartKey``; a page that keeps failing after botocore's own
  retries is retried here with backoff, and after a bounded but generous budget the scan raises
  :class:`ScanFailedError`. A page is never skipped: losing a page would silently lose items.
* Read capacity is shared with production traffic, so each segment spends at most its share of
  ``read_budget × capacity`` per second, measured from ``ConsumedCapacity`` (a token bucket).
* Per-item work is nil: items are yielded as they come, counters move once per page.
"""

from __future__ import annotations

import logging
import math
import queue
import random
import threading
import time
from dataclasses import dataclass, replace
from functools import partial
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Iterable, Iterator, NamedTuple, TypeVar

import apache_beam as beam
from apache_beam.metrics import Metrics
from botocore.exceptions import ClientError, ConnectionError as BotoConnectionError, HTTPClientError

from ...mappers.table import SourceDescription
from ..run.batches import Batch, SegmentAt, SegmentDone
from ..run.options import SEGMENTS_PER_CALL, lanes, readers
from ..run import progress
from ..run.metrics import NAMESPACE
from .client import ClientSettings, keep_field_raw, make_client
from ...mappers.errors import ServiceError
from ...mappers.analysis.estimates import READ_UNIT_BYTES, read_units
from ...mappers.limits import SCAN_SEGMENTS_MAX

log = logging.getLogger(__name__)
_JITTER = random.Random()  # the retries' own: the global generator is the application's (and hypothesis's)

GIB = 1 << 30
MAX_AUTO_SEGMENTS = 1000
PAGE_BYTES = 1 << 20
"""A Scan page holds up to 1 MB."""
PAGES_PER_SEGMENT = 4
"""Below this many pages per segment a table is not split further (each segment costs at least one request)."""
SMALL_TABLE_SEGMENTS = 8
"""The fewest segments a table worth splitting gets: parallel reads, and a kill costs at most a segment's pages in
flight rather than the whole table's."""
UNKNOWN_SIZE_SEGMENTS = SMALL_TABLE_SEGMENTS
"""Segments when DescribeTable reports no size (0 for up to six hours after a table is loaded): the table may be
large, and an empty table pays only one request per segment."""


THROTTLE_CODES = frozenset({"ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded"})
TRANSIENT_CODES = frozenset({"InternalServerError", "ServiceUnavailable", "InternalFailure"})


def choose_total_segments(
    size_bytes: int, requested: int | None = None, *, max_segments: int = MAX_AUTO_SEGMENTS
) -> int:
    """The default: one segment per GiB (as the EMR and Glue connectors do), but at least one per
    :data:`PAGES_PER_SEGMENT` pages up to :data:`SMALL_TABLE_SEGMENTS`, so a table of more than a
    few pages is never one segment; :data:`UNKNOWN_SIZE_SEGMENTS` when the size is 0 (unknown).
    Between 1 and ``max_segments``.

    An explicit request wins, up to DynamoDB's limit of 1,000,000 segments.
    """
    if requested is not None:
        if not 1 <= requested <= SCAN_SEGMENTS_MAX:
            raise ValueError(f"total segments must be between 1 and {SCAN_SEGMENTS_MAX}, got {requested}")
        return requested
    if size_bytes < 0:
        raise ValueError(f"table size cannot be negative: {size_bytes}")
    if size_bytes == 0:
        return min(max_segments, UNKNOWN_SIZE_SEGMENTS)
    small = min(SMALL_TABLE_SEGMENTS, math.ceil(size_bytes / (PAGES_PER_SEGMENT * PAGE_BYTES)))
    return max(1, min(max_segments, max(small, math.ceil(size_bytes / GIB))))


def estimate_rcu(response_bytes: int, consistent_read: bool) -> float:
    """Read units for a Scan page when the server reports none: 1 per 4 KB strongly consistent, half eventually."""
    return read_units(max(response_bytes, 1), consistent_read)


class ReadBudget:
    """A token bucket over consumed read capacity units, allowed to go into debt.

    The cost of a Scan page is only known after it arrives, so the page is spent afterwards and
    the *next* request waits until the debt is paid back. So that no page, the first included, costs
    more than a burst, :meth:`page_items` sizes each request (Scan's ``Limit``) from what the pages
    read so far cost per item, the first being a one-item probe: 8 segments' first 1 MB pages were
    1,024 RCU at once under a budget of 50 RCU/s.
    """

    def __init__(
        self,
        rate: float,
        burst: float | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if rate <= 0:
            raise ValueError(f"read budget rate must be positive, got {rate}")
        self.rate = float(rate)
        self.burst = float(burst) if burst is not None else max(self.rate, 1.0)
        self._clock = clock
        self._sleep = sleep
        self._tokens = self.burst
        self._last = clock()

    @staticmethod
    def per_segment_rate(capacity_rcu: float, read_budget: float, segments_in_flight: int) -> float:
        """``read_budget × capacity / segments in flight``: each concurrently scanned segment's share."""
        if not 0 < read_budget <= 1:
            raise ValueError(f"read_budget must be in (0, 1], got {read_budget}")
        if capacity_rcu <= 0 or segments_in_flight < 1:
            raise ValueError(f"need positive capacity and segments, got {capacity_rcu} RCU / {segments_in_flight}")
        return read_budget * capacity_rcu / segments_in_flight

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._last) * self.rate)
        self._last = now

    def delay(self) -> float:
        """Seconds to wait before the next request may go out (0 when the bucket is not in debt)."""
        self._refill()
        return -self._tokens / self.rate if self._tokens < 0 else 0.0

    def page_items(self, rcu_per_item: float | None, page_rcu_max: float) -> int | None:
        """Items the next page may hold so that it costs at most a burst (1 before any cost is known); None when
        even the largest page (``page_rcu_max``: 1 MB) fits in a burst."""
        if self.burst >= page_rcu_max:
            return None
        if rcu_per_item is None:
            return 1
        return max(1, int(self.burst / max(rcu_per_item, 1e-9)))

    def wait(self) -> float:
        """Sleep off any debt; returns the time slept."""
        pause = self.delay()
        if pause > 0:
            self._sleep(pause)
        return pause

    def spend(self, units: float) -> None:
        self._refill()
        self._tokens -= units


@dataclass(frozen=True)
class RetryPolicy:
    """Page-level retries on top of botocore's: full-jitter exponential backoff, then fail loudly.

    A page gives up after ``max_attempts`` or once ``deadline`` seconds have passed since its first
    attempt, whichever comes first: a source that throttles every request, or is gone, ends the
    run within about two minutes instead of retrying for a quarter of an hour. Waits are short
    (``max_delay``) so that a long retry phase is reported every few seconds.
    """

    max_attempts: int = 100
    base_delay: float = 0.5
    max_delay: float = 5.0
    deadline: float = 90.0
    botocore_attempts: int = 3
    """Attempts inside botocore per Scan call (its retry mode paces them) before a retry here, which is logged."""

    def backoff(self, attempt: int) -> float:
        return _JITTER.uniform(0, min(self.max_delay, self.base_delay * (2**attempt)))


class CorruptResponseError(Exception):
    """A Scan answer that is not a whole Scan result (e.g. a body cut short): retried like a dropped connection."""

    def __init__(self, response: dict[str, Any]) -> None:
        super().__init__("the Scan answer is not a whole Scan result (body cut short?)")
        self.response = response  # as on botocore's ClientError: its metadata counts botocore's own retries


class ScanFailedError(ServiceError):
    """A Scan page still failed after every retry; the scan stops rather than skip the page."""

    def __init__(self, table: str, segment: int, total_segments: int, attempts: int, start_key: Any, cause: Exception,
                 seconds: float = 0.0):
        self.table, self.segment, self.total_segments = table, segment, total_segments
        self.attempts, self.start_key = attempts, start_key
        super().__init__(
            f"scan of {table} segment {segment}/{total_segments} failed after {attempts} attempts in {seconds:.0f}s "
            f"(ExclusiveStartKey={start_key!r}): {_brief(cause)}",
            "check that DynamoDB is reachable and not throttling (read_budget), then resume the run (--resume)",
        )


def _brief(err: Exception) -> str:
    """An error on one line, with its kind."""
    return f"{type(err).__name__}: {' '.join(str(err).split())}"


class ScanPage(NamedTuple):
    items: list[dict[str, Any]]
    last_key: dict[str, Any] | None
    """LastEvaluatedKey: where the next page starts, None once the segment is done."""
    consumed_rcu: float
    retries: int
    """Retries this page needed: botocore's (RetryAttempts) plus ours, mostly throttling."""
    scanned_count: int
    nbytes: int = 0
    """The response's size (its Content-Length), 0 where the transport does not say."""
    throttled: bool = False
    """Whether DynamoDB throttled a request for this page (seen by our retries, or retried by botocore's)."""


RETRIED_ERRORS = (ClientError, BotoConnectionError, HTTPClientError, CorruptResponseError)


def _error_code(err: Exception) -> str:
    return err.response.get("Error", {}).get("Code", "") if isinstance(err, ClientError) else ""


_BOTOCORE_THROTTLED = threading.local()
"""Whether botocore retried a throttled Scan attempt in this thread's current call (:func:`scan_client`'s hook)."""


def _note_throttle(response: Any = None, **_: Any) -> None:
    """botocore's ``needs-retry`` event, once per attempt: remember a throttled answer, which botocore may retry
    and absorb before our retries see it (several segments read at once share the throttling)."""
    parsed = response[1] if isinstance(response, tuple) and len(response) > 1 else None
    if isinstance(parsed, dict) and parsed.get("Error", {}).get("Code") in THROTTLE_CODES:
        _BOTOCORE_THROTTLED.seen = True


def _retryable(err: Exception) -> bool:
    if isinstance(err, ClientError):  # AWS: retry throttling and any 5xx (a load balancer's 503 has no error code)
        status = err.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0
        return _error_code(err) in THROTTLE_CODES | TRANSIENT_CODES or status >= 500
    return isinstance(err, RETRIED_ERRORS)


def _response_bytes(response: dict[str, Any]) -> int:
    """The response's Content-Length; 0 where the transport does not say (e.g. moto in-process)."""
    return int(response.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("content-length", 0))


def _page_rcu(response: dict[str, Any], nbytes: int, consistent_read: bool) -> float:
    consumed = response.get("ConsumedCapacity")
    if consumed and "CapacityUnits" in consumed:
        return float(consumed["CapacityUnits"])
    if not nbytes:  # size unknown; rough size from the item count (4 KB items assumed)
        return estimate_rcu(READ_UNIT_BYTES * response.get("ScannedCount", 0), consistent_read)
    return estimate_rcu(nbytes, consistent_read)


def scan_pages(
    client: Any,
    table: str,
    segment: int = 0,
    total_segments: int = 1,
    *,
    consistent_read: bool = False,
    start_key: dict[str, Any] | None = None,
    limit: int | None = None,
    budget: ReadBudget | None = None,
    retry: RetryPolicy = RetryPolicy(),
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[ScanPage]:
    """Scan one segment page by page, from ``start_key`` (or the start) to its end.

    Raises :class:`ScanFailedError` when a page cannot be read, and lets other errors (missing
    table, bad credentials, validation) through at once: those do not get better by waiting.
    """
    if not 0 <= segment < total_segments <= SCAN_SEGMENTS_MAX:
        raise ValueError(f"segment {segment} is not in 0..{total_segments - 1} (total at most {SCAN_SEGMENTS_MAX})")
    request: dict[str, Any] = {
        "TableName": table,
        "ConsistentRead": consistent_read,
        "ReturnConsumedCapacity": "TOTAL",
    }
    if total_segments > 1:
        request.update(Segment=segment, TotalSegments=total_segments)
    if limit is not None:
        request["Limit"] = limit
    key = start_key
    scanned, spent = 0, 0.0  # what the pages so far held and cost, to size the next under the budget
    page_rcu_max = estimate_rcu(PAGE_BYTES, consistent_read)  # a full 1 MB page
    while True:
        if key is not None:
            request["ExclusiveStartKey"] = key
        affordable = budget.page_items(spent / scanned if scanned else None, page_rcu_max) if budget else None
        if affordable is not None:
            request["Limit"] = min(limit, affordable) if limit is not None else affordable
        attempt, inner, throttled, started = 0, 0, False, time.monotonic()
        while True:
            if budget is not None:
                budget.wait()
            _BOTOCORE_THROTTLED.seen = False
            try:
                response = client.scan(**request)
                if "Count" not in response:  # every Scan result has one; botocore parses a cut body into {}
                    raise CorruptResponseError(response)
                throttled = throttled or getattr(_BOTOCORE_THROTTLED, "seen", False)
                break
            except RETRIED_ERRORS as err:
                if not _retryable(err):
                    raise
                attempt += 1
                # botocore's own attempts; its connection errors carry ``response = None``
                inner += (getattr(err, "response", None) or {}).get("ResponseMetadata", {}).get("RetryAttempts", 0)
                throttled = throttled or _error_code(err) in THROTTLE_CODES or getattr(_BOTOCORE_THROTTLED, "seen", False)
                elapsed = time.monotonic() - started
                if attempt >= retry.max_attempts or elapsed >= retry.deadline:
                    raise ScanFailedError(table, segment, total_segments, attempt, key, err, elapsed) from err
                pause = retry.backoff(attempt)
                log.warning("scan %s segment %d: %s; retry %d in %.1fs (failing for %.0fs, giving up after %.0fs)",
                            table, segment, _brief(err), attempt, pause, elapsed, retry.deadline)
                sleep(pause)
        nbytes = _response_bytes(response)
        rcu = _page_rcu(response, nbytes, consistent_read)
        scanned, spent = scanned + response.get("ScannedCount", 0), spent + rcu
        if budget is not None:
            budget.spend(rcu)
        key = response.get("LastEvaluatedKey")
        metadata = response.get("ResponseMetadata", {})
        yield ScanPage(
            response.get("Items", []),
            key,
            rcu,
            attempt + inner + metadata.get("RetryAttempts", 0),
            response.get("ScannedCount", 0),
            nbytes,
            throttled,
        )
        if key is None:
            return


def keep_items_raw(client: Any) -> None:
    """Let ``client.scan`` return its ``Items`` as the raw JSON, skipping botocore's per-value parsing.

    botocore walks every attribute of every item against the service model, most of the scan's
    client time; ``json.loads`` of the same page costs a fraction of that (docs/PERFORMANCE.md). Items stay in wire format, except that ``B`` values stay base64 text, the
    export form the mapper and dead letters already take. The rest of the response (keys, counts,
    consumed capacity) is parsed by botocore as usual.
    """
    keep_field_raw(client, "Scan", "Items")


def scan_client(settings: ClientSettings, retry: RetryPolicy = RetryPolicy()) -> Any:
    """A client for :func:`scan_pages`: items kept raw, and few silent botocore attempts per call, since
    ``retry`` (which reports each retry and has a deadline) takes over after them."""
    client = make_client(replace(settings, max_attempts=retry.botocore_attempts))
    keep_items_raw(client)
    client.meta.events.register("needs-retry.dynamodb.Scan", _note_throttle, unique_id="ddb2bt-scan-throttled")
    return client


T = TypeVar("T")
_END: Any = object()


PAGES_AHEAD = 1
"""Pages a segment's reader may fetch beyond what the caller has taken: its next page is requested as soon as the
caller takes the last one, so the request overlaps that page's mapping and writing."""
_POLL = 0.1
"""Seconds between a blocked reader's looks at whether the caller has stopped."""


class _Stopped(Exception):
    """Raised in a reader's waits (retry backoff, read budget) once the caller has stopped reading."""


def _room(slots: threading.Semaphore, stop: threading.Event) -> bool:
    """Wait for one of ``slots``; False when the caller stopped first."""
    while not stop.is_set():
        if slots.acquire(timeout=_POLL):
            return True
    return False


def read_segments(open_pages: Callable[[int, Callable[[float], None]], Iterator[T]],
                  segments: tuple[int, ...] | list[int], *,
                  at_once: int = SEGMENTS_PER_CALL, ahead: int = PAGES_AHEAD,
                  interleave: bool = True, last: Callable[[T], bool] | None = None) -> Iterator[tuple[int, T | None]]:
    """The pages of ``segments`` as ``(segment, page)``, each segment's in its order and followed by
    ``(segment, None)`` once it has ended; ``open_pages(segment, sleep)`` gives a segment's pages, waiting (retry
    backoff, read budget) only through ``sleep``, which raises once the caller has stopped.

    Up to ``at_once`` segments are read at the same time, in background threads, each at most ``ahead`` pages
    beyond what the caller took, fetched or fetching (memory: ``at_once × ahead`` pages besides the caller's). With
    ``interleave`` the pages come in the order they arrived, segments mixed; without it segment after
    segment in the order given, the next ones read ahead meanwhile (for a consumer that needs each
    segment's pages together). A reader's error is raised here when its segment's turn comes. Leaving
    early (``close()``, an error, one reader's included) stops every reader after the request it is making
    (a reader retrying a failing page stops at its next wait): pages read but not taken are dropped, never
    reported, so a resumed run reads them again.

    ``last(page)`` says that a page is its segment's final one (a Scan page without LastEvaluatedKey): its reader
    then queues the segment's end right behind it and goes on to the next segment at once, instead of waiting
    until the caller has taken that page, which may be queued behind other segments' pages for as long as they
    take to work on; the next segment's first request overlaps that work. Up to ``at_once`` segments may have
    ended this way with their final page not yet taken (memory: ``at_once × (ahead + 1)`` pages besides the
    caller's); beyond that a reader waits as without ``last``.
    """
    stop = threading.Event()
    boxes: dict[int, queue.Queue] = {segment: queue.Queue() for segment in segments}  # held to ``ahead`` by slots
    slots = {segment: threading.Semaphore(max(1, ahead)) for segment in segments}
    arrivals: queue.Queue = queue.Queue()  # segment numbers, in the order their entries arrived (interleave)
    arrived = arrivals.put if interleave else (lambda _segment: None)
    ends = threading.Semaphore(max(1, at_once))  # segments ended early whose final page the caller has not taken
    ended_early: set[int] = set()

    def sleep(seconds: float) -> None:
        if stop.wait(seconds):
            raise _Stopped()

    def fill(segment: int) -> None:
        pages: Iterator[T] | None = None
        try:
            pages = open_pages(segment, sleep)
            while _room(slots[segment], stop):  # a page is fetched only once the caller took the one before
                page = next(pages, _END)
                if page is not _END and last is not None and last(page) and ends.acquire(blocking=False):
                    # never blocks: with no token left, the reader waits for the caller as without ``last`` (a
                    # caller taking segment after segment may be waiting for this one's end: no deadlock)
                    ended_early.add(segment)
                    for entry in (page, _END):
                        boxes[segment].put((entry, None))
                        arrived(segment)
                    return
                boxes[segment].put((page, None))
                arrived(segment)
                if page is _END:
                    return
        except Exception as err:  # noqa: BLE001 - handed to the caller, raised there
            boxes[segment].put((_END, err))
            arrived(segment)
        finally:
            close = getattr(pages, "close", None)
            if close is not None:
                close()

    with ThreadPoolExecutor(max_workers=max(1, min(at_once, len(segments))),
                            thread_name_prefix="ddb2bt-scan") as pool:
        try:
            for segment in segments:  # started in this order as threads free up
                pool.submit(fill, segment)
            open_segments = len(segments)
            order = iter(segments)
            current = None
            while open_segments:
                if interleave:
                    segment = arrivals.get()
                else:
                    current = next(order) if current is None else current
                    segment = current
                page, err = boxes[segment].get()
                slots[segment].release()  # its reader may fetch the next page while this one is worked on
                if err is not None:
                    raise err
                if page is _END:
                    open_segments -= 1
                    current = None
                    if segment in ended_early:
                        ends.release()
                    yield segment, None
                else:
                    yield segment, page
        finally:
            stop.set()  # readers stop after their request in flight; the pool waits for them
            pool.shutdown(wait=True, cancel_futures=True)


def scan_segment(client: Any, table: str, segment: int = 0, total_segments: int = 1, **options: Any) -> Iterator[dict]:
    """The items of one segment (see :func:`scan_pages` for the options)."""
    for page in scan_pages(client, table, segment, total_segments, **options):
        yield from page.items


def sample_items(client: Any, table: str, n: int, *, consistent_read: bool = False,
                 max_pages: int | None = None) -> list[dict]:
    """Up to ``n`` items from the start of the table, for a dry run: a few small pages, not a scan.

    ``max_pages`` defaults to a few more than ``n`` items need at ~100 per page, so a sparse
    start of the table (filtered or tiny pages) cannot turn the sample into a full scan.
    """
    found: list[dict] = []
    if n <= 0:
        return found
    max_pages = max_pages or max(3, n // 100 + 1)
    for pages, page in enumerate(scan_pages(client, table, consistent_read=consistent_read, limit=n), start=1):
        found.extend(page.items[: n - len(found)])
        if len(found) >= n or pages >= max_pages:
            break
    return found


@dataclass(frozen=True)
class BudgetPlan:
    """How a segment's read rate is set: given outright, or a share of the table's capacity.

    Resolved where a client is at hand (a worker's ``setup``), so building the pipeline, e.g. a
    Dataflow dry run, needs no access to DynamoDB.
    """

    rcu_per_segment: float | None = None
    """Fixed RCU/s per segment; ``math.inf`` for no limit; None to derive it from the capacity."""
    read_budget: float = 0.5
    on_demand_rcu: int = 4000
    segments_in_flight: int = 1
    table_info: SourceDescription | None = None

    def resolve(self, client: Any, table: str) -> float | None:
        """RCU/s per segment, None when unlimited; calls DescribeTable when neither rate nor table_info is given,
        through ``client`` (or the client that ``client()`` makes, made only then)."""
        rate = self.rcu_per_segment
        if rate is None:
            # the capacity is all the rate needs: DescribeTable alone, not the TTL's call as well (a round trip
            # per worker's setup, before its first page)
            if self.table_info is None and callable(client):
                client = client()
            info = self.table_info or SourceDescription.from_describe_table(client.describe_table(TableName=table))
            rate = ReadBudget.per_segment_rate(info.capacity_rcu(self.on_demand_rcu), self.read_budget,
                                               self.segments_in_flight)
        return None if math.isinf(rate) else rate


def _last_page(page: ScanPage) -> bool:
    """Whether ``page`` ends its segment: Scan gives no LastEvaluatedKey with a segment's last page."""
    return page.last_key is None


class _ScanSegmentFn(beam.DoFn):
    """Scans the lanes of segment numbers it receives, up to :data:`SEGMENTS_PER_CALL` segments of a lane at once
    (:func:`read_segments`); client and read rate are set up per worker in ``setup``."""

    def __init__(self, settings: ClientSettings, table: str, total_segments: int, consistent_read: bool,
                 budget: BudgetPlan, retry: RetryPolicy, page_limit: int | None, *,
                 start_keys: dict[int, dict[str, Any]] | None = None, savepoints: bool = False,
                 progress_dir: str | None = None, interleave: bool = False) -> None:
        self._settings, self._table, self._total = settings, table, total_segments
        self._interleave = interleave
        self._consistent, self._plan, self._retry, self._limit = consistent_read, budget, retry, page_limit
        self._start_keys, self._savepoints, self._progress_dir = dict(start_keys or {}), savepoints, progress_dir
        self._rate: float | None = None
        self._items = Metrics.counter(NAMESPACE, "items_read")
        self._pages = Metrics.counter(NAMESPACE, "scan_pages")
        self._rcu = Metrics.counter(NAMESPACE, "consumed_rcu")
        self._retries = Metrics.counter(NAMESPACE, "scan_retries")
        self._throttled = Metrics.counter(NAMESPACE, "throttled_pages")
        self._client: Any = None

    def setup(self) -> None:
        self._client = scan_client(self._settings, self._retry)
        self._rate = self._plan.resolve(partial(make_client, self._settings), self._table)
        self._progress = progress.reporter(self._progress_dir)
        log.info("scan %s: %s RCU/s per segment", self._table,
                 "unlimited" if self._rate is None else f"{self._rate:.1f}")

    def process(self, lane: tuple[int, ...]) -> Iterable[Any]:
        spent = 0.0  # counters are integers: carry the half units
        # taken as they arrive (migrate): a segment's reader goes on to the lane's next segment as soon as it has
        # its last page, not once that page is taken (validate takes segment after segment: as it was)
        last = _last_page if self._interleave else None
        for segment, page in read_segments(self._pages_of, lane, interleave=self._interleave, last=last):
            if page is None:  # its reader's end, which may come after other segments' pages: marked at its last page
                continue
            self._pages.inc()
            if self._progress is not None:
                self._progress.count({"pages_read": 1})
            self._items.inc(len(page.items))
            if page.retries:
                self._retries.inc(page.retries)
            if page.throttled:
                self._throttled.inc()
            spent += page.consumed_rcu
            if spent >= 1:
                self._rcu.inc(int(spent))
                spent -= int(spent)
            if page.items:
                yield Batch(page.items, page.nbytes)  # the page is the batch
            if page.last_key is None:  # the segment's last page (Scan gives no LastEvaluatedKey): done behind it
                yield SegmentDone(segment)
            elif self._savepoints:
                yield SegmentAt(segment, page.last_key)  # the writer passes it on once the page is stored
        if spent > 0:
            self._rcu.inc(math.ceil(spent))

    def _pages_of(self, segment: int, sleep: Callable[[float], None]) -> Iterator[ScanPage]:
        """One segment's pages (run in a reader thread: no Beam metrics here), paced by a budget of its own; every
        wait through ``sleep`` (:func:`read_segments`)."""
        start = self._start_keys.get(segment)
        if start is not None:
            log.info("scan %s segment %d: resumed at its savepoint", self._table, segment)
        return scan_pages(self._client, self._table, segment, self._total, consistent_read=self._consistent,
                          start_key=start, limit=self._limit,
                          budget=ReadBudget(self._rate, sleep=sleep) if self._rate else None, retry=self._retry,
                          sleep=sleep)


class ScanDynamoDB(beam.PTransform):
    """Parallel Scan as a Beam source: a PCollection of item batches, each segment's followed by its ``SegmentDone``.

    Lanes of segment numbers are created, reshuffled so the runner spreads them over workers, and each
    lane is scanned to its end by one DoFn call, several of its segments at once. Items travel as a :class:`~.batches.Batch` per Scan page
    (up to 1 MB). The done marker travels in the same PCollection, in band, so that steps fused
    with the scan see it after the segment's last batch; a second output merged back with a
    Flatten would cut the fusion, and the runner would then hold the whole scan in between
    (profiled). ``completed_segments`` (from a checkpoint) are left out,
    which is what ``--resume`` relies on: a segment is reported done only after all its items were
    emitted. With ``savepoints`` each page is followed by a :class:`~.batches.SegmentAt` holding its
    LastEvaluatedKey, and ``start_keys`` (segment -> ExclusiveStartKey, from a checkpoint's
    savepoints) start those segments part way.

    Read budget: each segment may consume ``rcu_per_segment`` RCU/s. Left as None it is
    ``source.read_budget × capacity / segments_in_flight`` (see :meth:`ReadBudget.per_segment_rate`),
    capacity coming from ``table_info`` or a DescribeTable call in each worker's ``setup`` (never at
    build time, so a Dataflow dry run stays offline).
    ``segments_in_flight`` is how many scan calls run at once (workers × threads); it defaults to every
    segment, which never overspends but is slow when far fewer run at once: pass the real concurrency when it
    is known. With fewer calls than segments, the segments are dealt into that many lanes (:func:`lanes`) and
    each call reads up to :data:`SEGMENTS_PER_CALL` segments of its lane at once, so the budget is split
    among the segments actually read at once (:func:`readers`), never among fewer.
    ``math.inf`` turns the budget off, leaving pacing to botocore's adaptive retry mode.

    ``interleave``: a lane's segments' pages may come mixed, in the order they arrive (each segment's own in
    order, its savepoints and done marker after its pages), for a consumer that judges barriers on everything
    before them, as the migration's writer does; without it a lane gives segment after segment (validate's
    compare step takes a segment's rows together), the next segments still read ahead.
    """

    def __init__(self, source_settings: Any, total_segments: int, consistent_read: bool | None = None,
                 completed_segments: frozenset[int] | set[int] = frozenset(), *, rcu_per_segment: float | None = None,
                 segments_in_flight: int | None = None, table_info: SourceDescription | None = None,
                 retry: RetryPolicy = RetryPolicy(), page_limit: int | None = None,
                 client_settings: ClientSettings | None = None, start_keys: dict[int, dict[str, Any]] | None = None,
                 savepoints: bool = False, progress_dir: str | None = None, interleave: bool = False) -> None:
        super().__init__()
        table = getattr(source_settings, "table", None)
        if not table:
            raise ValueError("ScanDynamoDB needs source settings with a table name")
        choose_total_segments(0, total_segments)  # validates the range
        self._table, self._total = table, total_segments
        self._consistent = bool(source_settings.consistent_read if consistent_read is None else consistent_read)
        done = frozenset(completed_segments)
        self._lanes = lanes([s for s in range(total_segments) if s not in done],
                            min(segments_in_flight or total_segments, total_segments))
        self._settings = client_settings or ClientSettings.from_source(source_settings)
        self._budget = BudgetPlan(
            rcu_per_segment,
            getattr(source_settings, "read_budget", 0.5),
            getattr(source_settings, "on_demand_rcu", 4000),
            readers(self._lanes),
            table_info,
        )
        self._retry, self._limit = retry, page_limit
        self._start_keys = {s: key for s, key in (start_keys or {}).items() if s not in done}
        self._savepoints, self._progress_dir, self._interleave = savepoints, progress_dir, interleave

    def rcu_per_segment(self) -> float | None:
        """The per-segment read rate the scan will hold (None: unlimited); may call DescribeTable once."""
        return self._budget.resolve(partial(make_client, self._settings), self._table)

    def expand(self, pbegin: beam.pvalue.PBegin) -> dict[str, beam.PCollection]:
        fn = _ScanSegmentFn(self._settings, self._table, self._total, self._consistent, self._budget, self._retry,
                            self._limit, start_keys=self._start_keys, savepoints=self._savepoints,
                            progress_dir=self._progress_dir, interleave=self._interleave)
        outputs = (
            pbegin
            | "Segments" >> beam.Create(self._lanes)  # its own Reshuffle spreads the lanes over the workers
            | "Scan" >> beam.ParDo(fn).with_output_types(Batch)
        )
        return outputs
