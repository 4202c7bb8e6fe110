"""The README's Dataflow command, as printed there, with `--dry_run=True`: exit 0, offline, no AWS credentials.

The command is read from README.md (so the test breaks when the README changes in a way that no
longer works), run through the CLI with the spec it names written by `ddb2bt init` (a
`./pyproject.toml` in it would point at this checkout). Nothing listens where AWS or Google would be asked.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from typer.testing import CliRunner

from ddb2bt.cli.main import app

ROOT = Path(__file__).resolve().parents[2]


def readme_dataflow_command() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = next(b for b in re.findall(r"```bash\n(.*?)```", text, re.S) if "DataflowRunner" in b)
    command = " ".join(line.split("#")[0].rstrip().rstrip("\\") for line in block.splitlines())
    words = shlex.split(command)
    assert words[:2] == ["ddb2bt", "migrate"], words
    return words[2:]


def test_readme_dataflow_command_dry_run_is_offline(tmp_path, monkeypatch):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                 "BIGTABLE_EMULATOR_HOST", "GOOGLE_CLOUD_PROJECT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("GCE_METADATA_HOST", "127.0.0.1:9")  # Google's credential lookup fails at once
    monkeypatch.chdir(tmp_path)
    args = readme_dataflow_command()
    spec = args[0]
    runner = CliRunner()
    made = runner.invoke(app, ["init", "--template", "single-table", "-o", spec])
    assert made.exit_code == 0, made.output
    args = [str(ROOT / "pyproject.toml") if a.endswith("pyproject.toml") else a for a in args]
    args = [a.replace("--setup_file=./pyproject.toml", f"--setup_file={ROOT / 'pyproject.toml'}") for a in args]

    result = runner.invoke(app, ["migrate", *args, "--dry_run=True"])

    assert result.exit_code == 0, result.output
    assert "Cloud Bigtable: projects/my-project/instances/my-instance/tables/" in result.stderr
    assert "dry run: built 4 stages: Scan, Map, WriteToBigtable, Persist" in result.stdout
    assert "would stage: container image us-central1-docker.pkg.dev/my-project/my-repo/ddb2bt:0.1.0" in result.stdout
    assert "assumed: 1 scan segment" in result.stderr
    assert not (tmp_path / "runs").exists() and not (tmp_path / "gs:").exists()  # nothing written


def test_readme_tour_never_writes_over_a_file_it_wrote():
    """`init`/`infer` refuse an existing -o without --force: the tour's commands, run in order, each write a new file."""
    text = (ROOT / "README.md").read_text()
    tour = re.search(r"## A tour of the CLI\n+```bash\n(.*?)```", text, re.S)
    assert tour is not None
    written = []
    for line in tour.group(1).splitlines():
        words = shlex.split(line.split("#")[0])
        if words[:2] in (["ddb2bt", "init"], ["ddb2bt", "infer"]) and "-o" in words and "--force" not in words:
            written.append(words[words.index("-o") + 1])
    assert len(written) >= 2 and len(set(written)) == len(written), written
