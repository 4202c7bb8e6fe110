"""The Dataflow Flex Template: its parameters are exactly ddb2bt's run options, and the launcher builds the job.

The launcher runs under Beam's DataflowRunner with --dry_run=True: the job graph is built as on
Dataflow, with no network and no credentials (nothing is submitted, nothing remote is read).
"""

import json
import re
import runpy
from importlib import resources
from pathlib import Path

import pytest

from ddb2bt.app.options import RUN_OPTIONS, parse_args

ROOT = Path(__file__).resolve().parents[2]
FLEX = resources.files("ddb2bt.templates") / "flex"
METADATA = json.loads((FLEX / "metadata.json").read_text())
EXAMPLES = {"spec": "gs://my-bucket/specs/videos.yaml", "run_dir": "gs://my-bucket/runs/v",
            "dead_letter": "gs://my-bucket/runs/v/dl.jsonl",
            "resume": "true", "aws_region": "us-east-1", "instance": "my-instance", "app_profile": "bulk",
            "max_dead_letters": "5%", "aws_role_arn": "arn:aws:iam::123456789012:role/ddb2bt-reader"}
LAUNCHER_ONLY = {"no_wait", "endpoint_url", "profile", "project"}
"""Run options that are no template parameters: the launcher never waits, workers have no AWS profiles or local
endpoints, and the job's own --project (set by the service) is the instance's project."""
launcher = runpy.run_path(str(FLEX / "main.py"))


def test_metadata_shape():
    assert METADATA["name"] and METADATA["description"]
    names = [p["name"] for p in METADATA["parameters"]]
    assert len(names) == len(set(names))
    for parameter in METADATA["parameters"]:
        assert {"name", "label", "helpText", "isOptional"} <= set(parameter)
    assert [p["name"] for p in METADATA["parameters"] if not p["isOptional"]] == ["spec"]


@pytest.mark.parametrize("parameter", METADATA["parameters"], ids=lambda p: p["name"])
def test_parameter_is_a_run_option(parameter):
    name = parameter["name"]
    value = EXAMPLES.get(name, "7")
    for regex in parameter.get("regexes", ()):
        assert re.match(regex, value), (name, regex)
    options, spec = parse_args([f"--{name}={value}"], with_spec=True)
    expected = True if value == "true" else (int(value) if value.isdigit() else value)
    assert (spec if name == "spec" else getattr(options, name)) == expected
    assert options.beam_args == ()  # ddb2bt's own options never reach Beam


def test_every_run_option_is_a_template_parameter():
    names = {p["name"] for p in METADATA["parameters"]}
    assert names == {o.name for o in RUN_OPTIONS} - LAUNCHER_ONLY | {"spec"}


SPEC = """\
source: {table: Videos, partition_key: pk, sort_key: sk}
target: {project: p, instance: i, table: videos, families: {v: {max_versions: 1}}}
entities:
  - name: video
    row_key: "{pk}"
    timestamp: {fixed: "2024-01-01T00:00:00Z"}
    columns: [{attribute: title, family: v}]
    drop: [sk]
"""


def test_launcher_builds_the_job_under_the_dataflow_dry_run(tmp_path, monkeypatch, caplog):
    """Every template parameter given, Dataflow's dry run: the job graph is built with no network or credentials."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "BIGTABLE_EMULATOR_HOST"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("GCE_METADATA_HOST", "127.0.0.1:9")  # Beam's credential lookup fails at once, offline
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    parameters = [f"--{p['name']}={EXAMPLES.get(p['name'], '7')}" for p in METADATA["parameters"]
                  if p["name"] not in ("spec", "sample", "resume")]
    beam = ["--runner=DataflowRunner", "--project=dummy-project", "--region=us-central1", "--temp_location=gs://dummy-bucket/tmp",
            "--dry_run=True", f"--setup_file={ROOT / 'pyproject.toml'}"]
    caplog.set_level("INFO")
    assert launcher["main"]([f"--spec={spec}", *parameters, *beam]) == 0
    assert "stages: Scan, Map, WriteToBigtable, Persist" in caplog.text
    assert "projects/dummy-project/instances/my-instance/tables/videos, app profile bulk" in caplog.text
    assert "staged package: sdist of" in caplog.text
    assert not (tmp_path / "runs").exists()


def test_launcher_refuses_a_local_run_folder_on_dataflow(tmp_path, caplog):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    code = launcher["main"]([f"--spec={spec}", "--run_dir=/tmp/x", "--runner=DataflowRunner", "--project=dummy-project",
                             "--region=us-central1", "--temp_location=gs://dummy-bucket/tmp",
            "--dry_run=True"])
    assert code == 2
    assert "--run-dir /tmp/x" in caplog.text and "gs://" in caplog.text


def test_launcher_refuses_an_unknown_parameter(tmp_path, caplog):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    assert launcher["main"]([f"--spec={spec}", "--bogus_flag=1", "--dry_run=True"]) == 2
    assert "--bogus_flag" in caplog.text


def test_launcher_builds_the_job_for_the_worker_image(tmp_path, monkeypatch, caplog):
    """The template's own way: the workers run the image (sdk_container_image), no package is staged."""
    monkeypatch.setenv("GCE_METADATA_HOST", "127.0.0.1:9")
    monkeypatch.delenv("BIGTABLE_EMULATOR_HOST", raising=False)
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    image = "us-central1-docker.pkg.dev/my-project/my-repo/ddb2bt:0.1.0"
    caplog.set_level("INFO")
    code = launcher["main"]([f"--spec={spec}", "--run_dir=gs://my-bucket/runs/v", "--instance=my-instance",
                             "--aws_role_arn=arn:aws:iam::123456789012:role/ddb2bt-reader",
                             "--runner=DataflowRunner", "--project=dummy-project", "--region=us-central1",
                             "--temp_location=gs://dummy-bucket/tmp", f"--sdk_container_image={image}",
                             "--dry_run=True"])
    assert code == 0, caplog.text
    assert f"staged package: container image {image}" in caplog.text


def test_launcher_refuses_workers_without_ddb2bt(tmp_path, caplog):
    """Neither an image nor a package: Beam's default worker image has no ddb2bt, the job could never start."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    code = launcher["main"]([f"--spec={spec}", "--run_dir=gs://my-bucket/runs/v", "--runner=DataflowRunner",
                             "--project=dummy-project", "--region=us-central1",
                             "--temp_location=gs://dummy-bucket/tmp", "--dry_run=True"])
    assert code == 2
    assert "Beam's default image, which has no ddb2bt" in caplog.text and "--sdk_container_image" in caplog.text
