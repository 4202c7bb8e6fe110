"""`ddb2bt redrive`: a run's dead letters through the fixed spec, against moto_server and the Bigtable emulator."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import boto3
import pytest

from ddb2bt.app.migrate import migrate
from ddb2bt.app.options import RunOptions
from ddb2bt.mappers.loader import load_spec
from ddb2bt.pipelines.dynamodb.client import create_table, put_items
from tests.pipelines.cells import expected_cells, read_cells

GOOD, NO_PRICE, NOTES = range(0, 6), range(6, 9), range(9, 12)
STILL_BAD = 11  # a note without Text: the fixed spec still refuses it


def make_items() -> list[dict]:
    items = []
    for i in range(12):
        item = {"pk": {"S": f"cat{i % 3}"}, "Img": {"B": bytes([i, 0, 255, 10])}, "Tags": {"SS": ["a", f"t{i}"]}}
        if i in NOTES:
            item["sk"] = {"S": f"note#{i:02d}"}
            if i != STILL_BAD:
                item["Text"] = {"S": f"note {i}\nwith a line break and ünïcode"}
        else:
            item["sk"] = {"S": f"item#{i:02d}"}
            if i in GOOD:
                item["Price"] = {"N": f"{i}.50"}
        items.append(item)
    return items


def spec_data(table: str, endpoint: str, fixed: bool) -> dict:
    """v1: Price required, no entity for notes. v2 (fixed): Price optional, notes map (Text required)."""
    product = {"name": "product", "match": {"sk": {"prefix": "item#"}}, "row_key": "{pk}#{sk}",
               "columns": [{"attribute": "Price", "family": "p", "encoding": "decimal", "required": not fixed}],
               "rest": {"family": "x"}}
    note = {"name": "note", "match": {"sk": {"prefix": "note#"}}, "row_key": "{pk}#{sk}",
            "columns": [{"attribute": "Text", "family": "n", "required": True}], "rest": {"family": "x"}}
    families = {"p": {"max_versions": 1}, "x": None, **({"n": {"max_versions": 1}} if fixed else {})}
    return {"source": {"table": table, "partition_key": "pk", "sort_key": "sk", "endpoint_url": endpoint,
                       "region": "us-east-1"},
            "target": {"table": table, "families": families},
            "entities": [product, note] if fixed else [product]}  # no migration_time: cells take the run's "now"


def write_spec(path: Path, data: dict) -> Path:
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    return path


def letters(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture
def failed_run(bigtable_env, moto_server, unique_name, tmp_path):
    """A migration with v1 that dead-letters 6 of 12 items (3 map, 3 unmatched); returns (items, run dir, specs)."""
    items = make_items()
    client = boto3.client("dynamodb", endpoint_url=moto_server.endpoint, region_name="us-east-1")
    create_table(client, unique_name, "pk", "sk")
    put_items(client, unique_name, items)
    v1 = write_spec(tmp_path / "v1.json", spec_data(unique_name, moto_server.endpoint, fixed=False))
    v2 = write_spec(tmp_path / "v2.json", spec_data(unique_name, moto_server.endpoint, fixed=True))
    run_dir = tmp_path / "run"
    result = migrate(v1, RunOptions(run_dir=str(run_dir)))
    assert result.ok and result.counters["rows_written"] == 6 and result.counters["dead_lettered"] == 6
    return items, run_dir, v1, v2


def test_redrive_writes_what_the_fixed_spec_maps_and_keeps_only_what_still_fails(failed_run, invoke, tmp_path):
    items, run_dir, v1, v2 = failed_run
    before = read_cells(load_spec(v1).target)
    assert {letter["stage"] for letter in letters(run_dir / "dead_letters.jsonl")} == {"map", "unmatched"}
    now_ms = json.loads((run_dir / "checkpoint.json").read_text())["now_ms"]

    redrive_dir = tmp_path / "redrive1"
    result = invoke("redrive", run_dir, v2, "--run-dir", redrive_dir)
    assert result.exit_code == 0, result.output
    assert "read 6 items: 5 written" in result.stdout and "1 dead-lettered, 0 skipped" in result.stdout
    assert "redrive OK" in result.stdout
    assert "dead-lettered 1: 1 cannot map (entity note" in result.stdout  # by reason, as migrate says it
    assert "6 items (3 map, 3 unmatched)" in result.stderr
    assert "original run's time" in result.stderr

    # Bigtable, cell by cell: the first run's rows untouched, the redriven ones exactly as v2 maps them at the run's now
    redriven = [items[i] for i in (*NO_PRICE, *NOTES) if i != STILL_BAD]
    expected = {**before, **expected_cells(load_spec(v2), redriven, now_ms=now_ms)}
    assert read_cells(load_spec(v2).target) == expected
    assert len(expected) == 11
    image_cells = [cell for key, cells in expected.items() for cell in cells if cell[1] == b"Img"]
    assert len(image_cells) == 11  # binary attributes came back from base64 intact (compared above)

    # the new dead-letter file: only the item that still fails, mode 0600; the old one untouched
    new_letters = letters(redrive_dir / "dead_letters.jsonl")
    assert [(d["item"]["sk"]["S"], d["stage"], d["entity"]) for d in new_letters] == [("note#11", "map", "note")]
    assert new_letters[0]["item"]["Img"] == {"B": "CwD/Cg=="}
    assert stat.S_IMODE(os.stat(redrive_dir / "dead_letters.jsonl").st_mode) == 0o600
    assert len(letters(run_dir / "dead_letters.jsonl")) == 6

    # redriving the redrive needs no spec (the folder keeps it) and reconciles again: 1 read, 1 still failing
    again = invoke("redrive", redrive_dir, "--run-dir", tmp_path / "redrive2", "--format", "json")
    assert again.exit_code == 0, again.output
    data = json.loads(again.stdout)
    assert data["ok"] and data["now_ms"] == now_ms and data["inherited_now"]
    assert (data["counters"]["items_read"], data["counters"]["rows_written"], data["counters"]["dead_lettered"]) == (1, 0, 1)
    assert data["items_by_stage"] == {"map": 1} and data["dead_letter_lines"] == 1
    assert not any("/" in name for name in data["counters"])  # reasons apart, not as counter names
    assert list(data["reasons"]["dead_lettered"].values()) == [1]

    # a spec with a migration_time: cells take it, and the note says so rather than the original run's time
    timed = write_spec(tmp_path / "v3.json", {**json.loads(v2.read_text()), "migration_time": "2024-01-01T00:00:00Z"})
    third = invoke("redrive", redrive_dir, timed, "--run-dir", tmp_path / "redrive3")
    assert third.exit_code == 0, third.output
    assert "carry the spec's migration_time (2024-01-01T00:00:00+00:00)" in third.stderr
    assert "original run's time" not in third.stderr


def test_lines_without_an_item_are_reported_not_redriven(bigtable_env, invoke, tmp_path, unique_name):
    spec = write_spec(tmp_path / "spec.json", spec_data(unique_name, "http://127.0.0.1:1", fixed=True))
    item = {"pk": {"S": "cat1"}, "sk": {"S": "item#01"}, "Price": {"N": "1"}}
    source = {"item": None, "stage": "source", "reason": "export count mismatch (file): data/a.json.gz should hold 3 "
              "items, 2 were read", "entity": None, "attribute": None, "row_key": None}
    mapped = {"item": item, "stage": "write", "reason": "refused", "entity": "product", "attribute": None, "row_key": None}
    file = tmp_path / "old" / "dead_letters.jsonl"
    file.parent.mkdir()
    file.write_text(json.dumps(source) + "\n" + json.dumps(mapped) + "\n", encoding="utf-8")
    result = invoke("redrive", file, spec, "--run-dir", tmp_path / "new")  # a dead-letter file named directly
    assert result.exit_code == 1, result.output  # the item was written, but the count mismatch is not resolved
    assert f"PROBLEM: 1 lines of {file} hold no item (an export's count mismatch) and stay there" in result.stdout
    assert "redrive FAILED" in result.stdout and json.loads(file.read_text().splitlines()[0]) == source
    assert "1 lines hold no item and cannot be re-driven" in result.stderr
    assert "export count mismatch (file): data/a.json.gz" in result.stderr
    assert "read 1 item: 1 written" in result.stdout
    assert (tmp_path / "new" / "dead_letters.jsonl").read_text() == ""
    assert (tmp_path / "new" / "spec.json").read_text() == spec.read_text()


@pytest.mark.parametrize("content, message", [
    (None, "error: no dead-letter file at {file}; give a run folder"),
    ('{"item": {"pk": {"S": "a"}}, "stage": "map"}\nnot json\n', "error: {file} line 2 is not JSON"),
    ('{"stage": "map"}\n', "error: {file} line 1 is not a dead letter (an object with item and stage)"),
])
def test_bad_dead_letter_files_are_one_line_exit_2(invoke, tmp_path, content, message):
    spec = write_spec(tmp_path / "spec.json", spec_data("t", "http://127.0.0.1:1", fixed=True))
    file = tmp_path / "run" / "dead_letters.jsonl"
    if content is not None:
        file.parent.mkdir()
        file.write_text(content, encoding="utf-8")
    result = invoke("redrive", tmp_path / "run", spec, "--run-dir", tmp_path / "new")
    assert result.exit_code == 2
    assert result.stderr.splitlines()[-1].startswith(message.format(file=file)), result.stderr
    assert not (tmp_path / "new").exists()  # nothing started


def test_a_migration_folder_keeps_no_spec(invoke, tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "dead_letters.jsonl").write_text('{"item": {"pk": {"S": "a"}}, "stage": "map"}\n')
    result = invoke("redrive", tmp_path / "run")
    assert result.exit_code == 2
    assert "keeps no spec" in result.stderr and "ddb2bt redrive RUN_DIR SPEC" in result.stderr


def test_a_run_of_another_table_is_refused(failed_run, invoke, tmp_path):
    """The dead letters are the run's table's items: a spec of another table would write them into its own target."""
    _, run_dir, v1, v2 = failed_run
    before = read_cells(load_spec(v1).target)
    other = write_spec(tmp_path / "other.json", {**json.loads(v2.read_text()),
                                                 "source": {**json.loads(v2.read_text())["source"], "table": "Other"}})
    result = invoke("redrive", run_dir, other, "--run-dir", tmp_path / "new")
    assert result.exit_code == 2, result.output
    table = json.loads(v1.read_text())["source"]["table"]
    assert result.stderr.splitlines()[-1] == (
        f"error: {run_dir}/dead_letters.jsonl holds dead letters of {table}, but {other} reads Other; redrive them "
        f"through the (fixed) spec of {table}: ddb2bt redrive RUN_DIR SPEC")
    assert not (tmp_path / "new").exists() and read_cells(load_spec(v1).target) == before

    # the fixed spec of the same table goes on, and its folder remembers the table for a redrive of the redrive
    assert invoke("redrive", run_dir, v2, "--run-dir", tmp_path / "fixed").exit_code == 0
    assert json.loads((tmp_path / "fixed" / "redrive.json").read_text())["table"] == table
    again = invoke("redrive", tmp_path / "fixed", other, "--run-dir", tmp_path / "again")
    assert again.exit_code == 2 and f"holds dead letters of {table}, but" in again.stderr


def test_a_folder_without_dead_letters_has_nothing_to_redrive_and_makes_nothing(invoke, tmp_path):
    """It made a run folder (redrive.json, a spec copy, an empty dead-letter file) and said "redrive OK"."""
    spec = write_spec(tmp_path / "spec.json", spec_data("t", "http://127.0.0.1:1", fixed=True))
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "dead_letters.jsonl").write_text("\n")
    for given in (tmp_path / "run", tmp_path / "run" / "dead_letters.jsonl"):
        result = invoke("redrive", given, spec, "--run-dir", tmp_path / "new")
        assert result.exit_code == 0, result.output
        assert result.stdout.splitlines() == [f"nothing to redrive: {tmp_path / 'run' / 'dead_letters.jsonl'} holds no "
                                              "dead letter (no run folder made)"], result.output
        assert result.stderr == "" and not (tmp_path / "new").exists()
    result = invoke("redrive", tmp_path / "run", spec, "--run-dir", tmp_path / "new", "--format", "json")
    assert result.exit_code == 0 and json.loads(result.stdout)["nothing"] is True and not (tmp_path / "new").exists()


@pytest.mark.parametrize("sibling", [True, False])
def test_a_file_given_for_the_run_folder_is_named_with_the_fix(invoke, tmp_path, sibling):
    """`redrive rv/checkpoint.json` named rv/checkpoint.json/dead_letters.jsonl."""
    spec = write_spec(tmp_path / "spec.json", spec_data("t", "http://127.0.0.1:1", fixed=True))
    (tmp_path / "rv").mkdir()
    (tmp_path / "rv" / "checkpoint.json").write_text("{}")
    if sibling:
        (tmp_path / "rv" / "dead_letters.jsonl").write_text("")
    result = invoke("redrive", tmp_path / "rv" / "checkpoint.json", spec, "--run-dir", tmp_path / "new")
    assert result.exit_code == 2, result.output
    fix = (f"give its run folder: ddb2bt redrive {tmp_path / 'rv'} SPEC" if sibling else
           "give the run folder that holds dead_letters.jsonl, or a dead-letter file (*.jsonl)")
    assert result.stderr.splitlines() == [f"error: {tmp_path / 'rv' / 'checkpoint.json'} is a file, not a run folder "
                                          f"(one holds dead_letters.jsonl); {fix}"], result.stderr
    assert not (tmp_path / "new").exists()


def test_a_redrive_stopped_by_a_service_says_the_command_that_redrives_again(failed_run, invoke, tmp_path,
                                                                            monkeypatch):
    """A redrive is run again, not resumed: the line names the same letters, spec and options, and no --run-dir (the
    stopped one may hold part of its dead letters, which a new redrive into it refuses). It printed the error alone."""
    import shlex

    from ddb2bt.app import redrive as use_case
    from ddb2bt.pipelines.bigtable.sink import BigtableWriteError
    from ddb2bt.pipelines.run.dead_letters import write_part

    items, run_dir, v1, v2 = failed_run
    flag = ("--flush-limit-mutation-count", "7")  # an option given is given again
    now_ms = json.loads((run_dir / "checkpoint.json").read_text())["now_ms"]
    before = read_cells(load_spec(v1).target)

    def gone(result, dead_letter):
        write_part(dead_letter, [(run_dir / "dead_letters.jsonl").read_text().splitlines()[0]])  # part way
        raise BigtableWriteError("Bigtable did not take the rows within 60s: ServiceUnavailable: gone",
                                 "check that Bigtable is reachable")

    real = use_case.wait_for
    monkeypatch.setattr(use_case, "wait_for", gone)
    stopped = invoke("redrive", run_dir, v2, "--run-dir", tmp_path / "first", *flag)
    assert stopped.exit_code == 3, stopped.output
    line = stopped.stderr.splitlines()[-1]
    assert line.startswith("error: Bigtable did not take the rows within 60s"), line
    command = shlex.split(line.split("into a new run folder): ", 1)[1])
    assert command == ["ddb2bt", "redrive", str(run_dir), str(v2), *flag], command
    refused = invoke("redrive", run_dir, v2, "--run-dir", tmp_path / "first")  # why not the same folder
    assert refused.exit_code == 2 and "first" in refused.stderr, refused.output

    monkeypatch.setattr(use_case, "wait_for", real)
    monkeypatch.chdir(tmp_path)  # the new folder is runs/<table>-redrive-<UTC time>, here
    again = invoke(*command[1:])
    assert again.exit_code == 0, again.output
    redriven = [items[i] for i in (*NO_PRICE, *NOTES) if i != STILL_BAD]
    assert read_cells(load_spec(v2).target) == {**before, **expected_cells(load_spec(v2), redriven, now_ms=now_ms)}


def test_the_redrive_line_migrate_prints_writes_where_the_run_wrote(bigtable_env, moto_server, invoke, unique_name,
                                                                   tmp_path):
    """A migration into another instance (--instance) printed `ddb2bt redrive RUN SPEC`, which wrote the redriven
    items into the spec's instance; the line now carries the run's Bigtable and writer options."""
    import shlex

    items = make_items()
    client = boto3.client("dynamodb", endpoint_url=moto_server.endpoint, region_name="us-east-1")
    create_table(client, unique_name, "pk", "sk")
    put_items(client, unique_name, items)
    spec = write_spec(tmp_path / "spec.json", spec_data(unique_name, moto_server.endpoint, fixed=False))
    other = ("--instance", "other-instance")
    ran = invoke("migrate", spec, "--run-dir", tmp_path / "run", "--yes", *other)
    assert ran.exit_code == 0, ran.output
    line = next(line for line in ran.stdout.splitlines() if "then re-drive them: " in line)
    command = shlex.split(line.split("then re-drive them: ", 1)[1])
    assert command == ["ddb2bt", "redrive", str(tmp_path / "run"), str(spec), *other], command
    write_spec(spec, spec_data(unique_name, moto_server.endpoint, fixed=True))  # the spec fixed in place
    again = invoke(*command[1:], "--run-dir", tmp_path / "redrive")
    assert again.exit_code == 0, again.output
    target = load_spec(spec).target.model_copy(update={"instance": "other-instance"})
    fixed = [item for i, item in enumerate(items) if i != STILL_BAD]
    now_ms = json.loads((tmp_path / "run" / "checkpoint.json").read_text())["now_ms"]
    assert read_cells(target) == expected_cells(load_spec(spec), fixed, now_ms=now_ms)  # all in the run's instance


def test_the_redrive_line_of_a_dead_letter_file_not_named_jsonl_works(bigtable_env, moto_server, invoke, unique_name,
                                                                      tmp_path):
    """`migrate --dead-letter letters.txt` printed `ddb2bt redrive letters.txt SPEC`, which redrive refused as 'a file,
    not a run folder'; a file whose lines are dead letters is one, whatever its name."""
    import shlex

    items = make_items()
    client = boto3.client("dynamodb", endpoint_url=moto_server.endpoint, region_name="us-east-1")
    create_table(client, unique_name, "pk", "sk")
    put_items(client, unique_name, items)
    spec = write_spec(tmp_path / "spec.json", spec_data(unique_name, moto_server.endpoint, fixed=False))
    letters = tmp_path / "letters.txt"
    ran = invoke("migrate", spec, "--run-dir", tmp_path / "run", "--dead-letter", letters, "--yes")
    assert ran.exit_code == 0, ran.output
    line = next(line for line in ran.stdout.splitlines() if "then re-drive them: " in line)
    command = shlex.split(line.split("then re-drive them: ", 1)[1])
    assert command[:3] == ["ddb2bt", "redrive", str(letters)], command
    write_spec(spec, spec_data(unique_name, moto_server.endpoint, fixed=True))
    again = invoke(*command[1:], "--run-dir", tmp_path / "redrive")
    assert again.exit_code == 0, again.output
    fixed = [item for i, item in enumerate(items) if i != STILL_BAD]
    now_ms = json.loads((tmp_path / "run" / "checkpoint.json").read_text())["now_ms"]

    def untimed(cells: dict) -> dict:  # a loose file names no run: its items' cells carry the redrive's own "now"
        return {key: sorted((c[0], c[1], c[3]) for c in row) for key, row in cells.items()}

    assert untimed(read_cells(load_spec(spec).target)) == untimed(expected_cells(load_spec(spec), fixed, now_ms=now_ms))
