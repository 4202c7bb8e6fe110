"""What every use case reads first: the spec with the command line's overrides, the source table's description."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ..mappers.spec import MappingSpec
from ..pipelines.run.dead_letters import consolidate
from ..pipelines.pipeline import query_counters
from ..pipelines.sources import source_for
from ..pipelines.bigtable.target import TargetOverrides, resolve_target
from .options import RunOptions

if TYPE_CHECKING:
    from ..mappers.table import SourceDescription
    from ..mappers.spec import MappingSpec

Step = Callable[[str], object]
"""A progress callback, called with what is about to happen (the CLI shows it as a spinner); never required."""


def announce(step: Step | None, message: str) -> None:
    if step is not None:
        step(message)


def load_spec(spec: MappingSpec | str | Path, options: RunOptions = RunOptions(), *,
              writes: bool = True) -> MappingSpec:
    """The spec (SpecError on any problem) with the source and target settings of ``options`` applied.

    AWS: ``--endpoint-url``, ``--aws-region``, ``--profile`` override the spec (with no region
    anywhere, the client reads ``AWS_REGION``). The Google target is settled by
    :func:`ddb2bt.pipelines.bigtable.target.resolve_target`, strictly when the use case ``writes`` or reads
    Bigtable (a plan reads neither and keeps the spec's names).
    """

    if not isinstance(spec, MappingSpec):
        from ..mappers.loader import load_spec as load

        spec = load(spec)
    aws = {"endpoint_url": options.endpoint_url, "region": options.aws_region, "profile": options.profile,
           "role_arn": options.aws_role_arn}
    update = {k: v for k, v in aws.items() if v}
    overrides = TargetOverrides(options.project, options.instance, options.app_profile)
    target = resolve_target(spec.target, overrides, strict=writes)
    return spec.model_copy(update={"source": spec.source.model_copy(update=update), "target": target})


def describe_source(spec: MappingSpec) -> SourceDescription | None:
    """The spec's source described by its service (DescribeTable and TTL, boiled down); None for an export."""
    return source_for(spec).describe()


def with_source_keys(spec: MappingSpec, source: SourceDescription | None) -> MappingSpec:
    """The spec with key names from DescribeTable where it omits them: the one place they are filled in."""
    if source is None or spec.source.partition_key is not None:
        return spec
    return spec.with_keys(source.partition_key, source.sort_key)


def wait_for(result: Any, dead_letter: str | None = None) -> tuple[str, dict[str, int], int]:
    """Wait for a pipeline to end: (its state, its counters, the dead-letter file's lines).

    The dead letters' part files are joined into ``dead_letter`` whatever happens, so a run that fails or is
    interrupted still leaves the file its error or resume line names.
    """

    try:
        state = str(result.wait_until_finish())
    finally:
        lines = consolidate(dead_letter) if dead_letter else 0
    return state, query_counters(result), lines


def unfinished(state: str) -> list[str]:
    """The problem of a pipeline that did not end DONE; none when it did."""
    return [] if state.endswith("DONE") else [f"the pipeline ended in state {state}"]
