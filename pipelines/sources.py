"""The registry of sources: which :class:`~.source.Source` reads a spec's ``source``, chosen once per run.

Each kind of source registers a test on the spec's ``source`` section and a factory; the newest
registration whose test holds wins, so a source registered later (a new module, a test) can
claim specs the built-in ones would take. Built in: a full export (``source.export``) and the live
table (``source.table``). Sources that no spec's ``source`` names are made directly by their use case
(a dead-letter file by redrive; Bigtable rows, the spec's ``target`` read back, by rollback) and
registered in :data:`KINDS`, which lists every kind, for the interface's tests.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from .bigtable.rows import RowSource
from .dynamodb.sources import ExportSource, ScanSource
from .registry import Registration, Registry
from .run.dead_letter_source import DeadLetterSource
from .source import ItemsSource, Source

if TYPE_CHECKING:
    from ..mappers.spec import MappingSpec, SourceSpec

_SOURCES: Registry[Source] = Registry((ItemsSource, DeadLetterSource, RowSource))
KINDS = _SOURCES.kinds
"""Every kind of source, the ones no spec names included."""


def register(kind: type[Source], matches: Callable[[SourceSpec], bool],
             make: Callable[[SourceSpec], Source] | None = None) -> Registration[Source]:
    """Make ``kind`` read the specs whose ``source`` section ``matches`` (``make``: how, default ``kind(source)``).
    Returns the registration, for :func:`unregister`."""
    return _SOURCES.register(kind, matches, make or kind)


def unregister(registration: Registration[Source]) -> None:
    _SOURCES.unregister(registration)


def source_of(source: SourceSpec) -> Source:
    """The source a spec's ``source`` section names (the newest registration that claims it)."""
    found = _SOURCES.choose(source)
    if found is None:
        raise LookupError("no registered source reads this source section")  # SourceSpec requires table or export
    return found


def source_for(spec: MappingSpec) -> Source:
    """The source of ``spec``: chosen here, once, for every use case."""
    return source_of(spec.source)


def read_items(source: SourceSpec, limit: int | None = None) -> list[dict]:
    """The first ``limit`` items (a few scan pages, never a full scan), or every item (one sequential read)."""
    return source_of(source).items(limit)


def random_sample(source: SourceSpec, n: int, *, item_count: int = 0, seed: int | None = None) -> list[dict]:
    """Up to ``n`` items picked at random across the source (``item_count``: DescribeTable's, which sizes a scan's
    sample)."""
    return source_of(source).random_sample(n, item_count=item_count, seed=seed)


register(ScanSource, lambda source: source.table is not None and source.export is None)
register(ExportSource, lambda source: source.export is not None)
