"""The table as the data client's ``MutationsBatcher`` sees it, its MutateRows answers read as raw protobuf.

The client's MutateRows operation reads each entry's answer (``index``, ``status``) through proto-plus
wrappers: most of the client's CPU per written row, more than building the row's message
(docs/PERFORMANCE.md). Everything else stays the client's: batching and flow control, the
request, retries of the entries that fail with a retryable error and say ``is_idempotent()``,
timeouts, and the errors of the entries that failed for good. Only the stream of answers is
handed over as the raw messages those wrappers wrap, whose fields read the same (``status`` is
``google.rpc.Status`` either way). Touches the batcher's target (its ``client._gapic_client``,
which it gives the operation) and the operation's use of ``mutate_rows``: pinned in pyproject.toml,
tested in tests/pipelines/test_bigtable_raw_answers.py.

:func:`free_finished_operations` mends one more thing of the client's MutateRows operation: it holds itself in a
cycle (its retry lambda refers to it), so every batch's entries, their messages and their cells outlived the request
until a full collection of the older generation found them: most of what that collection walked, and the batch's
memory held meanwhile (docs/PERFORMANCE.md).
"""

from __future__ import annotations

import functools
from typing import Any


class _Delegate:
    """Stands for ``inner``: every attribute not set on it is ``inner``'s."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __repr__(self) -> str:
        return repr(self._inner)


class RawAnswersTarget(_Delegate):
    """``table``, except that its client's ``_gapic_client.mutate_rows`` streams raw ``MutateRowsResponse``s."""

    def __init__(self, table: Any) -> None:
        super().__init__(table)
        client = self.client = _Delegate(table.client)
        client._gapic_client = _Gapic(table.client._gapic_client)  # type: ignore[attr-defined]  # set on the stand-in


class _Gapic(_Delegate):
    def __init__(self, gapic: Any) -> None:
        from google.cloud.bigtable_v2.types import bigtable as types_pb

        super().__init__(gapic)
        self._raw = types_pb.MutateRowsResponse.pb

    def mutate_rows(self, *args: Any, **kwargs: Any) -> Any:
        # The call is made here, so that it fails where the client's would; each answer is unwrapped as it comes.
        return map(self._raw, self._inner.mutate_rows(*args, **kwargs))


def free_finished_operations() -> None:
    """Make the client's MutateRows operation let go of its retry closure (the one reference back to itself) once
    it has run, so that the operation and the batch it holds are freed by reference counting when the batcher
    drops it, not by the cyclic collector later. Process-wide and idempotent; an operation's outcome (its errors
    raise out of ``start``) is unchanged. Touches ``_MutateRowsOperation.start`` and ``_operation``: pinned in
    pyproject.toml, tested in tests/pipelines/test_bigtable_raw_answers.py."""
    try:  # a client whose private layout differs loses this saving, never a migration (the test pins it in range)
        from google.cloud.bigtable.data._cross_sync import CrossSync

        operation = CrossSync._Sync_Impl._MutateRowsOperation
        start = operation.start
    except (ImportError, AttributeError):
        return
    if getattr(start, "_ddb2bt_frees", False):
        return

    @functools.wraps(start)
    def start_then_free(self: Any) -> Any:
        try:
            return start(self)
        finally:
            self._operation = None

    start_then_free._ddb2bt_frees = True  # type: ignore[attr-defined]
    operation.start = start_then_free
