"""What a Dataflow run can check offline is checked before anything starts: one line naming the flag, exit 2.

Each case is the README's kind of command (`ddb2bt migrate SPEC … --runner DataflowRunner … --dry_run=True`)
with one thing wrong; nothing listens where Google or AWS would be asked (GCE_METADATA_HOST and the
AWS endpoints point at a closed loopback port), so a check that reached for the network would hang
or fail otherwise, and each must answer within seconds.
"""

from __future__ import annotations

import time

import pytest

from ddb2bt.mappers.cloud_paths import bucket_problem

IMAGE = "example.org/ddb2bt:test"


@pytest.fixture
def dataflow(invoke, tmp_path, monkeypatch):
    monkeypatch.setenv("GCE_METADATA_HOST", "127.0.0.1:9")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    monkeypatch.delenv("BIGTABLE_EMULATOR_HOST", raising=False)
    monkeypatch.chdir(tmp_path)
    assert invoke("init", "--template", "single-table", "-o", "videos.yaml").exit_code == 0

    def run(*changes: str, base: dict[str, str] | None = None):
        args = {"--project": "my-project", "--instance": "my-instance", "--run-dir": "gs://my-bucket/runs/v",
                "--runner": "DataflowRunner", "--region": "us-central1", "--temp_location": "gs://my-bucket/tmp",
                "--sdk_container_image": IMAGE, **(base or {})}
        words = [w for flag, value in args.items() if value is not None for w in (flag, value)]
        started = time.monotonic()
        result = invoke("migrate", "videos.yaml", "--yes", *words, *changes, "--dry_run=True")
        return result, time.monotonic() - started

    return run


def last_error(result) -> str:
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors == result.stderr.splitlines()[-1:], result.stderr
    return errors[0]


def test_the_well_formed_command_builds(dataflow):
    result, _ = dataflow()
    assert result.exit_code == 0, result.output
    assert f"would stage: container image {IMAGE}" in result.stdout


def test_a_setup_file_that_does_not_exist_is_refused(dataflow, tmp_path):
    result, _ = dataflow("--setup_file", "/no/such/pyproject.toml", base={"--sdk_container_image": None})
    assert result.exit_code == 2, result.output
    assert last_error(result).startswith("error: --setup_file /no/such/pyproject.toml: no such file; pass the path "
                                         "of ddb2bt's pyproject.toml")
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("flag,path,bucket", [
    ("--temp_location", "gs://b/tmp", "b"),  # a 1-character bucket: Beam's lookup hung ~2 min, then "Bigtable"
    ("--staging_location", "gs://My_Bucket/staging", "My_Bucket"),
    ("--run-dir", "gs://ab/runs/v", "ab"),
    ("--run-dir", "s3://my_bucket/runs/v", "my_bucket"),  # S3 names have no underscores
    ("--dead-letter", "gs://google-runs/dl.jsonl", "google-runs"),
    ("--run-dir", "gs:///runs/v", ""),
])
def test_a_malformed_bucket_is_refused_naming_the_flag(dataflow, flag, path, bucket):
    result, seconds = dataflow(base={flag: path})
    assert result.exit_code == 2, result.output
    line = last_error(result)
    assert line.startswith(f"error: {flag} {path}: "), line
    assert (f"bucket {bucket!r}" in line) if bucket else "names no bucket" in line
    assert f"pass {flag} gs://BUCKET/folder" in line
    assert seconds < 30  # offline: no bucket lookup


def test_a_dataflow_run_without_ddb2bt_on_the_workers_is_refused(dataflow):
    result, _ = dataflow(base={"--sdk_container_image": None})
    assert result.exit_code == 2, result.output
    line = last_error(result)
    assert "DataflowRunner workers would run Beam's default image, which has no ddb2bt" in line
    assert "--sdk_container_image" in line and "--setup_file" in line


@pytest.mark.parametrize("path", ["gs://my-bucket/x", "gs://dummy-bucket", "gs://a_b/x", "gs://example.com.data/x",
                                  "s3://my-bucket/x", "s3://a.b-c/x", "gs://abc/x", "/local/folder", "runs/x"])
def test_well_formed_paths_pass(path):
    assert bucket_problem(path) is None


@pytest.mark.parametrize("path", ["gs://b/x", "gs://ab/x", "gs://-abc/x", "gs://abc-/x", "gs://ABC/x", "gs://192.168.0.1/x",
                                  "gs://goog-data/x", "gs://" + "a" * 64 + "/x", "s3://a_b/x", "s3://a..b/x",
                                  "s3://xn--abc/x", "s3://abc-s3alias/x", "s3:///x"])
def test_malformed_buckets_are_named(path):
    assert bucket_problem(path)


def test_validate_checks_its_paths_the_same_way(invoke, dataflow):
    """validate on Dataflow: the same offline check of the bucket names (here --temp_location)."""
    result = invoke("validate", "videos.yaml", "--run-dir", "gs://my-bucket/runs/v", "--project", "my-project",
                    "--instance", "my-instance", "--runner", "DataflowRunner", "--region", "us-central1",
                    "--temp_location", "gs://b/tmp", "--dry_run=True")
    assert result.exit_code == 2, result.output
    assert last_error(result).startswith("error: --temp_location gs://b/tmp: bucket 'b'")
