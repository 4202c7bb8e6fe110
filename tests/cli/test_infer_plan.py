"""infer, migrate-plan and report against the seed tables in an in-process moto."""

import json
import re

import pytest
import yaml

from ddb2bt.app.seeds import seed_spec
from ddb2bt.mappers.compiler import compile_spec
from ddb2bt.mappers.loader import load_spec
from ddb2bt.templates import catalog


def _entity_split(spec, items):
    """Items grouped by the entity that maps them: a partition of item indexes, independent of entity names."""
    compiled = compile_spec(spec)
    groups = {}
    for index, item in enumerate(items):
        groups.setdefault(getattr(compiled.map_item(item), "entity", None), set()).add(index)
    return sorted(sorted(group) for group in groups.values())


@pytest.mark.parametrize(("template", "table"), [("single-table", "Videos"), ("adjacency-list", "Invoices")])
def test_infer_reproduces_the_seed_design(invoke, seeded_moto, tmp_path, template, table):
    out = tmp_path / "draft.yaml"
    result = invoke("infer", "--table", table, "-o", out)
    assert result.exit_code == 0, result.output
    assert "warning" not in result.stderr
    draft = load_spec(out)
    items = list(catalog.seed_items(catalog.get(template).seed))
    assert _entity_split(draft, items) == _entity_split(seed_spec(catalog.get(template)), items)

    plan = invoke("migrate-plan", out, "--format", "json")
    assert plan.exit_code == 0, plan.output
    data = json.loads(plan.stdout)
    assert data["has_errors"] is False and data["sample"]["errors"] == 0


def test_infer_adjacency_list_uses_a_family_per_related_type(invoke, seeded_moto):
    result = invoke("infer", "--table", "Invoices")
    spec = yaml.safe_load(result.stdout)
    assert set(spec["target"]["families"]) == {"Invoice", "Payment"}
    payment = next(e for e in spec["entities"] if e["name"] == "payment")
    assert payment["row_key"] == "{pk|strip_prefix('Invoice-')}"
    assert payment["columns"][0]["qualifier"] == "{sk|strip_prefix('Payment-')}"
    assert payment["timestamp"] == {"attribute": "DateCreated"}
    assert "# Adjacency list" in result.stdout


def test_infer_single_table_folds_comments_into_one_timed_column(invoke, seeded_moto):
    spec = yaml.safe_load(invoke("infer", "--table", "Videos").stdout)
    assert {e["row_key"] for e in spec["entities"]} == {"{pk}"}
    comment = next(e for e in spec["entities"] if e["name"] == "video_comment")
    assert comment["timestamp"]["template"] == "{sk|strip_prefix('VideoComment#')|reverse_timestamp(9999999999)}"
    counters = [c for e in spec["entities"] for c in e["columns"] if c["attribute"] in ("Count", "ViewCount")]
    assert {c["encoding"] for c in counters} == {"int64"}


def test_infer_unknown_table_exit_2(invoke, seeded_moto):
    result = invoke("infer", "--table", "Nope")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: AWS DescribeTable: ") and "check the table name" in result.stderr


def test_migrate_plan_text(invoke, seeded_moto):
    result = invoke("migrate-plan", catalog.resources.files("ddb2bt.templates") / "videos.yaml")
    assert result.exit_code == 0, result.output
    assert "Videos → Bigtable ddb2bt-local/videos" in result.stdout
    assert "sample: 9 items → 9 mapped" in result.stdout
    assert "no errors" in result.stdout


def test_migrate_plan_json_is_the_plan_object(invoke, seeded_moto):
    result = invoke("migrate-plan", catalog.resources.files("ddb2bt.templates") / "invoices.yaml", "--format", "json", "--sample", "4")
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert data["target_table"] == "invoices" and data["sample"]["items"] == 4


def _partial_videos(tmp_path, unmatched):
    spec = tmp_path / "videos.yaml"
    spec.write_text(
        "source: {table: Videos, partition_key: pk, sort_key: sk}\n"
        "target: {table: videos, families: {video: {max_versions: 1}}}\n"
        f"unmatched: {unmatched}\n"
        "entities:\n  - {name: video, match: {sk: Video}, row_key: '{pk}', drop: [sk, UploadDate],"
        " columns: [{attribute: Formats, family: video, encoding: json}]}\n"
    )
    return spec


def test_migrate_plan_exit_1_on_errors(invoke, seeded_moto, tmp_path):
    result = invoke("migrate-plan", _partial_videos(tmp_path, "fail"))
    assert result.exit_code == 1
    assert "errors: fix them before migrating" in result.stdout


def test_migrate_plan_strict_fails_on_warnings(invoke, seeded_moto, bigtable_env, unique_name, tmp_path):
    spec = _partial_videos(tmp_path, "dead_letter")  # a new table in the emulator: the warnings are the plan's own
    spec.write_text(spec.read_text().replace("{table: videos,", f"{{table: {unique_name},"))
    assert invoke("migrate-plan", spec).exit_code == 0
    assert invoke("migrate-plan", spec, "--strict").exit_code == 1


@pytest.mark.parametrize("name", ["report.html", "report.md"])
def test_report(invoke, seeded_moto, tmp_path, name):
    out = tmp_path / "out" / name
    result = invoke("report", catalog.resources.files("ddb2bt.templates") / "invoices.yaml", "-o", out)
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert ("<html" in text.lower()) if name.endswith("html") else text.startswith("#")


def test_report_needs_a_known_extension(invoke, tmp_path):
    result = invoke("report", "spec.yaml", "-o", tmp_path / "report.pdf")
    assert result.exit_code == 2 and ".html or .md" in result.output


def test_migrate_plan_json_carries_values_whole(invoke, seeded_moto):
    """JSON output never shortens a value: the Formats map (over 200 characters) is there in full, every place."""
    from ddb2bt.mappers.attrvalue import to_json

    video = next(i for i in catalog.seed_items(catalog.get("single-table").seed) if i["sk"] == {"S": "Video"}
                 and i["pk"] == {"S": "0123"})
    whole = to_json(video["Formats"])
    assert len(whole) > 200
    result = invoke("migrate-plan", catalog.resources.files("ddb2bt.templates") / "videos.yaml", "--format", "json")
    assert result.exit_code == 0, result.output
    assert "…" not in result.stdout
    data = json.loads(result.stdout)
    example = next(x for e in data["entities"] if e["name"] == "video" for x in e["examples"]
                   if x["row_key"] == "0123")
    assert {a["name"]: a["value"] for a in example["item"]}["Formats"] == whole
    assert example["cells"][0]["value"] == whole
    folded = next(row for row in data["folded_rows"] if row["row_key"] == "0123")
    assert next(c for c in folded["cells"] if c["column"] == "video:Formats")["value"] == whole


def test_piped_migrate_plan_text_shows_the_folded_row_whole_and_figures_that_agree(invoke, seeded_moto):
    """stdout is not a terminal here: the single-table row comes whole (every item, every cell, the versions
    explained), long values are shortened saying so, and the estimates say what the JSON says (0.5 RCU, not 0)."""
    spec = catalog.resources.files("ddb2bt.templates") / "videos.yaml"
    text = invoke("migrate-plan", spec).stdout
    data = json.loads(invoke("migrate-plan", spec, "--format", "json").stdout)
    lines = text.splitlines()
    assert "  comment (map, row key {pk}): 4 matched, 4 mapped, 0 skipped, 0 errors; 2 rows" in lines
    assert "  video: keep at most 1000 versions" in lines
    row = lines[lines.index("Row 0123, whole: 5 sampled items write into it"):]
    assert row[1:6] == ["  #1 video: pk=0123, sk=Video", "  #2 comment: pk=0123, sk=VideoComment#8305627524",
                        "  #3 comment: pk=0123, sk=VideoComment#8305636557", "  #4 likes: pk=0123, sk=VideoStatsLikes",
                        "  #5 views: pk=0123, sk=VideoStatsViews"]
    cells = row[6:11]
    assert [line.split(" @ ")[0].strip() for line in cells] == [
        "video:Formats", "video:Likes", "video:UserComments (version 1 of 2)", "video:UserComments (version 2 of 2)",
        "video:Views"]
    assert cells[2].endswith("from #2, utf8: I really like this idea. The special effects are amazing.")
    assert cells[0].endswith("chars)") and "… (+" in cells[0]  # the long map, shortened and saying so
    assert row[11].startswith("  video:UserComments holds 2 versions, written by items #2, #3")
    assert "(1 more folded row in `--format json` and `ddb2bt report`)" in lines
    assert "values longer than 80 characters are shortened above (… (+N chars)); `--format json` has them whole" in text
    e = data["estimates"]
    assert e["scan_read_units"] == 0.5 and "  scan: 0.5 RCU at 2,000 RCU/s, ~0.0 s" in lines
    assert e["table_bytes"] == 875 and data["source"]["size_bytes"] == 0  # moto's DescribeTable: not refreshed yet
    assert "  source: 9 items (from DescribeTable), 875 B (the sample's average item × 9 items; DescribeTable " \
           "reports 0 B)" in lines
    assert "estimates (counted in the sample):" in lines
    invoices = invoke("migrate-plan", catalog.resources.files("ddb2bt.templates") / "invoices.yaml").stdout
    assert "  payment (map, row key {pk|strip_prefix('Invoice-')}): 4 matched, 4 mapped, 0 skipped, 0 errors; " \
           "2 rows" in invoices.splitlines()  # a long template whole, not folded into a narrow column


def test_piped_migrate_plan_text_shows_one_items_row_when_no_row_is_folded(invoke, seeded_moto):
    text = invoke("migrate-plan", catalog.resources.files("ddb2bt.templates") / "product_catalog.yaml").stdout
    lines = text.splitlines()
    assert "Row " not in text and "Example row hats#fedoras#brandA (one item)" in lines
    assert "  SKU:Price @ 2024-01-01T00:00:00.000Z, decimal: 30" in lines


def test_infer_output_dash_is_stdout(invoke, seeded_moto, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = invoke("infer", "--table", "Invoices", "-o", "-")

    def pinned(text: str) -> str:  # each draft pins migration_time to its own second: two runs may straddle one
        return re.sub(r'migration_time: "[^"]+"', "migration_time: T", text)

    assert result.exit_code == 0 and "migration_time: " in result.stdout, result.output
    assert pinned(result.stdout) == pinned(invoke("infer", "--table", "Invoices").stdout)
    assert not (tmp_path / "-").exists()
