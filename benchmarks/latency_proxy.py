"""A loopback TCP proxy that delays every request by a fixed time: network distance on one machine.

The command-line face of :class:`ddb2bt.pipelines.local.proxy.DelayProxy` (see there for what it
does and its safety limits). Run it as ``python -m benchmarks.latency_proxy --target 127.0.0.1:PORT``;
it prints ``PORT <n>`` once it listens, and exits after ``--max-seconds`` or when idle for
``--idle-seconds``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from ddb2bt.pipelines.local.proxy import DelayProxy, serve


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", required=True, help="loopback host:port to forward to")
    parser.add_argument("--port", type=int, default=0, help="port to listen on (0: any free one)")
    parser.add_argument("--delay-ms", type=float, default=20.0)
    parser.add_argument("--max-connections", type=int, default=128)
    parser.add_argument("--max-buffer", type=int, default=16 << 20, help="bytes in flight per connection")
    parser.add_argument("--max-seconds", type=float, default=1800.0, help="stop after this long in any case")
    parser.add_argument("--idle-seconds", type=float, default=300.0, help="stop after this long without a connection")
    args = parser.parse_args(argv)
    host, _, port = args.target.rpartition(":")
    proxy = DelayProxy(host, int(port), args.delay_ms / 1000, max_connections=args.max_connections,
                       max_buffer=args.max_buffer)
    asyncio.run(serve(proxy, args.port, args.max_seconds, args.idle_seconds))


if __name__ == "__main__":
    main(sys.argv[1:])
