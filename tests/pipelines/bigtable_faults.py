"""Faults of the Bigtable data client's MutateRows transport (a lost answer, a connection cut under a request), for
tests that pin how its retries go."""

from __future__ import annotations

import asyncio
import threading

from ddb2bt.pipelines.local.proxy import Proxy

__all__ = ["CutLargeRequest", "LostResponse", "ResetConnections", "StallAfter"]


class LostResponse:
    """The data client's MutateRows transport, except that the first request is applied by Bigtable and then answered
    UNAVAILABLE (the response lost): the client retries the entries that say they are idempotent."""

    def __init__(self, real) -> None:
        self.real, self.calls = real, 0

    def __call__(self, *args, **kwargs):
        from google.api_core.exceptions import ServiceUnavailable

        self.calls += 1
        answers = list(self.real(*args, **kwargs))
        if self.calls == 1:
            raise ServiceUnavailable("response lost after the write was applied")
        return iter(answers)


class CutLargeRequest(Proxy):
    """A loopback TCP proxy in front of the emulator that closes, both ways, the first connection on which the client
    sends more than ``after`` bytes, before those bytes go on: a request larger than that never reaches the server
    whole (a gRPC server takes a message only once it is whole), and the client sees its connection break under
    the call. Later connections pass unchanged."""

    def __init__(self, target_host: str, target_port: int, *, after: int) -> None:
        super().__init__(target_host, target_port)
        self.after, self.cuts = after, 0

    async def relay(self, reader, writer, up_reader, up_writer) -> None:
        await super().relay(_Counted(self, reader, (writer, up_writer)), writer, up_reader, up_writer)


class _Counted:
    """The client's side of one connection, read by the proxy: past the proxy's ``after`` bytes (once per proxy), the
    connection is aborted both ways and reads as ended."""

    def __init__(self, proxy: CutLargeRequest, reader, sides) -> None:
        self.proxy, self.reader, self.sides, self.sent = proxy, reader, sides, 0

    async def read(self, size: int) -> bytes:
        data = await self.reader.read(size)
        if not self.proxy.cuts and self.sent + len(data) > self.proxy.after:
            self.proxy.cuts += 1
            for side in self.sides:
                side.transport.abort()
            return b""
        self.sent += len(data)
        return data


class StallAfter(Proxy):
    """A loopback TCP proxy in front of the emulator that forwards the client's first ``after`` bytes (all
    connections together) and then holds everything the client sends, forever: a run behind it cannot finish, so a
    kill once ``stalled`` is set lands mid-run however fast the machine is."""

    def __init__(self, target_host: str, target_port: int, *, after: int) -> None:
        super().__init__(target_host, target_port)
        self.after, self.sent, self.stalled = after, 0, threading.Event()

    async def relay(self, reader, writer, up_reader, up_writer) -> None:
        await super().relay(_Stalling(self, reader), writer, up_reader, up_writer)


class _Stalling:
    def __init__(self, proxy: StallAfter, reader) -> None:
        self.proxy, self.reader = proxy, reader

    async def read(self, size: int) -> bytes:
        data = await self.reader.read(size)
        if self.proxy.stalled.is_set() or self.proxy.sent + len(data) > self.proxy.after:
            self.proxy.stalled.set()
            await asyncio.Event().wait()  # never set: held until the proxy stops
        self.proxy.sent += len(data)
        return data


class ResetConnections(Proxy):
    """A loopback TCP proxy in front of the emulator that resets (aborts both ways) a connection once the client has
    sent ``after`` bytes on it, ``resets`` times in all: the connection breaks under whatever calls are on it
    (MutateRows, ReadRows), as a load balancer or a NAT dropping it would, and the client sees UNAVAILABLE.
    ``done`` counts the resets made; once they are all made, connections pass unchanged. ``answers``: count the
    server's bytes instead (reads: small requests, large answers)."""

    def __init__(self, target_host: str, target_port: int, *, after: int, resets: int, answers: bool = False) -> None:
        super().__init__(target_host, target_port)
        self.after, self.resets, self.answers, self.done = after, resets, answers, 0

    async def relay(self, reader, writer, up_reader, up_writer) -> None:
        sides = (writer, up_writer)
        if self.answers:
            await super().relay(reader, writer, _Resetting(self, up_reader, sides), up_writer)
        else:
            await super().relay(_Resetting(self, reader, sides), writer, up_reader, up_writer)


class _Resetting:
    def __init__(self, proxy: ResetConnections, reader, sides) -> None:
        self.proxy, self.reader, self.sides, self.sent = proxy, reader, sides, 0

    async def read(self, size: int) -> bytes:
        data = await self.reader.read(size)
        self.sent += len(data)
        if self.proxy.done < self.proxy.resets and self.sent > self.proxy.after:
            self.proxy.done += 1
            for side in self.sides:
                side.transport.abort()
            return b""
        return data
