"""Catch-up from incremental exports, end to end: full-export backfill → exports applied in sequence → Bigtable
equals a fresh migration of the final table, cell by cell; gaps, overlaps and NEW_IMAGE exports refused."""

from __future__ import annotations

import json
import shlex
import os
import random
import re

import pytest

from ddb2bt.app.cutover import catch_up
from ddb2bt.app.migrate import migrate
from ddb2bt.app.options import RunOptions
from ddb2bt.pipelines.dynamodb.export import ExportError
from ddb2bt.pipelines.cutover.timeline import TimelineError

from .cells import expected_cells, read_cells
from ddb2bt.pipelines.cutover.workload import make_spec
from .export_fixtures import write_export
from ddb2bt.pipelines.dynamodb.export_writer import compact, write_incremental_export
from .catchups import HOUR, T0, backfill, incremental, simulate

def test_catch_up_exports_in_sequence_converge_and_gaps_are_refused(bigtable_env, unique_name, tmp_path):
    rng = random.Random(7)
    table: dict = {}
    simulate(rng, table, 40, T0 - HOUR, T0)  # the table as the full export saw it
    spec = backfill(tmp_path, unique_name, list(table.values()))
    log = simulate(rng, table, 120, T0, T0 + 2 * HOUR)
    options = RunOptions(run_dir=str(tmp_path / "run"))

    first = incremental(tmp_path, log, T0, T0 + HOUR, unique_name)
    second = incremental(tmp_path, log, T0 + HOUR, T0 + 2 * HOUR, unique_name)
    with pytest.raises(TimelineError, match="a gap"):
        catch_up(spec, second, options)  # the first window is missing
    result = catch_up(spec, first, options)
    assert result.ok, result.problems
    c = result.counters
    assert c["changes_read"] == c["changes_applied"] + c["changes_dead_lettered"] + c["changes_skipped"] > 0
    assert c["cells_deleted"] > 0
    result = catch_up(spec, second, options)
    assert result.ok, result.problems
    with pytest.raises(TimelineError, match="already applied"):
        catch_up(spec, second, options)

    assert read_cells(spec.target) == expected_cells(spec, list(table.values()))
    letters = [json.loads(line) for line in open(result.dead_letter)]
    assert result.dead_letter_lines == len(letters) == result.counters["changes_dead_lettered"]
    assert all(letter["item"]["NewImage"] and "Title" not in letter["item"]["NewImage"] for letter in letters)

    timeline = json.loads((tmp_path / "run" / "cutover.json").read_text())
    assert timeline["applied_to_us"] == T0 + 2 * HOUR and len(timeline["phases"]) == 2


def test_overlap_new_image_and_unfinished_backfill_are_refused(bigtable_env, unique_name, tmp_path):
    rng = random.Random(3)
    table: dict = {}
    simulate(rng, table, 10, T0 - HOUR, T0)
    export_dir = write_export(tmp_path / "full", list(table.values()), files=1, table=unique_name)
    spec = make_spec(unique_name, export={"path": export_dir})
    log = simulate(rng, table, 10, T0, T0 + HOUR)
    options = RunOptions(run_dir=str(tmp_path / "run"))
    window = incremental(tmp_path, log, T0, T0 + HOUR, unique_name)
    with pytest.raises(TimelineError, match="has not finished"):
        catch_up(spec, window, options)  # no backfill has run into this folder
    migrate(spec, options)
    with pytest.raises(TimelineError, match="overlaps"):
        catch_up(spec, incremental(tmp_path, log, T0 - 60_000_000, T0 + HOUR, unique_name), options)
    new_only = write_incremental_export(tmp_path / "newimage", compact(log, T0, T0 + HOUR, ("pk", "sk")), T0,
                                        T0 + HOUR, view="NEW_IMAGE")
    with pytest.raises(ExportError, match="NEW_AND_OLD_IMAGES"):
        catch_up(spec, new_only, options)
    assert not (tmp_path / "run" / "cutover.json").exists()  # nothing was applied


def test_a_timeline_refuses_another_spec_than_the_one_its_phases_applied(tmp_path):
    """QA: after a catch-up, `tail` with a spec whose Title went to another family was taken, and Bigtable ended
    matching neither spec. The saved timeline's spec is the one the cutover goes on with; how a service is reached
    (endpoint, region) may change."""
    from ddb2bt.pipelines.cutover import timeline as tl

    spec = make_spec("posts")
    run = str(tmp_path / "run")
    tl.save(run, tl.Timeline("export", T0, 0, T0, spec=spec.model_dump(mode="json", by_alias=True)))
    assert tl.load(run, spec).start_us == T0
    assert tl.load(run, make_spec("posts", endpoint_url="http://localhost:1", region="eu-west-1")).start_us == T0
    moved = spec.model_dump(mode="json", by_alias=True)
    moved["entities"][2]["columns"][0]["family"] = "c"
    with pytest.raises(TimelineError, match="the spec differs from the one the cutover in .* applies"):
        tl.load(run, type(spec).model_validate(moved))
    with pytest.raises(TimelineError, match="the spec differs"):
        tl.load(run, make_spec("another_table"))


def test_catch_up_without_a_terminal_prints_progress_lines(bigtable_env, unique_name, tmp_path, monkeypatch):
    """CI logs: `progress: catch-up …: N/TOTAL changes read · elapsed` every DDB2BT_PROGRESS_SECONDS and at the end,
    the total from the export's manifest; the result on stdout stays clean."""
    from typer.testing import CliRunner

    from ddb2bt.cli.main import app

    rng = random.Random(11)
    table: dict = {}
    simulate(rng, table, 40, T0 - HOUR, T0)
    spec = backfill(tmp_path, unique_name, list(table.values()))
    export = incremental(tmp_path, simulate(rng, table, 300, T0, T0 + HOUR, posts=40), T0, T0 + HOUR, unique_name)
    total = json.loads(open(f"{export}/manifest-summary.json").read())["itemCount"]
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(spec.model_dump(mode="json", by_alias=True)))
    monkeypatch.setenv("DDB2BT_PROGRESS_SECONDS", "0.05")
    done = CliRunner().invoke(app, ["catch-up", str(spec_file), "--run-dir", str(tmp_path / "run"), "--export", export])
    assert done.exit_code == 0, done.output
    lines = [line for line in done.stderr.splitlines() if line.startswith("progress: ")]
    assert len(lines) >= 2, done.stderr
    figures = rf"(checking the export|[\d,]+/{total:,} changes read)"
    assert all(re.fullmatch(rf"progress: catch-up of export {os.path.basename(export)}: {figures} · \d:\d\d:\d\d elapsed", line)
               for line in lines), lines
    assert f": {total:,}/{total:,} changes read · " in lines[-1]  # the last line: the whole export
    assert "progress:" not in done.stdout and "timeline applied up to" in done.stdout


def test_the_changes_read_are_tallied_live_by_the_apply_step(bigtable_env, unique_name, tmp_path):
    """What `cutover-status` and the progress lines read while a catch-up runs (catch_up_progress): the apply step
    tallies each batch as it comes in, so at the end the live total is every change of the export."""
    from ddb2bt.app.cutover import catch_up_progress
    from ddb2bt.pipelines.run.progress import flush_local

    from ddb2bt.app.cutover import catch_up_live_folder

    rng = random.Random(5)
    table: dict = {}
    simulate(rng, table, 30, T0 - HOUR, T0)
    spec = backfill(tmp_path, unique_name, list(table.values()))
    export = incremental(tmp_path, simulate(rng, table, 80, T0, T0 + HOUR), T0, T0 + HOUR, unique_name)
    run_dir = str(tmp_path / "run")
    result = catch_up(spec, export, RunOptions(run_dir=run_dir))
    assert result.ok, result.problems
    flush_local(catch_up_live_folder(run_dir))  # this process's totals, as the run's end writes them
    total = json.loads(open(f"{export}/manifest-summary.json").read())["itemCount"]
    assert catch_up_progress(run_dir) == {"changes_read": total} and result.counters["changes_read"] == total > 0


def test_a_file_holding_other_than_its_manifest_count_is_a_dead_letter_and_the_timeline_stays(bigtable_env, unique_name,
                                                                                              tmp_path):
    """manifest-files.json says how many changes each data file holds; a file that holds another number is written to
    the dead-letter file (one line naming the file and both counts) and the catch-up does not reconcile, so the
    timeline does not move on."""
    rng = random.Random(9)
    table: dict = {}
    simulate(rng, table, 20, T0 - HOUR, T0)
    spec = backfill(tmp_path, unique_name, list(table.values()))
    export = incremental(tmp_path, simulate(rng, table, 40, T0, T0 + HOUR), T0, T0 + HOUR, unique_name, files=1)
    manifest = os.path.join(export, "manifest-files.json")
    entry = json.loads(open(manifest).read())
    entry["itemCount"] += 1
    open(manifest, "w").write(json.dumps(entry) + "\n")
    result = catch_up(spec, export, RunOptions(run_dir=str(tmp_path / "run")))
    assert not result.ok and result.counters["export_count_mismatch"] == 1
    assert any("copy the incremental export again" in problem for problem in result.problems), result.problems
    letters = [json.loads(line) for line in open(result.dead_letter)]
    mismatches = [letter for letter in letters if "export count mismatch" in letter["reason"]]
    assert len(mismatches) == 1 and str(entry["itemCount"]) in mismatches[0]["reason"], letters
    timeline = tmp_path / "run" / "cutover.json"  # written by the first catch-up that reconciles
    assert not timeline.exists() or json.loads(timeline.read_text())["phases"] == []


def test_changes_text_says_an_unknown_total_is_unknown():
    from ddb2bt.cli.commands.cutover import changes_text

    assert changes_text(1200, None) == "1,200 changes read (total unknown)"
    assert changes_text(1200, 3000) == "1,200/3,000 changes read"
    assert changes_text(3001, 3000) == "3,001 changes read (more than the 3,000 the export lists)"


def test_ctrl_c_stops_a_catch_up_without_advancing_the_timeline(bigtable_env, unique_name, tmp_path, monkeypatch):
    """Ctrl-C while the job runs: one line says the timeline did not advance and gives the command to run again (exit
    130, not typer's silent 130); run again, the export converges cell by cell."""
    from typer.testing import CliRunner

    from ddb2bt.app import cutover
    from ddb2bt.cli.main import app

    rng = random.Random(12)
    table: dict = {}
    simulate(rng, table, 40, T0 - HOUR, T0)
    spec = backfill(tmp_path, unique_name, list(table.values()))
    export = incremental(tmp_path, simulate(rng, table, 60, T0, T0 + HOUR), T0, T0 + HOUR, unique_name)
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(spec.model_dump(mode="json", by_alias=True)))
    run_dir = str(tmp_path / "run")
    args = ["catch-up", str(spec_file), "--run-dir", run_dir, "--export", export]

    def ctrl_c(*args, **kwargs):  # the user presses Ctrl-C while the job runs
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(cutover, "wait_for", ctrl_c)
        stopped = CliRunner().invoke(app, args)
    assert stopped.exit_code == 130, stopped.output
    assert (f"error: catch-up stopped by Ctrl-C; the timeline in {run_dir} advances only once the whole export is "
            "applied; a job on Dataflow keeps running (let it end, or cancel it); then run the same command "
            "again") in stopped.stderr
    assert f"ddb2bt catch-up {spec_file} --run-dir {run_dir} --export {export}" in stopped.stderr
    timeline = json.loads((tmp_path / "run" / "cutover.json").read_text()) \
        if (tmp_path / "run" / "cutover.json").exists() else {"applied_to_us": T0}
    assert timeline["applied_to_us"] == T0 and not timeline.get("phases")

    printed = shlex.split(stopped.stderr.rsplit("harmlessly): ", 1)[1])
    assert printed[1:] == args  # the line that goes on, run as printed
    again = CliRunner().invoke(app, printed[1:])
    assert again.exit_code == 0, again.output
    assert read_cells(spec.target) == expected_cells(spec, list(table.values()))
