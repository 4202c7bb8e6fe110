"""The plan use case: map a sample of the source with the spec and analyse it (migrate-plan and report).

``plan`` reads a few pages of the source and nothing of the target; ``plan_against_target`` also
reads the Bigtable target (never writing) and compares it with the spec. Neither writes anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .context import Step, announce, describe_source, load_spec
from .options import RunOptions

if TYPE_CHECKING:
    from ..mappers.analysis.plan import MigrationPlan
    from ..mappers.spec import MappingSpec
    from .review import Reviewed
    from .target_diff import TargetDiff

def plan(spec: MappingSpec | str | Path, sample: int, options: RunOptions = RunOptions(),
         step: Step | None = None) -> MigrationPlan:
    """The dry run that migrate-plan prints and the report renders."""
    from ..mappers.analysis.plan import build_plan
    from ..pipelines.sources import read_items

    spec = load_spec(spec, options, writes=False)
    announce(step, f"reading a sample of {sample} items from {spec.source.table or 'the export'}…")
    source = describe_source(spec)
    items = read_items(spec.source, sample)
    announce(step, f"mapping {len(items)} items and checking them…")
    return build_plan(spec, items, source)



@dataclass(frozen=True)
class TargetPlan:
    """migrate-plan's result: the plan over a sample, the target's diff, and what a reviewed plan file records."""

    plan: MigrationPlan
    target: TargetDiff
    reviewed: Reviewed

    @property
    def has_errors(self) -> bool:
        """Plan errors, or a target migrate would refuse."""
        return self.plan.has_errors or bool(self.target.blocking)

    @property
    def has_warnings(self) -> bool:
        """Plan warnings, a target that could not be read, or one that already holds rows."""
        return self.plan.has_warnings or bool(self.target.warnings)

    def to_json(self) -> dict[str, Any]:
        """The plan object (every field, full values) with the target's diff under ``target``."""
        data = self.plan.model_dump(mode="json")
        data["target"] = self.target.as_dict()
        return data


def plan_against_target(spec: MappingSpec | str | Path, sample: int, options: RunOptions = RunOptions(),
                        step: Step | None = None, where: Step | None = None) -> TargetPlan:
    """The plan, then the target read without writing (see :mod:`.target_diff`).

    ``where`` is told first, before anything is read, where the writes would go. A target with no
    names (no --project/--instance, no emulator) or out of reach is not read, and the diff says why.
    """
    from ..mappers.errors import UsageError
    from ..mappers.loader import load_spec as load_file
    from ..mappers.spec import MappingSpec
    from ..pipelines.bigtable.target import describe_target
    from .context import with_source_keys
    from .review import reviewed
    from .runs import source_name
    from ..mappers.index_rows import index_targets
    from .target_diff import diff_target

    raw = spec if isinstance(spec, MappingSpec) else load_file(spec)
    try:
        load_spec(raw, options, writes=True)  # what migrate would settle; a plan goes on without names
        not_named = None
    except UsageError as err:
        not_named = err.one_line()
    resolved = load_spec(raw, options, writes=False)
    announce(where, f"plan {source_name(resolved)} → {describe_target(resolved.target)}")
    the_plan = plan(resolved, sample, options, step)
    announce(step, "reading the Bigtable target (read-only)…")
    diff = diff_target(resolved.target, not_named=not_named, indexes=index_targets(resolved))
    ok = not the_plan.has_errors and not diff.blocking
    keyed = with_source_keys(resolved, the_plan.source)
    return TargetPlan(the_plan, diff, reviewed(keyed, the_plan.source, diff, ok=ok,
                                               estimated_items=None if the_plan.estimates.lower_bound
                                               else the_plan.estimates.items))  # never a total it does not know
