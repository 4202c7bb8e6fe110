"""The rollback's writer alone, A/B against its ablations: CPU per item of the writing thread.

``python -m benchmarks.rollback_writer_ab [--items N] [--passes P]`` starts a loopback HTTP server in its own process
that answers every request with ``{"UnprocessedItems":{}}`` (DynamoDB's answer when everything was written), then
writes the benchmark dataset's items with ``DynamoWriter`` (one thread, 100 items a ``write``, as the rollback commits
them) in alternating passes: the writer as it is and with each of the round-6 changes taken back
(``rollback_section._undone``). Each pass uses a fresh client (its first call goes the whole way) and is timed with
``time.thread_time`` of the writing thread, so the server's work and other processes' do not count, though the
kernel's loopback TCP work for each request does. Prints the median (min-max) per variant.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

SERVER = """
import http.server, sys
class Answer(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        data = b'{"UnprocessedItems":{}}'
        self.send_response(200)
        self.send_header("Content-Type", "application/x-amz-json-1.0")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def log_message(self, *_):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answer)
print(server.server_address[1], flush=True)
server.serve_forever()
"""
VARIANTS = {"as is": None, "round 5's writer": "rollback_write_round5_writer",
            "body by json.dumps": "rollback_write_stdlib_body", "every call through the client": "rollback_write_client_layer"}


def main(argv: list[str] | None = None) -> dict[str, list[float]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=2_500)
    parser.add_argument("--passes", type=int, default=10)
    args = parser.parse_args(argv)
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")  # a loopback server: any credentials sign
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    from ddb2bt.mappers.attrvalue import with_bytes
    from ddb2bt.pipelines.dynamodb.client import ClientSettings, make_client
    from ddb2bt.pipelines.dynamodb.sink import DynamoWriter, WriteBudget, send_requests_raw

    from . import dataset
    from .rollback_section import _undone

    items = [{name: with_bytes(value) for name, value in item.items()} for item in dataset.generate(args.items)]
    server = subprocess.Popen([sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    endpoint = f"http://127.0.0.1:{server.stdout.readline().strip()}"
    cpu: dict[str, list[float]] = {name: [] for name in VARIANTS}
    try:
        for number in range(args.passes):
            for name in list(VARIANTS) if number % 2 == 0 else reversed(VARIANTS):
                with _undone(VARIANTS[name]):
                    client = make_client(ClientSettings(endpoint_url=endpoint, region="us-east-1"))
                    send_requests_raw(client)
                    writer = DynamoWriter(client, "T", ("pk", "sk"), WriteBudget(None))
                    writer.write(items[:25])  # the client's first call
                    began = time.thread_time()
                    for at in range(0, len(items), 100):
                        assert not writer.write(items[at:at + 100])
                    cpu[name].append((time.thread_time() - began) / len(items) * 1e6)
    finally:
        server.kill()
    print(f"{args.passes} alternating passes of {args.items:,} items, load {os.getloadavg()[0]:.1f} at the end")
    for name, figures in cpu.items():
        print(f"{name:<32} {statistics.median(figures):6.1f} µs of CPU per item ({min(figures):.1f}-{max(figures):.1f})")
    return cpu


if __name__ == "__main__":
    main()
