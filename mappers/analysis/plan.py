"""The migration plan: a dry run of a spec over a sample, as data.

`migrate-plan` prints it, the schema translation report renders it, and `migrate` can refuse to
start on its errors: all three read the same frozen object, so what the user reviewed is what
runs. The plan holds previews (text), never raw item bytes, and serialises with
`model_dump(mode="json")`. Previews are whole values (JSON carries them in full); a renderer that
shortens one for the screen does so with :func:`shorten`, which says how much it left out.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from pydantic import BaseModel, ConfigDict, computed_field

from .anatomy import KeyAnatomy, key_anatomy
from .causes import Cause, group_causes, hidden_errors
from ..checks import sample_findings
from ..compiler import CompiledSpec, compile_spec
from .estimates import Estimates, HotspotReport, estimate, hotspot_reports
from ..gc import family_text
from .folded import FoldedRow, folded_rows as fold_rows
from .access_plan import IndexPlan, PatternPlan, index_lints, index_plans, pattern_plans
from ..decode import Decoder, Loss, compile_decoder, round_trip
from .lints import Lint, lint, lint_data, lint_losses
from ..results import ItemError, MappedRow, Skipped
from ..rollback import verdict
from .sample import Sample, SizeStats, analyse_sample, readable_bytes, size_stats
from ..table import SourceDescription
from .previews import PREVIEW_CHARS, AttributePreview, CellPreview, cell_preview, item_preview, shorten  # noqa: F401 - the plan's parts
from ..spec import EntitySpec, MappingSpec

_LISTED = 5
"""Causes a finding lists in its message (the rest are in the dead letters, with their counts)."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


# --------------------------------------------------------------------------- plan parts


class FamilyPlan(_Frozen):
    name: str
    gc: str
    """The policy in words (mappers/gc.py): "keep at most 1 version", "drop cells older than 30d", ..."""
    max_versions: int | None = None
    max_age_seconds: float | None = None


class ExampleRow(_Frozen):
    """One sampled item and what it becomes, side by side (docs/EXAMPLES.md §2)."""

    item: tuple[AttributePreview, ...]
    outcome: str
    """mapped, skipped or error."""
    row_key: str | None = None
    cells: tuple[CellPreview, ...] = ()
    note: str | None = None
    """The skip or error reason."""


class EntityPlan(_Frozen):
    name: str
    action: str
    row_key_template: str | None
    salt_buckets: int | None = None
    matched: int
    mapped: int
    skipped: int
    errors: int
    distinct_row_keys: int
    examples: tuple[ExampleRow, ...]
    losses: tuple[str, ...] = ()
    """What this entity's items lose on the way (declared in the spec, or errors when not)."""
    key: KeyAnatomy | None = None
    """The row key taken apart: its parts, the delimiter, what the byte order means for reads."""


class DeadLetterExample(_Frozen):
    reason: str
    entity: str | None
    attribute: str | None
    item: tuple[AttributePreview, ...]


class DeadLetters(_Frozen):
    total: int = 0
    by_reason: dict[str, int] = {}
    """Sampled items per cause (:func:`~.causes.group_causes`: reasons that differ only in their values are one)."""
    causes: tuple[Cause, ...] = ()
    """The same causes with their example values, plus those the items' first errors hide (``Cause.hidden``)."""
    examples: tuple[DeadLetterExample, ...] = ()


class SampleSummary(_Frozen):
    items: int
    mapped: int
    skipped: int
    errors: int
    unmatched: int
    distinct_row_keys: int
    item_sizes: SizeStats
    row_sizes: SizeStats
    cell_sizes: SizeStats
    attribute_types: dict[str, dict[str, int]]
    entity_mix: dict[str, int]
    """Items per entity (plus `(unmatched)`)."""


class MigrationPlan(_Frozen):
    source_table: str | None
    partition_key: str | None
    sort_key: str | None
    source: SourceDescription | None
    target_table: str
    target_instance: str
    families: tuple[FamilyPlan, ...]
    migration_time: str | None
    unmatched_policy: str
    entities: tuple[EntityPlan, ...]
    unmatched_examples: tuple[DeadLetterExample, ...]
    dead_letters: DeadLetters
    sample: SampleSummary
    lints: tuple[Lint, ...]
    hotspots: tuple[HotspotReport, ...]
    estimates: Estimates
    folded_rows: tuple[FoldedRow, ...] = ()
    """Rows several sampled items write into (single-table designs), whole, with their versions explained."""
    access_patterns: tuple[PatternPlan, ...] = ()
    """Each declared access pattern: the Bigtable read serving it (tried on the sample), or why none can."""
    indexes: tuple[IndexPlan, ...] = ()
    """Each secondary index carried as index rows (spec.indexes), with its rows on the sample."""
    rollback: tuple[str, ...] = ()
    """Whether `ddb2bt rollback` can rebuild every item from Bigtable, or what it cannot and why (mappers.rollback)."""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def has_errors(self) -> bool:
        return any(item.severity == "error" for item in self.lints)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def has_warnings(self) -> bool:
        return any(item.severity == "warning" for item in self.lints)


def extrapolation(plan: MigrationPlan) -> tuple[str, str]:
    """(what the sample-based figures are, one sentence saying so): counted, or extrapolated by how much."""
    e, sampled = plan.estimates, plan.sample.items
    if e.lower_bound:
        return "the sample: lower bounds", (
            f"The table's item count is unknown: DescribeTable reports 0 (its counts are refreshed about every 6 hours, "
            f"so a freshly loaded table shows 0). The table holds at least the {sampled:,} sampled items; these figures "
            "are the sample's own, lower bounds.")
    if e.items_from == "sample":
        return "the sample", (f"No DescribeTable numbers (an export, or a table not described): the {sampled} sampled "
                              "items are taken to be the whole table, so these figures are the sample's own.")
    if sampled >= e.items:
        return "counted in the sample", (f"The sample covers the whole table ({sampled:,} items, DescribeTable says "
                                         f"{e.items:,}): these figures are counted, not extrapolated.")
    return f"extrapolated ×{e.items / max(sampled, 1):,.1f}", (
        f"Extrapolated from a sample: the {sampled:,} sampled items are scaled to the {e.items:,} items DescribeTable "
        f"reports (×{e.items / max(sampled, 1):,.1f}). Rows shared by many items make the row count a lower bound.")


def source_count_text(plan: MigrationPlan) -> str:
    """How many items the source holds, as far as anyone knows (the plan's and the report's words)."""
    e = plan.estimates
    if e.lower_bound:
        return (f"at least {e.items:,} items (the sample); DescribeTable's count is unknown (it reports 0, and is "
                "refreshed about every 6 hours)")
    return f"{e.items:,} items (from {e.items_from})"


def example_row(compiled: CompiledSpec, item: dict) -> ExampleRow:
    result, sources = compiled.trace_item(item)
    if isinstance(result, MappedRow):
        return ExampleRow(
            item=item_preview(item), outcome="mapped", row_key=readable_bytes(result.row_key),
            cells=tuple(cell_preview(cell, source) for cell, source in zip(result.cells, sources)),
            note="; ".join(result.warnings) or None,
        )  # fmt: skip
    note = result.describe() if isinstance(result, ItemError) else result.reason
    return ExampleRow(item=item_preview(item), outcome="error" if isinstance(result, ItemError) else "skipped", note=note)


def _dead_letter(item: dict, error: ItemError) -> DeadLetterExample:
    return DeadLetterExample(reason=error.reason, entity=error.entity, attribute=error.attribute, item=item_preview(item))


# --------------------------------------------------------------------------- building the plan


def _types(sample: Sample) -> dict[str, str]:
    """Each attribute's most frequent DynamoDB type in the sample (what key and timestamp texts read back as)."""
    return {name: max(types, key=lambda name: types[name]) for name, types in sample.attribute_types.items() if types}


def _round_trips(decoder: Decoder, sample: Sample) -> list[tuple[str, str]]:
    """(entity, difference) for sampled items whose own cells do not read back as the item."""
    found = []
    for item, result in zip(sample.items, sample.results):
        if isinstance(result, MappedRow):
            found += [(result.entity, text) for text in round_trip(decoder, item, result.entity, result.row_key, result.cells)]
    return found


def rollback_lines(spec: MappingSpec, round_trips: list[tuple[str, str]]) -> tuple[str, ...]:
    """The rollback verdict, with the sampled items that did not read back (data-dependent losses) after it."""
    lines = verdict(spec).lines()
    if round_trips:
        lines = [line for line in lines if not line.startswith("every item")]
        lines += [f"cannot be rebuilt: a sampled item of entity {entity!r}: {text}" for entity, text in round_trips[:5]]
    return tuple(lines)


def _by_severity(found: tuple[Lint, ...]) -> tuple[Lint, ...]:
    order = {"error": 0, "warning": 1, "info": 2}
    return tuple(sorted(found, key=lambda item: order[item.severity]))


def _entity_plan(entity: EntitySpec, sample: Sample, examples: int, compiled: CompiledSpec, found: tuple[Loss, ...],
                 spec: MappingSpec) -> EntityPlan:
    mine = [(item, result) for item, result in zip(sample.items, sample.results) if result.entity == entity.name]
    # Mapped examples first: they are what the reader wants to compare; errors are listed with the dead letters.
    shown = sorted(mine, key=lambda pair: not isinstance(pair[1], MappedRow))[:examples]
    return EntityPlan(
        name=entity.name,
        action=entity.action,
        row_key_template=entity.row_key.template if entity.row_key else None,
        salt_buckets=entity.row_key.salt_buckets if entity.row_key else None,
        matched=len(mine),
        mapped=sum(isinstance(result, MappedRow) for _, result in mine),
        skipped=sum(isinstance(result, Skipped) for _, result in mine),
        errors=sum(isinstance(result, ItemError) for _, result in mine),
        distinct_row_keys=len(set(sample.keys_by_entity.get(entity.name, ()))),
        examples=tuple(example_row(compiled, item) for item, _ in shown),
        losses=tuple(loss.describe() for loss in found if loss.entity == entity.name),
        key=key_anatomy(entity.row_key.template, entity.row_key.delimiter, entity.row_key.on_delimiter,
                        entity.row_key.salt_buckets, spec.source.partition_key, spec.source.sort_key)
        if entity.row_key else None,
    )


def _behind(causes: tuple[Cause, ...]) -> tuple[Lint, ...]:
    """The causes that items' first errors hide: a warning, so that every problem shows in one plan round."""
    hidden = [cause.model_copy(update={"count": cause.hidden, "hidden": 0}) for cause in causes if cause.hidden]
    if not hidden:
        return ()
    listed = "; ".join(cause.line() for cause in hidden[:_LISTED])
    more = f"; and {len(hidden) - _LISTED} more in the dead letters" if len(hidden) > _LISTED else ""
    return (Lint(severity="warning", code="errors-behind-errors", where="sample", message=(
        f"behind the first error of some sampled items are more: {listed}{more}. Fixing the first error alone "
        "still dead-letters these items; fix these too.")),)  # fmt: skip


def _planning(estimates: Estimates) -> tuple[Lint, ...]:
    """The backfill against the stream's 24-hour retention (issue 13's planning): a warning when the scan outlasts it."""
    warning = estimates.stream_retention_warning
    return (Lint(severity="warning", code="backfill-exceeds-stream-retention", message=warning,
                 where="source.read_budget"),) if warning else ()


def _summary(spec: MappingSpec, sample: Sample) -> SampleSummary:
    mix = Counter(result.entity or "(unmatched)" for result in sample.results)
    return SampleSummary(
        items=len(sample.items),
        mapped=len(sample.mapped),
        skipped=len(sample.skipped),
        errors=len(sample.errors),
        unmatched=len(sample.unmatched),
        distinct_row_keys=len(sample.row_sizes),
        item_sizes=size_stats(list(sample.item_sizes)),
        row_sizes=size_stats(list(sample.row_sizes.values())),
        cell_sizes=size_stats(list(sample.cell_sizes)),
        attribute_types=sample.attribute_types,
        entity_mix={entity.name: mix.get(entity.name, 0) for entity in spec.entities} | (
            {"(unmatched)": mix["(unmatched)"]} if mix.get("(unmatched)") else {}
        ),
    )


def build_plan(
    spec: MappingSpec,
    items: list[dict[str, Any]],
    source: SourceDescription | None = None,
    *,
    now_ms: int | None = None,
    read_budget: float | None = None,
    target_write_hours: float = 4.0,
    examples_per_entity: int = 3,
    dead_letter_examples: int = 5,
) -> MigrationPlan:
    """Map the sample with the compiled spec and gather everything a reviewer needs before a run."""
    if source is not None and spec.source.partition_key is None:
        spec = spec.with_keys(source.partition_key, source.sort_key)
    compiled = compile_spec(spec, now_ms)
    results = [compiled.map_item(item) for item in items]
    # A spec that cannot work on this data (no item has the timestamp attribute, an entity dead-letters
    # its whole sample, nothing matches): plan errors, so that migrate refuses to start on them.
    found = tuple(Lint(severity="error", **f._asdict()) for f in sample_findings(spec, items, results))
    sample = analyse_sample(items, results)
    decoder = compile_decoder(spec, _types(sample))
    patterns, pattern_lints = pattern_plans(spec, items, results, decoder, _types(sample))
    delimiters = Counter(e.row_key.delimiter for e in spec.entities if e.row_key)
    hotspots = hotspot_reports(sample, delimiters.most_common(1)[0][0] if delimiters else "#")
    errors = sample.errors
    causes = group_causes((error for _, error in errors), hidden_errors(
        spec, [item for item, _ in errors], [error for _, error in errors], compiled.now_ms))
    estimates = estimate(
        sample,
        item_count=source.item_count if source else None,
        size_bytes=source.size_bytes if source else None,
        provisioned_rcu=source.read_capacity if source else None,
        on_demand_rcu=spec.source.on_demand_rcu,
        read_budget=read_budget if read_budget is not None else spec.source.read_budget,
        consistent_read=spec.source.consistent_read,
        from_export=spec.source.export is not None,
        target_write_hours=target_write_hours,
    )
    trips = _round_trips(decoder, sample)
    return MigrationPlan(
        source_table=source.table if source else spec.source.table,
        partition_key=spec.source.partition_key,
        sort_key=spec.source.sort_key,
        source=source,
        target_table=spec.target.table,
        target_instance=spec.target.instance,
        families=tuple(
            FamilyPlan(name=name, gc=family_text(policy), max_versions=policy.max_versions,
                       max_age_seconds=policy.max_age.total_seconds() if policy.max_age else None)
            for name, policy in spec.target.families.items()
        ),  # fmt: skip
        migration_time=spec.migration_time.isoformat().replace("+00:00", "Z") if spec.migration_time else None,
        unmatched_policy=spec.unmatched,
        entities=tuple(_entity_plan(entity, sample, examples_per_entity, compiled, decoder.losses, spec) for entity in spec.entities),
        unmatched_examples=tuple(
            DeadLetterExample(reason=getattr(r, "reason", ""), entity=None, attribute=None, item=item_preview(item))
            for item, r in sample.unmatched[:dead_letter_examples]
        ),
        dead_letters=DeadLetters(
            total=len(errors),
            by_reason={cause.text: cause.count - cause.hidden for cause in causes if cause.count > cause.hidden},
            causes=causes,
            examples=tuple(_dead_letter(item, error) for item, error in errors[:dead_letter_examples]),
        ),
        sample=_summary(spec, sample),
        lints=_by_severity(
            lint(spec, sample, ttl_attribute=source.ttl_active if source else None, hotspots=hotspots)
            + tuple(lint_data(spec, sample, compiled.now_ms * 1000))
            + tuple(lint_losses(spec, trips))
            + found
            + _behind(causes)
            + _planning(estimates)
            + pattern_lints
            + tuple(index_lints(spec, source))
        ),
        hotspots=hotspots,
        folded_rows=fold_rows(spec, compiled, sample),
        access_patterns=patterns,
        indexes=index_plans(spec, results),
        rollback=rollback_lines(spec, trips),
        estimates=estimates,
    )
