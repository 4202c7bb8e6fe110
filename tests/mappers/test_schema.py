"""The shipped JSON Schema is current and accepts the shipped specs (editors rely on it)."""

from importlib import resources

import jsonschema
import pytest
import yaml

from ddb2bt.mappers.schema import SCHEMA_PATH, json_schema, json_schema_text

TEMPLATES = sorted(path.name for path in resources.files("ddb2bt.templates").iterdir() if path.name.endswith(".yaml"))


def test_shipped_schema_is_up_to_date():
    assert SCHEMA_PATH.read_text(encoding="utf-8") == json_schema_text(), "run: python -m ddb2bt.mappers.schema"


@pytest.mark.parametrize("name", TEMPLATES)
def test_templates_validate_against_the_schema(name):
    spec = yaml.safe_load((resources.files("ddb2bt.templates") / name).read_text(encoding="utf-8"))
    jsonschema.validate(spec, json_schema())


def test_schema_rejects_a_misspelt_key():
    spec = yaml.safe_load((resources.files("ddb2bt.templates") / "invoices.yaml").read_text(encoding="utf-8"))
    spec["entities"][0]["row_kee"] = spec["entities"][0].pop("row_key")
    with pytest.raises(jsonschema.ValidationError, match="row_kee"):
        jsonschema.validate(spec, json_schema())
