"""A reviewed plan (`migrate-plan --out plan.json`) and the check that `migrate --plan plan.json` makes against it.

The file records what was reviewed: the spec (``checkpoint.spec_hash``: what it migrates, blind to
how services are reached or paced), the source (DescribeTable's shape of the table, or the export's
manifest; item counts and sizes are left out, DynamoDB refreshes them every few hours), the target's
state (where, whether it exists, its families' GC rules, whether it holds rows) and whether the plan
was clean. ``migrate --plan`` recomputes the same and refuses to run (exit 2) naming what changed.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..mappers.errors import UsageError
from ..pipelines.run.checkpoint import spec_hash
from ..pipelines.run.dead_letters import create_private
from ..pipelines.sources import source_for

if TYPE_CHECKING:
    from ..mappers.table import SourceDescription
    from ..mappers.spec import MappingSpec
    from .target_diff import TargetDiff

FORMAT = "ddb2bt-plan/1"


class PlanChangedError(UsageError):
    """The spec, source or target is no longer what the reviewed plan saw."""


@dataclass(frozen=True)
class Reviewed:
    spec_hash: str
    source: dict[str, Any]
    target: dict[str, Any]
    ok: bool = True
    """The plan had no errors and migrate would not refuse the target."""
    estimated_items: int | None = None
    spec: tuple[str, ...] = ()
    """Where the reviewed spec was: as given to migrate-plan, then absolute (what `migrate --plan` runs without SPEC)."""

    def to_file(self, path: Path, spec_path: str, plan: dict[str, Any]) -> None:
        data = {"format": FORMAT, "made_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "spec": spec_path,
                "spec_file": str(Path(spec_path).resolve()), "spec_hash": self.spec_hash, "source": self.source,
                "target": self.target, "ok": self.ok, "estimated_items": self.estimated_items, "plan": plan}

        with create_private(str(path)) as handle:
            handle.write((json.dumps(data, indent=2, sort_keys=True, default=str) + "\n").encode("utf-8"))

    @classmethod
    def from_file(cls, path: Path) -> Reviewed:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise UsageError(f"--plan {path}: cannot read a plan from it ({err})",
                             "write one with `ddb2bt migrate-plan SPEC --out plan.json`") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise UsageError(f"--plan {path} is not a plan written by `ddb2bt migrate-plan --out`",
                             "write one with `ddb2bt migrate-plan SPEC --out plan.json`")
        spec = tuple(str(data[key]) for key in ("spec", "spec_file") if data.get(key))
        return cls(data["spec_hash"], data["source"], data["target"], bool(data["ok"]), data.get("estimated_items"), spec)

    def spec_path(self, plan: Path) -> Path:
        """The spec this plan reviewed, for `migrate --plan FILE` without SPEC: as it was given when it still is the
        same file from here, else its absolute path. Whether it still says the same is :func:`check`'s to say."""
        given = [Path(text) for text in self.spec]
        for candidate in given:
            if candidate.is_file() and candidate.resolve() == given[-1].resolve():
                return candidate
        raise UsageError(f"the spec the plan in {plan} reviewed ({' = '.join(self.spec) or 'not recorded'}) is not "
                         "there anymore", "give it: `ddb2bt migrate SPEC --plan FILE`")


def reviewed(spec: MappingSpec, source: SourceDescription | None, target: TargetDiff, *, ok: bool = True,
             estimated_items: int | None = None) -> Reviewed:
    """What a plan (or a run about to start) sees: spec, source and target, comparable across processes."""

    return Reviewed(spec_hash(spec), source_state(spec, source), target.state(), ok, estimated_items)


def source_state(spec: MappingSpec, source: SourceDescription | None) -> dict[str, Any]:
    """What the plan file records of the source (never a secret: endpoints are redacted)."""
    return source_for(spec).state(source)


def check(saved: Reviewed, current: Reviewed, path: Path) -> None:
    """PlanChangedError naming each part that is no longer what was reviewed; nothing when all match."""
    if not saved.ok:
        raise PlanChangedError(f"the plan in {path} had errors (or a target migrate refuses); it cannot be applied",
                               "fix them and run `ddb2bt migrate-plan ... --out` again")
    changed = []
    if saved.spec_hash != current.spec_hash:
        changed.append("the spec (what it migrates or where it writes)")
    if saved.source != current.source:
        changed.append(f"the source ({_differences(saved.source, current.source)})")
    if saved.target != current.target:
        changed.append(f"the target ({_differences(saved.target, current.target)})")
    if changed:
        raise PlanChangedError(f"not what was reviewed in {path}: {'; '.join(changed)} changed since the plan",
                               "review again with `ddb2bt migrate-plan ... --out` (nothing was written)")


def _differences(before: dict[str, Any], after: dict[str, Any]) -> str:
    """``a.b: old → new`` for each leaf that differs."""
    flat_before, flat_after = _flat(before), _flat(after)
    keys = sorted(k for k in flat_before.keys() | flat_after.keys() if flat_before.get(k) != flat_after.get(k))
    return ", ".join(f"{key}: {_short(flat_before.get(key))} → {_short(flat_after.get(key))}" for key in keys)


def _flat(data: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(data, dict) or not data:
        return {prefix: data}
    found: dict[str, Any] = {}
    for key, value in data.items():
        found.update(_flat(value, f"{prefix}.{key}" if prefix else str(key)))
    return found


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 120 else text[:119] + "…"
