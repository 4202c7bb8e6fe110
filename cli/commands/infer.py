"""`ddb2bt infer`: draft a spec from a live table (DescribeTable + a sample), with comments."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from .. import inputs
from ..options import EndpointUrl, Profile, Region


def command(
    table: Annotated[str, typer.Option("--table", help="DynamoDB table to describe and sample.", show_default=False)],
    sample: Annotated[int, typer.Option("--sample", min=1, help="How many items to sample.")] = 500,
    endpoint_url: EndpointUrl = None,
    region: Region = None,
    profile: Profile = None,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Write the draft here instead of stdout.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing output file.")] = False,
) -> None:
    """Draft a commented mapping spec from DescribeTable and a sample of the table's items."""
    if output is not None and output.exists() and not force:
        raise FileExistsError(f"{output} already exists; pass --force to overwrite it or -o to write elsewhere")
    client = inputs.dynamodb_client(endpoint_url, region, profile)
    draft, sampled = infer_table(client, table, sample)
    if endpoint_url:
        draft.spec["source"]["endpoint_url"] = endpoint_url
    if region:
        draft.spec["source"]["region"] = region
    text = render(draft)
    if output is None:
        typer.echo(text, nl=False)
    else:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text, encoding="utf-8")
        typer.echo(f"Wrote {output} from {sampled} sampled items. Next: review it, then `ddb2bt migrate-plan {output}`.", err=True)
    problem = draft_problem(draft, str(output or "<draft>"))
    if problem:  # a draft is still worth reading; say what to fix
        typer.echo(f"warning: the draft needs edits before it loads: {problem}", err=True)


def infer_table(client, table: str, sample: int):
    """(InferredSpec, items sampled) from DescribeTable, DescribeTimeToLive and a sample."""
    from ...mappers.infer import infer_spec
    from ...pipelines.dynamodb_client import describe_raw
    from ...pipelines.dynamodb_scan import sample_items

    from ..progress import working

    with working(f"describing {table} and reading a sample of {sample} items…"):
        response, ttl = describe_raw(client, table)
        items = sample_items(client, table, sample)
    ttl_description = (ttl or {}).get("TimeToLiveDescription", {})
    ttl_attribute = ttl_description.get("AttributeName") if ttl_description.get("TimeToLiveStatus") == "ENABLED" else None
    return infer_spec(response, items, ttl_attribute=ttl_attribute), len(items)


def render(draft) -> str:
    from ...mappers.spec_yaml import render_yaml

    return render_yaml(draft.spec, draft.comments, draft.header)


def draft_problem(draft, where: str) -> str | None:
    from ...mappers.loader import SpecError, validate_data

    try:
        validate_data(draft.spec, where)
    except SpecError as err:
        return str(err)
    return None
