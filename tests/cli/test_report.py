"""The schema translation report: sections, inline SVG charts, escaping, no external resources, real rendering."""

from __future__ import annotations

import html
import json
import re
import subprocess

import pytest

from ddb2bt.cli.report import render_html, render_markdown
from ddb2bt.mappers.analysis.plan import SourceDescription, build_plan
from ddb2bt.mappers.spec import MappingSpec
from ddb2bt.mappers.units import human_size
from ddb2bt.templates import catalog
from tests.golden import SEEDS
from .report_support import CHROMIUM, CHROMIUM_FLAGS, NOW_MS, SOURCE, needs_chromium, seed_plan

SECTIONS = (
    "Source: DynamoDB schema",
    "Target: Bigtable schema",
    "Mapping per entity",
    "What changes for the application&#x27;s reads",
    "Findings",
    "Key distribution",
    "Estimates",
)
def rest_only_spec(table: str = "T", entity: str = "e") -> MappingSpec:
    """One entity keyed by pk whose attributes all go to the rest family f."""
    return MappingSpec.model_validate({
        "source": {"table": table, "partition_key": "pk"},
        "target": {"table": "t", "families": {"f": {"max_versions": 1}}},
        "migration_time": "2024-01-01T00:00:00Z",
        "entities": [{"name": entity, "row_key": "{pk}", "rest": {"family": "f"}}],
    })  # fmt: skip


def hostile_plan():
    """User data full of markup and a URL-free spec, to check escaping and that the page itself links nowhere."""
    spec = rest_only_spec("<T>", "e<script>")
    items = [{"pk": {"S": f"<img src=x onerror=alert({i})>"}, "v": {"S": "</td></table><b>bold</b> a|b"}} for i in range(3)]
    return build_plan(spec, items, now_ms=NOW_MS)


@pytest.mark.parametrize("name", SEEDS)
def test_html_has_sections_charts_and_examples(name):
    page = render_html(seed_plan(name, SOURCE))
    for section in SECTIONS:
        assert f">{section}</h2>" in page, section
    assert page.count("<svg") >= 1  # a chart of one bar, or one that repeats another, is a sentence instead
    assert "GSI byUser (user) has no Bigtable equivalent" in page


def test_seed_examples_read_like_the_brief():
    page = render_html(seed_plan("product_catalog"))
    assert "Bigtable row hats#fedoras#brandA" in page and "SKU:Price" in page and "keep at most 1 version" in page
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
                    "## What changes for the application's reads", "## Findings", "## Estimates"):  # fmt: skip
        assert section in text
    assert "| video:UserComments | 1 of 2 | I really like this idea." in text  # the folded row, whole
    assert "█" in text  # charts as text bars
    hostile = render_markdown(hostile_plan())
    assert "<img" not in hostile and "&lt;img src=x" in hostile
    assert "| v | S | &lt;/td>&lt;/table>&lt;b>bold&lt;/b> a\\|b |" in hostile  # a pipe cannot break the table


def test_viewport_meta_and_scaling_charts():
    page = render_html(seed_plan("videos", SOURCE))
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in page
    charts = re.findall(r"<svg [^>]*>", page)
    assert charts and all('width="100%"' in svg and "viewBox=" in svg and "height=" not in svg for svg in charts)


def test_folded_rows_are_shown_whole_with_their_versions_explained():
    plan = seed_plan("videos", SOURCE)
    text = render_markdown(plan)
    folded = text[text.index("## Folded rows"):text.index("## What changes")]
    # the Videos row 0123: the video, its two comments, likes and views; every cell, comments newest first
    assert "### Row 0123: 5 items" in folded
    assert "| #3 | comment | pk=0123, sk=VideoComment#8305636557 |" in folded
    whole = folded[folded.index("**Bigtable row 0123, whole**"):]
    assert "### Row 0124" not in folded and "1 more folded row in migrate-plan's `--format json`." in folded
    assert [line.split(" | ")[0] + " | " + line.split(" | ")[1] for line in whole.splitlines() if line.startswith("| video")] \
        == ["| video:Formats | only", "| video:Likes | only", "| video:UserComments | 1 of 2",
            "| video:UserComments | 2 of 2", "| video:Views | only"]
    assert "| video:UserComments | 1 of 2 | I really like this idea. The special effects are amazing. | utf8 | " \
           "2023-09-10T19:01:15.000Z | #2 |" in whole
    assert ("video:UserComments holds 2 versions, written by items #2, #3, each at its own time (comment: template "
            "{sk\\|strip_prefix('VideoComment#')\\|reverse_timestamp(9999999999)}); a read returns the newest first. "
            "Family video keeps at most 1000 versions, so all of them stay.") in whole
    assert "No sampled row is written by more than one item" in render_markdown(seed_plan("product_catalog"))


def test_figures_agree_and_say_when_they_extrapolate():
    extrapolated = render_markdown(seed_plan("videos", SOURCE))
    assert "Extrapolated from a sample: the 9 sampled items are scaled to the 1,000,000 items DescribeTable reports " \
           "(×111,111.1)" in extrapolated
    assert "| Bigtable cells | 1,000,000 | extrapolated ×111,111.1 |" in extrapolated
    # DescribeTable's size of 0 (not refreshed yet) is said next to the size the estimates use instead
    fresh = SourceDescription(table="Videos", partition_key="pk", sort_key="sk", item_count=9, size_bytes=0)
    plan = seed_plan("videos", fresh)
    text = render_markdown(plan)
    used = human_size(plan.estimates.table_bytes)
    assert f"| Size (approx.) | 0 B (DescribeTable, refreshed about every 6 h); the estimates use {used}: the sample's " \
           "average item × 9 items |" in text
    assert f"| Table size | {used} | the sample's average item × items |" in text
    assert "The sample covers the whole table (9 items, DescribeTable says 9): these figures are counted" in text
    # read units as the plan's JSON has them: 0.5, not 0
    assert plan.estimates.scan_read_units == 0.5
    assert "| Read capacity the scan consumes | 0.5 RCU |" in text
    no_source = render_markdown(seed_plan("videos"))
    assert "No DescribeTable numbers" in no_source and "| Bigtable cells | 9 | the sample |" in no_source
    assert "| Table size | 875 B | the sample |" in no_source


def test_report_to_stdout_is_markdown(invoke, seeded_moto):
    spec = catalog.resources.files("ddb2bt.templates") / "videos.yaml"
    result = invoke("report", spec, "-o", "-")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("# Schema translation report: DynamoDB Videos → Bigtable")
    assert "## Folded rows: several items, one row" in result.stdout and "<html" not in result.stdout
    assert "Wrote" not in result.stdout + result.stderr


def test_report_file_kinds(invoke, tmp_path):
    result = invoke("report", "spec.yaml", "-o", tmp_path / "report.pdf")
    assert result.exit_code == 2
    assert "report.pdf must end in .html or .md (or be - for Markdown on stdout)" in result.stderr


# Runs in the page after it is laid out and writes what it measured into the DOM, which --dump-dom returns. Test-only:
# the report itself has no script.
MEASURE = """<script>(function () {
  const width = document.documentElement.clientWidth, problems = [];
  const name = el => el.tagName.toLowerCase() + (el.className && el.className.baseVal === undefined && el.className
    ? "." + el.className : "") + ' "' + (el.textContent || "").trim().slice(0, 50) + '"';
  const shown = el => { const r = el.getBoundingClientRect(); return r.width > 0 && r.height > 0; };
  if (document.documentElement.scrollWidth > width) problems.push("page scrolls sideways: " +
    document.documentElement.scrollWidth + " px wide in " + width);
  for (const el of document.body.querySelectorAll("*")) {
    if (!shown(el)) continue;
    const r = el.getBoundingClientRect();
    if (r.left < -0.5 || r.right > width + 0.5) problems.push("outside the page (" + Math.round(r.left) + ".." +
      Math.round(r.right) + " of " + width + "): " + name(el));
    if (!(el instanceof SVGElement) && el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).display !== "inline")
      problems.push("content wider than its box (" + el.scrollWidth + " > " + el.clientWidth + "): " + name(el));
  }
  for (const parent of document.querySelectorAll("body, body *")) {
    const kids = [...parent.children].filter(shown).map(el => [el, el.getBoundingClientRect()]);
    for (let i = 0; i < kids.length; i++) for (let j = i + 1; j < kids.length; j++) {
      const [a, ra] = kids[i], [b, rb] = kids[j];
      const w = Math.min(ra.right, rb.right) - Math.max(ra.left, rb.left);
      const h = Math.min(ra.bottom, rb.bottom) - Math.max(ra.top, rb.top);
      if (w > 1.5 && h > 1.5) problems.push("overlap: " + name(a) + " and " + name(b));
    }
  }
  const charts = [...document.querySelectorAll("svg")];
  for (const svg of charts) {
    const box = svg.viewBox.baseVal, drawn = svg.getBoundingClientRect();
    if (drawn.width > svg.parentElement.getBoundingClientRect().width + 0.5) problems.push("chart wider than its figure");
    for (const part of svg.querySelectorAll("text, rect")) {
      const b = part.getBBox();
      if (b.x < -0.5 || b.x + b.width > box.width + 0.5 || b.y + b.height > box.height + 0.5)
        problems.push("clipped in its chart: " + name(part));
    }
  }
  const out = document.createElement("pre");
  out.id = "measured";
  out.textContent = JSON.stringify({width: width, charts: charts.map(c => c.getBoundingClientRect().width),
                                    problems: problems.slice(0, 30), count: problems.length});
  window.parent.document.body.appendChild(out);
})();</script>"""


def measure(page_html: str, width: int, tmp_path) -> dict:
    """Lay ``page_html`` out ``width`` px wide in headless Chromium; what MEASURE found.

    The page is shown in an iframe of that width (a headless window is at least 500 px wide): its media queries and
    its layout see exactly ``width`` px, as a phone's browser does with the report's viewport meta.
    """
    page = tmp_path / f"report-{width}.html"
    framed = html.escape(page_html.replace("</body>", MEASURE + "</body>"), quote=True)
    page.write_text(f'<!DOCTYPE html><html><body style="margin:0"><iframe style="width:{width}px;height:900px;border:0" '
                    f'srcdoc="{framed}"></iframe></body></html>', encoding="utf-8")
    profile = "--user-data-dir=" + str(tmp_path / f"profile-{width}")
    window = f"--window-size={width + 100},1000"
    dom = subprocess.run([CHROMIUM, *CHROMIUM_FLAGS, profile, window, "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=90, check=True).stdout  # fmt: skip
    found = re.search(r'<pre id="measured">(.*?)</pre>', dom, re.S)
    assert found, dom[-2000:]
    return json.loads(html.unescape(found.group(1)))


def long_values_plan():
    """Long unbroken values everywhere a user's data can go: keys, names, URLs, JSON."""
    long = "x" * 150
    spec = MappingSpec.model_validate({
        "source": {"table": "T" * 60, "partition_key": "pk", "sort_key": "sk"},
        "target": {"table": "t" * 50, "families": {"f" * 40: {"max_versions": 3}}},
        "migration_time": "2024-01-01T00:00:00Z",
        "entities": [{"name": "entity_" + "n" * 60, "row_key": "{pk}", "rest": {"family": "f" * 40}}],
    })  # fmt: skip
    items = [{"pk": {"S": f"https://example.com/{long}/{i // 2}"}, "sk": {"S": f"{long}{i}"},
              "attribute_" + "a" * 70: {"S": "https://example.com/" + long}, "m": {"M": {long: {"N": "1"}}}}
             for i in range(6)]  # fmt: skip
    return build_plan(spec, items, now_ms=NOW_MS)


@needs_chromium
@pytest.mark.parametrize("width", [420, 1400])
@pytest.mark.parametrize("plan", ["videos", "long values"])
def test_report_fits_the_screen_in_headless_chromium(tmp_path, width, plan):
    """No sideways scrolling, nothing outside the page or its box, no overlapping boxes, charts scaled and unclipped."""
    the_plan = seed_plan("videos", SOURCE) if plan == "videos" else long_values_plan()
    found = measure(render_html(the_plan), width, tmp_path)
    assert found["width"] == width
    assert found["problems"] == [], f"{found['count']} layout problems at {width} px"
    assert found["charts"] and all(0 < w <= width for w in found["charts"])
    if width == 420:
        assert max(found["charts"]) > 300  # charts scale down to the screen, not away
    else:
        assert max(found["charts"]) <= 480  # and stay readable on a wide screen (at most 1.2x their drawing)


@needs_chromium
def test_the_measurement_catches_overflow_and_overlap(tmp_path):
    """The check can fail: a fixed-width chart, a table wider than the screen, two boxes on top of each other."""
    page = ('<!DOCTYPE html><html><head><meta name="viewport" content="width=device-width"></head><body>'
            '<svg width="720" height="40" viewBox="0 0 720 40"><text x="700" y="20">clipped label</text></svg>'
            '<table><tr><td>' + "y" * 200 + '</td></tr></table>'
            '<div style="position:relative;height:40px"><p style="position:absolute;top:0">a</p>'
            '<p style="position:absolute;top:5px">b</p></div></body></html>')  # fmt: skip
    problems = " | ".join(measure(page, 420, tmp_path)["problems"])
    assert "page scrolls sideways" in problems and "outside the page" in problems
    assert "clipped in its chart" in problems and "overlap: p" in problems


@needs_chromium
def test_report_renders_in_headless_chromium(tmp_path):
    page = tmp_path / "report.html"
    page.write_text(render_html(seed_plan("videos", SOURCE)), encoding="utf-8")
    profile = ["--user-data-dir=" + str(tmp_path / "profile"), "--window-size=1200,2000"]
    png = tmp_path / "report.png"
    subprocess.run([CHROMIUM, *CHROMIUM_FLAGS, *profile, f"--screenshot={png}", page.as_uri()],
                   capture_output=True, timeout=90, check=True)  # fmt: skip
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000


def test_long_values_are_shortened_saying_by_how_much_while_the_plan_keeps_them_whole():
    long = "x" * 1000
    plan = build_plan(rest_only_spec(), [{"pk": {"S": "k"}, "v": {"S": long}}], now_ms=NOW_MS)
    assert {a.value for e in plan.entities for x in e.examples for a in x.item} >= {long}  # the plan: whole
    text = render_markdown(plan)
    assert long not in text and "x… (+776 chars)" in text  # 240 characters shown, the rest counted


@pytest.mark.parametrize("name", ["report.html", "report.md"])
def test_a_report_file_is_private_like_dead_letters(tmp_path, name):
    """It shows sample items (user data): 0600 whatever the umask, also over an existing file (QA: it was 0644)."""
    import os

    from ddb2bt.cli.report import write_report

    out = tmp_path / "sub" / name
    out.parent.mkdir()
    out.write_text("old")
    os.chmod(out, 0o644)
    write_report(seed_plan("videos"), out)
    assert (out.stat().st_mode & 0o777) == 0o600 and "Videos" in out.read_text()
