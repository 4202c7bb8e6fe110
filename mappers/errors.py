"""The one error hierarchy of ddb2bt. Standard library only, so every layer (and `--help`) can import it.

Every error a user can cause or meet is a :class:`Ddb2btError`, and its class says what kind it is::

    Ddb2btError                 exit 1  (the base; a run that ends but does not reconcile is a result, not an error)
    ├── UsageError              exit 2  bad flag, spec, file, a missing table, or a target that disagrees with
    │                                   the spec; nothing was started (SpecError, ResumeError, ExportError, ...)
    ├── ServiceError            exit 3  a dependency is unreachable, too slow, or refused us
    │                                   (credentials, permissions, a dead emulator)
    └── Interrupted             exit 130 the user pressed Ctrl-C; the message says what goes on and how to go on

Item problems (an unmappable item, a refused write) are not exceptions: they are values
(``mappers.results.ItemError``) that become dead letters, and the run goes on.

The CLI decides by ``isinstance`` only. Beam re-raises a worker's error as a ``RuntimeError``
whose text holds the original's traceback, so :func:`recover` finds a ddb2bt error again in
an exception's chain, or in that text through the registry of ddb2bt error classes, and the
error keeps its kind (and exit code) across the pipeline boundary.
"""

from __future__ import annotations

import re
from typing import ClassVar

USAGE, FAILED, UNAVAILABLE, INTERRUPTED = 2, 1, 3, 130

_REGISTRY: dict[str, type[Ddb2btError]] = {}


class Ddb2btError(Exception):
    """Base of every ddb2bt error; ``str()`` is what a user sees: what went wrong and, after `; `, what to do."""

    exit_code: ClassVar[int] = FAILED

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(f"{message}; {hint}" if hint else message)

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        _REGISTRY[f"{cls.__module__}.{cls.__qualname__}"] = cls

    def __reduce__(self):  # picklable whatever the subclass's __init__ takes (Beam ships errors between processes)
        return _rebuild, (type(self), str(self))

    def one_line(self) -> str:
        """The message (hint included) on one line."""
        return " ".join(str(self).split()) or type(self).__name__

    def lines(self) -> list[str]:
        """What to show, one line per problem (an error that gathers several problems lists each)."""
        return [self.one_line()]


def _rebuild(cls: type[Ddb2btError], message: str) -> Ddb2btError:
    """An instance of ``cls`` with ``message``, without calling a subclass's own ``__init__``."""
    error = Exception.__new__(cls)
    Exception.__init__(error, message)
    return error


class UsageError(Ddb2btError):
    """Bad input: a flag, a spec, a file, a run directory, a target that disagrees with the spec. Nothing started."""

    exit_code = USAGE


class ServiceError(Ddb2btError):
    """A service (DynamoDB, Bigtable, S3/GCS, a local server) is unreachable, too slow, or refused the request."""

    exit_code = UNAVAILABLE


class Interrupted(Ddb2btError):
    """Ctrl-C: what was stopped, what keeps running, and the command that goes on from here."""

    exit_code = INTERRUPTED


# "ddb2bt.pipelines.bigtable.sink.BigtableWriteError: message", as a traceback prints an error.
_QUALIFIED_LINE = re.compile(r"^(?P<qualified>(?:[A-Za-z_]\w*\.)+[A-Za-z_]\w*): (?P<message>.*)$", re.MULTILINE)
_STEP_SUFFIX = re.compile(r" \[while running '[^']*'\]")


def recover(error: BaseException) -> Ddb2btError | None:
    """The ddb2bt error behind ``error``: itself, one in its cause/context chain, or one named in Beam's text.

    Beam's runners re-raise a worker's failure as ``RuntimeError(<the worker's traceback as text>)``;
    the last ``module.Class: message`` line of a registered ddb2bt class in that text is rebuilt as
    an instance of that class, so it keeps its kind and exit code.
    """
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, Ddb2btError):
            text = str(current)  # Beam re-raises a step's error as its own type with " [while running 'Step']" added
            return _rebuild(type(current), _STEP_SUFFIX.sub("", text).strip()) if _STEP_SUFFIX.search(text) else current
        current = current.__cause__ or current.__context__
    found = None
    for match in _QUALIFIED_LINE.finditer(str(error)):
        cls = _REGISTRY.get(match["qualified"])
        if cls is not None:
            found = (cls, match["message"])
    if found is None:
        return None
    cls, message = found
    return _rebuild(cls, _STEP_SUFFIX.sub("", message).strip())
