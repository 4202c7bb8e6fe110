"""`ddb2bt migrate` as a team uses it: it says what it will do, asks (or needs --yes), shows progress, runs a reviewed
plan only while it still holds, resumes the latest run of a spec, and speaks JSON. Real servers (moto_server,
the Bigtable emulator) through CliRunner, whose stdin and stderr are not terminals.
"""

from __future__ import annotations

import json
import shlex

import pytest

from ddb2bt.mappers.loader import load_spec
from ddb2bt.pipelines.bigtable.read import read_cells
from ddb2bt.pipelines.bigtable.sink import admin_table, existing_families
from ddb2bt.pipelines.dynamodb.client import ClientSettings, create_table, make_client, put_items

pytestmark = pytest.mark.servers

ITEMS = 40
SPEC = """\
source: {{table: {table}, endpoint_url: "{endpoint}", region: us-east-1, total_segments: 2}}
target: {{table: {table}, families: {{f: {{max_versions: 1}}}}}}
migration_time: "{time}"
entities:
  - name: item
    row_key: "{{pk}}"
    columns: [{{attribute: v, family: f}}]
"""


@pytest.fixture
def source(moto_server, bigtable_env, unique_name, tmp_path):
    """A spec for a 40-item table in moto_server, written to the emulator."""
    client = make_client(ClientSettings(endpoint_url=moto_server.endpoint))
    create_table(client, unique_name, "pk")
    put_items(client, unique_name, [{"pk": {"S": f"k{i:03d}"}, "v": {"S": f"value {i}"}} for i in range(ITEMS)])
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.format(table=unique_name, endpoint=moto_server.endpoint, time="2024-01-01T00:00:00Z"))
    return spec


def rows(spec) -> int:
    return sum(1 for _ in read_cells(load_spec(spec).target))


def test_without_a_terminal_migrate_needs_yes(invoke, source, tmp_path):
    result = invoke("migrate", source, "--run-dir", tmp_path / "run")
    assert result.exit_code == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert errors == ["error: migrate asks before it writes, and stdin is not a terminal; pass --yes to start without "
                      "asking (or --plan FILE saved by `ddb2bt migrate-plan --out`)"]
    assert "+ table" in result.stderr  # it said what it would have done
    assert existing_families(admin_table(load_spec(source).target)) is None and not (tmp_path / "run").exists()


def test_summary_first_then_progress_lines_then_json_on_stdout(invoke, source, tmp_path, monkeypatch):
    monkeypatch.setenv("DDB2BT_PROGRESS_SECONDS", "0.2")  # plain progress lines, often, since stderr is no terminal
    result = invoke("migrate", source, "-y", "--run-dir", tmp_path / "run", "--format", "json")
    assert result.exit_code == 0, result.output
    err = result.stderr.splitlines()
    table = load_spec(source).target.table
    assert err[0].startswith(f"migrate {table} → Bigtable emulator at ") and err[0].endswith(f"/tables/{table}")
    assert err[1] == f"runner DirectRunner; run folder {tmp_path / 'run'}; 2 scan segments"
    assert f"source: {ITEMS} items to read (from DescribeTable, refreshed about every six hours)" in err
    assert any(line.startswith("read budget: 50% of 4,000 RCU (on-demand") for line in err)
    assert f"  + table {table}: does not exist; migrate creates it" in err
    progress = [line for line in err if line.startswith("progress: ")]
    assert progress and all(f"/{ITEMS} items read" in line and "ETA" in line for line in progress)

    data = json.loads(result.stdout)  # stdout holds the JSON and nothing else
    assert data["ok"] and data["state"].endswith("DONE") and data["segments"] == {"total": 2, "stored": 2}
    c = data["counters"]
    assert c["items_read"] == c["rows_written"] == ITEMS and c["scan_retries"] == 0 and c["throttled_pages"] == 0
    assert data["resume_command"] == shlex.join(["ddb2bt", "migrate", str(source), "--resume", "--run-dir",
                                                 str(tmp_path / "run"), "--yes"])
    assert rows(source) == ITEMS


def test_text_result_names_retries_and_throttling(invoke, source, tmp_path):
    result = invoke("migrate", source, "--yes", "--run-dir", tmp_path / "run")
    assert result.exit_code == 0, result.output
    assert f"read {ITEMS} items: {ITEMS} written" in result.stdout
    assert "0 retries, 0 throttled pages" in result.stdout and "segments: 2 of 2 stored" in result.stdout


def test_a_reviewed_plan_runs_only_while_it_holds(invoke, source, tmp_path, moto_server):
    plan = tmp_path / "plan.json"
    planned = invoke("migrate-plan", source, "--out", plan)
    assert planned.exit_code == 0, planned.output
    assert f"Wrote {plan}" in planned.stderr and json.loads(plan.read_text())["ok"] is True

    other = tmp_path / "other.yaml"  # the spec migrates something else now
    other.write_text(source.read_text().replace("2024-01-01T00:00:00Z", "2024-06-01T00:00:00Z"))
    changed = invoke("migrate", other, "--plan", plan, "--run-dir", tmp_path / "no")
    assert changed.exit_code == 2 and "the spec (what it migrates or where it writes) changed" in changed.stderr
    assert not (tmp_path / "no").exists()

    applied = invoke("migrate", source, "--plan", plan, "--run-dir", tmp_path / "run")  # no --yes: the plan is the yes
    assert applied.exit_code == 0, applied.output
    assert f"the plan in {plan} is still what was reviewed" in applied.stderr and rows(source) == ITEMS

    again = invoke("migrate", source, "--plan", plan, "--run-dir", tmp_path / "again")  # the target has changed since
    assert again.exit_code == 2
    error = again.stderr.strip().splitlines()[-1]
    assert error.startswith(f"error: not what was reviewed in {plan}: the target (exists: false → true, ")
    assert "holds_rows: false → true" in error

    table = load_spec(source).source.table  # and now the source too: its capacity
    make_client(ClientSettings(endpoint_url=moto_server.endpoint)).update_table(
        TableName=table, BillingMode="PROVISIONED", ProvisionedThroughput={"ReadCapacityUnits": 5,
                                                                            "WriteCapacityUnits": 5})
    both = invoke("migrate", source, "--plan", plan, "--run-dir", tmp_path / "again")
    assert both.exit_code == 2
    error = both.stderr.strip().splitlines()[-1]
    assert ('the source (description.billing_mode: "PAY_PER_REQUEST" → "PROVISIONED", description.read_capacity: '
            "null → 5)") in error
    assert "the target (" in error


def test_resume_alone_continues_the_latest_run_of_this_spec(invoke, source, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    first = invoke("migrate", source, "--yes")
    assert first.exit_code == 0, first.output
    (run_dir,) = (tmp_path / "runs").iterdir()
    resumed = invoke("migrate", source, "--yes", "--resume")
    assert resumed.exit_code == 0, resumed.output
    assert f"resuming the latest run of this spec under runs/: runs/{run_dir.name}" in resumed.stderr
    assert "resume: 2 of 2 segments already stored" in resumed.stderr
    assert "read 0 items: 0 written" in resumed.stdout  # nothing left to read

    other = tmp_path / "other.yaml"
    other.write_text(source.read_text().replace("2024-01-01T00:00:00Z", "2024-06-01T00:00:00Z"))
    refused = invoke("migrate", other, "--yes", "--resume")
    assert refused.exit_code == 2 and "no run of this spec under runs/" in refused.stderr


def test_a_resumed_run_says_which_of_its_dead_letters_earlier_attempts_wrote(invoke, source, tmp_path):
    """The dead-letter file of a resumed run covers every attempt; its counters only this one. The summary says
    how many lines the earlier attempts wrote, so that "0 dead-lettered" and a file of 3 lines do not disagree."""
    spec = load_spec(source)
    client = make_client(ClientSettings(endpoint_url=spec.source.endpoint_url))
    put_items(client, spec.source.table, [{"pk": {"S": f"bad#{i}"}, "v": {"S": "x"}} for i in range(3)])
    keyed = tmp_path / "keyed.yaml"
    keyed.write_text(source.read_text().replace('"{pk}"', '"{pk}#{v}"'))  # a '#' in a key part: unmappable
    run_dir = tmp_path / "run"
    first = invoke("migrate", keyed, "--yes", "--run-dir", run_dir)
    assert first.exit_code == 0, first.output
    assert "3 dead-lettered" in first.stdout and "(3 lines; holds user data)" in first.stdout, first.stdout
    resumed = invoke("migrate", keyed, "--yes", "--resume", "--run-dir", run_dir)
    assert resumed.exit_code == 0, resumed.output
    assert "0 dead-lettered" in resumed.stdout, resumed.stdout
    assert "(3 lines; 3 of them dead-lettered by earlier attempts of this run; holds user data)" in resumed.stdout
    assert len((run_dir / "dead_letters.jsonl").read_text().splitlines()) == 3


def test_infer_json_has_the_whole_draft(invoke, seeded_moto):
    result = invoke("infer", "--table", "Videos", "--format", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["table"] == "Videos" and data["sampled"] == 9 and data["problem"] is None
    assert data["spec"]["source"]["table"] == "Videos" and "entities" in data["spec"]
    assert data["yaml"].startswith("#") and "entities:" in data["yaml"]


REASONS_SPEC = """\
source: {{table: {table}, endpoint_url: "{endpoint}", region: us-east-1, total_segments: 2}}
target: {{table: {table}, families: {{f: {{max_versions: 1}}}}}}
migration_time: "2024-01-01T00:00:00Z"
unmatched: skip
entities:
  - {{name: audit, match: {{kind: audit}}, action: skip, row_key: "{{pk}}"}}
  - name: item
    match: {{kind: item}}
    row_key: "{{pk}}"
    columns: [{{attribute: v, family: f, required: true}}]
    drop: [kind]
"""


def test_skips_and_dead_letters_are_broken_down_by_reason(invoke, moto_server, bigtable_env, unique_name, tmp_path):
    """Every fourth item is an audit record (skipped by its entity), every fourth matches no entity (unmatched: skip),
    every fourth lacks its required attribute (dead-lettered): the result says so, reason by reason."""
    kinds = ["audit", "junk", "item", "item"]
    items = [{"pk": {"S": f"k{i:03d}"}, "kind": {"S": kinds[i % 4]}, **({"v": {"S": "x"}} if i % 4 != 2 else {})}
             for i in range(ITEMS)]
    client = make_client(ClientSettings(endpoint_url=moto_server.endpoint))
    create_table(client, unique_name, "pk")
    put_items(client, unique_name, items)
    spec = tmp_path / "spec.yaml"
    spec.write_text(REASONS_SPEC.format(table=unique_name, endpoint=moto_server.endpoint))
    quarter = ITEMS // 4

    text = invoke("migrate", spec, "--yes", "--run-dir", tmp_path / "run", "--max-dead-letters", "100%")
    assert text.exit_code == 0, text.output
    assert (f"read {ITEMS} items: {quarter} written ({quarter} cells, " in text.stdout
            and f"), {quarter} dead-lettered, {2 * quarter} skipped" in text.stdout), text.stdout
    lines = text.stdout.splitlines()
    assert f"skipped {2 * quarter}: {quarter} entity action is skip (entity audit), {quarter} no entity matches " \
           "(unmatched: skip)" in lines, text.stdout
    assert f"dead-lettered {quarter}: {quarter} cannot map (entity item, attribute v)" in lines, text.stdout

    data = json.loads(invoke("migrate", spec, "--yes", "--run-dir", tmp_path / "again", "--max-dead-letters", "100%",
                             "--format", "json").stdout)
    assert data["ok"] and data["error"] is None
    assert data["skipped_by_reason"] == {"entity action is skip (entity audit)": quarter,
                                         "no entity matches (unmatched: skip)": quarter}
    assert data["dead_lettered_by_reason"] == {"cannot map (entity item, attribute v)": quarter}
    assert not any("/" in name for name in data["counters"])  # the reasons are not mixed into the plain counters
    assert data["cells_written_exact"] is True  # one item per row: no item can overwrite another's cell


def test_where_items_share_rows_the_cell_count_says_it_is_an_upper_bound(moto_server, bigtable_env, unique_name,
                                                                          tmp_path, invoke):
    client = make_client(ClientSettings(endpoint_url=moto_server.endpoint))
    create_table(client, unique_name, "pk", "sk")
    put_items(client, unique_name, [{"pk": {"S": f"o{i // 2}"}, "sk": {"S": f"line{i % 2}"}, "v": {"S": "x"}}
                                    for i in range(4)])
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.format(table=unique_name, endpoint=moto_server.endpoint, time="2024-01-01T00:00:00Z")
                    .replace("{attribute: v, family: f}", "{attribute: v, family: f, qualifier: '{sk}'}"))
    result = invoke("migrate", spec, "--yes", "--run-dir", tmp_path / "run")
    assert result.exit_code == 0, result.output
    assert "read 4 items: 4 written (at most 4 cells, " in result.stdout, result.stdout


@pytest.mark.parametrize("sample", [None, 5])
def test_a_failed_export_run_says_one_thing_to_do(tmp_path, sample):
    """An export run keeps a checkpoint as a scan does: a dead dependency's line ends with the exact resume command
    (it said "then resume the run (--resume); run it again (... nothing to resume)"); only a --sample run, which
    keeps none, is to be run again."""
    from apache_beam.options.pipeline_options import PipelineOptions

    from ddb2bt.app.migrate import MigrateResult, PreparedRun
    from ddb2bt.app.options import RunOptions
    from ddb2bt.cli.commands.migrate import failure_line
    from ddb2bt.mappers.errors import ServiceError

    prepared = PreparedRun(
        spec=None, options=RunOptions(run_dir=str(tmp_path / "run"), sample=sample), pipeline_options=PipelineOptions(),
        run_dir=str(tmp_path / "run"), dead_letter=str(tmp_path / "dl.jsonl"), target="emulator", runner="DirectRunner",
        direct=True, dry_run=False, scanning=False, total_segments=8)
    error = ServiceError("Bigtable stopped answering", "check that Bigtable is up, then resume the run (--resume)")
    line = failure_line(MigrateResult(prepared, "FAILED", error=error), "spec.yaml", ("--yes",))
    if sample is None:
        resume = shlex.join(["ddb2bt", "migrate", "spec.yaml", "--resume", "--run-dir", str(tmp_path / "run"), "--yes"])
        assert line.endswith(f"; resume with: {resume}") and "run it again" not in line, line
    else:
        assert line.endswith("; run it again (a --sample run keeps no checkpoint)"), line


@pytest.mark.parametrize("value", ["abc", "0", "-5", "nan"])
def test_a_progress_interval_that_is_no_positive_number_is_bad_input(invoke, source, tmp_path, monkeypatch, value):
    """Was a ValueError shown as a bug (exit 1) for 'abc', and a progress line in a busy loop for 0 or less."""
    monkeypatch.setenv("DDB2BT_PROGRESS_SECONDS", value)
    result = invoke("migrate", source, "-y", "--run-dir", tmp_path / "run")
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines()[-1] == (f"error: DDB2BT_PROGRESS_SECONDS={value!r} is not a number of seconds "
                                              "between progress lines; set a positive number such as 10, or unset it")
    assert "progress:" not in result.stderr and not (tmp_path / "run").exists()
    assert existing_families(admin_table(load_spec(source).target)) is None  # no table created either


@pytest.mark.parametrize("resume", [[], ["--resume"]])
def test_a_validations_run_folder_is_refused_as_one(invoke, source, tmp_path, resume):
    """migrate given a validation's run folder (new, or --resume) says so in one line: before, a new run said the
    folder "already holds a migration run" and a resumed one that "the spec changed" (validate's checkpoint hash)."""
    assert invoke("migrate", source, "-y", "--run-dir", tmp_path / "run").exit_code == 0
    validation = tmp_path / "validation"
    assert invoke("validate", source, "--run-dir", validation).exit_code == 0
    before = sorted(path.name for path in validation.iterdir())
    result = invoke("migrate", source, "-y", "--run-dir", validation, *resume)
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines()[-1] == (f"error: {validation} is the run folder of a validation, not of a "
                                              "migration; give migrate a --run-dir of its own (or resume the "
                                              "validation with `ddb2bt validate`)")
    assert sorted(path.name for path in validation.iterdir()) == before and rows(source) == ITEMS


def test_a_run_shorter_than_the_progress_interval_still_ends_its_log_with_a_progress_line(monkeypatch):
    """Plain progress lines come every DDB2BT_PROGRESS_SECONDS: a run that ended sooner left none (the log said
    nothing of what was read, and this file's summary test failed now and then once migrate had got faster). The
    log ends with the last figures, as `watching`'s does; a line already shown is not shown twice."""
    import io

    from rich.console import Console

    from ddb2bt.cli import progress

    monkeypatch.setenv("DDB2BT_PROGRESS_SECONDS", "60")
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=400)
    snap = progress.Snapshot({"items_read": 40, "rows_written": 40}, 0.3, None, 40, (2, 2))
    with progress._display(console, "migrate") as show:
        show(snap, False)
    lines = out.getvalue().splitlines()
    assert lines == [f"progress: {snap.text()}"] and "40/40 items read" in lines[0]

    monkeypatch.setenv("DDB2BT_PROGRESS_SECONDS", "0.000001")
    out.truncate(0), out.seek(0)
    with progress._display(console, "migrate") as show:
        show(snap, False)
    assert out.getvalue().splitlines() == [f"progress: {snap.text()}"]


@pytest.mark.parametrize("where", ["prepare", "question"])
def test_ctrl_c_before_the_run_says_nothing_was_written_and_how_to_go_on(invoke, source, tmp_path, monkeypatch, where):
    """Ctrl-C while migrate checks the source and the target, or at its question: it said only "interrupted", and a
    user could not tell whether a table or a checkpoint had been made, nor how to go on."""
    import typer

    import ddb2bt.app.migrate as use_case
    import ddb2bt.cli.commands.migrate as command

    def ctrl_c(*args, **kwargs):
        raise KeyboardInterrupt

    def ctrl_c_at_the_question():
        raise typer.Abort()  # what typer.confirm raises for Ctrl-C

    if where == "prepare":
        monkeypatch.setattr(use_case, "prepare", ctrl_c)
    else:
        monkeypatch.setattr(command, "_confirm", ctrl_c_at_the_question)
    run_dir = tmp_path / "run"
    given = ("--run-dir", run_dir) if where == "prepare" else ("--run-dir", run_dir, "--format", "json")
    result = invoke("migrate", source, *given)
    assert result.exit_code == 130 and "Traceback" not in result.output
    again = shlex.join(["ddb2bt", "migrate", str(source), "--run-dir", str(run_dir),
                        *(["--format", "json"] if where == "question" else [])])
    assert result.stderr.splitlines()[-1] == (
        "error: interrupted before the migration started: nothing was written (no table, family or checkpoint made; "
        f"the source was only read); run it again: {again}")
    assert existing_families(admin_table(load_spec(source).target)) is None and not run_dir.exists()
