"""A loopback TCP proxy that delays every request by a fixed time: network distance on one machine.

Bytes from the client are held for ``--delay-ms`` after they arrive, then forwarded in order;
answers come back at once. An HTTP request (headers and body arrive within microseconds of each
other) therefore reaches the server ``delay`` later: a DynamoDB call costs one extra ``delay``,
as it would to a region ``delay`` away.

Safety: listens on 127.0.0.1 only, forwards to one loopback target only, holds at most
``--max-connections`` connections (further ones are refused) and at most ``--max-buffer`` bytes
per connection, and exits by itself after ``--max-seconds`` or when idle (no connection) for
``--idle-seconds``. Run it as ``python -m benchmarks.latency_proxy --target 127.0.0.1:PORT``; it
prints ``PORT <n>`` once it listens.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

LOOPBACK = ("127.0.0.1", "localhost", "::1")


class Proxy:
    def __init__(self, target_host: str, target_port: int, delay: float, max_connections: int, max_buffer: int):
        if target_host not in LOOPBACK:
            raise ValueError(f"the proxy only forwards to loopback, not {target_host!r}")
        self.target = (target_host, target_port)
        self.delay, self.max_connections, self.max_buffer = delay, max_connections, max_buffer
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
            await asyncio.gather(self._delayed(reader, up_writer), self._direct(up_reader, writer),
                                 return_exceptions=True)
        finally:
            self.active -= 1
            self.last_activity = time.monotonic()
            for w in (writer, up_writer):
                w.close()

    async def _delayed(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Client -> server: each chunk is forwarded `delay` after it arrived, in arrival order."""
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
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                if buffered + len(data) > self.max_buffer:
                    break  # bounded: a client sending faster than the delay allows is cut off
                buffered += len(data)
                self.requests += 1
                self.last_activity = time.monotonic()
                queue.put_nowait((loop.time() + self.delay, data))
        finally:
            queue.put_nowait((0.0, None))
            await task

    async def _direct(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            data = await reader.read(262144)
            if not data:
                break
            self.last_activity = time.monotonic()
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()


async def serve(args: argparse.Namespace) -> None:
    host, _, port = args.target.rpartition(":")
    proxy = Proxy(host, int(port), args.delay_ms / 1000, args.max_connections, args.max_buffer)
    server = await asyncio.start_server(proxy.handle, "127.0.0.1", args.port)
    print(f"PORT {server.sockets[0].getsockname()[1]}", flush=True)
    started = time.monotonic()
    async with server:
        while True:
            await asyncio.sleep(0.5)
            now = time.monotonic()
            if now - started > args.max_seconds:
                break
            if proxy.active == 0 and now - proxy.last_activity > args.idle_seconds:
                break


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", required=True, help="loopback host:port to forward to")
    parser.add_argument("--port", type=int, default=0, help="port to listen on (0: any free one)")
    parser.add_argument("--delay-ms", type=float, default=20.0)
    parser.add_argument("--max-connections", type=int, default=128)
    parser.add_argument("--max-buffer", type=int, default=16 << 20, help="bytes in flight per connection")
    parser.add_argument("--max-seconds", type=float, default=1800.0, help="stop after this long in any case")
    parser.add_argument("--idle-seconds", type=float, default=300.0, help="stop after this long without a connection")
    asyncio.run(serve(parser.parse_args(argv)))


if __name__ == "__main__":
    main(sys.argv[1:])
