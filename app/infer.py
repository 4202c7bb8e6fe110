"""The infer use case: draft a commented mapping spec from DescribeTable and a sample of a live table."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..mappers.analysis.infer import infer_spec
from ..mappers.loader import SpecError, validate_data
from ..mappers.table import SourceDescription
from ..mappers.spec_yaml import render_yaml
from ..pipelines.dynamodb.client import ClientSettings, describe_raw, make_client
from ..pipelines.dynamodb.scan import sample_items
from .context import Step, announce
from .options import RunOptions


@dataclass(frozen=True)
class InferResult:
    draft: Any
    """A ``mappers.infer.InferredSpec``."""
    sampled: int
    text: str
    """The draft as commented YAML."""
    problem: str | None
    """Why the draft does not load yet (a draft is still worth reading), or None."""


def infer(table: str, sample: int, options: RunOptions = RunOptions(), step: Step | None = None,
          client: Any = None) -> InferResult:

    client = client or make_client(ClientSettings(region=options.aws_region, endpoint_url=options.endpoint_url,
                                                  profile=options.profile))
    announce(step, f"describing {table} and reading a sample of {sample} items…")
    response, ttl = describe_raw(client, table)
    items = sample_items(client, table, sample)
    ttl_attribute = SourceDescription.from_describe_table(response, ttl).ttl_active
    draft = infer_spec(response, items, ttl_attribute=ttl_attribute)
    source = draft.spec["source"]
    source.update({k: v for k, v in (("endpoint_url", options.endpoint_url), ("region", options.aws_region)) if v})
    try:
        validate_data(draft.spec, "<draft>")
        problem = None
    except SpecError as err:
        problem = str(err)
    return InferResult(draft, len(items), render_yaml(draft.spec, draft.comments, draft.header), problem)
