"""Local mode: the embedded servers in the background with the seed tables loaded, to explore ddb2bt by hand.

``up`` starts a small supervisor process (``python -m ddb2bt.app.local serve DIR``) in a session of
its own. The supervisor starts DynamoDB (moto_server, or dynalite) and the Bigtable emulator through
:mod:`ddb2bt.pipelines.local.servers` (free loopback ports, process groups), loads the seed tables
of the worked examples, writes ``DIR/state.json`` (pids, endpoints, tables) and waits. ``down``
sends it SIGTERM, and the servers stop the way they stop after the demo or a test session. Safe to
re-run: ``up`` with a live state says so and starts nothing; a stale state (its supervisor gone)
is cleaned up first. Nothing here prints: the CLI renders the results.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..mappers.errors import ServiceError, UsageError

DEFAULT_DIR = Path("out/local")
STATE_FILE = "state.json"
LOG_FILE = "local.log"
DYNAMODB_SERVERS = ("moto", "dynalite")
START_SECONDS = 120.0
STOP_SECONDS = 20.0
REGION = "us-east-1"


class LocalModeError(ServiceError):
    """The local servers did not come up, or did not stop; the message carries the supervisor's log tail."""


@dataclass(frozen=True)
class Server:
    name: str
    endpoint: str
    pid: int


@dataclass(frozen=True)
class SeedTable:
    table: str
    items: int
    template: str
    """The starter template (`ddb2bt init --template NAME`) whose spec reads this table."""


@dataclass(frozen=True)
class LocalState:
    """What `local up` started: the supervisor, the two servers, the seed tables."""

    dir: str
    supervisor_pid: int
    dynamodb: Server
    bigtable: Server
    tables: tuple[SeedTable, ...]

    def environ(self) -> dict[str, str]:
        """The variables that point ddb2bt (and the AWS CLI, cbt, ...) at these servers.

        DynamoDB and its Streams by their own variables (what `migrate`, `tail` and `aws dynamodbstreams` read);
        every other AWS service (S3, STS, ...) by ``AWS_ENDPOINT_URL``, to the same server: nothing run in this
        shell reaches AWS (dynalite, which has no Streams or S3, answers such calls with an error).
        """
        from ..pipelines.local.servers import emulator_env

        endpoint = self.dynamodb.endpoint
        return {**emulator_env(self.bigtable.endpoint), "AWS_REGION": REGION, "AWS_ENDPOINT_URL": endpoint,
                "AWS_ENDPOINT_URL_DYNAMODB": endpoint, "AWS_ENDPOINT_URL_DYNAMODB_STREAMS": endpoint}

    def dead_servers(self) -> tuple[Server, ...]:
        """The servers that no longer run (killed, crashed, or a zombie its supervisor has not reaped yet)."""
        return tuple(server for server in (self.dynamodb, self.bigtable) if not _is_server(server))

    def exports(self) -> list[str]:
        """Shell lines for `eval "$(ddb2bt local up)"`: the user's own values saved first (see :func:`save_lines`), the
        variables, no AWS profile, and endpoint variables heeded."""
        names = changed(tuple(self.environ()))
        return (save_lines(names) + [f"export {name}={value}" for name, value in sorted(self.environ().items())]
                + [f"unset {name}" for name in UNSET])

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LocalState:
        return cls(data["dir"], data["supervisor_pid"], Server(**data["dynamodb"]), Server(**data["bigtable"]),
                   tuple(SeedTable(**table) for table in data["tables"]))


@dataclass(frozen=True)
class UpResult:
    state: LocalState
    already_up: bool
    cleaned: tuple[str, ...] = ()
    """What a stale state left behind and was cleaned up first."""
    died: tuple[Server, ...] = ()
    """The servers found dead under a live supervisor; `up` stopped the rest and started afresh."""


@dataclass(frozen=True)
class DownResult:
    was_up: bool
    stopped: tuple[int, ...] = ()
    """The pids stopped (the supervisor, then any server it left behind)."""
    variables: tuple[str, ...] = ()
    """The variables `up`'s lines changed, to restore (:func:`restore_lines`)."""


# --------------------------------------------------------------------------- the user's variables

SAVED = "DDB2BT_LOCAL_SAVED"
"""Set by `up`'s lines while the user's own values are saved (in ``DDB2BT_LOCAL_SAVED_<NAME>``)."""
CBT_PROJECT = CBT_INSTANCE = "ddb2bt-local"
"""The project and instance a spec targets when it names none (the emulator accepts any)."""


UNSET = ("AWS_PROFILE", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS")
"""What `up`'s lines unset: a profile would sign for a real account, and the other would make clients ignore the
endpoint variables that keep them local."""


def changed(names: tuple[str, ...]) -> tuple[str, ...]:
    """The variables `up`'s lines set or unset: ``names`` and :data:`UNSET`."""
    return tuple(sorted({*names, *UNSET}))


def save_lines(names: tuple[str, ...]) -> list[str]:
    """Shell lines that keep the user's own value of each of ``names`` (only those set) before `up` changes them, once
    per shell (a second `up` keeps the first save). The shell copies the values: they are never printed, so a
    credential of the user's does not appear on a terminal that runs `ddb2bt local up` without eval."""
    saves = " ".join(f'if [ -n "${{{name}+x}}" ]; then export {SAVED}_{name}="${name}"; fi;' for name in names)
    return [f'if [ -z "${{{SAVED}+x}}" ]; then export {SAVED}=1; {saves} fi']


def restore_lines(names: tuple[str, ...]) -> list[str]:
    """Shell lines for `eval "$(ddb2bt local down)"`: each of ``names`` back to the value the user had before `up`
    (unset when it had none, or when `up`'s lines were not eval'd in this shell)."""
    return [f'if [ -n "${{{SAVED}_{name}+x}}" ]; then export {name}="${SAVED}_{name}"; unset {SAVED}_{name}; '
            f"else unset {name}; fi" for name in names] + [f"unset {SAVED}"]


# --------------------------------------------------------------------------- processes


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not yet reaped by its parent, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    stat = Path(f"/proc/{pid}/stat")
    with contextlib.suppress(OSError, IndexError):
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    return True


def _reap(pid: int) -> None:
    """Collect ``pid``'s exit status if it is our child (when `up` and `down` run in one process)."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def _wait_gone(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        _reap(pid)
        if not alive(pid):
            return True
        time.sleep(0.05)
    return not alive(pid)


CMDLINE_MARKERS = {"moto_server": b"moto_server", "dynalite": b"dynalite", "bigtable-emulator": b"emulator"}
"""What the command line of each server (named as pipelines.local_servers names them) contains."""


def _is_server(server: Server) -> bool:
    """The server's pid still runs that server (pids are reused): its command line names it."""
    try:
        cmdline = Path(f"/proc/{server.pid}/cmdline").read_bytes()
    except OSError:
        return False
    return alive(server.pid) and CMDLINE_MARKERS.get(server.name, server.name.encode()) in cmdline


def _stop_group(pid: int) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, sig)
        if _wait_gone(pid, 5):
            return


# --------------------------------------------------------------------------- state


def _state_path(folder: Path) -> Path:
    return folder / STATE_FILE


def _read_state(folder: Path) -> dict[str, Any] | None:
    try:
        return dict(json.loads(_state_path(folder).read_text(encoding="utf-8")))
    except FileNotFoundError:
        return None
    except OSError as err:  # a --dir below a file, a state.json that is a folder: no traceback, no bare strerror
        raise _unusable(folder, err) from None
    except (ValueError, TypeError) as err:  # not JSON, or JSON that is no object (5: TypeError)
        raise UsageError(f"{_state_path(folder)} is not a local-mode state file: {err}",
                         "remove it (and stop any servers it named) or choose another --dir") from None


def _unusable(folder: Path, err: OSError) -> UsageError:
    return UsageError(f"--dir {folder} cannot be used ({err.strerror or err})", "choose a --dir this user can write")


def _write_state(folder: Path, data: dict[str, Any]) -> None:
    """Whole or not at all: `up` polls this file while the supervisor writes it."""
    tmp = folder / (STATE_FILE + ".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    tmp.replace(_state_path(folder))


def status(folder: Path = DEFAULT_DIR) -> LocalState | None:
    """The local servers of ``folder``, or None when they are not up (a stale state counts as not up).

    A live supervisor whose server died still gives its state: ``dead_servers()`` names the dead ones.
    """
    data = _read_state(folder)
    if not data or not data.get("ready"):
        return None
    state = LocalState.from_json(data)
    return state if alive(state.supervisor_pid) else None


# --------------------------------------------------------------------------- up / down


def up(folder: Path = DEFAULT_DIR, dynamodb: str = "moto", *, timeout: float = START_SECONDS) -> UpResult:
    """Start the servers in the background and load the seed tables; if they are up already, say so."""
    if dynamodb not in DYNAMODB_SERVERS:
        raise UsageError(f"unknown DynamoDB server {dynamodb!r}", f"choose one of {', '.join(DYNAMODB_SERVERS)}")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise _unusable(folder, err) from None
    running = status(folder)
    if running is not None and not running.dead_servers():
        return UpResult(running, already_up=True)
    restarted: tuple[int, ...] = ()
    died = running.dead_servers() if running is not None else ()
    if died:  # a server died under a live supervisor: stop what is left, start afresh
        restarted = down(folder).stopped
    starting = _read_state(folder) or {}
    if "supervisor_pid" in starting and not starting.get("error") and alive(int(starting["supervisor_pid"])):
        raise UsageError(f"the local servers in {folder} are still starting (pid {starting['supervisor_pid']})",
                         f"wait a moment and run `ddb2bt local status --dir {folder}`, or `ddb2bt local down`")
    cleaned = restarted + _clean_stale(folder)
    with open(folder / LOG_FILE, "wb") as log:  # a file, not a pipe: nobody reads the supervisor's output
        # Not the user's AWS profile: the servers and the seeding need none, and one the machine lacks fails them.
        environ = {name: value for name, value in os.environ.items() if name != "AWS_PROFILE"}
        proc = subprocess.Popen([sys.executable, "-m", __name__, "serve", str(folder), dynamodb], env=environ,
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)  # not stopped by the terminal's Ctrl-C; its own group
    deadline = time.monotonic() + timeout
    while True:
        data = _read_state(folder)
        if data and data.get("ready"):
            return UpResult(LocalState.from_json(data), already_up=False, cleaned=cleaned, died=died)
        if proc.poll() is not None or (data and data.get("error")):
            proc.wait()
            raise LocalModeError(f"the local servers did not start: {(data or {}).get('error') or _log_tail(folder)}",
                                 f"see {folder / LOG_FILE}")
        if time.monotonic() > deadline:
            _stop_group(proc.pid)
            raise LocalModeError(f"the local servers were not up after {timeout:.0f} s: {_log_tail(folder)}",
                                 f"see {folder / LOG_FILE}")
        time.sleep(0.1)


def down(folder: Path = DEFAULT_DIR) -> DownResult:
    """Stop what `up` started in ``folder`` (the supervisor stops its servers); nothing to do when it is not up."""
    data = _read_state(folder)
    if not data or "supervisor_pid" not in data:
        return DownResult(was_up=False)
    stopped = []
    pid = int(data["supervisor_pid"])
    if alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        if not _wait_gone(pid, STOP_SECONDS):
            raise LocalModeError(f"the local-mode supervisor (pid {pid}) did not stop in {STOP_SECONDS:.0f} s",
                                 f"stop it with `kill {pid}`, then run `ddb2bt local down --dir {folder}` again")
        stopped.append(pid)
    stopped += _clean_stale(folder)
    _state_path(folder).unlink(missing_ok=True)
    variables = changed(tuple(LocalState.from_json(data).environ())) if data.get("ready") else ()
    return DownResult(was_up=True, stopped=tuple(stopped), variables=variables)


def _clean_stale(folder: Path) -> tuple[Any, ...]:
    """Servers a dead supervisor left running (it was killed with SIGKILL): stop them, forget the state."""
    data = _read_state(folder)
    if not data:
        return ()
    stopped = []
    for key in ("dynamodb", "bigtable"):
        if key in data:
            server = Server(**data[key])
            if _is_server(server):
                _stop_group(server.pid)
                stopped.append(server.pid)
    _state_path(folder).unlink(missing_ok=True)
    return tuple(stopped)


def _log_tail(folder: Path, limit: int = 1500) -> str:
    try:
        text = (folder / LOG_FILE).read_bytes()[-limit:].decode("utf-8", "replace")
    except OSError:
        return "(no log)"
    return " ".join(text.split()) or "(empty log)"


# --------------------------------------------------------------------------- the supervisor


def serve(folder: Path, dynamodb: str = "moto") -> None:
    """The supervisor's body: start the servers, load the seeds, record them, wait for SIGTERM, stop them."""
    from ..pipelines.local import servers as local_servers
    from ..pipelines.dynamodb.client import ClientSettings, make_client
    from .seeds import SEEDED, load_seed_table

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # unwinds the servers' context managers
    state: dict[str, Any] = {"dir": str(folder), "supervisor_pid": os.getpid(), "ready": False}
    _write_state(folder, state)
    try:
        with contextlib.ExitStack() as stack:
            start = local_servers.moto_server if dynamodb == "moto" else local_servers.dynalite
            ddb = stack.enter_context(start())
            bigtable = stack.enter_context(local_servers.bigtable_emulator())
            stack.enter_context(local_servers.patched_environ(local_servers.emulator_env(bigtable.endpoint)))
            client = make_client(ClientSettings(endpoint_url=ddb.endpoint, region=REGION))
            tables = []
            for template in SEEDED:
                table, count = load_seed_table(client, template, stream=True)  # for `ddb2bt tail` too
                tables.append(asdict(SeedTable(table, count, template.name)))
            state.update(ready=True, tables=tables,
                         dynamodb=asdict(Server(ddb.name, ddb.endpoint, ddb.pid)),
                         bigtable=asdict(Server(bigtable.name, bigtable.endpoint, bigtable.pid)))
            _write_state(folder, state)
            while True:
                signal.pause()
    except Exception as error:  # noqa: BLE001 - recorded for `up`, which reports it in one line
        _write_state(folder, {**state, "ready": False, "error": f"{type(error).__name__}: {error}"})
        raise


if __name__ == "__main__":  # python -m ddb2bt.app.local serve DIR [moto|dynalite], started by `up`
    if len(sys.argv) not in (3, 4) or sys.argv[1] != "serve":
        sys.exit(f"usage: python -m {__name__} serve DIR [moto|dynalite] (started by `ddb2bt local up`)")
    serve(Path(sys.argv[2]), sys.argv[3] if len(sys.argv) == 4 else "moto")
