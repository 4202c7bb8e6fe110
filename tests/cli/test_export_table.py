"""An export of another table than the spec's source.table is refused before anything is read into Bigtable: one
line naming both tables, exit 2, no table created. The export is tests/data/aws_exports/documented (a full export of
`posts`, laid out as AWS documents it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from google.cloud.bigtable import Client

DOCUMENTED = Path(__file__).resolve().parents[1] / "data" / "aws_exports" / "documented" / "ddb" / "posts"
FULL = DOCUMENTED / "AWSDynamoDB" / "01714564800000-a1b2c3d4"


def write_spec(path: Path, table: str, target: str) -> Path:
    path.write_text(json.dumps({
        "source": {"table": table, "partition_key": "pk", "sort_key": "sk", "export": {"path": str(FULL)}},
        "target": {"table": target, "families": {"f": {"max_versions": 1}}},
        "migration_time": "2024-01-01T00:00:00Z",
        "entities": [{"name": "item", "row_key": "{pk}#{sk}", "rest": {"family": "f"}}]}), encoding="utf-8")
    return path


def tables(bigtable_env) -> set[str]:
    admin = Client(project="ddb2bt-local", admin=True).instance("ddb2bt-local")
    return {table.table_id for table in admin.list_tables()}


@pytest.mark.parametrize("command", [("migrate-plan",), ("report", "-o", "-"), ("validate",), ("migrate", "-y")])
def test_an_export_of_another_table_is_refused(bigtable_env, invoke, tmp_path, unique_name, command):
    spec = write_spec(tmp_path / "spec.json", "Videos", unique_name)
    result = invoke(command[0], spec, *command[1:], *(("--run-dir", tmp_path / "run") if command[0] in (
        "migrate", "validate") else ()))
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines()[-1] == (
        f"error: the export in {FULL} is of table posts (arn:aws:dynamodb:us-east-1:123456789012:table/posts), but "
        "source.table is Videos; point source.export.path at an export of Videos, or fix source.table")
    assert "Traceback" not in result.output and unique_name not in tables(bigtable_env)
    assert not (tmp_path / "run").exists()


def test_the_export_of_the_named_table_migrates(bigtable_env, invoke, tmp_path, unique_name):
    spec = write_spec(tmp_path / "spec.json", "arn:aws:dynamodb:us-east-1:123456789012:table/posts", unique_name)
    result = invoke("migrate", spec, "-y", "--run-dir", tmp_path / "run")
    assert result.exit_code == 0, result.output
    assert "read 5 items: 5 written" in result.stdout and unique_name in tables(bigtable_env)


def _damaged_copy(tmp_path: Path, line: str) -> Path:
    """The documented full export copied, its first data file's second line replaced by ``line``, and the manifest's
    MD5s (and the manifest's own .md5) made to match: the damage is in the data as the manifest vouches for it."""
    import base64
    import gzip
    import hashlib
    import shutil

    copy = tmp_path / "bucket"
    shutil.copytree(DOCUMENTED, copy)
    export = copy / FULL.relative_to(DOCUMENTED)
    entries = [json.loads(entry) for entry in (export / "manifest-files.json").read_text().splitlines()]
    data_file = copy / entries[0]["dataFileS3Key"].removeprefix("ddb/posts/")
    lines = gzip.decompress(data_file.read_bytes()).decode().splitlines()
    data = gzip.compress(("\n".join([lines[0], line, *lines[2:]]) + "\n").encode())
    data_file.write_bytes(data)
    entries[0]["md5Checksum"] = base64.b64encode(hashlib.md5(data).digest()).decode()
    entries[0]["etag"] = hashlib.md5(hashlib.md5(data).digest()).hexdigest() + "-1"
    body = "".join(json.dumps(entry, separators=(",", ":")) + "\n" for entry in entries).encode()
    (export / "manifest-files.json").write_bytes(body)
    (export / "manifest-files.md5").write_text(base64.b64encode(hashlib.md5(body).digest()).decode())
    return export


@pytest.mark.parametrize("line, detail", [
    ('{"Item": {"pk": {"S": "p9"', "not JSON: Expecting ',' delimiter at character 27"),
    ("[1, 2]", 'the line is [1, 2], not an object {"Item": {...}}'),  # was "list indices must be integers or ..."
    ('{"Item": 5}', "Item is 5, not an object of attributes"),  # was dead-lettered once the table was made
    ('{"Item": [{"S": "a"}]}', 'Item is [{"S": "a"}], not an object of attributes'),
    # values DynamoDB never writes: mapped as they were ({"SS": "abc"} became the set a, b, c), or dead-lettered
    ('{"Item": {"pk": {"S": "p9"}, "sk": {"S": "x"}, "tags": {"SS": "abc"}}}', 'tags: "abc" is not a valid SS value'),
    ('{"Item": {"pk": {"S": "p9"}, "sk": {"S": "x"}, "ok": {"BOOL": "yes"}}}', 'ok: "yes" is not a valid BOOL value'),
])
def test_a_damaged_data_file_that_matches_its_md5_creates_nothing(bigtable_env, invoke, tmp_path, unique_name, line,
                                                                  detail):
    """A data line that is no export item, in a file whose MD5 the manifest vouches for: one line naming the file and
    line, what is wrong in our words and what to do, exit 2, and neither the table nor the run folder made (migrate
    created the table, then failed on the line)."""
    export = _damaged_copy(tmp_path, line)
    spec = write_spec(tmp_path / "spec.json", "posts", unique_name)
    spec.write_text(spec.read_text().replace(str(FULL), str(export)))
    result = invoke("migrate", spec, "-y", "--run-dir", tmp_path / "run")
    assert result.exit_code == 2, result.output
    error = result.stderr.splitlines()[-1]
    assert error.startswith(f"error: {export}/data/") and f" line 2 is not an export item: {detail}; " in error, error
    assert error.endswith("; the file matches its manifest's MD5, so copying it again will not help: export the table "
                          "again (or restore the file as DynamoDB wrote it); nothing was written")
    assert "Traceback" not in result.output and unique_name not in tables(bigtable_env)
    assert not (tmp_path / "run").exists()


def _one_file_export(folder: Path, lines: list[bytes]) -> Path:
    """A full export of `posts` (as AWS lays it out) whose one data file holds ``lines``, its MD5 in the manifest."""
    import base64
    import gzip
    import hashlib

    export = folder / "AWSDynamoDB" / "01714564800000-a1b2c3d4"
    (export / "data").mkdir(parents=True, exist_ok=True)
    data = gzip.compress(b"".join(line + b"\n" for line in lines))
    (export / "data" / "part.json.gz").write_bytes(data)
    entry = {"itemCount": len(lines), "md5Checksum": base64.b64encode(hashlib.md5(data).digest()).decode(),
             "etag": hashlib.md5(data).hexdigest(), "dataFileS3Key": f"{export.relative_to(folder)}/data/part.json.gz"}
    (export / "manifest-files.json").write_text(json.dumps(entry, separators=(",", ":")) + "\n")
    summary = json.loads((FULL / "manifest-summary.json").read_text())
    summary.update(s3Prefix=None, itemCount=len(lines), manifestFilesS3Key=f"{export.relative_to(folder)}/manifest-files.json")
    (export / "manifest-summary.json").write_text(json.dumps(summary, separators=(",", ":")))
    return export


def test_a_damaged_line_found_mid_run_says_what_to_do_and_how_to_go_on(bigtable_env, invoke, tmp_path, unique_name):
    """A bad line past the first lines checked before the run is met once rows are written: the run's last line
    names the file and line, what to do (restore the file) and the exact command that resumes; it said only the line
    ("... line 401 is not an export item: ...", no way on). Restored, the resume command finishes the run."""
    import shlex

    good = [json.dumps({"Item": {"pk": {"S": f"p{n}"}, "sk": {"S": "s"}, "pad": {"S": "x" * 300}}}).encode()
            for n in range(404)]
    export = _one_file_export(tmp_path / "bucket", good[:400] + [b'{"Item": {"pk": {"S": "p9"'] + good[401:])
    spec = write_spec(tmp_path / "spec.json", "posts", unique_name)
    spec.write_text(spec.read_text().replace(str(FULL), str(export)))
    result = invoke("migrate", spec, "-y", "--run-dir", tmp_path / "run")
    assert result.exit_code == 2, result.output
    error = result.stderr.splitlines()[-1]
    assert " line 401 is not an export item: not JSON: " in error, error
    assert error.count("restore the file as DynamoDB wrote it") == 1, error
    assert ", resume with: ddb2bt migrate " in error, error
    _one_file_export(tmp_path / "bucket", good)  # restored
    again = shlex.split(error.rpartition(", resume with: ")[2])
    assert again[:2] == ["ddb2bt", "migrate"] and "--resume" in again, again
    result = invoke(*again[1:])
    assert result.exit_code == 0, result.output
    assert "404 written" in result.stdout or "run OK" in result.stdout, result.stdout


def test_a_data_file_holding_fewer_items_than_its_manifest_says_is_not_sent_to_redrive(bigtable_env, invoke, tmp_path,
                                                                                         unique_name):
    """A data file holding 2 items where its manifest line says 3: the run fails (exit 1) saying what to do about the
    export; it said 'fix the spec or the data ..., then re-drive them: ddb2bt redrive ...', and that redrive fails:
    a count mismatch holds no item to re-drive."""
    lines = [json.dumps({"Item": {"pk": {"S": f"p{n}"}, "sk": {"S": "s"}, "v": {"S": "x"}}}).encode() for n in range(2)]
    export = _one_file_export(tmp_path / "bucket", lines)
    for name in ("manifest-files.json", "manifest-summary.json"):  # the manifest says 3
        path = export / name
        path.write_text(path.read_text().replace('"itemCount":2', '"itemCount":3'))
    spec = write_spec(tmp_path / "spec.json", "posts", unique_name)
    spec.write_text(spec.read_text().replace(str(FULL), str(export)))
    result = invoke("migrate", spec, "-y", "--run-dir", tmp_path / "run")
    assert result.exit_code == 1, result.output
    assert "redrive" not in result.stdout, result.stdout
    assert ("PROBLEM: 2 export count mismatch(es) (a data file holds another number of items than its manifest says; "
            "each is a line of the dead-letter file): copy the export again and resume, or export the table again and "
            "migrate that export") in result.stdout, result.stdout


@pytest.mark.parametrize("compact", [True, False])  # AWS's own lines (the compiled grammar vouches), and spaced ones
def test_values_dynamodb_never_writes_past_the_first_lines_are_dead_letters(bigtable_env, invoke, tmp_path,
                                                                            unique_name, compact):
    """Past the first 64 KiB checked before the run, an item holding a value DynamoDB never writes was mapped as it was
    ({"SS": "abc"} written as the set a, b, c; {"BOOL": "yes"} and {"NULL": false} as they were): now each is a dead
    letter naming the attribute and what is wrong (the first lines' words), counted, and no cell of it is written;
    validate counts them as not mapped, as migrate did; redriven as they are, they stay dead letters, still unwritten."""
    separators = (",", ":") if compact else (", ", ": ")
    items = [{"pk": {"S": f"p{n}"}, "sk": {"S": "s"}, "pad": {"S": "x" * 300}} for n in range(404)]
    bad = {300: ("tags", {"SS": "abc"}, 'tags: "abc" is not a valid SS value'),
           350: ("ok", {"BOOL": "yes"}, 'ok: "yes" is not a valid BOOL value'),
           403: ("gone", {"M": {"n": {"NULL": False}}}, "gone.n: false is not a valid NULL value")}
    for n, (name, value, _reason) in bad.items():
        items[n][name] = value
    lines = [json.dumps({"Item": item}, separators=separators).encode() for item in items]
    assert sum(len(line) + 1 for line in lines[:300]) > 64 * 1024  # past what is checked before the run
    export = _one_file_export(tmp_path / "bucket", lines)
    spec = write_spec(tmp_path / "spec.json", "posts", unique_name)
    spec.write_text(spec.read_text().replace(str(FULL), str(export)))
    result = invoke("migrate", spec, "-y", "--run-dir", tmp_path / "run", "--dead-letter", tmp_path / "dead.jsonl")
    assert "Traceback" not in result.output
    assert "read 404 items: 401 written (401 cells, " in result.stdout, result.output
    assert "), 3 dead-lettered, 0 skipped" in result.stdout and "run OK" in result.stdout, result.output
    letters = [json.loads(line) for line in (tmp_path / "dead.jsonl").read_text().splitlines()]
    assert sorted((letter["item"]["pk"]["S"], letter["reason"], letter.get("attribute")) for letter in letters) == sorted(
        (f"p{n}", reason, name) for n, (name, _value, reason) in bad.items()), letters
    table = Client(project="ddb2bt-local", admin=True).instance("ddb2bt-local").table(unique_name)
    keys = {row.row_key for row in table.read_rows()}
    assert len(keys) == 401 and not keys & {f"p{n}#s".encode() for n in bad}
    checked = invoke("validate", spec, "--run-dir", tmp_path / "check")  # the same check: not mapped, not differing
    assert "compared 404 items (3 not mapped, 0 skipped): 401/401 rows found, 401/401 cells match" in checked.stdout, (
        checked.output)
    again = invoke("redrive", tmp_path / "dead.jsonl", spec, "--run-dir", tmp_path / "again")
    assert "read 3 items: 0 written (0 cells, 0 bytes), 3 dead-lettered, 0 skipped" in again.stdout, again.output
    assert [json.loads(line)["reason"] for line in (tmp_path / "again" / "dead_letters.jsonl").read_text().splitlines()
            ] == [letter["reason"] for letter in letters]
    assert {row.row_key for row in table.read_rows()} == keys
