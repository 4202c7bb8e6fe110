"""The registry of change sources: which :class:`~.change_source.ChangeSource` the catch-up and the tail read.

Each kind registers a test on where the changes are (``catch-up --export PATH``'s path; None for the
tail, which reads the spec's table's stream) and a factory; the newest registration whose test holds
wins, so a change source registered later (a new module, a test) can claim what the built-in ones
would take. Built in: an incremental export (any path) and the table's DynamoDB stream (no path).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from .change_source import ChangeSource
from .dynamodb.incremental_export import IncrementalExportChanges
from .dynamodb.stream import StreamChanges
from .registry import Registration, Registry

if TYPE_CHECKING:
    from ..mappers.spec import MappingSpec

_CHANGES: Registry[ChangeSource] = Registry()
KINDS = _CHANGES.kinds
"""Every kind of change source, for the interface's tests."""


def register(kind: type[ChangeSource], matches: Callable[[str | None, MappingSpec], bool],
             make: Callable[[str | None, MappingSpec], ChangeSource]) -> Registration[ChangeSource]:
    """Make ``kind`` read the changes at the places that ``matches`` (where, spec), made by ``make``. Returns the
    registration, for :func:`unregister`."""
    return _CHANGES.register(kind, matches, make)


def unregister(registration: Registration[ChangeSource]) -> None:
    _CHANGES.unregister(registration)


def change_source_for(spec: MappingSpec, where: str | None = None) -> ChangeSource:
    """The change source at ``where`` (an export's path), or the spec's table's stream (None): chosen here, once,
    for the catch-up and the tail."""
    found = _CHANGES.choose(where, spec)
    if found is None:  # the built-ins take every place
        raise LookupError(f"no registered change source reads {where or 'the stream'}")
    return found


register(StreamChanges, lambda where, spec: where is None, lambda where, spec: StreamChanges.of(spec))
register(IncrementalExportChanges, lambda where, spec: where is not None,
         lambda where, spec: IncrementalExportChanges(str(where)))
