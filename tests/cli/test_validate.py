"""`ddb2bt validate` on the command line, against the real local servers: the summary, --format json, refusals."""

from __future__ import annotations

import json
import re

import boto3
import pytest

from ddb2bt.app.migrate import migrate
from ddb2bt.app.options import RunOptions
from ddb2bt.app.seeds import load_seed_table
from ddb2bt.mappers.loader import load_spec
from ddb2bt.templates import catalog
from tests.pipelines.cells import drop_rows

pytestmark = pytest.mark.servers


@pytest.fixture
def videos(moto_server, bigtable_env, unique_name, tmp_path):
    """The videos example migrated into its own tables; (spec file, endpoint flags)."""
    client = boto3.client("dynamodb", endpoint_url=moto_server.endpoint)
    load_seed_table(client, catalog.get("single-table"), table=unique_name)
    text = catalog.starter_spec("single-table").replace("table: Videos", f"table: {unique_name}").replace(
        "table: videos", f"table: {unique_name}")
    spec = tmp_path / "videos.yaml"
    spec.write_text(text)
    endpoint = ("--endpoint-url", moto_server.endpoint)
    assert migrate(spec, RunOptions(run_dir=str(tmp_path / "migrated"), endpoint_url=moto_server.endpoint)).ok
    return spec, endpoint


def tamper(spec):
    """A changed Likes on 0123, row 0124 gone (dropped, not emptied: a repair writes it again, and the emulator may
    lose a write into an emptied row)."""
    from google.cloud.bigtable.data import BigtableDataClient, SetCell

    target = load_spec(spec).target
    with BigtableDataClient(project=target.project) as client:
        table = client.get_table(target.instance, target.table)
        (likes,) = [c for c in table.read_row(b"0123").cells if c.qualifier == b"Likes"]
        table.mutate_row(b"0123", [SetCell("video", b"Likes", (99).to_bytes(8, "big"), likes.timestamp_micros)])
    drop_rows(target, [b"0124"])


def test_clean_then_tampered_summary(invoke, videos, tmp_path):
    spec, endpoint = videos
    check = invoke("validate", spec, "--run-dir", tmp_path / "v1", *endpoint)
    assert check.exit_code == 0, check.output
    table = load_spec(spec).source.table
    assert check.stderr.splitlines()[0].startswith(f"validate {table} against Bigtable emulator at ")
    assert "compared 9 items" in check.stdout and "OK: Bigtable holds exactly" in check.stdout
    assert "read back through the decoder: " in check.stdout and "1 in 256 of the others" in check.stdout

    tamper(spec)
    check = invoke("validate", spec, "--run-dir", tmp_path / "v2", "--full", *endpoint)  # --full: old spelling
    assert check.exit_code == 1
    # row 0124 held four items: each is named
    assert "DIFFERENT: 1 different value, 4 missing row, 1 different attribute" in check.stdout
    assert "different value: 0123 video:Likes@" in check.stdout
    assert "missing row: 0124 (item pk=0124, sk=Video)" in check.stdout
    assert "different attribute: 0123 attribute 'Count' expected {'N': '3'} got {'N': '99'}" in check.stdout
    assert f"all differences: {tmp_path / 'v2' / 'differences.jsonl'}" in check.stdout
    assert len(check.stdout.splitlines()) < 25  # one screen


def test_json_has_the_data_on_stdout_and_full_values(invoke, videos, tmp_path):
    spec, endpoint = videos
    tamper(spec)
    check = invoke("validate", spec, "--run-dir", tmp_path / "v", "--format", "json", *endpoint)
    assert check.exit_code == 1
    result = json.loads(check.stdout)  # nothing else on stdout
    assert result["counts"] == {"different_value": 1, "missing_row": 4, "different_attribute": 1}
    assert result["totals"]["items_read"] == 9 and result["ok"] is False
    different = next(d for d in result["differences"] if d["kind"] == "different_value")
    assert different["found"] == {"base64": "AAAAAAAAAGM="}  # 99 as 8 bytes: not UTF-8 text, so base64, whole
    assert "validate " in check.stderr and result["differences_file"].endswith("differences.jsonl")


def test_sample_repair_and_refusals(invoke, videos, tmp_path):
    spec, endpoint = videos
    tamper(spec)
    sampled = invoke("validate", spec, "--sample", "9", "--run-dir", tmp_path / "s", *endpoint)
    assert sampled.exit_code == 1 and "compared a random sample of 9 items" in sampled.stdout
    repaired = invoke("validate", spec, "--repair", "--run-dir", tmp_path / "r", *endpoint)
    assert repaired.exit_code == 1 and "repair: 5 cells rewritten in 2 rows" in repaired.stdout, repaired.output
    assert invoke("validate", spec, "--run-dir", tmp_path / "again", *endpoint).exit_code == 0

    refused = invoke("validate", spec, "--sample", "5", "--resume", "--run-dir", tmp_path / "s", *endpoint)
    assert refused.exit_code == 2 and "--sample" in refused.stderr
    again = invoke("validate", spec, "--run-dir", tmp_path / "again", *endpoint)
    assert again.exit_code == 2 and "already holds a validation run" in again.stderr
    migration = invoke("validate", spec, "--resume", "--run-dir", tmp_path / "migrated", *endpoint)
    assert migration.exit_code == 2 and "run folder of a migration" in migration.stderr
    nothing = invoke("validate", spec, "--resume", "--run-dir", tmp_path / "never", *endpoint)
    assert nothing.exit_code == 2 and "nothing to resume" in nothing.stderr


DRY_SPEC = """\
source: {table: Videos, partition_key: pk, sort_key: sk, region: us-east-1}
target: {project: dummy-project, instance: my-instance, table: videos, families: {v: {max_versions: 1}}}
migration_time: "2024-01-01T00:00:00Z"
entities:
  - {name: video, row_key: "{pk}", columns: [{attribute: title, family: v}], drop: [sk]}
"""


def test_the_dataflow_job_is_built_offline(invoke, tmp_path, monkeypatch):
    """Dataflow's dry run: the validation's job graph is built with no network and no credentials."""
    monkeypatch.delenv("BIGTABLE_EMULATOR_HOST", raising=False)
    monkeypatch.setenv("GCE_METADATA_HOST", "127.0.0.1:9")  # Beam's credential lookup fails at once, offline
    spec = tmp_path / "spec.yaml"
    spec.write_text(DRY_SPEC)
    beam = ["--runner", "DataflowRunner", "--project", "dummy-project", "--region", "us-central1",
            "--temp_location", "gs://dummy-bucket/tmp", "--dry_run=True"]
    bare = invoke("validate", spec, "--run-dir", "gs://dummy-bucket/runs/v", *beam)
    assert bare.exit_code == 2 and "--sdk_container_image" in bare.stderr  # migrate's rule: workers need ddb2bt
    beam += ["--sdk_container_image", "example.org/ddb2bt:test"]
    built = invoke("validate", spec, "--run-dir", "gs://dummy-bucket/runs/v", "--total-segments", "4", "--repair",
                   *beam)
    assert built.exit_code == 0, built.output
    assert "dry run: built 5 stages: Scan, Map, Compare, Repair, Persist" in built.stdout
    local = invoke("validate", spec, "--run-dir", tmp_path / "v", *beam)
    assert local.exit_code == 2 and "gs://" in local.stderr  # workers cannot write a local run folder


def test_only_the_options_validate_uses(invoke, tmp_path):
    """validate offers none of migrate's options it has no use for, and refuses them (and writer options without
    --repair) in one line, exit 2, before reading anything; migrate still offers them."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(DRY_SPEC)
    shown = invoke("validate", "--help").stdout
    assert "--no-wait" not in shown and "--max-dead-letters" not in shown
    assert "--run-dir" in shown and "--flush-limit-bytes" in shown and "--repair" in shown
    text = " ".join(shown.replace("│", " ").split())  # validate's own help where it narrows a shared option's
    assert "never a migration's" in text and "With --repair, its writer: bytes per batch sent" in text
    migrate_help = invoke("migrate", "--help").stdout
    assert "--no-wait" in migrate_help and "--max-dead-letters" in migrate_help
    for given in (["--no-wait"], ["--max-dead-letters", "5"], ["--max_dead_letters=5%"]):
        refused = invoke("validate", spec, *given)
        assert refused.exit_code == 2, refused.output
        (line,) = refused.stderr.splitlines()
        assert line.startswith(f"error: {given[0].split('=')[0].replace('_', '-')} is not an option of `")
    for given in (["--flush-limit-bytes", "1000"], ["--dead-letter", str(tmp_path / "d.jsonl")]):
        refused = invoke("validate", spec, *given, "--run-dir", tmp_path / "v")
        assert refused.exit_code == 2 and "applies to the rewrites of --repair" in refused.stderr, refused.output
        assert not (tmp_path / "v").exists()


def test_as_of_takes_a_time_or_a_run_folder(invoke, tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(DRY_SPEC)
    assert "--as-of" in invoke("validate", "--help").stdout
    refused = invoke("validate", spec, "--as-of", "yesterday", "--run-dir", tmp_path / "v")
    assert refused.exit_code == 2 and "--as-of 'yesterday' is neither an ISO-8601 time nor a run folder" in refused.stderr
    assert not (tmp_path / "v").exists()


def test_as_of_a_run_without_migration_time_still_finds_a_changed_value_and_a_deleted_row(
        invoke, moto_server, bigtable_env, unique_name, tmp_path):
    """Without migration_time, cells carry the migration's "now": validating --as-of its run folder expects them
    there (the run's stored now_ms, not the validation's clock), so every cell matches but the two tampered ones,
    and nothing is excused as changed after the snapshot (QA: "OK" over 319,985 excused differences)."""
    from google.cloud.bigtable.data import BigtableDataClient, DeleteAllFromRow, ReadRowsQuery, SetCell

    from ddb2bt.pipelines.dynamodb.client import put_items

    client = boto3.client("dynamodb", endpoint_url=moto_server.endpoint, region_name="us-east-1")
    client.create_table(TableName=unique_name, BillingMode="PAY_PER_REQUEST",
                        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
                        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                              {"AttributeName": "sk", "AttributeType": "N"}])
    put_items(client, unique_name, [
        {"pk": {"S": f"user#{n % 3}"}, "sk": {"N": str(n)}, "price": {"N": f"{n}.5"}, "tags": {"SS": ["a", f"t{n}"]},
         "address": {"M": {"city": {"S": f"c{n}"}}}} for n in range(12)])
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"""
source: {{table: {unique_name}, partition_key: pk, sort_key: sk, total_segments: 4}}
target:
  table: {unique_name}
  families: {{r: {{max_versions: 1}}, t: {{max_versions: 1}}, a: {{}}}}
entities:
  - name: all
    row_key: {{template: "{{pk}}#{{sk|sortable_number}}", on_delimiter: escape}}
    columns:
      - {{attribute: tags, family: t, layout: set, encoding: utf8}}
      - {{attribute: address, family: a, layout: map, encoding: ddb_json}}
    rest: {{family: r, encoding: ddb_json}}
""")
    endpoint = ("--endpoint-url", moto_server.endpoint)
    migrated = tmp_path / "migrated"
    assert migrate(spec, RunOptions(run_dir=str(migrated), endpoint_url=moto_server.endpoint)).ok

    target = load_spec(spec).target
    with BigtableDataClient(project=target.project) as bigtable:
        table = bigtable.get_table(target.instance, target.table)
        first, second = table.read_rows(ReadRowsQuery(limit=2))
        changed, deleted, gone = first.row_key, second.row_key, len(second.cells)
        (price,) = [c for c in first.cells if c.qualifier == b"price"]
        table.mutate_row(changed, [SetCell("r", b"price", b'{"N":"999999"}', price.timestamp_micros)])  # same time
        table.mutate_row(deleted, [DeleteAllFromRow()])

    check = invoke("validate", spec, "--as-of", migrated, "--run-dir", tmp_path / "v", "--format", "json", *endpoint)
    assert check.exit_code == 1, check.output
    assert "sets no migration_time" not in check.stderr  # the run folder gave its "now": no such note
    result = json.loads(check.stdout)
    assert result["ok"] is False and result["problems"] == []
    assert result["counts"] == {"different_value": 1, "missing_row": 1, "different_attribute": 1}
    assert result["after_snapshot"] == {}
    totals = result["totals"]
    assert totals["rows_found"] == 11 and totals["cells_matched"] == totals["cells_expected"] - 1 - gone
    assert {(d["kind"], d["row_key"]) for d in result["differences"]} == {
        ("different_value", changed.decode()), ("different_attribute", changed.decode()),
        ("missing_row", deleted.decode())}


def test_without_a_terminal_progress_comes_as_plain_lines(invoke, videos, tmp_path, monkeypatch):
    """CI logs: `progress: …` lines every DDB2BT_PROGRESS_SECONDS, as migrate has (the bar is for terminals)."""
    spec, endpoint = videos
    monkeypatch.setenv("DDB2BT_PROGRESS_SECONDS", "0.05")
    check = invoke("validate", spec, "--run-dir", tmp_path / "v", "--total-segments", "2", *endpoint)
    assert check.exit_code == 0, check.output
    lines = [line for line in check.stderr.splitlines() if line.startswith("progress: ")]
    assert lines, check.stderr
    assert all(re.fullmatch(r"progress: comparing \S+ with \S+: [0-2]/2 segments compared · [\d,]+ items read · "
                            r"[\d,]+ compared · \d+ differences? · \d:\d\d:\d\d elapsed", line) for line in lines), lines
    assert lines[-1].startswith(f"progress: comparing {load_spec(spec).source.table} with ")
    assert "2/2 segments compared · 9 items read · 9 compared · 0 differences" in lines[-1]  # the last line: all done
    assert "progress:" not in check.stdout  # the result stays clean


def test_as_of_a_run_of_another_spec_says_what_validate_can_do(tmp_path):
    """After a redrive through a fixed spec, `validate FIXED --as-of RUN` met the catch-up's words ('catch up with the
    backfill's own spec'); it says the run's spec differs and gives the run's start as the --as-of time to use."""
    from ddb2bt.app.validate import snapshot_time
    from ddb2bt.mappers.errors import UsageError
    from ddb2bt.pipelines.run import checkpoint as ckpt

    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(catalog.starter_spec("key-value"))
    spec = load_spec(spec_file)
    run = tmp_path / "run"
    run.mkdir()
    saved = {"spec_hash": "another", "total_segments": 1, "table": "ProductCatalog", "now_ms": 1700000000123}
    (run / "checkpoint.json").write_text(json.dumps(saved))
    with pytest.raises(UsageError) as refused:
        snapshot_time(str(run), spec)
    assert "that migration ran with another spec than this one" in str(refused.value)
    assert "--as-of 2023-11-14T22:13:20.123Z" in str(refused.value) and "catch up" not in str(refused.value)
    (run / "checkpoint.json").write_text(json.dumps({**saved, "spec_hash": ckpt.spec_hash(spec)}))
    assert snapshot_time(str(run), spec)[0] == 1700000000123000


def test_the_resume_line_is_a_command_that_resumes_with_the_same_options(invoke, videos, tmp_path):
    """It dropped every run option (--endpoint-url here: the line read another DynamoDB) and --decode-all, and was not
    shell-quoted."""
    import shlex

    spec, endpoint = videos
    tamper(spec)
    check = invoke("validate", spec, "--run-dir", tmp_path / "v 3", "--decode-all", *endpoint)
    assert check.exit_code == 1, check.output
    line = next(line for line in check.stdout.splitlines() if "(resume with: " in line)
    command = shlex.split(line.split("(resume with: ", 1)[1].removesuffix(")"))
    assert command == ["ddb2bt", "validate", str(spec), *endpoint, "--resume", "--run-dir", str(tmp_path / "v 3"),
                       "--decode-all"], command
    again = invoke(*command[1:])
    assert again.exit_code == 1, again.output  # resumed, and the same differences found
    assert "DIFFERENT: 1 different value, 4 missing row" in again.stdout, again.stdout
    assert "read back through the decoder: " in again.stdout and "(every item)" in again.stdout, again.stdout


@pytest.mark.parametrize("where", ["prepare", "before the checkpoint", "run"])
def test_ctrl_c_says_what_was_kept_and_how_to_go_on(invoke, videos, tmp_path, monkeypatch, where):
    """Ctrl-C before the validation starts, or while it compares: it said only "interrupted"; now what was done and
    the command that goes on (the resume line once segments can have been compared)."""
    import shlex

    import ddb2bt.app.validate as use_case

    def ctrl_c(*args, **kwargs):
        raise KeyboardInterrupt

    if where == "run":  # stopped once its checkpoint is made: the segments compared so far are kept
        real_execute = use_case.execute

        def ctrl_c(prepared, *args, **kwargs):
            real_execute(prepared, *args, **kwargs)
            raise KeyboardInterrupt

    monkeypatch.setattr(use_case, "prepare" if where == "prepare" else "execute", ctrl_c)
    spec, endpoint = videos
    run_dir = tmp_path / "v"
    result = invoke("validate", spec, "--run-dir", run_dir, "--repair", *endpoint)
    assert result.exit_code == 130 and "Traceback" not in result.output
    command = ["ddb2bt", "validate", str(spec), *endpoint]
    if where == "prepare":
        expected = ("error: interrupted before the validation started: nothing was compared or written; run it "
                    f"again: {shlex.join([*command, '--run-dir', str(run_dir), '--repair'])}")
    elif where == "before the checkpoint":  # nothing to resume from: run again
        expected = ("error: validation stopped by Ctrl-C before its end: nothing of it is kept to resume (the cells "
                    f"it repaired stay repaired); run it again: {shlex.join([*command, '--run-dir', str(run_dir), '--repair'])}")
    else:
        expected = (f"error: validation stopped by Ctrl-C: the scan segments compared so far are kept in {run_dir} "
                    "(the cells it repaired stay repaired); resume with: "
                    f"{shlex.join([*command, '--resume', '--run-dir', str(run_dir), '--repair'])}")
    assert result.stderr.splitlines()[-1] == expected
