"""One place that turns errors into a one-line message and an exit code.

Exit codes: 0 done; 1 the command ran and found problems (plan errors, differences, a run that
did not reconcile); 2 bad input, nothing started (usage, spec, files, a target that disagrees
with the spec, a missing table); 3 a service could not be reached or refused us (credentials,
permissions, endpoints, a dead emulator); 130 interrupted. Decided by type only: ddb2bt's
errors (:mod:`ddb2bt.mappers.errors`) carry their kind, and the libraries' errors are
translated by :func:`ddb2bt.pipelines.run.service_errors.as_ddb2bt_error`.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any, Callable, Iterator, NoReturn

from rich.console import Console

import typer
from typer.core import TyperGroup

from ..mappers.errors import INTERRUPTED, Ddb2btError, Interrupted


def classify(error: BaseException) -> Ddb2btError | None:
    """The ddb2bt error for ``error``, or None for a bug (which keeps its traceback under --debug)."""
    from ..pipelines.run.service_errors import as_ddb2bt_error  # light: it looks only at libraries already loaded

    return as_ddb2bt_error(error)


def say_error(line: str) -> None:
    """Print `error: line` on stderr, a URL's credentials masked: the one place error lines are printed."""
    from ..pipelines.run.service_errors import redact

    typer.echo(f"error: {redact(line)}", err=True)


def report(code: int, lines: list[str]) -> NoReturn:
    """Print each line as `error: ...` on stderr and exit with ``code``."""
    for line in lines:
        say_error(line)
    raise typer.Exit(code)


def _reader_left() -> None:
    """stdout's reader is gone: what is still buffered, and Python's flush at exit, go to /dev/null (a flush into the
    closed pipe would make the exit status 120), and nothing is said about it on stderr."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            os.dup2(devnull, stream.fileno())
    os.close(devnull)


def _broken_pipe(console: Any) -> None:
    """rich's Console, on a closed stdout, exits 1 (rich.console.Console.on_broken_pipe): the code this CLI gives
    "found problems". Raised as BrokenPipeError instead, which the CLI ends with exit 0, as for typer.echo."""
    console.quiet = True
    raise BrokenPipeError


Console.on_broken_pipe = _broken_pipe  # type: ignore[method-assign,assignment]  # rich's documented hook


READS_ONLY = frozenset({"migrate-plan", "report", "infer", "parity", "cutover-status", "schema", "init"})
"""Commands that write nothing but their own output (stdout, or the -o/--out file once everything is computed)."""


def interrupted_line(given: list[str]) -> str:
    """What Ctrl-C in a command that says nothing of its own shows: for one that only reads, that nothing was written
    and to run it again (a bare "interrupted" left a user wondering what it had done)."""
    import shlex

    command = next((arg for arg in given if not arg.startswith("-")), None)
    if command in READS_ONLY:
        return (f"interrupted: `ddb2bt {command}` only reads, and wrote nothing; run it again: "
                f"{shlex.join(['ddb2bt', *given])}")
    return "interrupted"


@contextlib.contextmanager
def ctrl_c_says(message: str | Callable[[], str], hint: str | Callable[[], str] = "") -> Iterator[None]:
    """Ctrl-C (or SIGTERM, or Ctrl-C at a question) inside the block is :class:`Interrupted` with ``message`` (what
    was done, what was not) and ``hint`` (how to go on), each a text or a function called then; without it the
    command said only "interrupted", and a user could not tell whether anything was written or how to go on."""
    try:
        yield
    except (KeyboardInterrupt, typer.Abort):
        raise Interrupted(message() if callable(message) else message, hint() if callable(hint) else hint) from None


def _plain_flags(group: Any) -> None:
    """A flag (`--yes`, `--resume`) takes no value: no `<bool>` type in `--help` (typer shows one for every option)."""
    for command in [group, *getattr(group, "commands", {}).values()]:
        if command is not group:
            _plain_flags(command)
        helper = command.get_help_option(typer.Context(command))  # made once per command, then kept (click caches it)
        for param in [*getattr(command, "params", ()), *([helper] if helper is not None else [])]:
            if getattr(param, "is_flag", False) and param.metavar is None:
                param.metavar = ""


class ErrorHandlingGroup(TyperGroup):
    """A typer group whose commands' errors become one line on stderr (unless --debug), usage errors included."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        given = list(args[0] if args else kwargs.pop("args", None) or sys.argv[1:])
        _plain_flags(self)
        with _sigterm_as_ctrl_c():
            self._main(given, *args, **kwargs)

    def _main(self, given: list[str], *args: Any, **kwargs: Any) -> NoReturn:
        from .options import dashed

        try:  # not standalone, so that typer's boxed usage errors come here; an Exit comes back as its code
            code = super().main(dashed(given), *args[1:], **{**kwargs, "standalone_mode": False})
        except typer.TyperException as usage:  # typer's usage errors, in the same one-line style as ours
            usage_ctx = getattr(usage, "ctx", None)
            hint = f" (see `{usage_ctx.command_path} --help`)" if usage_ctx else ""
            message = " ".join(usage.format_message().replace("Value error, ", "").split())
            say_error(f"{message}{hint}")
            sys.exit(usage.exit_code)
        except typer.Abort:
            say_error(interrupted_line(given))
            sys.exit(INTERRUPTED)
        except BrokenPipeError:  # `ddb2bt ... | head`: the reader left; say nothing more, exit 0 (docs/… README)
            _reader_left()
            sys.exit(0)
        sys.exit(code if isinstance(code, int) else 0)

    def invoke(self, ctx: Any) -> Any:  # click's Context (typer vendors click)
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, typer.TyperException):
            raise
        except KeyboardInterrupt:  # typer would turn it into a silent exit 130: say it, as for any command's stop
            raise typer.Abort() from None
        except BrokenPipeError as error:  # the end of `| head` only if stdout's reader has left: else a failure
            if _stdout_gone():
                raise
            _fail(ctx, error)
        except Exception as error:  # noqa: BLE001 - classified below; unknown ones keep their traceback
            _fail(ctx, error)


@contextlib.contextmanager
def _sigterm_as_ctrl_c() -> Any:
    """SIGTERM (how Kubernetes, Docker, systemd and a CI's timeout stop a process) does what Ctrl-C does: the command
    stops after the batch in flight, reconciles and prints how to go on (a second one quits at once). By default it
    would end the process on the spot, without a word. Only where nobody chose otherwise (SIG_DFL), in the main
    thread; the previous handler is back afterwards (the CLI runs inside tests' processes too)."""
    import os
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) != signal.SIG_DFL:
        yield
        return
    owner = os.getpid()

    def as_ctrl_c(signum: int, _frame: Any) -> None:
        if os.getpid() != owner:  # a forked child that kept the handler: the default, as it would have had
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        from .progress import Terminated

        raise Terminated  # a KeyboardInterrupt: everything stops as for Ctrl-C; the progress says SIGTERM

    signal.signal(signal.SIGTERM, as_ctrl_c)
    try:
        yield
    finally:
        if signal.getsignal(signal.SIGTERM) is as_ctrl_c:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _stdout_gone() -> bool:
    """Whether stdout is a pipe (or socket) whose reader has left: a BrokenPipeError from anything else (a worker's
    pipe, a server's socket) is a failure, and was ended with exit 0 as though `| head` had read enough."""
    import select

    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # a stream without a descriptor (tests' runner): the process's own
        fd = 1
    try:
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        return any(events & (select.POLLERR | select.POLLHUP) for _fd, events in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # no poll (Windows) or no descriptor: as before, the reader left
        return True


def _fail(ctx: Any, error: BaseException) -> NoReturn:
    """One line for ``error`` and its exit code; a bug's line says how to see its traceback (raised under --debug)."""
    if (ctx.obj or {}).get("debug"):
        raise error
    found = classify(error)
    if found is None:
        # --debug is the main command's option: after the subcommand it is refused (an unknown option)
        again = f"`ddb2bt --debug {ctx.invoked_subcommand} ...`" if ctx.invoked_subcommand else "--debug"
        say_error(f"unexpected {type(error).__name__}: {' '.join(str(error).split())[:500]} "
                  f"(a bug: please report it; run it again as {again} for the traceback)")
        raise typer.Exit(1) from None
    report(found.exit_code, found.lines())
