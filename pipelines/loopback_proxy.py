"""Loopback TCP proxies that misbehave on purpose: network distance and HTTP faults on one machine.

* :class:`DelayProxy` holds every chunk from the client for a fixed delay, then forwards it in
  order; answers come back at once. An HTTP request (headers and body arrive within microseconds
  of each other) therefore reaches the server ``delay`` later, as it would a region away (the
  benchmarks' +20 ms runs, ``python -m benchmarks.latency_proxy``).
* :class:`HttpFaultProxy` reads HTTP/1.1 exchanges (DynamoDB's JSON API) one by one and can
  answer every request with a throttling error, or cut the body of Scan answers short (with a
  matching ``Content-Length``, so only the body's CRC32 shows it): the fault tests.

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


THROTTLED = json.dumps({"__type": "com.amazonaws.dynamodb.v20120810#ThrottlingException",
                        "message": "Rate of requests exceeds the allowed throughput (injected by HttpFaultProxy)"})


class HttpFaultProxy(Proxy):
    """HTTP/1.1 exchange by exchange (``Content-Length`` bodies, keep-alive), with faults.

    Faults touch only requests for ``operation`` (a DynamoDB API name; other calls pass through):
    ``throttle``: the first N are answered ``400 ThrottlingException``, never forwarded.
    ``truncate``: the first N answers lose the second half of their body; the headers stay
    (``x-amz-crc32`` too, unless ``drop_checksums``), and ``Content-Length`` matches the cut body.
    ``throttled`` and ``truncated`` count what was done.
    """

    def __init__(self, target_host: str, target_port: int, *, operation: str = "Scan", throttle: int = 0,
                 truncate: int = 0, drop_checksums: bool = False, **limits: int):
        super().__init__(target_host, target_port, **limits)
        self.target_header = f"DynamoDB_20120810.{operation}\r\n".encode()
        self.throttle, self.truncate, self.drop_checksums = throttle, truncate, drop_checksums
        self.throttled = self.truncated = 0

    async def relay(self, reader, writer, up_reader, up_writer) -> None:
        while True:
            try:
                head, body = await self._message(reader)
            except asyncio.IncompleteReadError:
                return  # the client closed the connection
            self.requests += 1
            self.last_activity = time.monotonic()
            chosen = self.target_header in head
            if chosen and self.throttled < self.throttle:
                self.throttled += 1
                payload = THROTTLED.encode()
                writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Type: application/x-amz-json-1.0\r\n"
                             b"x-amzn-RequestId: injected\r\nContent-Length: %d\r\n\r\n" % len(payload) + payload)
                await writer.drain()
                continue
            up_writer.write(head + body)
            await up_writer.drain()
            answer_head, answer = await self._message(up_reader)
            if chosen and self.truncated < self.truncate and answer:
                self.truncated += 1
                answer = answer[: len(answer) // 2]
                answer_head = _with_length(answer_head, len(answer), self.drop_checksums)
            writer.write(answer_head + answer)
            await writer.drain()

    async def _message(self, reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
        """One HTTP message: its head (through the blank line) and its ``Content-Length`` body."""
        head = await reader.readuntil(b"\r\n\r\n")
        length = _content_length(head)
        if length > self.max_buffer:
            raise ValueError(f"message of {length} bytes is over the proxy's limit")
        return head, await reader.readexactly(length)


def _content_length(head: bytes) -> int:
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return 0


def _with_length(head: bytes, length: int, drop_checksum: bool) -> bytes:
    """The head with ``Content-Length: length`` (and without ``x-amz-crc32`` if asked)."""
    lines = []
    for line in head[:-4].split(b"\r\n"):
        name = line.partition(b":")[0].strip().lower()
        if name == b"content-length":
            line = b"Content-Length: %d" % length
        elif name == b"x-amz-crc32" and drop_checksum:
            continue
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
