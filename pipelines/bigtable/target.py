"""Where the writes go: the Bigtable target resolved from flags, environment and spec, and a quick probe of it.

Precedence: ``--project/--instance/--app-profile`` flags, then ``GOOGLE_CLOUD_PROJECT`` (project
only), then what the spec says. With none of them a run against the emulator
(``BIGTABLE_EMULATOR_HOST``) uses the emulator's throwaway names; against real Bigtable it is
refused, rather than writing to a default nobody chose.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...mappers.errors import UsageError

if TYPE_CHECKING:
    from ...mappers.spec import TargetSpec

EMULATOR_ENV = "BIGTABLE_EMULATOR_HOST"
PROBE_SECONDS = 10.0
"""How long the probe waits for Bigtable before calling it unreachable (a dead emulator fails in ~10 s)."""


@dataclass(frozen=True)
class TargetOverrides:
    project: str | None = None
    instance: str | None = None
    app_profile: str | None = None


def emulator_host(environ: Mapping[str, str] | None = None) -> str | None:
    return (os.environ if environ is None else environ).get(EMULATOR_ENV) or None


def resolve_target(target: TargetSpec, overrides: TargetOverrides,
                   environ: Mapping[str, str] | None = None, *, strict: bool = True) -> TargetSpec:
    """The target with project, instance and app profile settled.

    UsageError when real Bigtable has no names, unless not ``strict`` (a plan, which writes nothing).
    """
    environ = os.environ if environ is None else environ
    given = target.model_fields_set
    project = overrides.project or environ.get("GOOGLE_CLOUD_PROJECT") or (target.project if "project" in given else None)
    instance = overrides.instance or (target.instance if "instance" in given else None)
    missing = [flag for flag, value in (("--project", project), ("--instance", instance)) if not value]
    if missing and strict and not emulator_host(environ):
        raise UsageError(
            f"no Bigtable {' and '.join(m.lstrip('-') for m in missing)} given for table {target.table!r}",
            f"pass {' and '.join(missing)} (or set target.project/target.instance in the spec, or GOOGLE_CLOUD_PROJECT), "
            f"or set {EMULATOR_ENV} to write to the emulator",
        )
    # Only names someone gave are set: a default stays unset, so describe_target can say none was given.
    update: dict[str, Any] = {name: value for name, value in (("project", project), ("instance", instance)) if value}
    if overrides.app_profile:
        update["app_profile"] = overrides.app_profile
    return target.model_copy(update=update)


def describe_target(target: TargetSpec, environ: Mapping[str, str] | None = None) -> str:
    """One line saying where the writes go, e.g. for the first line of `migrate`."""
    profile = f", app profile {target.app_profile}" if target.app_profile else ""
    host = emulator_host(environ)
    where = f"instances/{target.instance}/tables/{target.table}{profile}"
    if "project" in target.model_fields_set or host:  # the emulator takes any project: its default is the one used
        where = f"projects/{target.project}/{where}"
    else:  # real Bigtable and nobody named a project: the default is no project of anyone's
        where = f"{where} in no project (set target.project in the spec, or pass --project)"
    return f"Bigtable emulator at {host}: {where}" if host else f"Cloud Bigtable: {where}"


def probe_target(target: TargetSpec, *, must_exist: bool = False, timeout: float = PROBE_SECONDS,
                 holds: str = "") -> bool:
    """Whether the table exists, asked with a bounded deadline; raises the client's error if Bigtable cannot answer.

    A dead endpoint fails here within ``timeout`` seconds instead of somewhere inside the admin
    client's long default retries. ``must_exist`` turns a missing table into TableMissingError; ``holds`` names
    what the table is for in that error (an index's rows), when it is not the spec's main table.
    """
    from google.api_core.exceptions import NotFound
    from google.cloud.bigtable.data import BigtableDataClient

    from .sink import TableMissingError

    with BigtableDataClient(project=target.project) as client:
        table = client.get_table(target.instance, target.table, app_profile_id=target.app_profile)
        try:
            table.sample_row_keys(operation_timeout=timeout, attempt_timeout=timeout)
        except NotFound:
            if must_exist:
                where = f"index {holds!r}: " if holds else ""
                raise TableMissingError(
                    f"{where}Bigtable table {target.table!r} does not exist in instance {target.instance!r} "
                    f"(project {target.project!r})",
                    "migrate first (it creates the index tables), or check the index's target.table" if holds else
                    "migrate first, or check --project, --instance and target.table"
                ) from None
            return False
    return True


def holds_rows(target: TargetSpec, *, timeout: float = PROBE_SECONDS) -> bool:
    """Whether the (existing) table has at least one row: one row key read, values stripped, bounded deadline."""
    from google.cloud.bigtable.data import BigtableDataClient, ReadRowsQuery
    from google.cloud.bigtable.data.row_filters import StripValueTransformerFilter

    with BigtableDataClient(project=target.project) as client:
        table = client.get_table(target.instance, target.table, app_profile_id=target.app_profile)
        query = ReadRowsQuery(limit=1, row_filter=StripValueTransformerFilter(True))
        return bool(table.read_rows(query, operation_timeout=timeout, attempt_timeout=timeout))
