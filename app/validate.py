"""The validate use case: map the source again and compare with what Bigtable holds, cell by cell."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .context import Step, announce, describe_source, load_spec, with_source_keys
from .options import RunOptions

if TYPE_CHECKING:
    from ..mappers.spec import MappingSpec


@dataclass(frozen=True)
class ValidateResult:
    spec: Any
    target: str
    """Where the rows were read (emulator or Cloud Bigtable, project/instance/table)."""
    items: int
    not_mapped: int
    """Items the spec skips or dead-letters: they have no rows to compare."""
    comparison: Any
    """A ``mappers.validate.Comparison``."""
    full: bool

    @property
    def ok(self) -> bool:
        return bool(self.comparison.ok)


def validate(spec: MappingSpec | str | Path, sample: int, full: bool = False, options: RunOptions = RunOptions(),
             step: Step | None = None) -> ValidateResult:
    from ..mappers.compiler import compile_spec
    from ..mappers.results import MappedRow
    from ..mappers.validate import compare, expected_rows
    from ..pipelines.bigtable_read import read_cells
    from ..pipelines.sources import read_items
    from ..pipelines.target import describe_target, probe_target

    spec = load_spec(spec, options)
    spec = with_source_keys(spec, describe_source(spec))  # the source first, as migrate does
    probe_target(spec.target, must_exist=True)  # a dead Bigtable or a missing table fails here, in seconds
    announce(step, "reading the source…")
    items = read_items(spec.source, None if full else sample)
    announce(step, f"mapping {len(items)} items and reading their rows from Bigtable…")
    results = list(compile_spec(spec).map_items(items))
    expected = expected_rows(results)
    actual = dict(read_cells(spec.target, None if full else list(expected)))
    comparison = compare(expected, actual, spec.target.families, full=full, now_us=int(time.time() * 1_000_000))
    not_mapped = len(items) - sum(1 for r in results if isinstance(r, MappedRow))
    return ValidateResult(spec, describe_target(spec.target), len(items), not_mapped, comparison, full)
