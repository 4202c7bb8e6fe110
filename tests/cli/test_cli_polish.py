"""The CLI's manners: typer's usage errors on one line like ours, shell completion, Beam pass-through in migrate's help."""

import os
import subprocess
import sys

import pytest

USAGE_ERRORS = [
    (["no-such-command"], "error: No such command 'no-such-command'. (see `ddb2bt --help`)"),
    (["migrat"], "error: No such command 'migrat'. Did you mean 'migrate', 'migrate-plan'? (see `ddb2bt --help`)"),
    (["migrate-plan"], "error: Missing argument 'spec'. (see `ddb2bt migrate-plan --help`)"),
    (["migrate-plan", "x.yaml", "--format", "xml"],
     "error: Invalid value for '--format': 'xml' is not one of 'text', 'json'. (see `ddb2bt migrate-plan --help`)"),
    (["migrate-plan", "x.yaml", "--sample", "0"], "error: Invalid value for '--sample': Input should be greater than or equal to 1"),
    (["init", "--bogus"], "error: No such option: --bogus"),
    # Commands that pass unknown options to Beam: a misspelt option in SPEC's place is not read as a spec path.
    (["migrate", "--hepl"], "error: unknown option '--hepl' (neither a ddb2bt nor a Beam option; did you mean "
     "'--help'?); see `ddb2bt migrate --help`"),
    (["validate", "--hepl"], "error: unknown option '--hepl' (neither a ddb2bt nor a Beam option; did you mean "
     "'--help'?); see `ddb2bt validate --help`"),
    # A required option missing: a misspelt option is named first, unless Beam knows it.
    (["catch-up", "--hepl"], "error: unknown option '--hepl' (neither a ddb2bt nor a Beam option; did you mean "
     "'--help'?); see `ddb2bt catch-up --help`"),
    (["catch-up", "x.yaml", "--runner", "DirectRunner"], "error: Missing option '--run-dir'"),
    (["migrate", "--direct_num_workers=2", "spec.yaml"], "error: --direct_num_workers=2 stands where SPEC should: "
     "options passed on to Beam go after the arguments; `ddb2bt migrate SPEC [OPTIONS] --direct_num_workers=2`"),
    # After SPEC, an option neither ddb2bt nor Beam knows: the command's close spelling, and its own --help.
    (["migrate", "x.yaml", "--yse"], "error: unknown option '--yse' (neither a ddb2bt nor a Beam option; did you mean "
     "'--yes'?); see `ddb2bt migrate --help` for ddb2bt's options"),
    (["validate", "x.yaml", "--sampel", "3"], "error: unknown option '--sampel' (neither a ddb2bt nor a Beam option; "
     "did you mean '--sample'?); see `ddb2bt validate --help`"),
    (["migrate", "x.yaml", "--zzzz"], "error: unknown option '--zzzz' (neither a ddb2bt nor a Beam option); see "),
    # A value Beam's own parse refuses: one line naming the option, not Beam's usage of 126 lines.
    (["migrate", "x.yaml", "--yes", "--num_workers", "abc"], "error: --num_workers: invalid int value: 'abc'; see "),
    (["migrate"], "error: missing the SPEC argument; `ddb2bt migrate SPEC` (or `--plan FILE` saved by "
     "`ddb2bt migrate-plan SPEC --out FILE`)"),
]


@pytest.mark.parametrize("args, line", USAGE_ERRORS, ids=[" ".join(case[0]) for case in USAGE_ERRORS])
def test_typer_usage_errors_are_one_line_exit_2(invoke, args, line):
    result = invoke(*args)
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(line), result.stderr
    assert not any(box in result.stderr for box in "╭╰│─"), "a boxed panel"


def test_beam_options_a_runner_needs_are_checked_while_the_run_is_prepared(invoke, tmp_path, monkeypatch):
    """Beam's own validation, before anything starts: --region missing for Dataflow is one line and exit 2 (it was
    Beam's ValueError when the job was built, reported as a bug)."""
    monkeypatch.delenv("CLOUDSDK_COMPUTE_REGION", raising=False)  # Beam's default region, when set
    spec = tmp_path / "videos.yaml"
    assert invoke("init", "--template", "single-table", "-o", spec).exit_code == 0
    args = ["migrate", spec, "--yes", "--project", "my-project-123", "--instance", "i", "--run-dir", "gs://my-bucket-x/r",
            "--runner", "DataflowRunner", "--temp_location", "gs://my-bucket-x/tmp", "--dry_run=True"]
    result = invoke(*args)
    assert result.exit_code == 2, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]  # after the run's heading
    assert errors == result.stderr.splitlines()[-1:], result.stderr
    assert errors[0].startswith("error: --region is required with DataflowRunner; add --region="), result.stderr
    assert "ValueError" not in result.output
    assert invoke(*args, "--region", "us-central1", "--sdk_container_image", "example.org/ddb2bt:test").exit_code == 0


OUTPUTS = [(["migrate-plan", "x.yaml", "--out"], "--out"), (["report", "x.yaml", "-o"], "--output"),
           (["infer", "--table", "T", "-o"], "--output")]


@pytest.mark.parametrize("args, flag", OUTPUTS, ids=[case[0][0] for case in OUTPUTS])
def test_an_output_that_cannot_be_written_is_refused_first(invoke, tmp_path, args, flag):
    """Before any work (x.yaml does not even exist, no table is read): one line naming the flag, exit 2."""
    (tmp_path / "out.html").mkdir()
    for where, why in (("/proc/nope/out.html", "No such file or directory"), (str(tmp_path / "out.html"), "is a folder")):
        result = invoke(*args, where)
        assert result.exit_code == 2 and result.stdout == "", result.output
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error: {flag} {where} cannot be written") and why in lines[0], \
            result.stderr
    assert not os.path.exists("/proc/nope")


def test_shell_completion_is_on(invoke):
    assert "--install-completion" in invoke("--help").output
    script = invoke("--show-completion", "bash")
    assert script.exit_code == 0 and "_DDB2BT_COMPLETE=complete_bash" in script.output


def _complete(words: str, cword: int) -> list[str]:
    env = {**os.environ, "_DDB2BT_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(cword)}
    code = "from ddb2bt.cli.main import app; app(prog_name='ddb2bt')"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_completion_completes_commands_and_options():
    assert set(_complete("ddb2bt mig", 1)) == {"migrate", "migrate-plan"}
    assert {"redrive", "local"} <= set(_complete("ddb2bt ", 1))
    assert "--format" in _complete("ddb2bt migrate-plan spec.yaml --for", 3)


def test_migrate_help_mentions_beam_pass_through(invoke):
    result = invoke("migrate", "--help")
    text = " ".join(result.output.split())
    assert result.exit_code == 0
    assert "Beam options" in text and "--runner" in text and "docs/DATAFLOW.md" in text


def test_files_written_are_said_on_stderr_leaving_stdout_to_data(invoke, tmp_path):
    """`Wrote …` is a message, never data: stdout stays empty when a command writes a file (init, schema, report)."""
    spec = tmp_path / "spec.yaml"
    result = invoke("init", "--template", "key-value", "-o", spec)
    assert result.exit_code == 0 and spec.exists()
    assert result.stdout == "" and result.stderr.startswith(f"Wrote {spec} (key-value).")
    schema = invoke("schema", "-o", tmp_path / "schema.json")
    assert schema.exit_code == 0 and schema.stdout == ""


def test_ctrl_c_in_any_command_says_interrupted_and_exits_130(invoke, monkeypatch):
    """typer turns a KeyboardInterrupt into a silent exit 130; a command that does not handle it itself still says so."""
    import ddb2bt.mappers.schema as schema

    def interrupted() -> str:
        raise KeyboardInterrupt

    monkeypatch.setattr(schema, "json_schema_text", interrupted)
    result = invoke("schema")
    assert result.exit_code == 130
    assert result.output.strip().splitlines()[-1] == (  # a command that only reads says so, and how to go on
        "error: interrupted: `ddb2bt schema` only reads, and wrote nothing; run it again: ddb2bt schema")
    assert "Traceback" not in result.output
    from ddb2bt.cli.errors import interrupted_line

    assert interrupted_line(["--debug", "migrate-plan", "v.yaml", "--sample", "9"]) == (
        "interrupted: `ddb2bt migrate-plan` only reads, and wrote nothing; run it again: ddb2bt --debug migrate-plan "
        "v.yaml --sample 9")
    assert interrupted_line(["redrive", "RUN", "v.yaml"]) == "interrupted"  # it writes: not claimed


def test_ctrl_c_while_the_tail_starts_says_nothing_was_applied_and_how_to_start_it(invoke, tmp_path, monkeypatch):
    """Ctrl-C while `tail` loads its spec and timeline and checks Bigtable (seconds on a busy machine): it said only
    "interrupted", now that nothing was read or applied and the command that starts it again, with its own options."""
    import shlex

    from ddb2bt.templates import catalog
    from ddb2bt.pipelines.cutover import timeline

    def ctrl_c(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(timeline, "load", ctrl_c)
    monkeypatch.setenv("BIGTABLE_EMULATOR_HOST", "127.0.0.1:9")  # a target is named; nothing reaches it
    spec = tmp_path / "videos.yaml"
    spec.write_text(catalog.starter_spec("single-table"))
    run_dir = tmp_path / "run"
    result = invoke("tail", spec, "--run-dir", run_dir, "--until-idle", "5")
    assert result.exit_code == 130 and "Traceback" not in result.output
    again = shlex.join(["ddb2bt", "tail", str(spec), "--run-dir", str(run_dir), "--until-idle=5"])
    assert result.stderr.splitlines()[-1] == ("error: tail stopped by Ctrl-C while it was starting: nothing was read "
                                              f"from the stream or applied; start it again: {again}")
    assert not run_dir.exists()


def test_ctrl_c_while_python_loads_the_cli_is_one_line_not_an_import_traceback(monkeypatch, capsys):
    """The console script imports the CLI inside its entry point: a Ctrl-C during that import (half a second or more
    on a busy machine) was a traceback through typer's and rich's modules."""
    import importlib.abc
    from pathlib import Path

    from ddb2bt import cli

    class CtrlC(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "ddb2bt.cli.main":
                raise KeyboardInterrupt
            return None

    monkeypatch.delitem(sys.modules, "ddb2bt.cli.main")
    monkeypatch.delattr(cli, "main", raising=False)
    monkeypatch.setattr(sys, "meta_path", [CtrlC(), *sys.meta_path])
    with pytest.raises(SystemExit) as stopped:
        cli.run()
    assert stopped.value.code == 130
    assert capsys.readouterr().err == ("error: interrupted while ddb2bt was starting: nothing was done; run the "
                                       "command again\n")
    pyproject = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    assert '\nddb2bt = "ddb2bt.cli:run"\n' in pyproject  # the console script is this entry point
