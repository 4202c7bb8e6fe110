"""Issue 25 items 5 and 6: shell and CLI manners. A closed pipe is not exit 1; `--help` reads at 80 columns with an
example per command; the redrive line after dead letters; `local down` gives back the user's variables; an empty
dead-letter file made beforehand is accepted and made 0600; the plan header names no project nobody gave."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import boto3
import pytest
import typer

from ddb2bt.app import local
from ddb2bt.app.seeds import load_seed_table
from ddb2bt.app.options import RunOptions
from ddb2bt.cli.commands.migrate import redrive_command, render
from ddb2bt.cli.main import app
from ddb2bt.mappers.spec import TargetSpec
from ddb2bt.pipelines.run.dead_letters import DeadLetterDestinationError, check_dead_letter_destination
from ddb2bt.pipelines.bigtable.target import describe_target
from ddb2bt.templates import catalog

DDB2BT = [sys.executable, "-c", "from ddb2bt.cli.main import run; run()"]


def commands() -> list[tuple[str, ...]]:
    group = typer.main.get_command(app)
    found = []
    for name, command in group.commands.items():  # type: ignore[attr-defined]
        subcommands = getattr(command, "commands", None)
        found += [(name, sub) for sub in subcommands] if subcommands else [(name,)]
    return found


@pytest.mark.parametrize("command", commands(), ids=" ".join)
def test_help_reads_at_80_columns_with_an_example(invoke, command, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    result = invoke(*command, "--help")
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert max(map(len, text.splitlines())) <= 80
    group = typer.main.get_command(app)
    found = group.commands[command[0]]  # type: ignore[attr-defined]
    found = found.commands[command[1]] if len(command) > 1 else found
    for param in found.params:
        if param.param_type_name == "option" and not param.hidden:
            assert param.opts[0] in text, f"{param.opts[0]} cut or missing in `{' '.join(command)} --help`"
    assert "…" not in "".join(line for line in text.splitlines() if "--" in line)  # no name cut short
    rows = [line for line in text.splitlines() if line.startswith("│ -")]
    assert not [row for row in rows if "<bool>" in row], "\n".join(rows)  # a flag takes no value
    assert "_" not in "".join(re.findall(r"--[\w-]+", "".join(rows)))  # one spelling per option
    assert re.search(r"Example: (eval \"\$\()?ddb2bt ", text), text


def test_the_underscore_spelling_is_still_read(invoke, tmp_path):
    missing = tmp_path / "missing.yaml"
    for flag in ("--run_dir", "--run-dir"):
        result = invoke("validate", missing, flag, tmp_path / "run")
        assert result.exit_code == 2 and "missing.yaml" in result.stderr and "option" not in result.stderr


@pytest.mark.servers
def test_a_closed_pipe_ends_quietly_with_exit_0(moto_server, tmp_path):
    """`ddb2bt migrate-plan spec | head -1`: once the reader has gone, the rest of the output goes nowhere and the exit
    status is 0, not 1 (found problems, as rich's default made it) nor 120 (Python's failed flush at exit)."""
    load_seed_table(boto3.client("dynamodb", endpoint_url=moto_server.endpoint, region_name="us-east-1"),
                    catalog.get("single-table"), table="VideosPipe")
    spec = tmp_path / "videos.yaml"
    spec.write_text(catalog.starter_spec("single-table").replace("table: Videos", "table: VideosPipe"))
    env = {**os.environ, "AWS_ENDPOINT_URL_DYNAMODB": moto_server.endpoint, "AWS_ACCESS_KEY_ID": "testing",
           "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1"}
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first line: every write meets a closed pipe
    try:
        done = subprocess.run([*DDB2BT, "migrate-plan", str(spec)], stdout=write, stderr=subprocess.PIPE, env=env,
                              cwd=tmp_path, timeout=120)
    finally:
        os.close(write)
    assert done.returncode == 0, done.stderr.decode()
    assert b"Traceback" not in done.stderr and b"BrokenPipe" not in done.stderr and b"Exception ignored" not in done.stderr

    # and in a shell, as a user types it
    piped = subprocess.run(["bash", "-c", 'set -o pipefail; "$@" | head -1', "sh", *DDB2BT, "migrate-plan", str(spec)],
                           capture_output=True, env=env, cwd=tmp_path, timeout=120)
    assert piped.returncode == 0 and len(piped.stdout.splitlines()) == 1, piped.stderr.decode()


def test_after_dead_letters_the_exact_redrive_line():
    c = {"items_read": 1, "rows_written": 0, "cells_written": 0, "bytes_written": 0, "dead_lettered": 1, "skipped": 0}
    prepared = SimpleNamespace(dead_letter="runs/my run/dead_letters.jsonl", scanning=False, total_segments=1,
                               resumable=True, run_dir="runs/my run", options=RunOptions())
    result = SimpleNamespace(prepared=prepared, state="DONE", job_id=None, finished=True, counters=c, ended_early=False,
                             cells_exact=True, reasons={}, segments_done=None, dead_letter_lines=1, dead_letters_unjoined="",
                             problems=[], ok=True,
                             resume_command=lambda *args, **kwargs: "ddb2bt migrate …")
    lines = render(result, "specs/videos.yaml")  # type: ignore[arg-type]
    assert "read 1 item: 0 written (0 cells, 0 bytes), 1 dead-lettered, 0 skipped" in lines
    assert "fix the spec or the data (the reasons above say which), then re-drive them: ddb2bt redrive 'runs/my run' "\
           "specs/videos.yaml" in lines
    assert redrive_command("out/letters.jsonl", "s.yaml") == "ddb2bt redrive out/letters.jsonl s.yaml"
    # where the run wrote (Bigtable's and the writer's options), not the options redrive does not take
    given = RunOptions(instance="i 2", flush_limit_bytes=9, endpoint_url="http://x", total_segments=4)
    assert redrive_command("runs/r/dead_letters.jsonl", "s.yaml", given) == (
        "ddb2bt redrive runs/r s.yaml --instance 'i 2' --flush-limit-bytes 9")
    clean = render(SimpleNamespace(**{**vars(result), "dead_letter_lines": 0}), "s.yaml")  # type: ignore[arg-type]
    assert not any("redrive" in line for line in clean)


def run_in_shell(lines: list[str], env: dict[str, str]) -> dict[str, str]:
    done = subprocess.run(["sh", "-c", 'eval "$LINES"; unset LINES; env -0'], env={**env, "LINES": "\n".join(lines)},
                          capture_output=True, check=True)
    return dict(entry.split("=", 1) for entry in done.stdout.decode().split("\0") if "=" in entry)


def test_local_down_gives_back_the_variables_up_changed_without_printing_them():
    state = local.LocalState("d", 1, local.Server("moto", "http://127.0.0.1:1", 2),
                             local.Server("bigtable", "127.0.0.1:3", 3), ())
    user = {"PATH": os.environ["PATH"], "AWS_PROFILE": "prod", "AWS_ACCESS_KEY_ID": "AKIAUSERKEY",
            "AWS_SECRET_ACCESS_KEY": "user-secret"}
    up = state.exports()
    assert not any("AKIAUSERKEY" in line or "user-secret" in line or "prod" in line for line in up)
    inside = run_in_shell(up, user)
    assert "AWS_PROFILE" not in inside and inside["AWS_ACCESS_KEY_ID"] != "AKIAUSERKEY"
    assert inside["BIGTABLE_EMULATOR_HOST"] == "127.0.0.1:3"
    again = run_in_shell(up, inside)  # a second `up` in that shell keeps the first save
    down = local.restore_lines(local.changed(tuple(state.environ())))
    after = run_in_shell(down, again)
    assert {name: after.get(name) for name in [*state.environ(), "AWS_PROFILE"]} == \
        {name: user.get(name) for name in [*state.environ(), "AWS_PROFILE"]}
    assert not [name for name in after if name.startswith("DDB2BT_LOCAL_SAVED")]
    # `down` in a shell that never ran `up`'s lines: the variables are unset, as before
    assert "BIGTABLE_EMULATOR_HOST" not in run_in_shell(down, {**user, "BIGTABLE_EMULATOR_HOST": "x:1"})


def test_an_empty_dead_letter_file_made_beforehand_is_accepted_and_made_private(tmp_path):
    empty = tmp_path / "letters.jsonl"
    empty.touch(mode=0o644)
    os.chmod(empty, 0o644)
    check_dead_letter_destination(str(empty), create=False)
    assert empty.stat().st_mode & 0o777 == 0o600
    check_dead_letter_destination(str(empty))
    held = tmp_path / "held.jsonl"
    held.write_text('{"item": {}}\n')
    with pytest.raises(DeadLetterDestinationError, match=r"is not empty \(another run's dead letters, or a file"):
        check_dead_letter_destination(str(held), create=False)
    spec = tmp_path / "spec.yaml"  # a user's own file given by mistake: not called dead letters
    spec.write_text("source: {table: t}\n")
    with pytest.raises(DeadLetterDestinationError, match="a file that is not ours") as refused:
        check_dead_letter_destination(str(spec), create=False)
    assert spec.read_text() == "source: {table: t}\n"  # nothing written
    assert "holds dead letters of another run" not in str(refused.value)


def test_the_target_line_names_no_project_nobody_gave(monkeypatch):
    default = TargetSpec(table="t", families={"f": {}})
    named = TargetSpec(table="t", families={"f": {}}, project="p", instance="i")
    assert describe_target(named, {}) == "Cloud Bigtable: projects/p/instances/i/tables/t"
    assert describe_target(default, {}) == ("Cloud Bigtable: instances/ddb2bt-local/tables/t in no project (set "
                                            "target.project in the spec, or pass --project)")
    assert describe_target(default, {"BIGTABLE_EMULATOR_HOST": "127.0.0.1:9"}) == (  # the emulator's is the one used
        "Bigtable emulator at 127.0.0.1:9: projects/ddb2bt-local/instances/ddb2bt-local/tables/t")


def test_the_readme_says_what_a_closed_pipe_does():
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    assert "| head" in readme and "exit 0" in readme


def test_an_unexpected_error_says_where_debug_goes(invoke, monkeypatch):
    """The bug line names the exact way to get the traceback: --debug is the main command's option, so the
    `ddb2bt init ... --debug` its old words 'run with --debug' led to was refused as an unknown option."""

    def broken(name):
        raise RuntimeError("boom")

    monkeypatch.setattr(catalog, "starter_spec", broken)
    result = invoke("init", "-t", "key-value", "-o", "-")
    assert result.exit_code == 1
    assert "unexpected RuntimeError: boom" in result.output
    assert "run it again as `ddb2bt --debug init ...` for the traceback" in result.output
    with pytest.raises(RuntimeError):
        from typer.testing import CliRunner

        CliRunner().invoke(app, ["--debug", "init", "-t", "key-value", "-o", "-"], catch_exceptions=False)


def test_a_broken_pipe_that_is_not_stdout_is_a_failure_not_exit_0(invoke, monkeypatch):
    """A BrokenPipeError from anything but stdout (a worker process's pipe, a server's socket) ended the command with
    exit 0 and nothing said, as though `| head` had read enough: a false OK. Only a stdout whose reader has left
    ends quietly (test_a_closed_pipe_ends_quietly_with_exit_0)."""

    def broken(name):
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(catalog, "starter_spec", broken)
    result = invoke("init", "-t", "key-value", "-o", "-")
    assert result.exit_code == 3, result.output  # a connection that broke: a service could not be reached
    assert "error: [Errno 32] Broken pipe" in result.output
