"""What a migration will do to its Bigtable target, read without changing anything (terraform-plan style).

``diff_target`` probes the target (bounded deadline), reads the table's families and GC rules
through the admin API and whether it holds a row, and compares the families with the spec by
:func:`ddb2bt.pipelines.bigtable.sink.compare_families`, the comparison ``ensure_table`` applies
before a run writes. Each change carries a symbol: ``+`` created by migrate, ``!`` migrate refuses
(a GC rule that differs), ``~`` worth knowing (the table already holds rows), ``=`` as the spec
declares, ``·`` in the table only (left alone).

A plan may find the target unreachable (no emulator, no credentials, no names): it says so and goes
on (``read`` is False); ``migrate`` asks with ``strict`` and fails instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ..mappers.errors import ServiceError
from ..mappers.gc import family_text
from ..pipelines.bigtable.sink import admin_table, compare_families, existing_families
from ..pipelines.run.service_errors import as_ddb2bt_error
from ..pipelines.bigtable.target import describe_target, emulator_host, holds_rows, probe_target

if TYPE_CHECKING:
    from ..mappers.spec import TargetSpec


@dataclass(frozen=True)
class TargetChange:
    symbol: str
    """``+`` migrate creates it, ``!`` migrate refuses, ``~`` note, ``=`` unchanged, ``·`` left alone."""
    text: str
    family: str | None = None
    wanted: str | None = None
    """The spec's GC rule in words (families only)."""
    found: str | None = None
    """The table's GC rule in words, when the family exists."""

    @property
    def blocking(self) -> bool:
        return self.symbol == "!"


@dataclass(frozen=True)
class TargetDiff:
    where: str
    """One line: emulator or Cloud Bigtable, project/instance/table."""
    emulator: bool
    read: bool
    """False when the target could not be read (then ``note`` says why, and there are no changes)."""
    note: str | None = None
    exists: bool | None = None
    holds_rows: bool | None = None
    changes: tuple[TargetChange, ...] = ()
    families: dict[str, str] = field(default_factory=dict)
    """Every family the table has, with its GC rule in words (empty when it does not exist)."""
    comparison: Any = None
    """The sink's ``TableComparison`` (None when not read), for the error migrate raises on a refused target."""
    refused: Any = None
    """The ``TargetSpec`` of the table migrate refuses (the main table's or an index table's, see ``comparison``)."""
    index_tables: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Each index in a table of its own (spec `indexes`, `target: {table: ...}`): its table's state, as ``state()``."""

    @property
    def blocking(self) -> tuple[TargetChange, ...]:
        """What makes migrate refuse the target."""
        return tuple(change for change in self.changes if change.blocking)

    @property
    def warnings(self) -> tuple[str, ...]:
        """What a reviewer should know that does not stop migrate: not read, rows already there."""
        found = [self.note] if self.note else []
        return tuple(found + [change.text for change in self.changes if change.symbol == "~"])

    def state(self) -> dict[str, Any]:
        """What the target looked like: a reviewed plan runs only against the same state."""
        found = {"where": self.where, "read": self.read, "exists": self.exists, "holds_rows": self.holds_rows,
                 "families": dict(sorted(self.families.items()))}
        return {**found, "index_tables": self.index_tables} if self.index_tables else found

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("comparison")
        data.pop("refused")
        data["blocking"] = bool(self.blocking)
        return data


def diff_target(target: TargetSpec, *, not_named: str | None = None, strict: bool = False,
                indexes: Sequence[tuple[str, TargetSpec]] = ()) -> TargetDiff:
    """Read the target and compare it with the spec's families; never writes.

    ``not_named``: why the target has no names (nothing is read then). Without ``strict`` a target
    that cannot be reached (a ServiceError: down, no credentials, permission denied) gives a diff
    that says so; with ``strict`` the error is raised. ``indexes``: (index name, its table) for the indexes in tables
    of their own (``mappers.index_rows.index_targets``), each read and compared as the main table is, its changes
    named ``index NAME:``.
    """
    main = _diff_table(target, not_named=not_named, strict=strict)
    if not main.read or not indexes:
        return main
    changes, tables, refused, comparison = list(main.changes), {}, main.refused, main.comparison
    for name, index_target in indexes:
        found = _diff_table(index_target, strict=strict)
        if not found.read:
            changes.append(TargetChange("~", f"index {name}: table {index_target.table} not read: {found.note}"))
            continue
        changes += [replace(change, text=f"index {name}: {change.text}") for change in found.changes]
        tables[name] = found.state()
        if found.blocking and refused is None:
            refused, comparison = index_target, found.comparison
    return replace(main, changes=tuple(changes), index_tables=tables, refused=refused, comparison=comparison)


def _diff_table(target: TargetSpec, *, not_named: str | None = None, strict: bool = False) -> TargetDiff:

    where, emulator = describe_target(target), emulator_host() is not None
    if not_named is not None:
        return TargetDiff(where, emulator, read=False, note=f"target not read: {not_named}")
    try:
        exists = probe_target(target)  # a dead endpoint fails here within seconds
        existing = existing_families(admin_table(target)) if exists else None
        rows = holds_rows(target) if exists else False
    except Exception as error:  # noqa: BLE001 - classified: only a service's refusal or absence is a finding
        found = as_ddb2bt_error(error)
        if strict or not isinstance(found, ServiceError):
            raise
        return TargetDiff(where, emulator, read=False, note=f"target not read: {found.one_line()}")
    comparison = compare_families(target, existing)
    wanted = {name: family_text(policy) for name, policy in target.families.items()}
    changes: list[TargetChange] = []
    if not comparison.exists:
        changes.append(TargetChange("+", f"table {target.table}: does not exist; migrate creates it"))
    for name in comparison.missing:
        changes.append(TargetChange("+", f"family {name}: {wanted[name]} (migrate creates it)", name, wanted[name]))
    for difference in comparison.different:
        if difference.kind == "type":
            changes.append(TargetChange(
                "!", f"family {difference.family}: table has '{difference.found}', spec wants '{difference.wanted}' "
                     "(migrate refuses the table: a family's type cannot be changed; name another family in the spec, "
                     "or write to a new table)", difference.family, difference.wanted, difference.found))
            continue
        changes.append(TargetChange(
            "!", f"family {difference.family}: GC rule differs: table has '{difference.found}', spec wants "
                 f"'{difference.wanted}' (migrate refuses the table)",
            difference.family, difference.wanted, difference.found))
    for name in comparison.same:
        changes.append(TargetChange("=", f"family {name}: {wanted[name]}", name, wanted[name], wanted[name]))
    described = {name: family.words() for name, family in (existing or {}).items()}
    for name in comparison.extra:
        changes.append(TargetChange("·", f"family {name}: {described[name]} (not in the spec; left alone)", name,
                                    None, described[name]))
    if rows:
        changes.append(TargetChange("~", f"table {target.table} already holds rows: migrate writes into it, and rows "
                                         "with the same keys gain cells (or replace cells with the same timestamp)"))
    return TargetDiff(where, emulator, read=True, exists=comparison.exists, holds_rows=rows,
                      changes=tuple(changes), families=described, comparison=comparison,
                      refused=target if comparison.different else None)
