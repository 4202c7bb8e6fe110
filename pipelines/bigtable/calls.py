"""A Bigtable data API method called on the data client's own channel, with our own (de)serialisers.

The client's generated layer builds every request and answer as proto-plus objects; where that is most of
the CPU of a call (ReadRows answers read back chunk by chunk, MutateRows requests of 10,000 entries:
docs/PERFORMANCE.md) we send the same bytes ourselves. What the generated layer adds is kept: the call goes
on the client's channel (its credentials, its metrics interceptor, its channel refreshes), with its client
info header and the same error mapping (``wrap_method``: a gRPC error becomes the ``google.api_core``
exception the client's own call raises), and the routing header the generated method attaches.

A call made ``single_threaded`` reads its stream on the thread that iterates it (:func:`unary_stream`).

Touches the data client's ``_gapic_client._transport`` (``grpc_channel``, ``_wrapped_methods``) and its
``client_info``, and grpc's ``_channel.Channel._single_threaded_unary_stream``: pinned in pyproject.toml, tested in
tests/pipelines/test_bigtable_mutate.py, test_validate_lookup.py and test_rollback_reads.py.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

SERVICE = "/google.bigtable.v2.Bigtable/"


class ChannelCall:
    """The data client's server-streaming ``method`` (e.g. ``"ReadRows"``), called like the generated layer's
    wrapped method (``request``, ``timeout=``, ``metadata=``), its answers the stream of ``response_deserializer``'s
    results. ``request_serializer`` None sends ``bytes`` as they are.

    The client replaces its channel now and then (every 35 to 45 minutes against Bigtable) and rebuilds its own
    stubs then; a stub made on the old channel would fail once that is closed, so ours is made again whenever the
    client's are."""

    def __init__(self, client: Any, method: str, request_serializer: Callable[[Any], bytes] | None,
                 response_deserializer: Callable[[bytes], Any] | None, *, single_threaded: bool = False) -> None:
        self._client = client
        self._path = SERVICE + method
        self._serializers = request_serializer, response_deserializer
        self._single_threaded = single_threaded
        self._made_for: Any = None
        self._call: Any = None

    def __call__(self, request: Any, **kwargs: Any) -> Any:
        transport = self._client._gapic_client._transport  # noqa: SLF001 - its gRPC transport
        if transport._wrapped_methods is not self._made_for:  # noqa: SLF001 - rebuilt with the client's stubs
            from google.api_core.gapic_v1.method import wrap_method

            serializer, deserializer = self._serializers
            stub = unary_stream(transport.grpc_channel, self._path, serializer, deserializer,
                                single_threaded=self._single_threaded)
            self._call = wrap_method(stub, client_info=self._client.client_info)
            self._made_for = transport._wrapped_methods  # noqa: SLF001
        return self._call(request, **kwargs)


_FLIPPING = threading.Lock()


def unary_stream(channel: Any, path: str, serializer: Callable[[Any], bytes] | None,
                 deserializer: Callable[[bytes], Any] | None, *, single_threaded: bool = False) -> Any:
    """``channel``'s unary-stream call of ``path``; ``single_threaded``: one whose responses are received on the
    thread that reads the stream.

    grpc's default unary-stream call has a thread of its own receive each response and hand it to the reader
    through a condition variable: a thread switch per response, and the emulator answers ReadRows with a response
    per row (docs/PERFORMANCE.md). grpc's single-threaded variant (what its experimental channel option
    ``SingleThreadedUnaryStream`` selects for a whole channel) receives on the reader's thread. The data client
    makes its channels without that option, so the grpc channel inside its wrappers (the swappable channel and
    the metrics interceptor, which records nothing for a call outside the client's own operations) makes this one
    call with it. Where no grpc channel is found inside, the default call.
    """
    import grpc._channel

    inner = channel
    while single_threaded and not isinstance(inner, grpc._channel.Channel):
        inner = getattr(inner, "__dict__", {}).get("_channel")  # a wrapper's own channel (not its __getattr__)
        if inner is None:
            single_threaded = False
    if not single_threaded:
        return channel.unary_stream(path, request_serializer=serializer, response_deserializer=deserializer)
    with _FLIPPING:  # the flag is read while the call is made, and only then
        before = inner._single_threaded_unary_stream  # noqa: SLF001
        inner._single_threaded_unary_stream = True  # noqa: SLF001
        try:
            return inner.unary_stream(path, request_serializer=serializer, response_deserializer=deserializer)
        finally:
            inner._single_threaded_unary_stream = before  # noqa: SLF001


def routing_metadata(table: Any) -> tuple[tuple[str, str], ...]:
    """The routing header the generated layer attaches to a call on ``table`` (its name and app profile)."""
    from google.api_core.gapic_v1.routing_header import to_grpc_metadata

    return (to_grpc_metadata({"table_name": table.table_name, "app_profile_id": table.app_profile_id or ""}),)
