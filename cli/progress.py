"""Progress on stderr for the long steps, so stdout stays clean for the results (and `--format json`).

A local migration runs in a thread while this one shows what it has done, read from the run's
live totals (see :mod:`ddb2bt.pipelines.run.progress`): items read out of the expected count (or, when
no total is known, just the items and Scan pages read, never a share of a guess), rows, cells and
bytes written, the rate and an ETA, scan segments stored. On a terminal that is a bar;
otherwise (CI logs, pipes) a plain line every ``DDB2BT_PROGRESS_SECONDS`` (10 by default).

Ctrl-C asks the run to stop at its next batch and waits for it (the writer flushes and closes);
a second Ctrl-C quits at once. On a terminal, Ctrl-C is read as a key during the run rather than
sent as SIGINT to the whole process group (see :func:`ctrl_c_as_a_key`), so the worker processes
of a multi-process run live on until the run stops; elsewhere SIGINT reaches this process's main
thread (the pipeline's thread blocks it).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..mappers.units import human_size

PLAIN_SECONDS_ENV = "DDB2BT_PROGRESS_SECONDS"
PLAIN_SECONDS = 10.0
POLL_SECONDS = 0.25


def plain_seconds() -> float:
    """``DDB2BT_PROGRESS_SECONDS`` (PLAIN_SECONDS when unset or empty); a UsageError (exit 2) for a value that is not
    a positive number of seconds, read before the watched work starts."""
    import math

    from ..mappers.errors import UsageError

    text = os.environ.get(PLAIN_SECONDS_ENV) or ""
    if not text.strip():
        return PLAIN_SECONDS
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise UsageError(f"{PLAIN_SECONDS_ENV}={text!r} is not a number of seconds between progress lines",
                         f"set a positive number such as {PLAIN_SECONDS:g}, or unset it")
    return seconds
RATE_WINDOW_SECONDS = 30.0
WORKER_NOISE = ("No semi_persistent_directory found", "Discarding unparseable args", "Connecting to Bigtable emulator")
"""What every worker process of a multi-process DirectRunner says at start, to no one's benefit."""


def _console() -> Any:
    from rich.console import Console

    return Console(stderr=True)


@contextmanager
def spinner() -> Iterator[Callable[[str], None]]:
    """A spinner for steps whose length nobody knows in advance; yields the callback that names the current step."""
    with _console().status("starting…") as status:
        yield lambda message: status.update(message)


@contextmanager
def watching(label: str, figures: Callable[[], str]) -> Iterator[None]:
    """While the block runs: on a terminal a spinner with ``label`` and ``figures()`` (what is done so far); elsewhere a
    plain `progress: label: figures · elapsed` line every ``DDB2BT_PROGRESS_SECONDS`` (as `migrate` has), from a
    thread that polls ``figures`` (it must be cheap and must not raise)."""
    console, start, done = _console(), time.monotonic(), threading.Event()
    every = POLL_SECONDS * 4 if console.is_terminal else plain_seconds()
    with (console.status(label) if console.is_terminal else _nothing()) as status:

        def tick() -> None:
            while not done.wait(every):
                line = f"{label}: {figures()} · {clock(time.monotonic() - start)} elapsed"
                if status is not None:
                    status.update(line)
                else:
                    console.print(f"progress: {line}", markup=False, highlight=False, soft_wrap=True)

        ticker = threading.Thread(target=tick, name="ddb2bt-progress", daemon=True)
        ticker.start()
        try:
            yield
        finally:
            done.set()
            ticker.join()
        if status is None:  # the log ends with what was done
            line = f"{label}: {figures()} · {clock(time.monotonic() - start)} elapsed"
            console.print(f"progress: {line}", markup=False, highlight=False, soft_wrap=True)


@contextmanager
def _nothing() -> Iterator[None]:
    yield None


def say(text: str) -> None:
    """One line on stderr (everything that is not the command's data)."""
    print(text, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- worker noise


class _WorkerNoise(logging.Filter):
    """Drops the start-up chatter of multi-process DirectRunner workers (relayed to this process as warnings), and
    Beam's traceback of the stop a Ctrl-C asked for (the CLI says what happened, in one line)."""

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if record.exc_info and record.exc_info[0] is not None:
            text += record.exc_info[0].__name__
        return not any(noise in text for noise in (*WORKER_NOISE, "RunInterrupted", "stop requested"))


NOISY_LOGGERS = ("apache_beam.runners.portability.local_job_service", "apache_beam.runners.common",
                 "apache_beam.runners.worker.sdk_worker", "apache_beam.runners.worker.bundle_processor",
                 "apache_beam.runners.portability.fn_api_runner.fn_runner")


def quiet_workers() -> None:
    """No start-up warnings from every worker process, no traceback for a requested stop (errors still come through).

    Beam's loggers get a filter (the worker's logs reach this process through the job service's
    relay); the emulator's "Connecting to Bigtable emulator" RuntimeWarning, which each worker
    prints itself, is turned off through PYTHONWARNINGS, which the workers inherit.
    """
    for name in NOISY_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _WorkerNoise) for f in logger.filters):
            logger.addFilter(_WorkerNoise())
    ignore = "ignore:Connecting to Bigtable emulator"
    current = os.environ.get("PYTHONWARNINGS", "")
    if ignore not in current:
        os.environ["PYTHONWARNINGS"] = f"{current},{ignore}" if current else ignore


# --------------------------------------------------------------------------- a run with live progress


@dataclass
class Snapshot:
    """What the run has done at one moment, and what that means in rate and time."""

    totals: dict[str, int]
    elapsed: float
    rate: float | None
    """Items read per second over the last few seconds."""
    expected: int | None
    segments: tuple[int, int] | None
    """(stored, total) scan segments, for scans."""

    @property
    def eta(self) -> float | None:
        items = self.totals.get("items_read", 0)
        if not self.expected or not self.rate or items >= self.expected:
            return None
        return (self.expected - items) / self.rate

    def text(self) -> str:
        t = self.totals
        read = t.get("items_read", 0)
        if self.expected and read <= self.expected:
            items = f"{read:,}/{self.expected:,} items read"
        elif self.expected:  # the expected count was an estimate (DescribeTable's lags): no share of it
            items = f"{read:,} items read (more than the {self.expected:,} expected)"
        else:  # no known total: what was read, never a share of a guess
            items = f"{read:,} items read"
        parts = [items]
        if t.get("pages_read"):
            parts.append(f"{t['pages_read']:,} page{'s' * (t['pages_read'] != 1)}")
        parts.append(f"{t.get('rows_written', 0):,} rows ({t.get('cells_written', 0):,} cells, "
                     f"{human_size(t.get('bytes_written', 0))}) written")
        if t.get("dead_lettered"):
            parts.append(f"{t['dead_lettered']:,} dead-lettered")
        parts.append(f"{self.rate:,.0f} items/s" if self.rate is not None else "- items/s")
        if self.segments is not None:
            parts.append(f"{self.segments[0]}/{self.segments[1]} segments stored")
        parts.append(f"{clock(self.elapsed)} elapsed")
        eta = self.eta
        parts.append(f"ETA {clock(eta)}" if eta is not None else "ETA -")
        return " · ".join(parts)


def clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


class _Rate:
    """Items per second over a sliding window of samples."""

    def __init__(self, window: float = RATE_WINDOW_SECONDS) -> None:
        self.window = window
        self.samples: deque[tuple[float, int]] = deque()

    def add(self, now: float, items: int) -> float | None:
        self.samples.append((now, items))
        while len(self.samples) > 2 and now - self.samples[1][0] >= self.window:
            self.samples.popleft()
        first_time, first_items = self.samples[0]
        return (items - first_items) / (now - first_time) if now - first_time >= 1.0 else None


class Terminated(KeyboardInterrupt):
    """SIGTERM, delivered as a Ctrl-C (``cli.errors``): it stops the run the same way, and the progress says which
    came, so that a process stopped by its supervisor is not told to press Ctrl-C."""


CTRL_C, SIGTERM = "ctrl-c", "sigterm"
_STOPPING = {
    CTRL_C: ("stopping… (Ctrl-C again: quit now)", "stopping after the batch in flight (Ctrl-C again to quit now)…"),
    SIGTERM: ("SIGTERM: stopping… (a second SIGTERM: quit now)",
              "SIGTERM received: stopping after the batch in flight (a second SIGTERM quits now)…"),
}
"""What asked the run to stop -> (the bar's text, the plain line): how to quit without waiting, said the way it came."""


@dataclass
class LiveRun:
    """What :func:`run_live` needs to know about a run, as plain callables (no app import here)."""

    label: str
    run: Callable[[], Any]
    totals: Callable[[], dict[str, int]]
    segments: Callable[[], tuple[int, int] | None]
    stop: Callable[[], None]
    expected: int | None = None
    on_force_quit: Callable[[], str] | None = None
    """The line to print when a second Ctrl-C quits without waiting (e.g. the resume command)."""
    worker_log: str | None = None
    """Where processes the run starts write their stderr (this process's own goes on to the terminal)."""
    abandon: Callable[[bool, str], Any] | None = None
    """The run's result when it cannot end by itself, given whether a stop was asked and why it cannot (a worker
    process died: a SIGTERM to the whole process group, the out-of-memory killer): reconciled from what is stored."""


WORKER_EXITED = "Worker subprocess exited with return code "
"""How Beam's multi-process DirectRunner says, in a thread of its own, that a worker process ended: the runner then
waits for it forever."""
WORKER_GRACE_SECONDS = 5.0
"""How long a run whose worker process died may still end by itself (it cannot: the batches it held are lost)."""


def _worker_died(code: str) -> str:
    """`a worker process of the run was killed by SIGTERM` from Beam's return code (negative: the signal)."""
    try:
        number = int(code)
    except ValueError:
        return f"a worker process of the run ended ({code})"
    killed = -number if number < 0 else number - 128 if number > 128 else 0  # a shell says 128 + the signal
    if killed:
        try:
            name = signal.Signals(killed).name
        except ValueError:
            name = f"signal {killed}"
        return f"a worker process of the run was killed by {name}"
    return f"a worker process of the run exited with code {number}"


_BEAM_WORKER_THREADS = ("run_worker", "read_grpc_client_inputs", "beam_control_read")
"""Beam's threads that watch a worker process, or read its connections (their names in Beam 2.7x)."""


@contextmanager
def _beam_thread_errors(log: str | None, died: list[str]) -> Iterator[None]:
    """While the run is live: a worker process's end (Beam says it in a thread, with a traceback) is noted in
    ``died``, and it and what follows from it in Beam's other threads (their connections to it broken) go to the
    worker log instead of across the terminal: the run's end says it in one line."""
    previous = threading.excepthook

    def hook(args: Any) -> None:
        if isinstance(args.exc_value, RuntimeError) and str(args.exc_value).startswith(WORKER_EXITED):
            died.append(_worker_died(str(args.exc_value)[len(WORKER_EXITED):].strip()))
        # a worker's connections break before its end is known: Beam's threads that read them say it first
        if log is None or not (died or (args.thread is not None and args.thread.name in _BEAM_WORKER_THREADS)):
            previous(args)
            return
        import traceback

        with open(log, "a", encoding="utf-8") as out:
            out.write(f"Exception in thread {args.thread.name if args.thread else '?'}:\n")
            out.writelines(traceback.format_exception(args.exc_type, args.exc_value, args.exc_traceback))

    threading.excepthook = hook
    try:
        yield
    finally:
        threading.excepthook = previous


def run_live(live: LiveRun) -> Any:
    """Run ``live.run`` in a thread and show its progress until it ends; Ctrl-C asks it to stop."""
    console = _console()
    outcome: dict[str, Any] = {}

    def target() -> None:
        if hasattr(signal, "pthread_sigmask"):  # only the main thread takes a SIGINT (e.g. `kill -INT`)
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            outcome["result"] = live.run()
        except BaseException as err:  # re-raised in the caller's thread, where the CLI's error handler is
            outcome["error"] = err
        finally:
            finished.set()

    finished = threading.Event()  # not Thread.join(timeout): a Ctrl-C inside it can leave is_alive() False too early
    worker = threading.Thread(target=target, name="ddb2bt-migrate", daemon=True)
    start = time.monotonic()
    rate = _Rate()
    stopping = ""  # what asked the run to stop ("" until something does): the text says how to quit at once
    died: list[str] = []  # worker processes that ended under the run (it cannot end by itself then)
    given_up_at: float | None = None

    def snapshot() -> Snapshot:
        totals = live.totals()
        now = time.monotonic()
        return Snapshot(totals, now - start, rate.add(now, totals.get("items_read", 0)), live.expected,
                        live.segments())

    with stderr_of_children(live.worker_log), _beam_thread_errors(live.worker_log, died), \
            _display(console, live.label) as show, ctrl_c_as_a_key() as pressed:
        worker.start()
        while not finished.is_set():
            try:
                finished.wait(POLL_SECONDS)
                if died and live.abandon is not None:
                    given_up_at = given_up_at or time.monotonic()
                    if time.monotonic() - given_up_at > WORKER_GRACE_SECONDS and not finished.is_set():
                        outcome["result"] = live.abandon(bool(stopping), died[0])
                        break
                if pressed is not None and pressed():
                    raise KeyboardInterrupt
                if stopping:
                    live.stop()  # again: cheap, and safe against a run that had not started its clock yet
                show(snapshot(), stopping)
            except KeyboardInterrupt as interrupt:
                if stopping:
                    _force_quit(console, live)
                stopping = SIGTERM if isinstance(interrupt, Terminated) else CTRL_C
                live.stop()
                show(snapshot(), stopping)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]


@contextmanager
def stderr_of_children(path: str | None) -> Iterator[None]:
    """Processes started meanwhile write their stderr (fd 2) to ``path``; this one's ``sys.stderr`` stays as it was.

    A multi-process DirectRunner starts its workers with this process's fd 2, and each prints
    its own start-up warnings and tracebacks there; they belong in a log, not across the bar.
    """
    if path is None:
        yield
        return
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    sys.stderr.flush()
    terminal = os.dup(2)
    log = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    own, saved = open(os.dup(terminal), "w", buffering=1, encoding="utf-8", errors="replace"), sys.stderr
    os.dup2(log, 2)
    os.close(log)
    sys.stderr = own
    try:
        yield
    finally:
        own.flush()
        sys.stderr = saved
        os.dup2(terminal, 2)
        os.close(terminal)
        own.close()


_restore_terminal: list[Callable[[], None]] = []


@contextmanager
def ctrl_c_as_a_key() -> Iterator[Callable[[], bool] | None]:
    """On a terminal this process owns, Ctrl-C becomes a key this process reads instead of a SIGINT.

    The terminal sends SIGINT to its whole foreground process group, and a multi-process
    DirectRunner's workers (started through a shell, which unblocks signals) would die of it and
    leave the runner waiting for them. So for the run the terminal's interrupt character is turned
    off (Ctrl-Z and Ctrl-\\ still work) and input is read unbuffered; yields "was Ctrl-C pressed
    since the last call?", or None when stdin is no terminal in the foreground (SIGINT then stays
    the way in). The terminal is restored afterwards.
    """
    try:
        fd = sys.stdin.fileno()
        owned = os.isatty(fd) and os.tcgetpgrp(fd) == os.getpgrp()
    except (AttributeError, OSError, ValueError):  # e.g. a test runner's stdin
        owned = False
    if not owned:
        yield None
        return
    import select
    import termios

    saved = termios.tcgetattr(fd)
    mode = termios.tcgetattr(fd)
    mode[3] &= ~(termios.ICANON | termios.ECHO)
    mode[6][termios.VINTR] = bytes([os.fpathconf(fd, "PC_VDISABLE") & 0xFF])
    mode[6][termios.VMIN], mode[6][termios.VTIME] = 0, 0

    def restore() -> None:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)

    def pressed() -> bool:
        ready, _, _ = select.select([fd], [], [], 0)
        return bool(ready) and b"\x03" in os.read(fd, 1024)

    termios.tcsetattr(fd, termios.TCSADRAIN, mode)
    _restore_terminal.append(restore)
    try:
        yield pressed
    finally:
        _restore_terminal.remove(restore)
        restore()


def _force_quit(console: Any, live: LiveRun) -> None:
    for restore in _restore_terminal:
        restore()
    console.print("error: interrupted again: quit without waiting for the batches in flight"
                  + (f"; {live.on_force_quit()}" if live.on_force_quit else ""), markup=False, highlight=False)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(130)  # the pipeline's thread cannot be stopped from here; the segments it stored stay done


class _Board:
    """Two lines on a terminal: spinner, what, bar, share and ETA; then the counts. Redrawn by rich's Live."""

    def __init__(self, label: str) -> None:
        from rich.spinner import Spinner

        self.label, self.stopping = label, ""
        self.snap: Snapshot | None = None
        self.spinner = Spinner("dots")

    def __rich__(self) -> Any:
        from rich.console import Group
        from rich.progress_bar import ProgressBar
        from rich.table import Table
        from rich.text import Text

        snap = self.snap
        items = snap.totals.get("items_read", 0) if snap else 0
        expected = snap.expected if snap and snap.expected and items <= snap.expected else None  # else a pulse
        head = Table.grid(padding=(0, 1))
        what = _STOPPING[self.stopping][0] if self.stopping else self.label
        share = f"{min(items / expected, 1):.0%}" if expected else ""
        eta = snap.eta if snap else None
        head.add_row(self.spinner, Text(what), ProgressBar(total=expected, completed=items, width=30),
                     Text(f"{share} ETA {clock(eta) if eta is not None else '-'}"))
        return Group(head, Text("  " + (snap.text() if snap else "starting…"), overflow="fold"))


@contextmanager
def _display(console: Any, label: str) -> Iterator[Callable[[Snapshot, str], None]]:
    """A bar on a terminal; plain lines every few seconds elsewhere."""
    if console.is_terminal:
        from rich.live import Live

        board = _Board(label)
        with Live(board, console=console, refresh_per_second=4, transient=False):

            def show(snap: Snapshot, stopping: str) -> None:
                board.snap, board.stopping = snap, stopping

            yield show
        return
    every = plain_seconds()
    last: dict[str, Any] = {"at": time.monotonic(), "stopping": False, "snap": None, "shown": None}

    def plain(snap: Snapshot, stopping: str) -> None:
        now = time.monotonic()
        last["snap"] = snap
        if stopping and not last["stopping"]:
            last["stopping"] = True
            console.print(_STOPPING[stopping][1], markup=False, highlight=False)
        if now - float(last["at"]) >= every:
            last["at"], last["shown"] = now, snap
            console.print(f"progress: {snap.text()}", markup=False, highlight=False, soft_wrap=True)

    yield plain
    if last["snap"] is not None and last["snap"] is not last["shown"]:  # the log ends with what was done (as watching's)
        console.print(f"progress: {last['snap'].text()}", markup=False, highlight=False, soft_wrap=True)
