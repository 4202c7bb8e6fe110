"""migrate, validate and demo against the real local servers (moto_server + Bigtable emulator)."""

import boto3
import pytest

from ddb2bt.app.seeds import SEEDED, load_seed_table
from ddb2bt.templates import catalog

pytestmark = pytest.mark.servers


@pytest.fixture
def videos_spec(moto_server, bigtable_env, unique_name, tmp_path):
    """The videos example in its own DynamoDB and Bigtable tables."""
    client = boto3.client("dynamodb", endpoint_url=moto_server.endpoint)
    template = catalog.get("single-table")
    load_seed_table(client, template, table=unique_name)
    text = catalog.starter_spec("single-table").replace("table: Videos", f"table: {unique_name}").replace(
        "table: videos", f"table: {unique_name}")
    spec = tmp_path / "videos.yaml"
    spec.write_text(text)
    return spec


def test_migrate_on_the_servers(invoke, videos_spec, moto_server, tmp_path):
    endpoint = ["--endpoint-url", moto_server.endpoint]
    result = invoke("migrate", videos_spec, "--yes", "--run-dir", tmp_path / "run", *endpoint)
    assert result.exit_code == 0, result.output
    assert "read 9 items: 9 written" in result.stdout and "run OK" in result.stdout
    assert f"dead letters: {tmp_path / 'run' / 'dead_letters.jsonl'}" in result.stdout
    assert f"run folder: {tmp_path / 'run'}\n" in result.stdout and "resume" not in result.stdout  # finished: no resume

    # validate on the command line (summary, tampering, --format json, --repair) is in tests/cli/test_validate.py


def test_migrate_reports_bad_beam_args_as_usage(invoke, videos_spec, moto_server):
    result = invoke("migrate", videos_spec, "--yes", "--runner", "Nope")
    assert result.exit_code == 2


@pytest.mark.slow
def test_demo_end_to_end(invoke, tmp_path):
    out = tmp_path / "demo"
    result = invoke("demo", "--out", out)
    assert result.exit_code == 0, result.output
    for template in SEEDED:
        assert (out / template.name / "report.html").exists() and (out / template.name / "report.md").exists()
        assert (out / template.name / "inferred.yaml").exists()
    assert result.stdout.count("reconciled") == 3 and "NOT reconciled" not in result.stdout
    # re-running replaces the output
    assert invoke("demo", "--out", out).exit_code == 0
