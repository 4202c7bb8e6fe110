"""What several commands read before doing their one thing: the spec (with CLI overrides), a
DynamoDB client, DescribeTable and a sample of items. Imports are lazy: boto3 and Beam load only
when a command actually reads the source.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..mappers.plan import MigrationPlan, SourceDescription
    from ..mappers.spec import MappingSpec


def load(spec_path: Path, endpoint_url: str | None = None, region: str | None = None, profile: str | None = None) -> MappingSpec:
    """The spec (SpecError on any problem), with source settings given on the command line taking precedence."""
    from ..mappers.loader import load_spec

    spec = load_spec(spec_path)
    overrides = {k: v for k, v in {"endpoint_url": endpoint_url, "region": region, "profile": profile}.items() if v}
    if overrides:
        spec = spec.model_copy(update={"source": spec.source.model_copy(update=overrides)})
    return spec


def dynamodb_client(endpoint_url: str | None, region: str | None, profile: str | None) -> Any:
    """A low-level client from the usual AWS configuration (env, profile, config files)."""
    from ..pipelines.dynamodb_client import ClientSettings, make_client

    return make_client(ClientSettings(region=region, endpoint_url=endpoint_url, profile=profile))


def client_for(spec: MappingSpec) -> Any:
    return dynamodb_client(spec.source.endpoint_url, spec.source.region, spec.source.profile)


def source_description(spec: MappingSpec) -> SourceDescription | None:
    """DescribeTable boiled down for the plan; None when the spec reads an export."""
    from ..pipelines.dynamodb_client import describe_source

    if spec.source.export is not None:
        return None
    return describe_source(client_for(spec), spec.source.table)


def read_sample(spec: MappingSpec, n: int) -> list[dict]:
    """Up to `n` items from the start of the export or the table: a few pages, never a full scan."""
    from ..pipelines.sources import read_items

    return read_items(spec.source, n)


def read_all(spec: MappingSpec) -> list[dict]:
    """Every item of the export or the table (one sequential scan: for validate --full)."""
    from ..pipelines.sources import read_items

    return read_items(spec.source)


def plan_for(spec: MappingSpec, sample: int) -> MigrationPlan:
    """The dry run that migrate-plan prints and the report renders."""
    from ..mappers.plan import build_plan
    from .progress import working

    with working(f"reading a sample of {sample} items from {spec.source.table or 'the export'}…"):
        source = source_description(spec)
        items = read_sample(spec, sample)
    with working(f"mapping {len(items)} items and checking them…"):
        return build_plan(spec, items, source)
