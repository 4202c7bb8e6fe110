"""The plan use case: map a sample of the source with the spec and analyse it (migrate-plan and report).

Reads a few pages of the source and nothing of the target; writes nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from .context import Step, announce, describe_source, load_spec
from .options import RunOptions

if TYPE_CHECKING:
    from ..mappers.plan import MigrationPlan
    from ..mappers.spec import MappingSpec

def plan(spec: MappingSpec | str | Path, sample: int, options: RunOptions = RunOptions(),
         step: Step | None = None) -> MigrationPlan:
    """The dry run that migrate-plan prints and the report renders."""
    from ..mappers.plan import build_plan
    from ..pipelines.sources import read_items

    spec = load_spec(spec, options, writes=False)
    announce(step, f"reading a sample of {sample} items from {spec.source.table or 'the export'}…")
    source = describe_source(spec)
    items = read_items(spec.source, sample)
    announce(step, f"mapping {len(items)} items and checking them…")
    return build_plan(spec, items, source)

