"""The JSON files ddb2bt writes into a run folder, read back; one damaged or edited is refused in one line naming it.

Every such file (a migration's checkpoint, validate's marker, the cutover's timeline, the tail's state, a redrive's
record, ...) is read by :func:`read_json`, with a ``parse`` that turns the document into what its reader needs and
raises where it is not as ddb2bt wrote it. The refusal names the file, what is wrong and what to do; its class,
its wording of what the file should be and its advice are the reader's (a migration's checkpoint refuses with a
``ResumeError`` and "start the run again with another --run-dir"). Before, a damaged file ended in "unexpected
JSONDecodeError ... (a bug)" (or TypeError, KeyError) wherever a reader had no copy of this.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from ...mappers.errors import Ddb2btError, UsageError

T = TypeVar("T")

AS_WRITTEN = "as ddb2bt wrote it"
RESTORE = "restore it, or move the run folder aside and start that step again in a new one"


class RunFileError(UsageError):
    """A file of the run folder that is not as ddb2bt wrote it (damaged, edited, or another program's)."""


class NotAsWritten(ValueError):
    """What a ``parse`` of :func:`read_json` finds wrong with a document, in words the refusal shows as they are."""


def read_json(path: str, parse: Callable[[Any], T] | None = None, *, error: type[Ddb2btError] = RunFileError,
              written: str = AS_WRITTEN, fix: str = RESTORE) -> Any | None:
    """The JSON document at ``path`` (local, gs:// or s3://) through ``parse``, or None when there is none.

    A document that is not JSON, or that ``parse`` refuses (raising :class:`NotAsWritten`, or the ValueError,
    TypeError, KeyError or AttributeError of reading what is not there), is an ``error``: "<path> is not
    <written> (<what is wrong>)", and ``fix``, what to do."""
    from apache_beam.io.filesystems import FileSystems

    if not FileSystems.exists(path):
        return None
    with FileSystems.open(path) as handle:
        text = handle.read()
    try:
        data = json.loads(text)
    except ValueError as err:  # JSONDecodeError, UnicodeDecodeError
        raise error(f"{path} is not {written} (not JSON: {getattr(err, 'msg', err)})", fix) from None
    if parse is None:
        return data
    try:
        return parse(data)
    except (ValueError, TypeError, KeyError, AttributeError) as err:
        raise error(f"{path} is not {written} ({_problem(err)})", fix) from None


def _problem(err: Exception) -> str:
    if isinstance(err, NotAsWritten):
        return str(err)
    if isinstance(err, KeyError):
        return f"no field {err}"
    return f"{type(err).__name__}: {err}"


def json_object(data: Any) -> dict[str, Any]:
    """``data`` if it is a JSON object (a ``parse`` for :func:`read_json`)."""
    if not isinstance(data, dict):
        raise NotAsWritten(f"not a JSON object: {json.dumps(data)[:40]}")
    return data
