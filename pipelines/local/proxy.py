"""Loopback TCP proxies that misbehave on purpose: network distance and HTTP faults on one machine.

* :class:`DelayProxy` holds every chunk from the client for a fixed delay, then forwards it in
  order; answers come back at once. An HTTP request (headers and body arrive within microseconds
  of each other) therefore reaches the server ``delay`` later, as it would a region away (the
  benchmarks' +20 ms runs, ``python -m benchmarks.latency_proxy``).
* :class:`CutProxy` cuts the first answer longer than a given size there, aborting both sides (a connection
  lost in the middle of a gRPC stream): the resume tests of the Bigtable reads.
* :class:`HttpFaultProxy` reads HTTP/1.1 exchanges (DynamoDB's JSON API) one by one and can
  answer every request with a throttling error or a 5xx, cut the body of Scan answers short (with a
  matching ``Content-Length``, so only the body's CRC32 shows it), or replace bytes in it: the fault tests.
* :class:`ShardSplitProxy` shows moto_server's one-shard DynamoDB stream as a shard split, with
  empty pages if asked: the tail's shard-lineage tests.
* :class:`TtlDeleteProxy` marks chosen deletes in moto_server's stream as the TTL process's: the TTL test.

Safety: listens on 127.0.0.1 only, forwards to one loopback target only, holds at most
``max_connections`` connections (further ones are refused) and at most ``max_buffer`` bytes per
connection. :func:`serve` (a process) stops by itself after ``max_seconds`` or when idle;
:func:`serving` (a thread, for tests) stops when its ``with`` block ends. Stdlib only.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from typing import Iterator

LOOPBACK = ("127.0.0.1", "localhost", "::1")
HOST = "127.0.0.1"


class Proxy:
    """Forwards each connection to one loopback target; :meth:`relay` says what happens on the way."""

    def __init__(self, target_host: str, target_port: int, max_connections: int = 128, max_buffer: int = 16 << 20):
        if target_host not in LOOPBACK:
            raise ValueError(f"the proxy only forwards to loopback, not {target_host!r}")
        self.target = (target_host, target_port)
        self.max_connections, self.max_buffer = max_connections, max_buffer
        self.active = 0
        self.last_activity = time.monotonic()
        self.requests = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.active >= self.max_connections:
            writer.close()
            return
        self.active += 1
        self.last_activity = time.monotonic()
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            self.active -= 1
            writer.close()
            return
        try:
            await self.relay(reader, writer, up_reader, up_writer)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError, asyncio.CancelledError):
            pass  # a connection that broke or misbehaved, or the proxy stopping: the connection is closed
        finally:
            self.active -= 1
            self.last_activity = time.monotonic()
            for w in (writer, up_writer):
                w.close()

    async def relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    up_reader: asyncio.StreamReader, up_writer: asyncio.StreamWriter) -> None:
        """Client -> server and back, unchanged."""
        await asyncio.gather(self._copy(reader, up_writer), self._copy(up_reader, writer), return_exceptions=True)

    async def _copy(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(262144):
            self.last_activity = time.monotonic()
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()


class DelayProxy(Proxy):
    """Every chunk from the client is forwarded ``delay`` seconds after it arrived, in arrival order."""

    def __init__(self, target_host: str, target_port: int, delay: float, **limits: int):
        super().__init__(target_host, target_port, **limits)
        self.delay = delay

    async def relay(self, reader, writer, up_reader, up_writer) -> None:
        await asyncio.gather(self._delayed(reader, up_writer), self._copy(up_reader, writer), return_exceptions=True)

    async def _delayed(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        queue: asyncio.Queue = asyncio.Queue()
        buffered = 0
        loop = asyncio.get_running_loop()

        async def pump() -> None:
            nonlocal buffered
            while True:
                due, data = await queue.get()
                if data is None:
                    writer.write_eof() if writer.can_write_eof() else None
                    return
                pause = due - loop.time()
                if pause > 0:
                    await asyncio.sleep(pause)
                writer.write(data)
                buffered -= len(data)
                await writer.drain()

        task = asyncio.create_task(pump())
        try:
            while data := await reader.read(65536):
                if buffered + len(data) > self.max_buffer:
                    break  # bounded: a client sending faster than the delay allows is cut off
                buffered += len(data)
                self.requests += 1
                self.last_activity = time.monotonic()
                queue.put_nowait((loop.time() + self.delay, data))
        finally:
            queue.put_nowait((0.0, None))
            await task


class CutProxy(Proxy):
    """Forwards, except that the first answer longer than ``after`` bytes (on any connection) is cut there: both
    sides of that connection are aborted, as a lost connection leaves them. ``cuts`` counts the cuts made."""

    def __init__(self, target_host: str, target_port: int, after: int, **limits: int):
        super().__init__(target_host, target_port, **limits)
        self.after, self.cuts = after, 0

    async def relay(self, reader, writer, up_reader, up_writer) -> None:
        async def down() -> None:
            sent = 0
            while data := await up_reader.read(65536):
                if not self.cuts and sent + len(data) > self.after:
                    self.cuts += 1
                    writer.transport.abort()
                    up_writer.transport.abort()
                    return
                sent += len(data)
                writer.write(data)
                await writer.drain()

        await asyncio.gather(self._copy(reader, up_writer), down(), return_exceptions=True)


THROTTLED = json.dumps({"__type": "com.amazonaws.dynamodb.v20120810#ThrottlingException",
                        "message": "Rate of requests exceeds the allowed throughput (injected by HttpFaultProxy)"})


class HttpProxy(Proxy):
    """HTTP/1.1 exchange by exchange (``Content-Length`` bodies, keep-alive); :meth:`exchange` answers each request."""

    async def relay(self, reader, writer, up_reader, up_writer) -> None:
        while True:
            try:
                head, body = await self._message(reader)
            except asyncio.IncompleteReadError:
                return  # the client closed the connection
            self.requests += 1
            self.last_activity = time.monotonic()
            writer.write(await self.exchange(head, body, up_reader, up_writer))
            await writer.drain()

    async def exchange(self, head: bytes, body: bytes, up_reader: asyncio.StreamReader,
                       up_writer: asyncio.StreamWriter) -> bytes:
        """The answer to one request: the server's, unchanged."""
        return b"".join(await self._forward(head + body, up_reader, up_writer))

    async def _forward(self, request: bytes, up_reader: asyncio.StreamReader,
                       up_writer: asyncio.StreamWriter) -> tuple[bytes, bytes]:
        up_writer.write(request)
        await up_writer.drain()
        return await self._message(up_reader)

    async def _message(self, reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
        """One HTTP message: its head (through the blank line) and its ``Content-Length`` body."""
        head = await reader.readuntil(b"\r\n\r\n")
        length = _content_length(head)
        if length > self.max_buffer:
            raise ValueError(f"message of {length} bytes is over the proxy's limit")
        return head, await reader.readexactly(length)


class HttpFaultProxy(HttpProxy):
    """DynamoDB's JSON API with faults.

    Faults touch only requests for ``operation`` (a DynamoDB API name; other calls pass through):
    ``throttle``: the first N are answered ``400 ThrottlingException``, never forwarded.
    ``truncate``: the first N answers lose the second half of their body; the headers stay
    (``x-amz-crc32`` too, unless ``drop_checksums``), and ``Content-Length`` matches the cut body.
    ``fail``: the first N are answered ``failure`` (a whole HTTP answer: a 500 or 503 by default), never forwarded.
    ``corrupt``: the first N answers have the first ``corruption[0]`` in their body replaced by ``corruption[1]``
    (as long: the JSON may stay valid, only the body's CRC32 shows it); the headers stay (``x-amz-crc32`` too,
    unless ``drop_checksums``).
    ``throttled``, ``truncated``, ``failed`` and ``corrupted`` count what was done.
    """

    def __init__(self, target_host: str, target_port: int, *, operation: str = "Scan", throttle: int = 0,
                 truncate: int = 0, drop_checksums: bool = False, fail: int = 0, failure: bytes = b"",
                 corrupt: int = 0, corruption: tuple[bytes, bytes] = (b"", b""), **limits: int):
        super().__init__(target_host, target_port, **limits)
        if len(corruption[0]) != len(corruption[1]):
            raise ValueError("a corruption keeps the body's length: replace bytes by as many")
        self.target_header = f"DynamoDB_20120810.{operation}\r\n".encode()
        self.throttle, self.truncate, self.drop_checksums = throttle, truncate, drop_checksums
        self.fail, self.failure = fail, failure or SERVER_ERROR
        self.corrupt, self.corruption = corrupt, corruption
        self.throttled = self.truncated = self.failed = self.corrupted = 0

    async def exchange(self, head, body, up_reader, up_writer) -> bytes:
        chosen = self.target_header in head
        if chosen and self.throttled < self.throttle:
            self.throttled += 1
            return _json_answer(THROTTLED.encode(), b"400 Bad Request")
        if chosen and self.failed < self.fail:
            self.failed += 1
            return self.failure
        answer_head, answer = await self._forward(head + body, up_reader, up_writer)
        if chosen and self.truncated < self.truncate and answer:
            self.truncated += 1
            answer = answer[: len(answer) // 2]
            answer_head = _with_headers(answer_head, {b"content-length": b"%d" % len(answer)},
                                        drop=(b"x-amz-crc32",) if self.drop_checksums else ())
        elif chosen and self.corrupted < self.corrupt and self.corruption[0] in answer:
            self.corrupted += 1
            answer = answer.replace(self.corruption[0], self.corruption[1], 1)
            answer_head = _with_headers(answer_head, {}, drop=(b"x-amz-crc32",) if self.drop_checksums else ())
        return answer_head + answer


def http_answer(status: bytes, payload: bytes, content_type: bytes = b"application/x-amz-json-1.0") -> bytes:
    """A whole HTTP/1.1 answer made by a proxy (keep-alive)."""
    return (b"HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n" % (status, content_type, len(payload))
            + payload)


STREAMS_API = "DynamoDBStreams_20120810."


class MotoStreamsProxy(HttpProxy):
    """An :class:`HttpProxy` in front of moto_server that sends each request on a connection of its own."""

    async def _forward(self, request, up_reader, up_writer) -> tuple[bytes, bytes]:
        """Each request on a connection of its own: moto_server's answers may close theirs, and the proxy makes calls
        of its own between the client's."""
        up_reader, up_writer = await asyncio.open_connection(*self.target)
        try:
            return await super()._forward(request, up_reader, up_writer)
        finally:
            up_writer.close()


class ShardSplitProxy(MotoStreamsProxy):
    """moto_server's one-shard DynamoDB stream shown as a shard split, optionally with empty pages in it.

    What it reproduces of real DynamoDB Streams: a shard splits (or is rolled over every few hours)
    into a child; DescribeStream then gives the parent's ``SequenceNumberRange`` an
    ``EndingSequenceNumber`` and lists the child with ``ParentShardId``; GetRecords on the parent
    serves its records, then a page without ``NextShardIterator``; the child serves what follows.
    And GetRecords may answer ``Records: []`` with a ``NextShardIterator`` before records follow
    ("it might take multiple calls to get to a portion of the shard that contains stream records",
    e.g. trimmed records at TRIM_HORIZON): ``empty_pages`` such pages lie right after record
    ``gap_after`` (None: at the parent's start), and every iterator reaching there goes through them.

    The real shard's records up to ``split_after`` (a sequence number; None: all) are the parent's,
    the rest the child's. Until ``split`` is set the parent is still open (no end, no child listed).
    Iterators are the proxy's own: a shard and the last sequence number served, each GetRecords
    reads the real shard AFTER_SEQUENCE_NUMBER it. DescribeStream must come first (the tail's does).
    ``served`` lists ``(shard, sequence number)`` of every record handed out, in order. DynamoDB
    calls and a stream without exactly one shard pass through unchanged.
    """

    PARENT = "shardId-00000001700000000000-0a0a0a0a"
    CHILD = "shardId-00000001700003600000-0b0b0b0b"

    def __init__(self, target_host: str, target_port: int, *, split_after: int | None = None, split: bool = True,
                 empty_pages: int = 0, gap_after: int | None = None, **limits: int):
        super().__init__(target_host, target_port, **limits)
        self.split_after, self.split, self.empty_pages, self.gap_after = split_after, split, empty_pages, gap_after
        self.real: dict[str, str] = {}
        """The stream's ARN and its real shard's id and first sequence number, from DescribeStream."""
        self.iterators: dict[str, tuple[str, int, int]] = {}
        """An iterator's shard, the last sequence number served (or just before its first), empty pages passed."""
        self.served: list[tuple[str, int]] = []

    async def exchange(self, head, body, up_reader, up_writer) -> bytes:
        target = _header(head, b"x-amz-target").decode()
        if not target.startswith(STREAMS_API):
            return await super().exchange(head, body, up_reader, up_writer)
        operation, request = target[len(STREAMS_API):], json.loads(body or b"{}")

        async def call(name: str, payload: dict) -> dict:
            data = json.dumps(payload).encode()
            request_head = _with_headers(head, {b"x-amz-target": (STREAMS_API + name).encode(),
                                                b"content-length": b"%d" % len(data)})
            return json.loads((await self._forward(request_head + data, up_reader, up_writer))[1])

        if operation == "DescribeStream":
            answer = await call(operation, request)
            stream = answer["StreamDescription"]
            if len(stream.get("Shards", [])) == 1:
                (shard,) = stream["Shards"]
                start = shard["SequenceNumberRange"]["StartingSequenceNumber"]
                self.real = {"arn": stream["StreamArn"], "shard": shard["ShardId"], "start": start}
                numbers = {"StartingSequenceNumber": start}
                stream["Shards"] = [{"ShardId": self.PARENT, "SequenceNumberRange": numbers}]
                if self.split and self.split_after is not None:
                    numbers["EndingSequenceNumber"] = str(self.split_after)
                    stream["Shards"].append({"ShardId": self.CHILD, "ParentShardId": self.PARENT, "SequenceNumberRange":
                                             {"StartingSequenceNumber": str(self.split_after + 1)}})
            return _json_answer(json.dumps(answer).encode())
        if operation == "GetShardIterator" and request["ShardId"] in (self.PARENT, self.CHILD):
            origin = int(self.real["start"]) - 1 if request["ShardId"] == self.PARENT else int(self.split_after or 0)
            sequence = int(request.get("SequenceNumber") or 0)
            after = {"TRIM_HORIZON": origin, "AFTER_SEQUENCE_NUMBER": sequence,
                     "AT_SEQUENCE_NUMBER": sequence - 1}[request["ShardIteratorType"]]
            return _json_answer(json.dumps({"ShardIterator": self._iterator(request["ShardId"], after, 0)}).encode())
        if operation == "GetRecords" and request["ShardIterator"] in self.iterators:
            shard, after, passed = self.iterators[request["ShardIterator"]]
            end = self.split_after if shard == self.PARENT else None
            if end is not None and after >= end and self.split:
                return _json_answer(b'{"Records": []}')  # closed, and read to its end
            gap = int(self.real["start"]) - 1 if self.gap_after is None else self.gap_after
            if after == gap and passed < self.empty_pages:
                return _json_answer(json.dumps({"Records": [], "NextShardIterator":
                                                self._iterator(shard, after, passed + 1)}).encode())
            real = await call("GetShardIterator", {"StreamArn": self.real["arn"], "ShardId": self.real["shard"],
                                                   "ShardIteratorType": "AFTER_SEQUENCE_NUMBER",
                                                   "SequenceNumber": str(after)})
            page = await call("GetRecords", {"ShardIterator": real["ShardIterator"], "Limit": request.get("Limit", 1000)})
            bounds = ([gap] if gap > after else []) + ([end] if end is not None else [])
            records = [record for record in page["Records"]  # the parent's part, and up to the gap first
                       if all(int(record["dynamodb"]["SequenceNumber"]) <= bound for bound in bounds)]
            self.served += [(shard, int(record["dynamodb"]["SequenceNumber"])) for record in records]
            last = int(records[-1]["dynamodb"]["SequenceNumber"]) if records else after
            return _json_answer(json.dumps({"Records": records, "NextShardIterator":
                                            self._iterator(shard, last, passed if last == after else 0)}).encode())
        return await super().exchange(head, body, up_reader, up_writer)

    def _iterator(self, shard: str, after: int, passed: int) -> str:
        token = f"{shard}|{len(self.iterators)}"
        self.iterators[token] = (shard, after, passed)
        return token


class TtlDeleteProxy(MotoStreamsProxy):
    """moto_server's DynamoDB stream with the deletes of chosen items marked as DynamoDB's TTL process marks them.

    moto's records carry no ``userIdentity``; a REMOVE record that AWS's TTL process made carries
    ``{"PrincipalId": "dynamodb.amazonaws.com", "Type": "Service"}`` (the GetRecords member names of the
    service model). Every GetRecords answer passes through with that member added to the REMOVE records whose
    ``Keys`` are in ``ttl_keys`` (DynamoDB JSON, as on the wire); ``marked`` counts them. Everything else is
    moto's answer, unchanged.
    """

    IDENTITY = {"PrincipalId": "dynamodb.amazonaws.com", "Type": "Service"}

    def __init__(self, target_host: str, target_port: int, **limits: int):
        super().__init__(target_host, target_port, **limits)
        self.ttl_keys: list[dict] = []
        self.marked = 0

    async def exchange(self, head, body, up_reader, up_writer) -> bytes:
        if _header(head, b"x-amz-target") != (STREAMS_API + "GetRecords").encode():
            return await super().exchange(head, body, up_reader, up_writer)
        answer_head, answer = await self._forward(head + body, up_reader, up_writer)
        if not answer_head.startswith(b"HTTP/1.1 200"):
            return answer_head + answer
        page = json.loads(answer)
        for record in page.get("Records", []):
            if record.get("eventName") == "REMOVE" and record["dynamodb"].get("Keys") in self.ttl_keys:
                record["userIdentity"] = dict(self.IDENTITY)
                self.marked += 1
        return _json_answer(json.dumps(page).encode())


def _json_answer(payload: bytes, status: bytes = b"200 OK") -> bytes:
    """A whole HTTP answer of the JSON API made by the proxy (no ``x-amz-crc32``: botocore checks it only if sent)."""
    return (b"HTTP/1.1 %s\r\nContent-Type: application/x-amz-json-1.0\r\nx-amzn-RequestId: injected\r\n"
            b"Content-Length: %d\r\n\r\n" % (status, len(payload)) + payload)


SERVER_ERROR = _json_answer(json.dumps({"__type": "com.amazon.coral.service#InternalServerError",
                                         "message": "Internal server error (injected by HttpFaultProxy)"}).encode(),
                             b"500 Internal Server Error")
"""DynamoDB's own 500 (AWS: retry it with backoff)."""


def _header(head: bytes, wanted: bytes) -> bytes:
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == wanted:
            return value.strip()
    return b""


def _content_length(head: bytes) -> int:
    return int(_header(head, b"content-length") or 0)


def _with_headers(head: bytes, values: dict[bytes, bytes], drop: tuple[bytes, ...] = ()) -> bytes:
    """The head with the given headers' values replaced (names in lower case), and without those in ``drop``."""
    lines = []
    for line in head[:-4].split(b"\r\n"):
        name = line.partition(b":")[0].strip().lower()
        if name in drop:
            continue
        if name in values:
            line = line.partition(b":")[0] + b": " + values[name]
        lines.append(line)
    return b"\r\n".join(lines) + b"\r\n\r\n"


async def serve(proxy: Proxy, port: int = 0, max_seconds: float = 1800.0, idle_seconds: float = 300.0) -> None:
    """Run ``proxy`` on 127.0.0.1 (printing ``PORT <n>`` once it listens) until ``max_seconds`` or idle."""
    server = await asyncio.start_server(proxy.handle, HOST, port)
    print(f"PORT {server.sockets[0].getsockname()[1]}", flush=True)
    started = time.monotonic()
    async with server:
        while True:
            await asyncio.sleep(0.5)
            now = time.monotonic()
            if now - started > max_seconds:
                break
            if proxy.active == 0 and now - proxy.last_activity > idle_seconds:
                break


@contextlib.contextmanager
def serving(proxy: Proxy) -> Iterator[int]:
    """Run ``proxy`` on 127.0.0.1 in a background thread for the ``with`` block; yields its port."""
    loop = asyncio.new_event_loop()
    server = loop.run_until_complete(asyncio.start_server(proxy.handle, HOST, 0))
    thread = threading.Thread(target=loop.run_forever, name="ddb2bt-proxy", daemon=True)
    thread.start()
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        asyncio.run_coroutine_threadsafe(_close(server), loop).result()
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()


async def _close(server: asyncio.AbstractServer) -> None:
    """Stop listening and end every open connection."""
    server.close()
    tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
