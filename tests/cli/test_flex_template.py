"""The Dataflow Flex Template: every metadata parameter is one the pipeline's option parser accepts."""

import json
import re
import runpy
from importlib import resources

import pytest

FLEX = resources.files("ddb2bt.templates") / "flex"
METADATA = json.loads((FLEX / "metadata.json").read_text())
EXAMPLES = {"spec": "gs://b/specs/videos.yaml", "run_dir": "gs://b/runs/v", "dead_letter": "gs://b/runs/v/dl.jsonl",
            "resume": "true"}
launcher = runpy.run_path(str(FLEX / "main.py"))


def test_metadata_shape():
    assert METADATA["name"] and METADATA["description"]
    names = [p["name"] for p in METADATA["parameters"]]
    assert len(names) == len(set(names))
    for parameter in METADATA["parameters"]:
        assert {"name", "label", "helpText", "isOptional"} <= set(parameter)
    assert [p["name"] for p in METADATA["parameters"] if not p["isOptional"]] == ["spec"]


@pytest.mark.parametrize("parameter", METADATA["parameters"], ids=lambda p: p["name"])
def test_parameter_is_accepted_by_the_pipeline_options(parameter):
    from apache_beam.options.pipeline_options import PipelineOptions

    from ddb2bt.pipelines.options import MigrationOptions

    name = parameter["name"]
    value = EXAMPLES.get(name, "7")
    for regex in parameter.get("regexes", ()):
        assert re.match(regex, value), (name, regex)
    args = launcher["normalize_flags"]([f"--{name}={value}"])
    parsed = MigrationOptions(args).get_all_options(retain_unknown_options=False)
    expected = True if value == "true" else (int(value) if value.isdigit() else value)
    assert parsed[name] == expected
    assert name in PipelineOptions(args).view_as(MigrationOptions).get_all_options()


def test_every_migration_option_is_a_template_parameter():
    from ddb2bt.pipelines.options import MigrationOptions

    import argparse

    parser = argparse.ArgumentParser()
    MigrationOptions._add_argparse_args(parser)
    options = {action.dest for action in parser._actions if action.dest != "help"}
    assert options == {p["name"] for p in METADATA["parameters"]}


def test_flags_normalize():
    normalize = launcher["normalize_flags"]
    assert normalize(["--resume=true", "--resume=false", "--sample=3"]) == ["--resume", "--sample=3"]
    with pytest.raises(SystemExit):
        normalize(["--resume=maybe"])


def test_dockerfile_uses_the_launcher_conventions():
    text = (FLEX / "Dockerfile").read_text()
    assert text.startswith("#") and "FROM gcr.io/dataflow-templates-base/python311-template-launcher-base" in text
    assert 'FLEX_TEMPLATE_PYTHON_PY_FILE="/template/templates/flex/main.py"' in text
    assert "FLEX_TEMPLATE_PYTHON_SETUP_FILE" in text
