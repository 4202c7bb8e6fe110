"""The schema translation report: sections, inline SVG charts, escaping, no external resources, real rendering."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from ddb2bt.cli.report import render_html, render_markdown
from ddb2bt.mappers.loader import load_spec
from ddb2bt.mappers.plan import SourceDescription, build_plan
from ddb2bt.mappers.spec import MappingSpec
from tests.golden import SEEDS, seed_items, template_path

NOW_MS = 1_700_000_000_000
SECTIONS = (
    "Source: DynamoDB schema",
    "Target: Bigtable schema",
    "Mapping per entity",
    "What changes for the application&#x27;s reads",
    "Lints",
    "Key distribution",
    "Estimates",
)
SOURCE = SourceDescription(
    table="Videos", partition_key="pk", sort_key="sk", item_count=1_000_000, size_bytes=10**9, read_capacity=1000,
    global_indexes=({"name": "byUser", "kind": "GSI", "partition_key": "user"},),
)  # fmt: skip


def seed_plan(name, source=None):
    return build_plan(load_spec(template_path(name)), seed_items(name), source, now_ms=NOW_MS)


def hostile_plan():
    """User data full of markup and a URL-free spec, to check escaping and that the page itself links nowhere."""
    spec = MappingSpec.model_validate({
        "source": {"table": "<T>", "partition_key": "pk"},
        "target": {"table": "t", "families": {"f": {"max_versions": 1}}},
        "migration_time": "2024-01-01T00:00:00Z",
        "entities": [{"name": "e<script>", "row_key": "{pk}", "rest": {"family": "f"}}],
    })  # fmt: skip
    items = [{"pk": {"S": f"<img src=x onerror=alert({i})>"}, "v": {"S": "</td></table><b>bold</b> a|b"}} for i in range(3)]
    return build_plan(spec, items, now_ms=NOW_MS)


@pytest.mark.parametrize("name", SEEDS)
def test_html_has_sections_charts_and_examples(name):
    page = render_html(seed_plan(name, SOURCE))
    for section in SECTIONS:
        assert f">{section}</h2>" in page, section
    assert page.count("<svg") >= 5  # item sizes, entity mix, row sizes, two key-prefix charts
    assert "GSI byUser (user) has no Bigtable equivalent" in page


def test_seed_examples_read_like_the_brief():
    page = render_html(seed_plan("product_catalog"))
    assert "Bigtable row hats#fedoras#brandA" in page and "SKU:Price" in page and "max 1 version" in page
    assert "No findings on the spec or the sample." in page


def test_html_escapes_user_data_and_loads_nothing_external():
    page = render_html(hostile_plan())
    assert "<img" not in page and "<script" not in page and "<b>bold" not in page
    assert "&lt;img src=x onerror=alert(0)&gt;" in page
    assert not re.search(r"https?://", page)
    assert not re.search(r"<(link|script|img|iframe)\b|@import|url\(", page)


@pytest.mark.parametrize("name", SEEDS)
def test_html_references_no_external_resources_even_with_urls_in_data(name):
    page = render_html(seed_plan(name))
    assert not re.search(r"""(src|href)\s*=\s*["']?https?:""", page) and "url(" not in page and "<script" not in page


def test_markdown_mirrors_the_html():
    plan = seed_plan("videos", SOURCE)
    text = render_markdown(plan)
    for section in ("## Source: DynamoDB schema", "## Target: Bigtable schema", "## Mapping per entity",
                    "## What changes for the application's reads", "## Lints", "## Estimates"):  # fmt: skip
        assert section in text
    assert "| video:UserComments | I really like this idea." in text
    assert "█" in text  # charts as text bars
    hostile = render_markdown(hostile_plan())
    assert "<img" not in hostile and "&lt;img src=x" in hostile
    assert "| v | S | &lt;/td>&lt;/table>&lt;b>bold&lt;/b> a\\|b |" in hostile  # a pipe cannot break the table


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]  # fmt: skip


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)")
def test_report_renders_in_headless_chromium(tmp_path):
    page = tmp_path / "report.html"
    page.write_text(render_html(seed_plan("videos", SOURCE)), encoding="utf-8")
    profile = ["--user-data-dir=" + str(tmp_path / "profile"), "--window-size=1200,2000"]
    dom = subprocess.run([CHROMIUM, *CHROMIUM_FLAGS, *profile, "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=90, check=True).stdout  # fmt: skip
    assert dom.count("<svg") >= 5 and dom.count("<rect") >= 5
    assert "Mapping per entity" in dom
    png = tmp_path / "report.png"
    subprocess.run([CHROMIUM, *CHROMIUM_FLAGS, *profile, f"--screenshot={png}", page.as_uri()],
                   capture_output=True, timeout=90, check=True)  # fmt: skip
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
