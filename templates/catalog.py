"""The starter specs shipped with ddb2bt, and the seed data of the three worked examples.

Read through importlib.resources, so they work from a wheel as well as from a checkout.
"""

from __future__ import annotations

import json
import re
from importlib import resources
from typing import Iterator, NamedTuple
from ..mappers.errors import UsageError


class TemplateNotFound(UsageError, LookupError):
    """No template by that name; the message lists the ones there are."""


class StarterTemplate(NamedTuple):
    name: str
    file: str
    description: str
    seed: str | None = None
    """templates/seeds/<seed>.jsonl holds example items for it, when set."""


TEMPLATES: dict[str, StarterTemplate] = {
    t.name: t
    for t in (
        StarterTemplate("key-value", "product_catalog.yaml", "pk#sk becomes the row key, attributes one column each (product catalog)", "product_catalog"),
        StarterTemplate("single-table", "videos.yaml", "several entity types per partition folded into one row per partition (videos)", "videos"),
        StarterTemplate("adjacency-list", "invoices.yaml", "related items become one column per related id in their own family (invoices, payments)", "invoices"),
        StarterTemplate("time-series", "time_series.yaml", "device#metric#reverse-ts rows, newest first, cells at the reading's time"),
        StarterTemplate("versioned", "versioned.yaml", "v1_/v2_ sort-key versions become cell versions; the v0_ copy is skipped"),
        StarterTemplate("multi-tenant", "multi_tenant.yaml", "tenant id as the row-key prefix, one table for all tenants"),
        StarterTemplate("write-sharded", "write_sharded.yaml", "un-shard '2023-09-10.7' partition keys and re-salt them deliberately"),
    )
}

_SCHEMA_LINE = re.compile(r"^\$schema:.*$", re.M)
SCHEMA_HINT = "# For editor completion: `ddb2bt schema -o spec.schema.json`, then add `$schema: spec.schema.json`."


def get(name: str) -> StarterTemplate:
    try:
        return TEMPLATES[name]
    except KeyError:
        raise TemplateNotFound(f"no template {name!r}; choose one of: {', '.join(TEMPLATES)}") from None


def template_text(name: str) -> str:
    """The template's YAML, comments included, as shipped (its `$schema` points into the package)."""
    return resources.files(__package__).joinpath(get(name).file).read_text(encoding="utf-8")


def starter_spec(name: str) -> str:
    """The template ready to write next to the user's files: the package-relative `$schema` becomes a hint."""
    return _SCHEMA_LINE.sub(SCHEMA_HINT, template_text(name), count=1)


def seed_items(seed: str) -> Iterator[dict]:
    """The example items of a worked example, one DynamoDB-JSON item per line."""
    text = resources.files(__package__).joinpath("seeds", f"{seed}.jsonl").read_text(encoding="utf-8")
    for line in text.splitlines():
        if line.strip():
            yield json.loads(line)
