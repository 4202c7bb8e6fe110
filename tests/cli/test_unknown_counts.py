"""Counts that say what they know. DescribeTable reports ItemCount 0 for up to six hours after a table is loaded;
dynalite does the same (it reports 0 for a loaded table), moto_server reports the real count. With no count the plan,
its JSON, the report and migrate's header call the count unknown and the sample a lower bound, and progress shows
items, pages and segments, never a share of a guessed total. Real servers through CliRunner (no terminal: the plain
`progress:` lines)."""

from __future__ import annotations

import json
import re

import pytest

from ddb2bt.cli.progress import Snapshot
from ddb2bt.pipelines.dynamodb.client import ClientSettings, create_table, make_client, put_items

pytestmark = pytest.mark.servers

from ..app.specs import SPEC  # a one-family spec for a table on a local endpoint

ITEMS, SAMPLE = 300, 100


def loaded(endpoint: str, table: str, tmp_path) -> str:
    client = make_client(ClientSettings(endpoint_url=endpoint))
    create_table(client, table, "pk")
    put_items(client, table, [{"pk": {"S": f"k{i:04d}"}, "v": {"S": f"value {i} " + "z" * 200}} for i in range(ITEMS)])
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.format(table=table, endpoint=endpoint))
    return str(spec)


@pytest.fixture
def uncounted(dynalite, bigtable_env, unique_name, tmp_path):
    """A spec for a freshly loaded table whose DescribeTable says ItemCount 0, TableSizeBytes 0 (dynalite)."""
    spec = loaded(dynalite.endpoint, unique_name, tmp_path)
    described = make_client(ClientSettings(endpoint_url=dynalite.endpoint)).describe_table(TableName=unique_name)
    assert (described["Table"]["ItemCount"], described["Table"]["TableSizeBytes"]) == (0, 0)  # as DynamoDB after a load
    return spec


@pytest.fixture
def counted(moto_server, bigtable_env, unique_name, tmp_path):
    """The same table in moto_server, whose DescribeTable counts the items."""
    spec = loaded(moto_server.endpoint, unique_name, tmp_path)
    described = make_client(ClientSettings(endpoint_url=moto_server.endpoint)).describe_table(TableName=unique_name)
    assert described["Table"]["ItemCount"] == ITEMS
    return spec


def test_plan_text_json_and_report_call_an_unreported_count_unknown_and_the_sample_a_lower_bound(invoke, uncounted):
    text = invoke("migrate-plan", uncounted, "--sample", SAMPLE)
    assert text.exit_code == 0, text.output
    assert (f"  source: at least {SAMPLE} items (the sample); DescribeTable's count is unknown (it reports 0, and is "
            "refreshed about every 6 hours), at least ") in text.stdout
    assert "estimates (the sample: lower bounds):" in text.stdout
    assert re.search(r"  scan: at least \S+ RCU at \S+ RCU/s, at least ~", text.stdout), text.stdout
    assert "  target: at least ~" in text.stdout
    assert "(from sample)" not in text.stdout

    data = json.loads(invoke("migrate-plan", uncounted, "--sample", SAMPLE, "--format", "json").stdout)
    e = data["estimates"]
    assert e["lower_bound"] is True and e["items"] == SAMPLE and e["items_from"] == "sample"
    assert any("item count is unknown" in line and "lower bound" in line for line in e["assumptions"])

    report = invoke("report", uncounted, "--sample", SAMPLE, "-o", "-")
    assert report.exit_code == 0, report.output
    assert f"The table holds at least the {SAMPLE:,} sampled items" in report.stdout
    assert f"| Items | at least {SAMPLE:,} | the sample (DescribeTable reports 0) |" in report.stdout
    assert f"| Items (approx.) | at least {SAMPLE:,} items (the sample)" in report.stdout
    assert "| Scan duration | at least " in report.stdout
    assert "taken to be the whole table" not in report.stdout


def test_a_reported_count_is_used_as_it_is(invoke, counted):
    text = invoke("migrate-plan", counted, "--sample", SAMPLE)
    assert text.exit_code == 0, text.output
    figures = text.stdout.replace("a cluster keeps at least 1 node", "")  # the cost note's fact, not a bound
    assert f"  source: {ITEMS} items (from DescribeTable)" in text.stdout and "at least" not in figures
    data = json.loads(invoke("migrate-plan", counted, "--sample", SAMPLE, "--format", "json").stdout)
    assert data["estimates"]["lower_bound"] is False and data["estimates"]["items"] == ITEMS
    report = invoke("report", counted, "--sample", SAMPLE, "-o", "-").stdout
    assert f"| Items | {ITEMS:,} | DescribeTable (approximate) |" in report
    assert "at least" not in report.replace("a cluster keeps at least 1 node", "")


def test_migrate_without_a_known_count_shows_items_pages_and_segments_never_a_share(invoke, uncounted, tmp_path,
                                                                                     monkeypatch):
    """Even run from a reviewed plan, whose sample once became the progress total ("43,180/1,000 items read")."""
    monkeypatch.setenv("DDB2BT_PROGRESS_SECONDS", "0.2")
    plan = tmp_path / "plan.json"
    assert invoke("migrate-plan", uncounted, "--sample", SAMPLE, "--out", plan).exit_code == 0
    result = invoke("migrate", uncounted, "--plan", plan, "--run-dir", tmp_path / "run")
    assert result.exit_code == 0, result.output
    err = result.stderr.splitlines()
    assert "source: item count unknown (DescribeTable reports 0; it refreshes about every six hours)" in err
    assert ("assumed: 8 scan segments: DescribeTable reports no size yet (it refreshes about every six hours); pass "
            "--total-segments to choose") in err
    progress = [line for line in err if line.startswith("progress: ")]
    assert progress, result.stderr
    for line in progress:
        assert re.match(r"progress: [\d,]+ items read · ", line) and "ETA -" in line, line
        assert not re.search(r"\d/[\d,]+ items", line), line
        assert re.search(r"\d/8 segments stored", line), line
    # a line drawn after items arrived says how many pages they came in (on a loaded machine the run may end
    # before the first such line: the pages are then shown by the terminal-bar test)
    assert all(re.search(r" · [1-9][\d,]* pages? · ", line) for line in progress
               if not line.startswith("progress: 0 items")), progress
    assert f"read {ITEMS} items" in result.stdout


def test_migrate_with_a_known_count_shows_the_share(invoke, counted, tmp_path, monkeypatch):
    monkeypatch.setenv("DDB2BT_PROGRESS_SECONDS", "0.2")
    result = invoke("migrate", counted, "-y", "--run-dir", tmp_path / "run")
    assert result.exit_code == 0, result.output
    progress = [line for line in result.stderr.splitlines() if line.startswith("progress: ")]
    assert progress and all(re.match(rf"progress: [\d,]+/{ITEMS} items read · ", line) for line in progress), progress


def test_a_count_that_was_too_low_is_not_shown_as_a_share_past_its_end():
    snap = Snapshot({"items_read": 43_180, "pages_read": 12}, 10.0, 4318.0, 1_000, (0, 1))
    text = snap.text()
    assert text.startswith("43,180 items read (more than the 1,000 expected) · 12 pages · ") and "ETA -" in text
    assert "43,180/1,000" not in text
    unknown = Snapshot({"items_read": 500, "pages_read": 3}, 1.0, None, None, (0, 8)).text()
    assert unknown.startswith("500 items read · 3 pages · ") and "0/8 segments stored" in unknown
    assert Snapshot({"items_read": 9, "pages_read": 1}, 1.0, None, None, (0, 8)).text().startswith("9 items read · 1 page · ")


def test_the_terminal_bar_without_a_known_count_shows_items_pages_and_segments(dynalite, bigtable_emulator,
                                                                               unique_name, tmp_path):
    """On a terminal (rich's bar): the count line never reads N/total, and the bar shows no share or ETA."""
    import os

    from ddb2bt.pipelines.local import servers as local_servers

    from tests.installed import DDB2BT

    from .terminal import Terminal

    spec = loaded(dynalite.endpoint, unique_name, tmp_path)
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "BIGTABLE_", "GOOGLE_"))},
           **local_servers.FAKE_AWS_ENV, "TERM": "xterm-256color", "COLUMNS": "160", "LINES": "40",
           "BIGTABLE_EMULATOR_HOST": bigtable_emulator.endpoint}
    term = Terminal([DDB2BT, "migrate", spec, "-y", "--run-dir", str(tmp_path / "run")], env, tmp_path)
    assert term.wait() == 0, term.text()[-3000:]
    text = term.text()
    assert re.search(rf"  {ITEMS} items read · [1-9]\d* pages? · {ITEMS} rows ", text), text[-3000:]
    assert "8/8 segments stored" in text and f"read {ITEMS} items" in text
    assert not re.search(r"\d/[\d,]+ items", text) and not re.search(r"\d+% ETA", text), text[-3000:]
