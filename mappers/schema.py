"""The spec's JSON Schema, generated from the pydantic models and shipped as spec.schema.json.

Editors (VS Code's YAML extension, JetBrains) read it through a `$schema:` line or a
`# yaml-language-server: $schema=...` comment to complete and check spec files.
"""

from __future__ import annotations

import json
from pathlib import Path

from .spec import MappingSpec

SCHEMA_PATH = Path(__file__).with_name("spec.schema.json")


def json_schema() -> dict:
    schema = MappingSpec.model_json_schema(by_alias=True, mode="validation")
    _allow_shorthands(schema["$defs"])
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "ddb2bt mapping spec"
    return schema


def _allow_shorthands(defs: dict) -> None:
    """The models accept shorthands through before-validators, which pydantic's schema cannot see."""
    for name in ("Template", "RowKeySpec"):
        defs[name] = {"anyOf": [{"type": "string", "description": "Shorthand for {template: ...}."}, defs[name]]}
    match = defs["EntitySpec"]["properties"]["match"]
    values = [alternative for alternative in defs["Condition"]["properties"]["equals"]["anyOf"] if alternative != {"type": "null"}]
    shorthand = {"anyOf": values, "description": "Shorthand for {equals: ...}."}
    match["additionalProperties"] = {"anyOf": [shorthand, {"$ref": "#/$defs/Condition"}]}


def json_schema_text() -> str:
    return json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":  # python -m ddb2bt.mappers.schema regenerates the shipped file
    SCHEMA_PATH.write_text(json_schema_text(), encoding="utf-8")
    print(f"wrote {SCHEMA_PATH}")
