"""Real local servers for tests, the demo and benchmarks: Bigtable emulator, moto_server, dynalite.

Why real servers: the sources and the sink must be exercised over the same wire protocols
(gRPC for Bigtable, DynamoDB's HTTP JSON API) that production uses, without any cloud account.
Each context manager starts one server on 127.0.0.1 on a free port, waits until it accepts
connections, yields a `LocalServer`, and always stops the process group afterwards.

Binaries are installed by `make setup` (tools/setup.sh), which locates them through this module
(`python pipelines/local/servers.py which NAME`) so both agree. Stdlib only, on purpose: the
set-up script runs this file before the project's other code is importable.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

try:
    from ddb2bt.mappers.errors import ServiceError, UsageError
except ImportError:  # run as a script (`which`) by tools/setup.sh, where only the standard library is sure to be there
    UsageError = ServiceError = RuntimeError  # type: ignore[misc,assignment]

ROOT = Path(__file__).resolve().parents[2]
HOST = "127.0.0.1"
SETUP_HINT = "run `make setup` (bash tools/setup.sh) from the repository root"

# Fake credentials: boto3 refuses to sign without some, and these can never reach a real account.
FAKE_AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


class ServerNotInstalled(UsageError):
    """A server binary is missing; the message says how to install it."""


class ServerStartError(ServiceError):
    """A server did not come up; the message carries the tail of its output."""


class ServerDied(ServiceError):
    """A server exited on its own while in use; the message carries the tail of its output."""


@dataclass(frozen=True)
class LocalServer:
    name: str
    host: str
    port: int
    endpoint: str  # what clients take: "http://host:port" for DynamoDB, "host:port" for the emulator
    pid: int


# --- locating binaries -------------------------------------------------------------------------


def find_cbtemulator() -> Path | None:
    """Google's packaged emulator: on PATH, from the Debian package, or inside a gcloud SDK."""
    candidates = [shutil.which("cbtemulator"), "/usr/lib/google-cloud-sdk/platform/bigtable-emulator/cbtemulator"]
    gcloud = shutil.which("gcloud")
    if gcloud:  # <sdk>/bin/gcloud -> <sdk>/platform/bigtable-emulator/cbtemulator
        candidates.append(str(Path(gcloud).resolve().parents[1] / "platform/bigtable-emulator/cbtemulator"))
    return next((Path(c) for c in candidates if c and os.access(c, os.X_OK)), None)


def _require(path: Path | None, what: str) -> Path:
    if path is None or not os.access(path, os.X_OK):
        raise ServerNotInstalled(f"{what} not found ({path or 'no candidate'}); {SETUP_HINT}")
    return path


def find_bigtable_emulator() -> Path:
    """cbtemulator when installed, else the bttest server that setup.sh builds from Debian's Go packages."""
    return _require(find_cbtemulator() or ROOT / "tools/emulator/bttest-emulator", "Bigtable emulator")


def find_moto_server() -> Path:
    # Next to the running interpreter, unresolved: a venv's python is a symlink out of the venv.
    return _require(Path(sys.executable).parent / "moto_server", "moto_server")


def find_dynalite() -> Path:
    """The project's launcher for the npm-installed dynalite: its command line, minus a crash (see the script)."""
    _require(ROOT / "tools/node/node_modules/.bin/dynalite", "dynalite")
    return _require(ROOT / "tools/node/dynalite-server.js", "dynalite launcher")


# --- running them ------------------------------------------------------------------------------


def free_port(host: str = HOST) -> int:
    """Ask the kernel for an unused port (bind to 0). Another process may grab it before the
    server binds, so `_serve` retries with a new port when the server dies at start."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def port_open(host: str, port: int, timeout: float = 0.2) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _tail(log_path: str, limit: int = 3000) -> str:
    with open(log_path, "rb") as f:
        return f.read()[-limit:].decode("utf-8", "replace")


def _stop(proc: subprocess.Popen) -> None:
    """Stop the whole process group (servers may fork helpers): TERM, then KILL what is left."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(5)
    with contextlib.suppress(ProcessLookupError):  # a hung leader, or children that outlived it
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _wait_listening(name: str, proc: subprocess.Popen, port: int, timeout: float, log_path: str) -> None:
    deadline = time.monotonic() + timeout
    while not port_open(HOST, port):
        if proc.poll() is not None:
            raise ServerStartError(f"{name} exited with {proc.returncode} before listening on {HOST}:{port}; "
                                   f"output tail:\n{_tail(log_path)}")
        if time.monotonic() > deadline:
            raise ServerStartError(f"{name} not listening on {HOST}:{port} after {timeout:.0f}s; "
                                   f"output tail:\n{_tail(log_path)}")
        time.sleep(0.05)


@contextlib.contextmanager
def _serve(name: str, argv_for_port, endpoint_fmt: str, timeout: float, attempts: int = 3) -> Iterator[LocalServer]:
    """Start `argv_for_port(port)` until it listens, yield it, and always stop it."""
    with tempfile.NamedTemporaryFile(prefix=f"ddb2bt-{name}-", suffix=".log", delete=False) as log:
        log_path = log.name
    try:
        for attempt in range(1, attempts + 1):
            port = free_port()
            with open(log_path, "wb") as log:  # a file, not a pipe: a full pipe would block the server
                proc = subprocess.Popen(argv_for_port(port), stdin=subprocess.DEVNULL, stdout=log,
                                        stderr=subprocess.STDOUT, start_new_session=True)  # own group: see _stop
            try:
                _wait_listening(name, proc, port, timeout, log_path)
            except ServerStartError:
                died_at_start = proc.returncode is not None
                _stop(proc)
                if died_at_start and attempt < attempts:
                    continue  # most likely lost the race for the port: try another one
                raise
            try:
                yield LocalServer(name, HOST, port, endpoint_fmt.format(host=HOST, port=port), proc.pid)
            finally:
                died = proc.poll()  # before _stop: None while it runs; < 0 if a signal ended it (a fault test's kill)
                _stop(proc)
            if died is not None and died >= 0:  # it ended by itself: say why, or its users only saw "refused"
                raise ServerDied(f"{name} exited with {died} while in use; output tail:\n{_tail(log_path)}")
            return
    finally:
        os.unlink(log_path)


def bigtable_emulator(timeout: float = 60) -> contextlib.AbstractContextManager[LocalServer]:
    """Bigtable emulator (gRPC); `.endpoint` is the value for BIGTABLE_EMULATOR_HOST."""
    binary = find_bigtable_emulator()
    return _serve("bigtable-emulator", lambda port: [str(binary), "-host", HOST, "-port", str(port)],
                  "{host}:{port}", timeout)


def moto_server(timeout: float = 60) -> contextlib.AbstractContextManager[LocalServer]:
    """moto's DynamoDB/S3 server; `.endpoint` is an endpoint_url for boto3."""
    binary = find_moto_server()
    return _serve("moto_server", lambda port: [str(binary), "-H", HOST, "-p", str(port)],
                  "http://{host}:{port}", timeout)


def dynalite(timeout: float = 60) -> contextlib.AbstractContextManager[LocalServer]:
    """dynalite, in memory, with table state changes instant so tables are ACTIVE at once."""
    binary = find_dynalite()
    fast = ["--createTableMs", "0", "--deleteTableMs", "0", "--updateTableMs", "0"]
    return _serve("dynalite", lambda port: [str(binary), "--host", HOST, "--port", str(port), *fast],
                  "http://{host}:{port}", timeout)


# --- environment for clients -------------------------------------------------------------------


def emulator_env(bigtable_host_port: str | None = None) -> dict[str, str]:
    """Variables that point clients at local servers: the Bigtable emulator (when given) and
    fake AWS credentials (DynamoDB endpoints are passed explicitly as endpoint_url)."""
    env = dict(FAKE_AWS_ENV)
    if bigtable_host_port:
        env["BIGTABLE_EMULATOR_HOST"] = bigtable_host_port
    return env


@contextlib.contextmanager
def patched_environ(env: dict[str, str], unset: tuple[str, ...] = ("AWS_PROFILE",)) -> Iterator[None]:
    """Set `env` (and drop `unset`, so no real profile is picked up) in os.environ, then restore it."""
    saved = {k: os.environ.get(k) for k in (*env, *unset)}
    os.environ.update(env)
    for k in unset:
        os.environ.pop(k, None)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


if __name__ == "__main__":  # used by tools/setup.sh: `local_servers.py which cbtemulator|bigtable|moto|dynalite`
    finders = {"cbtemulator": lambda: _require(find_cbtemulator(), "cbtemulator"), "bigtable": find_bigtable_emulator,
               "moto": find_moto_server, "dynalite": find_dynalite}
    if len(sys.argv) != 3 or sys.argv[1] != "which" or sys.argv[2] not in finders:
        sys.exit(f"usage: {sys.argv[0]} which {{{'|'.join(finders)}}}")
    try:
        print(finders[sys.argv[2]]())
    except ServerNotInstalled as e:
        sys.exit(str(e))
