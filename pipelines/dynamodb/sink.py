"""The rollback's sink: items into a DynamoDB table with BatchWriteItem, within a write budget, and read back.

:class:`DynamoDBSink` is DynamoDB as a :class:`~ddb2bt.pipelines.sink.Sink`: it checks the target table
(DescribeTable: there, and keyed how), and gives a writer without Beam (:meth:`DynamoDBSink.writer`), which
the rollback's worker processes use as they are and a Beam graph wraps in one thin step
(:mod:`ddb2bt.pipelines.run.writes`). Nothing here imports Beam.

`DynamoWriter.write` puts a group of items and returns those DynamoDB refused (a ValidationException
names no item: the request is then split into single PutItems to find which). Unprocessed items are
sent again with exponential backoff and jitter, as AWS asks; throttling and 5xx answers are retried the
same way until `retry_seconds` have passed without progress, then `WriteStalled` ends the run, which
`--resume` continues. The budget (`WriteBudget`) is a token bucket of write capacity units per
second shared by the writer threads: each put costs its item's units (1 per started KB).
`DynamoWriter.get` reads items back by key with BatchGetItem (strongly consistent, 100 keys a call).
`send_requests_raw` lets a client's BatchWriteItem requests skip botocore's per-value validation and
serialisation: the body is one JSON encoding (orjson) of the items as they are (the wire format), and every
call after the first is the request botocore sent first, with its own body, signed anew here (SigV4, botocore's
credentials) and sent on the writer's own keep-alive connections where botocore's HTTP session would connect
directly, else by that session (`_RawBatchWrite`, `_Sent`, `_Connections`); an answer other than a 200 or a DynamoDB
error the writer handles sends that request botocore's whole way (and every later one, but after a failed connection);
throttling pauses the direct way for ``DIRECT_PAUSE_S``.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import hmac
import json
import os
import random
import threading
import time
import uuid
from collections.abc import Sequence
from typing import Any

import orjson
from botocore.exceptions import BotoCoreError, ConnectionError as BotoConnectionError, HTTPClientError

from ...mappers.attrvalue import with_bytes
from ...mappers.errors import ServiceError, UsageError
from ...mappers.rollback import requests, write_units
from ..run.service_errors import redact
from ..sink import Sink
from .client import ClientSettings, keep_field_raw, make_client

RETRYABLE = {"ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded",
             "InternalServerError", "ServiceUnavailable", "LimitExceededException"}
GET_LIMIT = 100
_JITTER = random.Random()  # the retries' own: the global generator is the application's (and hypothesis's)
DIRECT_PAUSE_S = 60.0
"""After a direct BatchWriteItem is throttled (or answered 5xx), how long every request goes botocore's whole way (its
retry mode, the adaptive mode's rate limiter) before the direct way is tried again (:class:`_RawBatchWrite`)."""


_RAW_BODY = "ddb2bt_raw_body"
_OFFER = "ddb2bt_raw_request"
_SENDER = "ddb2bt_batch_write"
_PLACEHOLDER: list[dict[str, Any]] = [{"DeleteRequest": {"Key": {}}}]


def send_requests_raw(client: Any) -> None:
    """Let ``client.batch_write_item`` send its ``RequestItems`` as one JSON encoding of the items (:func:`request_body`).

    Profiled: botocore validates and serialises every attribute value against the service model, in
    Python, about as much of a writer thread's time as the request's round trip. The items come from
    the decoder in wire format (B as bytes, which become base64 text, as botocore writes them), so the
    body is the same JSON botocore would send. botocore still builds the request around it (target
    header, signature, retries of the same body); it is only handed a one-request placeholder to
    serialise (`provide-client-params`), whose body is then replaced (`before-call`). The answer is
    parsed by botocore as usual.
    """
    client.meta.events.register("provide-client-params.dynamodb.BatchWriteItem", _stash_body,
                                unique_id="ddb2bt-raw-batch-write-params")
    client.meta.events.register("before-call.dynamodb.BatchWriteItem", _swap_body,
                                unique_id="ddb2bt-raw-batch-write-body")
    setattr(client, _SENDER, _RawBatchWrite(client))


def batch_writer(client: Any) -> Any:
    """What sends a ``BatchWriteItem(RequestItems=...)`` for ``client``: its :class:`_RawBatchWrite` when
    :func:`send_requests_raw` prepared it, else ``client.batch_write_item``."""
    return getattr(client, _SENDER, None) or client.batch_write_item


class _RawBatchWrite:
    """``BatchWriteItem`` calls after the first sent through the client's endpoint with the request the first prepared.

    Profiled, after the body: botocore's client layer spends about a quarter of a writer's CPU per call before
    the request reaches its endpoint (the call's events, the endpoint rules resolved again, the placeholder
    validated and serialised, the user agent rebuilt), and it is the same for every call of one client: the URL,
    headers and signing context do not depend on the items, which travel in the body. So the first call goes the
    whole way, and what it prepared is kept when it is really sent (``request-created``: a stubbed call never
    is); every later call hands that request, with its own body and a fresh context, to the endpoint
    (``client._endpoint.make_request``, private: pinned in pyproject.toml and tested), which signs it anew, sends it,
    retries it as botocore's retry mode says, and parses the answer. An error answer raises the client's own
    ``ClientError`` class, as ``_make_api_call`` does. Until an answer says otherwise, later calls skip the endpoint
    too (:meth:`_direct`): the request botocore first sent (``before-send``), signed anew here, on connections of
    their own (:class:`_Connections`) or the endpoint's HTTP session."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.prepared: tuple[dict, dict, Any, frozenset[str]] | None = None
        self.direct = True
        """Later calls are sent by :meth:`_direct` until an answer sends them botocore's whole way."""
        self.direct_again_at: float | None = None
        """When a throttled direct way is tried again (``time.monotonic``); None: not paused, or ended for good."""
        self.sent: _Sent | None = None
        """The first request botocore really sent (signed, its final headers) and the network answered, which
        :meth:`_direct` sends again."""
        self._candidate: _Sent | None = None
        """A request botocore is about to send (``before-send``), kept once the network answers it (:meth:`_answered`)."""
        self.connections: _Connections | None = None
        """Where :meth:`_direct` sends (None: the endpoint's HTTP session)."""
        client.meta.events.register("before-call.dynamodb.BatchWriteItem", self._offer,
                                    unique_id="ddb2bt-raw-batch-write-offer")
        client.meta.events.register("request-created.dynamodb.BatchWriteItem", self._keep,
                                    unique_id="ddb2bt-raw-batch-write-keep")
        client.meta.events.register_last("before-send.dynamodb.BatchWriteItem", self._seen,
                                         unique_id="ddb2bt-raw-batch-write-seen")
        client.meta.events.register("needs-retry.dynamodb.BatchWriteItem", self._answered,
                                    unique_id="ddb2bt-raw-batch-write-answered")

    def __call__(self, **params: Any) -> dict:
        prepared = self.prepared
        if prepared is None or set(params) != {"RequestItems"} or len(params["RequestItems"]) != 1:
            return self.client.batch_write_item(**params)
        request, context, model, features = prepared
        body = request_body(params)
        again = self.direct_again_at
        if again is not None and time.monotonic() >= again:
            self.direct, self.direct_again_at = True, None
        if self.direct:
            answer = self._direct(body)
            if answer is not None:
                return answer
        request = {**request, "headers": dict(request["headers"]), "body": body, "context": _copy_context(context)}
        with _features(features):  # the user agent names the features the first call's preparation used
            http, parsed = self.client._endpoint.make_request(model, request)  # noqa: SLF001 - pinned, tested
        if http.status_code >= 300:
            error = self.client.exceptions.from_code(parsed.get("Error", {}).get("Code"))
            raise error(parsed, "BatchWriteItem")
        return parsed

    def _direct(self, body: bytes) -> dict | None:
        """One attempt of a BatchWriteItem ``body``, signed here and sent on :attr:`connections` (else by the
        endpoint's HTTP session), without botocore's request and retry machinery: the answer (a 200 whose CRC32 is
        DynamoDB's), or the client's ``ClientError`` raised for a DynamoDB error answer; None where botocore's whole
        way must send it (a damaged or unreadable answer, and then every later request too; a failed connection, for
        this request only, on our own connections or through the HTTP session).

        Profiled: botocore's endpoint spends about three quarters of a writer's CPU around the request it sends (the
        request built and prepared anew, the events of each step, SigV4 through its general header maps, the retry
        handler, the response parser walking the answer's shapes, urllib3's pool), and a BatchWriteItem's answer is
        ``{}`` or its unprocessed items. What changes between two calls is the body, the time, the invocation id and
        the credentials (refreshed by botocore's provider): the rest is the first call's request as botocore sent it
        (:class:`_Sent`). It goes on connections of its own where the endpoint's HTTP session would connect directly
        (:class:`_Connections`), else through that session (TLS, proxies and timeouts as configured). Any error
        answer but a ValidationException (which names an item of this request) ends the direct way (throttling and
        5xx for ``DIRECT_PAUSE_S``), so that what follows goes through botocore's retry mode (and the adaptive mode's rate limiter) as before: throttling and
        5xx answers are raised, as botocore raises them once its attempts are spent, for the writer's own backoff;
        any other error answer sends the request botocore's whole way, whose answer counts."""
        sent = self.sent
        if sent is None:
            return None
        credentials = self.client._request_signer._credentials  # noqa: SLF001 - pinned, tested (refreshable)
        frozen = credentials.get_frozen_credentials() if credentials is not None else None
        if frozen is None or not frozen.access_key or not frozen.secret_key:
            self.direct = False
            return None
        connections = self.connections
        try:
            if connections is not None:
                status, headers, content = connections.send(sent.signed_headers(body, frozen), body)
            else:
                http = self.client._endpoint.http_session.send(sent.request(body, frozen))  # noqa: SLF001 - pinned, tested
                status, headers, content = http.status_code, http.headers, http.content
        except (_Unsent, BotoConnectionError, HTTPClientError):  # a connection cut, refused or timed out, on
            return None  # either way: this request botocore's whole way, with its retries; the next one directly
        except BotoCoreError:
            self.direct = False
            return None
        try:
            answer = orjson.loads(content) if content else {}
        except orjson.JSONDecodeError:
            self.direct = False
            return None
        checksum = headers.get("x-amz-crc32")
        if not isinstance(answer, dict) or (checksum is not None and
                                            str(binascii.crc32(content) & 0xFFFFFFFF) != checksum.strip()):
            self.direct = False
            return None
        metadata = {"RequestId": headers.get("x-amzn-requestid", ""), "HTTPStatusCode": status,
                    "HTTPHeaders": {name.lower(): value for name, value in headers.items()}, "RetryAttempts": 0}
        if status == 200:
            answer["ResponseMetadata"] = metadata
            return answer
        code = str(answer.get("__type", "")).rpartition("#")[2]
        if code != "ValidationException":
            self.direct = False
            if code not in RETRYABLE:  # botocore's own answer to this request is the one that counts
                return None
            self.direct_again_at = time.monotonic() + DIRECT_PAUSE_S  # while the target is busy, botocore's limiter
        error = {"Error": {"Code": code, "Message": answer.get("message", answer.get("Message", ""))},
                 "ResponseMetadata": metadata}
        raise self.client.exceptions.from_code(code)(error, "BatchWriteItem")

    def _seen(self, request: Any, **_: Any) -> None:
        if self.sent is None and self.direct:
            self._candidate = _Sent.of(request)

    def _answered(self, response: Any = None, **_: Any) -> None:
        """After a BatchWriteItem's attempt: its request is kept for :meth:`_direct` only when the network answered
        it (urllib3's response under botocore's). A ``before-send`` hook that answered instead (moto's in-process
        mock, a stub) keeps the direct way off, so that nothing it would have answered goes to the network; an
        attempt that got no answer (a connection error) leaves the choice to the next one."""
        candidate, self._candidate = self._candidate, None
        if self.sent is not None or not self.direct or not response:
            return None
        from urllib3.response import HTTPResponse

        if candidate is None or not isinstance(getattr(response[0], "raw", None), HTTPResponse):
            self.direct = False
            return None
        try:
            self.connections = _Connections.of(self.client, candidate.url)
        except Exception:  # noqa: BLE001 - e.g. a CA bundle the TLS context cannot load: botocore's way, which says why
            self.direct = False
            return None
        self.sent = candidate
        return None

    def _offer(self, params: dict, model: Any, context: dict, **_: Any) -> None:
        if self.prepared is None and "body" in params:
            context[_OFFER] = ({name: value for name, value in params.items() if name not in ("body", "context")},
                               _copy_context(context), model, _current_features())

    def _keep(self, request: Any, **_: Any) -> None:
        offered = getattr(request, "context", {}).pop(_OFFER, None)
        if offered is not None and self.prepared is None:
            offered[0]["headers"] = dict(offered[0]["headers"])
            self.prepared = offered


_VOLATILE = frozenset({"authorization", "x-amz-date", "x-amz-security-token", "amz-sdk-invocation-id", "content-length"})
"""The headers of a sent request that :class:`_Sent` makes anew for each body."""


class _Sent:
    """The first BatchWriteItem botocore sent, to send again with another body: its URL and headers, signed anew
    with SigV4 over the same signed headers and credential scope (read off its Authorization header), a fresh
    invocation id. Only a request signed with plain SigV4 (``AWS4-HMAC-SHA256``) to a path without a query is kept."""

    def __init__(self, url: str, headers: dict[str, str], signed: tuple[str, ...], scope: tuple[str, str],
                 host: str) -> None:
        self.url, self.headers, self.signed, self.host = url, headers, signed, host
        self.region, self.service = scope
        self._keys: tuple[tuple[str, str], bytes] | None = None

    @classmethod
    def of(cls, request: Any) -> _Sent | None:
        from urllib.parse import urlsplit

        from botocore.auth import _host_from_url

        headers = {name: value.decode("utf-8") if isinstance(value, bytes) else value
                   for name, value in request.headers.items()}
        authorization = next((value for name, value in headers.items() if name.lower() == "authorization"), "")
        parts = urlsplit(request.url)
        algorithm, _, fields = authorization.partition(" ")
        found = dict(field.strip().split("=", 1) for field in fields.split(",") if "=" in field)
        scope = found.get("Credential", "").split("/")
        if algorithm != "AWS4-HMAC-SHA256" or len(scope) != 5 or scope[4] != "aws4_request" or parts.query \
                or parts.path not in ("", "/") or "Signature" not in found or request.method != "POST":
            return None
        signed = tuple(found.get("SignedHeaders", "").split(";"))
        kept = {name: value for name, value in headers.items() if name.lower() not in _VOLATILE}
        lowered = {name.lower() for name in kept}
        if not all(name in lowered or name in _VOLATILE or name == "host" for name in signed) \
                or ("host" in signed and "host" in lowered):
            return None
        return cls(request.url, kept, signed, (scope[2], scope[3]), _host_from_url(request.url))

    def _signing_key(self, secret: str, day: str) -> bytes:
        keys = self._keys
        if keys is not None and keys[0] == (secret, day):
            return keys[1]
        key = ("AWS4" + secret).encode("utf-8")
        for part in (day, self.region, self.service, "aws4_request"):
            key = hmac.new(key, part.encode("utf-8"), hashlib.sha256).digest()
        self._keys = ((secret, day), key)
        return key

    def request(self, body: bytes, credentials: Any) -> Any:
        """An ``AWSPreparedRequest`` of ``body``, signed now with ``credentials`` (botocore's frozen credentials)."""
        from botocore.awsrequest import AWSPreparedRequest

        return AWSPreparedRequest("POST", self.url, self.signed_headers(body, credentials), body, False)

    def signed_headers(self, body: bytes, credentials: Any) -> dict[str, str]:
        """The headers of a request of ``body``, signed now with ``credentials`` (botocore's frozen credentials)."""
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        headers = dict(self.headers)
        headers["X-Amz-Date"] = stamp
        if credentials.token:
            headers["X-Amz-Security-Token"] = credentials.token
        headers["amz-sdk-invocation-id"] = str(uuid.uuid4())
        values = {name.lower(): " ".join(value.split()) for name, value in headers.items()}
        values["host"] = self.host
        if not all(name in values for name in self.signed) or ("x-amz-security-token" in values) != \
                ("x-amz-security-token" in self.signed):
            raise BotoCoreError()  # what was signed then cannot be signed now: botocore's whole way
        # the path is "/": of() keeps only requests to the root
        canonical = "\n".join(("POST", "/", "", *(f"{name}:{values[name]}" for name in self.signed), "",
                               ";".join(self.signed), hashlib.sha256(body).hexdigest()))
        day = stamp[:8]
        scope = f"{day}/{self.region}/{self.service}/aws4_request"
        to_sign = f"AWS4-HMAC-SHA256\n{stamp}\n{scope}\n{hashlib.sha256(canonical.encode('utf-8')).hexdigest()}"
        signature = hmac.new(self._signing_key(credentials.secret_key, day), to_sign.encode("utf-8"),
                             hashlib.sha256).hexdigest()
        headers["Authorization"] = (f"AWS4-HMAC-SHA256 Credential={credentials.access_key}/{scope}, "
                                    f"SignedHeaders={';'.join(self.signed)}, Signature={signature}")
        headers["Content-Length"] = str(len(body))
        return headers


class _Unsent(Exception):
    """The request may not have reached DynamoDB: the connection was refused, cut or timed out."""


class _Connections:
    """Keep-alive connections to one endpoint (``http.client``, one per thread), where the client's HTTP session
    would connect directly: no proxy for the URL, no client certificate, TLS verified (against the CA bundle the
    session verifies with). Profiled: urllib3's pool around each request cost about half of what the direct way
    spends per request; ``http.client`` under it is the same HTTP/1.1 with the session's socket options and
    timeouts. A connection that fails is closed, and the request goes botocore's whole way (:class:`_Unsent`)."""

    def __init__(self, url: str, context: Any, connect_timeout: float | None, read_timeout: float | None,
                 socket_options: list) -> None:
        from urllib.parse import urlsplit

        parts = urlsplit(url)
        # the port given, as http.client would otherwise read an IPv6 literal's last group as one
        self.host, self.port, self.context = parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80), context
        self.connect_timeout, self.read_timeout, self.socket_options = connect_timeout, read_timeout, socket_options
        self._local = threading.local()

    @classmethod
    def of(cls, client: Any, url: str) -> _Connections | None:
        """Connections for ``client``'s requests to ``url``, or None where its HTTP session does more than connect."""
        import ssl
        from urllib.parse import urlsplit

        from botocore.httpsession import URLLib3Session, get_cert_path

        session = client._endpoint.http_session  # noqa: SLF001 - pinned, tested
        scheme = urlsplit(url).scheme
        if type(session) is not URLLib3Session or scheme not in ("http", "https") \
                or session._cert_file is not None or session._proxy_config.proxy_url_for(url):  # noqa: SLF001
            return None
        context = None
        if scheme == "https":
            verify = session._verify  # noqa: SLF001
            if verify is False:
                return None  # never less checked than the session; unverified TLS stays the session's
            where = get_cert_path(verify)
            if not where:
                return None
            context = ssl.create_default_context(**({"capath": where} if os.path.isdir(where) else {"cafile": where}))
        config = client.meta.config
        return cls(url, context, config.connect_timeout, config.read_timeout, list(session._socket_options or []))

    def send(self, headers: dict[str, str], body: bytes) -> tuple[int, Any, bytes]:
        """(status, headers, body) of a POST to ``/``; :class:`_Unsent` when the connection fails."""
        import http.client

        connection = getattr(self._local, "connection", None)
        try:
            if connection is None:
                connection = self._connect()
            connection.request("POST", "/", body, headers)
            answer = connection.getresponse()
            content = answer.read()
        except (OSError, http.client.HTTPException) as err:
            self._drop(connection)
            raise _Unsent(str(err)) from err
        if answer.will_close:
            self._drop(connection)
        return answer.status, answer.headers, content

    def _connect(self) -> Any:
        import http.client

        if self.context is not None:
            connection: Any = http.client.HTTPSConnection(self.host, self.port, timeout=self.connect_timeout,
                                                          context=self.context)
        else:
            connection = http.client.HTTPConnection(self.host, self.port, timeout=self.connect_timeout)
        self._local.connection = connection
        connection.connect()
        for option in self.socket_options:
            connection.sock.setsockopt(*option)
        connection.sock.settimeout(self.read_timeout)
        return connection

    def _drop(self, connection: Any) -> None:
        self._local.connection = None
        if connection is not None:
            connection.close()


def _copy_context(context: dict) -> dict:
    """A botocore call context for one more call: its dicts copied (botocore's handlers write into them per call)."""
    return {name: dict(value) if isinstance(value, dict) else value for name, value in context.items()}


def request_body(params: dict) -> bytes:
    """The JSON body of a DynamoDB request whose AttributeValues are in wire format (bytes become base64).

    orjson writes it (a tenth of ``json.dumps``'s time, the largest part of building a request): the same JSON
    value as botocore's ``json.dumps`` body, in compact form and with non-ASCII characters as UTF-8 rather than
    ``\\u`` escapes, which JSON reads as the same text (tested through botocore's own serialiser). What orjson
    refuses (a lone surrogate, which is not UTF-8; an integer beyond 64 bits) is written by ``json.dumps`` as
    before, so DynamoDB answers it as it did. Wire items hold no floats (``N`` is text), where the two differ.
    """
    try:
        return orjson.dumps(params, default=_wire_json)
    except orjson.JSONEncodeError:
        return json.dumps(params, default=_wire_json).encode("utf-8")


def _wire_json(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not a DynamoDB wire value")


def _stash_body(params: dict, context: dict, **_: Any) -> dict | None:
    requests = params.get("RequestItems")
    if not isinstance(requests, dict) or len(requests) != 1:
        return None
    context[_RAW_BODY] = request_body(params)
    return {**params, "RequestItems": {table: _PLACEHOLDER for table in requests}}


def _swap_body(params: dict, context: dict, **_: Any) -> None:
    body = context.pop(_RAW_BODY, None)
    if body is not None:
        params["body"] = body


def _current_features() -> frozenset[str]:
    """The user-agent feature ids botocore registered for the call being made (its private ``botocore.context``,
    which botocore releases before it lack: none then)."""
    try:
        from botocore.context import get_context
    except ImportError:
        return frozenset()
    found = get_context()
    return frozenset(found.features) if found is not None else frozenset()


def _features(features: frozenset[str]) -> Any:
    """A botocore call context holding ``features``, as ``_make_api_call`` runs in (``with_current_context``)."""
    try:
        from botocore.context import ClientContext, start_as_current_context
    except ImportError:
        return contextlib.nullcontext()
    return start_as_current_context(ClientContext(features=set(features)))


class WriteStalled(ServiceError):
    """DynamoDB kept refusing or throttling writes for longer than the retry window: the run stops (resumable)."""


class WriteBudget:
    """A token bucket: `take(units)` waits until the budget allows them; None per second means no limit."""

    def __init__(self, per_second: float | None) -> None:
        self.rate = per_second
        self._lock = threading.Lock()
        self._tokens = per_second or 0.0
        self._stamp = time.monotonic()
        self.waited = 0.0

    def take(self, units: int) -> None:
        if not self.rate:
            return
        while True:
            with self._lock:
                now = time.monotonic()
                self._tokens = min(self.rate, self._tokens + (now - self._stamp) * self.rate)
                self._stamp = now
                if self._tokens >= min(units, self.rate):  # an item larger than a second's budget still goes, alone
                    self._tokens -= units
                    return
                pause = (min(units, self.rate) - self._tokens) / self.rate
                self.waited += pause
            time.sleep(pause)


class DynamoWriter:
    """Puts and gets for one table; a botocore client is thread-safe, so writer threads share one."""

    def __init__(self, client: Any, table: str, key_names: Sequence[str], budget: WriteBudget, *,
                 retry_seconds: float = 120.0) -> None:
        self.client, self.table, self.key_names = client, table, tuple(key_names)
        self.budget, self.retry_seconds = budget, retry_seconds
        self.retries = 0
        self._batch_write = batch_writer(client)

    def write(self, items: list[dict]) -> list[tuple[dict, str]]:
        """Put every item (a later item with the same key wins); (item, reason) for each DynamoDB refused."""
        refused: list[tuple[dict, str]] = []
        for group in requests(items, self.key_names):
            refused += self._batch(group)
        return refused

    def _batch(self, items: list[dict]) -> list[tuple[dict, str]]:
        if self.budget.rate:  # an item's size is worked out only where a budget counts it
            self.budget.take(sum(write_units(item) for item in items))
        pending = [{"PutRequest": {"Item": item}} for item in items]
        backoff = _Backoff(self.retry_seconds, "BatchWriteItem")
        while pending:
            answer, refused = self._send(backoff, self._batch_write, RequestItems={self.table: pending})
            if refused is not None:  # names no item: find the refused ones one by one
                return [found for request in pending for found in self._single(request["PutRequest"]["Item"])]
            left = answer.get("UnprocessedItems", {}).get(self.table, [])
            if left:
                self.retries += 1
                if len(left) < len(pending):
                    backoff.progress()
                backoff.wait("UnprocessedItems")
            pending = left
        return []

    def _single(self, item: dict) -> list[tuple[dict, str]]:
        # botocore serialises PutItem itself (only BatchWriteItem's body is sent raw): B must be bytes for it
        _, refused = self._send(_Backoff(self.retry_seconds, "PutItem"), self.client.put_item, TableName=self.table,
                                Item={name: with_bytes(value) for name, value in item.items()})
        return [] if refused is None else [(item, f"DynamoDB refused the item: {refused}")]

    def _send(self, backoff: _Backoff, call: Any, **request: Any) -> tuple[dict, str | None]:
        """(answer, None), or ({}, DynamoDB's message) for a ValidationException; throttling and 5xx retried."""
        from botocore.exceptions import ClientError

        while True:
            try:
                return call(**request), None
            except ClientError as err:
                code = err.response.get("Error", {}).get("Code", "")
                if code in RETRYABLE:
                    self.retries += 1
                    backoff.wait(code)
                    continue
                if code == "ValidationException":
                    return {}, err.response["Error"].get("Message", code)
                raise

    def get(self, keys: list[dict]) -> list[dict]:
        """The items that exist among ``keys`` (each a dict of key attributes), strongly consistent."""
        found: list[dict] = []
        for start in range(0, len(keys), GET_LIMIT):
            pending: dict[str, Any] = {self.table: {"Keys": keys[start:start + GET_LIMIT], "ConsistentRead": True}}
            backoff = _Backoff(self.retry_seconds, "BatchGetItem")
            while pending:
                answer = self.client.batch_get_item(RequestItems=pending)
                found += answer.get("Responses", {}).get(self.table, [])
                pending = answer.get("UnprocessedKeys") or {}
                if pending:
                    backoff.wait("UnprocessedKeys")
        return found


class _Backoff:
    """Exponential backoff with full jitter (AWS's advice for BatchWriteItem), bounded by a window without progress."""

    def __init__(self, window: float, call: str) -> None:
        self.window, self.call = window, call
        self.attempt, self.since = 0, time.monotonic()

    def progress(self) -> None:
        self.attempt, self.since = 0, time.monotonic()

    def wait(self, why: str) -> None:
        if time.monotonic() - self.since > self.window:
            raise WriteStalled(f"DynamoDB answered {why} to {self.call} for {self.window:.0f} s without progress",
                               "raise the table's write capacity (or lower --wcu) and continue with --resume")
        self.attempt += 1
        time.sleep(_JITTER.uniform(0, min(5.0, 0.05 * 2 ** self.attempt)))


class DynamoDBSink(Sink):
    """Items (in DynamoDB's wire format) into an existing DynamoDB table with BatchWriteItem, within ``wcu`` write
    units per second per writer (``writer(share)``: a process's share of them); items DynamoDB refuses are given back
    (as dead letters, in a Beam graph)."""

    kind = "dynamodb"

    def __init__(self, settings: ClientSettings, table: str, key_names: Sequence[str] = (), *,
                 wcu: float | None = None, retry_seconds: float = 120.0) -> None:
        self.settings, self.table, self.key_names = settings, table, tuple(key_names)
        self.wcu, self.retry_seconds = wcu, retry_seconds

    def describe(self) -> str:
        where = f" at {redact(self.settings.endpoint_url)}" if self.settings.endpoint_url else ""
        return f"DynamoDB table {self.table}{where}"

    def client(self) -> Any:
        """A client whose BatchWriteItem bodies are one JSON encoding (:func:`send_requests_raw`) and whose BatchGetItem
        answers keep their items as raw JSON (a comparison reads B as bytes or base64 alike)."""
        client = make_client(self.settings)
        send_requests_raw(client)  # items travel in the wire format (B as base64 text), as the sources give them
        keep_field_raw(client, "BatchGetItem", "Responses")
        return client

    def table_keys(self, client: Any = None) -> tuple[tuple[str, ...], dict[str, str]] | None:
        """The table's key names (HASH first) and their attribute types, from DescribeTable; None when it does not
        exist."""
        from botocore.exceptions import ClientError

        try:
            described = (client or make_client(self.settings)).describe_table(TableName=self.table)["Table"]
        except ClientError as err:
            if err.response.get("Error", {}).get("Code") != "ResourceNotFoundException":
                raise
            return None
        schema = sorted(described["KeySchema"], key=lambda key: key["KeyType"])  # HASH before RANGE
        names = tuple(key["AttributeName"] for key in schema)
        types = {d["AttributeName"]: d["AttributeType"] for d in described.get("AttributeDefinitions", [])}
        return names, {name: types[name] for name in names if name in types}

    def check(self) -> None:
        if self.table_keys() is None:
            raise UsageError(f"there is no DynamoDB table {self.table} to write into",
                             "create it (with the source's key schema) or name another table")

    def prepare(self, *, create: bool = True) -> None:
        self.check()  # DynamoDB tables are made with their key schema and capacity by their owners, never here

    def writer(self, share: int = 1, client: Any = None) -> DynamoWriter:
        """A writer for one process of ``share`` (its budget is that share of ``wcu``), on ``client`` (one made by
        :meth:`client`, which a run may share between its check, writers and reads) or its own."""
        budget = WriteBudget(self.wcu / share if self.wcu else None)
        return DynamoWriter(client or self.client(), self.table, self.key_names, budget, retry_seconds=self.retry_seconds)

    def write(self, batches: Any, label: str | None = None) -> Any:
        from ..run.writes import write_items

        return write_items(self, batches, label or "WriteToDynamoDB")
