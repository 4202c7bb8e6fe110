"""A --run-dir that cannot become a folder is one line naming --run-dir, exit 2, before anything starts, on every
command that makes its own run folder (migrate's own check is in test_migrate_cli.py)."""

from __future__ import annotations

import pytest

from ddb2bt.templates import catalog


@pytest.mark.parametrize("command", [
    ("validate", "{spec}"),
    ("rollback", "{spec}", "--to-table", "Videos-back"),
    ("redrive", "{old}", "{spec}"),
])
@pytest.mark.parametrize("where, reason", [("file/run", "Not a directory"), ("file", "")])
def test_a_run_dir_under_a_file_is_refused_naming_the_flag(invoke, tmp_path, monkeypatch, command, where, reason):
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # nothing may be reached: the check comes first
    monkeypatch.setenv("BIGTABLE_EMULATOR_HOST", "127.0.0.1:9")
    spec = tmp_path / "videos.yaml"
    spec.write_text(catalog.starter_spec("single-table"), encoding="utf-8")
    old = tmp_path / "old"
    old.mkdir()
    (old / "dead_letters.jsonl").write_text("", encoding="utf-8")
    (tmp_path / "file").write_text("mine", encoding="utf-8")
    before = sorted(p.name for p in tmp_path.rglob("*"))
    args = [a.format(spec=spec, old=old) for a in command]
    result = invoke(*args, "--run-dir", tmp_path / where)
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines()[-1].startswith(f"error: --run-dir {tmp_path / where} cannot be written ("), \
        result.stderr
    assert reason in result.stderr and "choose a --run-dir path this user can write" in result.stderr
    assert "Traceback" not in result.output and not result.stdout
    assert sorted(p.name for p in tmp_path.rglob("*")) == before and (tmp_path / "file").read_text() == "mine"
