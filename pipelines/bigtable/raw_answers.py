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
"""

from __future__ import annotations

from typing import Any


class RawAnswersTarget:
    """``table``, except that its client's ``_gapic_client.mutate_rows`` streams raw ``MutateRowsResponse``s."""

    def __init__(self, table: Any) -> None:
        self._table = table
        self.client = _Client(table.client)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._table, name)

    def __repr__(self) -> str:
        return repr(self._table)


class _Client:
    def __init__(self, client: Any) -> None:
        self._client = client
        self._gapic_client = _Gapic(client._gapic_client)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


class _Gapic:
    def __init__(self, gapic: Any) -> None:
        from google.cloud.bigtable_v2.types import bigtable as types_pb

        self._gapic = gapic
        self._raw = types_pb.MutateRowsResponse.pb

    def mutate_rows(self, *args: Any, **kwargs: Any) -> Any:
        # The call is made here, so that it fails where the client's would; each answer is unwrapped as it comes.
        return map(self._raw, self._gapic.mutate_rows(*args, **kwargs))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._gapic, name)
