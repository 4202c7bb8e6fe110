"""Load the worked examples' seed items into a (local) DynamoDB: used by `ddb2bt demo` and the tests."""

from __future__ import annotations

from typing import Any

from ..mappers.loader import parse_document, validate_data
from ..pipelines.dynamodb.client import create_table, put_items
from ..templates import catalog

SEEDED = tuple(t for t in catalog.TEMPLATES.values() if t.seed)


def seed_spec(template: catalog.StarterTemplate) -> Any:
    """The template's spec, parsed (for the table name and key schema)."""

    data, lines = parse_document(catalog.template_text(template.name), template.file)
    data.pop("$schema", None)
    return validate_data(data, template.file, lines)


def load_seed_table(client: Any, template: catalog.StarterTemplate, table: str | None = None,
                    stream: bool = False) -> tuple[str, int]:
    """Create the example's table (its key schema from the spec, string keys; a NEW_AND_OLD_IMAGES stream if
    ``stream``) and put its items; (table, items)."""

    spec = seed_spec(template)
    name = table or spec.source.table
    create_table(client, name, spec.source.partition_key, spec.source.sort_key, stream=stream)
    assert template.seed is not None, f"{template.name} has no seed items"  # SEEDED holds only templates with seeds
    return name, put_items(client, name, catalog.seed_items(template.seed))
