"""Ctrl-C while `migrate` waits for a Dataflow job: the job goes on, and the user is told how to cancel it (exit 130).

Dataflow cannot run here, so the job is a stand-in with the one method the wait calls; what is
tested is ddb2bt's handling: the error's kind, its text and the command it prints.
"""

from __future__ import annotations

from apache_beam.options.pipeline_options import PipelineOptions
import pytest
from typer.testing import CliRunner

from ddb2bt.app import migrate as use_case
from ddb2bt.app.options import RunOptions
from ddb2bt.cli.main import app
from ddb2bt.mappers.errors import INTERRUPTED, Interrupted


class InterruptedJob:
    def wait_until_finish(self):
        raise KeyboardInterrupt


def prepared(tmp_path, runner: str, direct: bool) -> use_case.PreparedRun:
    options = PipelineOptions([f"--runner={runner}", "--project=p", "--region=europe-west1"])
    return use_case.PreparedRun(
        spec=None, options=RunOptions(), pipeline_options=options, run_dir="gs://b/runs/t",
        dead_letter=str(tmp_path / "dl.jsonl"), target="Cloud Bigtable: projects/p/instances/i/tables/t",
        runner=runner, direct=direct, dry_run=False, scanning=True, total_segments=4,
    )


def test_ctrl_c_on_dataflow_says_the_job_keeps_running(tmp_path):
    with pytest.raises(use_case.JobStillRunning) as caught:
        use_case._finish(prepared(tmp_path, "DataflowRunner", False), InterruptedJob(), "2026-11-22_01_02_03-123",
                         "https://console.cloud.google.com/dataflow/jobs/europe-west1/2026-11-22_01_02_03-123?project=p")
    error = caught.value
    assert isinstance(error, Interrupted) and error.exit_code == INTERRUPTED
    text = error.one_line()
    assert "Dataflow job 2026-11-22_01_02_03-123 keeps running" in text
    assert "gcloud dataflow jobs cancel 2026-11-22_01_02_03-123 --region europe-west1" in text


def test_ctrl_c_on_a_local_run_is_not_hidden(tmp_path):
    with pytest.raises(KeyboardInterrupt):  # a local run stops with the process: the CLI reports it
        use_case._finish(prepared(tmp_path, "DirectRunner", True), InterruptedJob(), None, None)


def test_the_cli_prints_one_line_and_exits_130(tmp_path, monkeypatch):
    def interrupted(spec, options, **_):
        raise use_case.JobStillRunning("stopped waiting; Dataflow job J keeps running (URL)",
                                       "cancel it with `gcloud dataflow jobs cancel J --region R`")

    monkeypatch.setattr(use_case, "prepare", interrupted)
    spec = tmp_path / "spec.yaml"
    spec.write_text("{}")
    result = CliRunner().invoke(app, ["migrate", str(spec)])
    assert result.exit_code == 130
    assert result.stderr.strip().splitlines() == [
        "error: stopped waiting; Dataflow job J keeps running (URL); cancel it with `gcloud dataflow jobs cancel J "
        "--region R`"]
