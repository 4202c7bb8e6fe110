"""Our own MutateRows call under the data client's ``MutationsBatcher``: the request sent as the bytes of its entries.

The client's MutateRows operation builds each request as a proto-plus ``MutateRowsRequest`` of its entries (upb
copying every entry's message into the request), serialises it on the way out, and reads every answer through
proto-plus and an exception object per entry, the successful ones too: about a third of the CPU of a written
row (docs/PERFORMANCE.md). Here each entry is serialised once, when the batcher first asks for its size
(:mod:`.entries` keeps the bytes as ``wire``: the entry as field 2 of a request), a request is those records
joined after the table's fields (repeated fields concatenate), sent on the client's own channel
(:class:`.calls.ChannelCall`: its client info, routing header and error mapping), its answers parsed raw.

Everything else is the client's, unchanged: the batcher (flush limits, flow control, the background requests; its
``append`` for our own entries only reads their count and kept size directly, staging and flushing as the client's),
and the operation's rules — which entries are retried (those failing with a retryable error that say
``is_idempotent()``), its backoff, operation and attempt deadlines, and the errors of the entries that failed
for good (``MutationsExceptionGroup`` of ``FailedMutationEntryError``, each cause the exception the client's own
call makes of the entry's status). Only the two steps that build and read messages are replaced: the batcher's
``_execute_mutate_rows`` (which made the client's operation, and a ``Status`` per entry for a completion callback
we do not use) and the operation's ``_run_attempt``. Touches ``MutationsBatcher._execute_mutate_rows`` and its
``_target``, ``_operation_timeout``, ``_attempt_timeout``, ``_retryable_errors``, ``_flow_control``;
``_MutateRowsOperation``'s constructor, ``mutations``, ``remaining_indices``, ``errors``, ``timeout_generator``,
``_operation_metric``, ``_handle_entry_error``; what ``MutationsBatcher.append`` reads and sets (:data:`STAGING`,
checked per batcher: the client's own append where one is missing); and, for a batcher given the writer's kept
thread pools (:class:`Pools`), what its ``close`` reads and calls (:data:`LENT`, checked the same way): pinned in
pyproject.toml, tested in tests/pipelines/test_bigtable_mutate.py.
"""

from __future__ import annotations

import atexit
import functools
import threading
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any, cast

from .calls import ChannelCall, routing_metadata
from .entries import prebuilt_entry_class, request_entry_prefix


def entry_record(entry: Any) -> bytes:
    """An entry as a request's field 2: the ``wire`` it keeps (:mod:`.entries`, once sized), else its message
    serialised (the client's own ``RowMutationEntry``)."""
    wire = getattr(entry, "wire", b"")
    if wire:
        return wire
    data = entry._to_pb()._pb.SerializeToString()  # noqa: SLF001 - proto-plus's raw message
    return request_entry_prefix(len(data)) + data


STAGING = ("_closed", "_staged_entries", "_staged_count", "_staged_bytes", "_flush_limit_count",
           "_flush_limit_bytes", "_schedule_flush")
"""What the client's ``MutationsBatcher.append`` reads and sets, which the batcher's own append for our entries
does too (the client's own append where an instance lacks one of them)."""
LENT = ("_sync_rpc_executor", "_sync_flush_executor", "_flush_timer", "_closed", "_staged_entries", "_schedule_flush",
        "_flush_internal", "_raise_exceptions", "_on_exit")
"""What a batcher's close reads and calls when its pools are lent (:class:`Pools`): the client's ``close`` less the
pools' shutdown (checked per batcher: the client's own pools and close where one is missing)."""
BATCH_STEP = ["self", "batch", "metric"]
OPERATION = ["self", "gapic_client", "target", "mutation_entries", "operation_timeout", "attempt_timeout", "metric",
             "retryable_exceptions"]
"""The parameters of the client's ``MutationsBatcher._execute_mutate_rows`` and ``_MutateRowsOperation`` this
module is written against."""


def client_layout_fits() -> bool:
    """Whether the installed client has the private layout this module replaces parts of (pyproject.toml pins the
    versions that do; another one writes through the client's own operation, slower, never wrongly)."""
    import inspect

    from google.cloud.bigtable.data import MutationsBatcher

    try:
        from google.cloud.bigtable.data._cross_sync import CrossSync

        operation = CrossSync._Sync_Impl._MutateRowsOperation
        step = MutationsBatcher._execute_mutate_rows
    except (ImportError, AttributeError):
        return False
    return (list(inspect.signature(step).parameters) == BATCH_STEP
            and list(inspect.signature(operation.__init__).parameters) == OPERATION
            and all(hasattr(operation, name) for name in ("_run_attempt", "_handle_entry_error", "start")))


class Pools:
    """The two thread pools a batcher sends with, kept for a writer's life and lent to one batcher at a time.

    The client's batcher makes its own per batcher (its flushes' and their requests': 4 and 8 threads at most,
    started on first use) and shuts them down at ``close()``; the writer opens a batcher per Scan page, so every page
    started its threads anew (~5 a page besides its timer: docs/PERFORMANCE.md "Own CPU round 12"). A batcher
    given ``pools`` takes a free pair (or keeps the pair it made, the client's sizes), and gives it back once its
    close has waited for every flush and request it submitted, so each batcher still has pools of its own while it sends (the
    client's concurrency, unchanged) and threads are started only while more batchers than ever before are open at
    once. :meth:`shutdown` (the writer's teardown, after its batchers are closed) shuts down the free pairs and, from
    then on, each pair given back."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._free: list[tuple[ThreadPoolExecutor, ThreadPoolExecutor]] = []
        self._shut = False

    def lend(self, made: tuple[Any, Any]) -> tuple[Any, Any]:
        """A free pair, else ``made`` (the pair the client's batcher has just made: no thread started yet)."""
        with self._lock:
            return self._free.pop() if self._free else made

    def give_back(self, pair: tuple[Any, Any]) -> None:
        with self._lock:
            if not self._shut:
                self._free.append(pair)
                return
        for pool in pair:
            pool.shutdown(wait=True)

    def shutdown(self) -> None:
        """Shut down every free pair (their threads joined); a pair given back later is shut down then."""
        with self._lock:
            self._shut, free, self._free = True, self._free, []
        for pair in free:
            for pool in pair:
                pool.shutdown(wait=True)


class _Submitting:
    """A lent pool as a batcher submits to it (the client's ``CrossSync`` calls only ``submit``): each future kept
    in the batcher's list, for its close to wait for."""

    __slots__ = ("_pool", "_futures")

    def __init__(self, pool: ThreadPoolExecutor, futures: list[Any]) -> None:
        self._pool, self._futures = pool, futures

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        future = self._pool.submit(fn, *args, **kwargs)
        self._futures.append(future)
        return future


@functools.cache
def batcher_class() -> type:
    """The data client's ``MutationsBatcher`` sending its requests through :func:`operation_class`'s operation (the
    client's own batcher where :func:`client_layout_fits` says no). Built on first use, so importing this module
    does not import the Bigtable client."""
    from google.cloud.bigtable.data import MutationsBatcher
    from google.cloud.bigtable.data.exceptions import MutationsExceptionGroup
    from google.cloud.bigtable_v2.types import bigtable as types_pb

    if not client_layout_fits():
        return MutationsBatcher
    operation = operation_class()
    answer = types_pb.MutateRowsResponse.pb().FromString

    ours = prebuilt_entry_class()
    client_append = MutationsBatcher.append

    class Batcher(MutationsBatcher):
        borrows_pools = True

        def __init__(self, table: Any, pools: Pools | None = None, **limits: Any) -> None:
            super().__init__(table, **limits)
            self._mutate_rows = ChannelCall(table.client, "MutateRows", None, answer)
            if not all(hasattr(self, name) for name in STAGING):  # another layout: the client's own append
                self.append = functools.partial(client_append, self)  # type: ignore[method-assign]
            self._pools: Pools | None = None
            if pools is not None and all(hasattr(self, name) for name in LENT):  # else the client's own close
                self._pools = pools
                self._lent = pools.lend((self._sync_rpc_executor, self._sync_flush_executor))
                self._submitted: list[Any] = []
                rpc, flush = (cast(Any, _Submitting(pool, self._submitted)) for pool in self._lent)
                self._sync_rpc_executor, self._sync_flush_executor = rpc, flush

        def close(self) -> None:
            """The client's close, with lent pools given back instead of shut down, once every flush and request
            this batcher submitted to them has ended (the client's close waited for them by shutting the pools
            down)."""
            if not hasattr(self, "_lent"):
                super().close()
                return
            pools, self._pools = self._pools, None  # None: closed before (given back then)
            try:
                self._closed.set()
                self._flush_timer.cancel()
                entries = self._staged_entries
                try:
                    self._schedule_flush()
                except RuntimeError:  # as the client's: no pool to flush on, flush here
                    self._flush_internal(entries)
                wait([self._flush_timer])  # first: it may still submit a flush until it has seen the batcher closed
                waited, submitted = 0, self._submitted  # only ever appended to (a flush submits its requests)
                while waited < len(submitted):
                    upto = len(submitted)
                    wait(submitted[waited:upto])
                    waited = upto
            finally:
                if pools is not None:
                    pools.give_back(self._lent)
            atexit.unregister(self._on_exit)
            self._raise_exceptions()

        def append(self, mutation_entry: Any) -> None:
            """The client's append (stage the entry, flush at its count or byte limit), for an entry of ours
            without its per-entry work that cannot apply: the ABC check that it is no ``Mutation`` (it is a
            ``RowMutationEntry``), ``len`` and ``size()`` through calls (its count is its tuples', its size kept
            as it was sized). Another entry goes through the client's own."""
            if not isinstance(mutation_entry, ours):
                client_append(self, mutation_entry)
                return
            mutation_entry = cast(Any, mutation_entry)
            if self._closed.is_set():
                raise RuntimeError("Cannot append to closed MutationsBatcher")
            size = mutation_entry._size
            if size < 0:
                size = mutation_entry.size()
            self._staged_entries.append(mutation_entry)
            self._staged_count += len(mutation_entry.tuples)
            self._staged_bytes += size
            if self._staged_count >= self._flush_limit_count or self._staged_bytes >= self._flush_limit_bytes:
                self._schedule_flush()

        def _execute_mutate_rows(self, batch: list[Any], metric: Any) -> list[Any]:
            """The client's own, less the per-entry statuses it builds for a completion callback (none is set)."""
            try:
                operation(self._target, batch, self._mutate_rows, operation_timeout=self._operation_timeout,
                          attempt_timeout=self._attempt_timeout, metric=metric,
                          retryable_exceptions=self._retryable_errors).start()
            except MutationsExceptionGroup as group:
                for error in group.exceptions:
                    error.index = None  # as the client's: an index into this batch means nothing to the caller
                return list(group.exceptions)
            finally:
                self._flow_control.remove_from_flow(batch)
            return []

    return Batcher


@functools.cache
def operation_class() -> type:
    """The client's ``_MutateRowsOperation`` with its request sent as bytes and its answers read raw."""
    from google.api_core.exceptions import from_grpc_status
    from google.cloud.bigtable.data._cross_sync import CrossSync
    from google.cloud.bigtable.data.exceptions import _MutateRowsIncomplete
    from google.cloud.bigtable.data.mutations import _MUTATE_ROWS_REQUEST_MUTATION_LIMIT, _EntryWithProto
    from google.cloud.bigtable_v2.types import bigtable as types_pb

    request_fields = types_pb.MutateRowsRequest.pb()
    ours = prebuilt_entry_class()

    class MutateRows(CrossSync._Sync_Impl._MutateRowsOperation):  # type: ignore[name-defined]
        def __init__(self, target: Any, entries: list[Any], call: Any, **rules: Any) -> None:
            total = sum(len(entry.mutations) for entry in entries)
            if total > _MUTATE_ROWS_REQUEST_MUTATION_LIMIT:  # the client's own check, as it words it
                raise ValueError(f"mutate_rows requests can contain at most {_MUTATE_ROWS_REQUEST_MUTATION_LIMIT} "
                                 f"mutations across all entries. Found {total}.")
            # The client's retry, deadlines and error lists, for no entries: its constructor would build each
            # entry's proto-plus message, ours keep their bytes.
            super().__init__(target.client._gapic_client, target, [], **rules)  # noqa: SLF001
            # What the client's operation holds per entry (its ``entry`` and request record, ``proto``): our own
            # entries are that themselves; another's gets a holder with its bytes.
            self.mutations: list[Any] = [entry if isinstance(entry, ours) else
                                         _EntryWithProto(entry, entry_record(entry))  # type: ignore[arg-type]
                                         for entry in entries]
            self.remaining_indices = list(range(len(self.mutations)))
            self._call = call
            self._head = request_fields(app_profile_id=target.app_profile_id or "",
                                        **target._request_path).SerializeToString()  # noqa: SLF001
            self._routing = routing_metadata(target)

        def _run_attempt(self) -> None:
            """The client's attempt (the same entries, errors and retries), its request joined from the entries'
            bytes and its answers read raw; an entry that succeeded makes no exception object."""
            self._operation_metric.start_attempt()
            remaining, mutations = self.remaining_indices, self.mutations
            self.remaining_indices = []
            if not remaining:
                return
            request = b"".join([self._head, *[mutations[index].proto for index in remaining]])
            active = dict(enumerate(remaining))  # the request's index -> the operation's
            errors = self.errors
            try:
                for answer in self._call(request, timeout=next(self.timeout_generator), metadata=self._routing):
                    for result in answer.entries:
                        index = active.pop(result.index)
                        status = result.status
                        if status.code:
                            self._handle_entry_error(index, from_grpc_status(status.code, status.message,
                                                                             details=status.details))
                        elif index in errors:
                            del errors[index]
            except Exception as exc:
                for index in active.values():
                    self._handle_entry_error(index, exc)
                raise
            for index in active.values():
                self._handle_entry_error(index, _MutateRowsIncomplete("no response entry received for mutation"))
            if self.remaining_indices:
                raise _MutateRowsIncomplete

    return MutateRows
