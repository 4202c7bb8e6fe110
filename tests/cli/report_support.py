"""Headless Chromium and the seed plan that the report tests render."""

import pytest
import shutil
from ddb2bt.mappers.loader import load_spec
from ddb2bt.mappers.analysis.plan import SourceDescription, build_plan
from tests.golden import seed_items, template_path


NOW_MS = 1_700_000_000_000


SOURCE = SourceDescription(
    table="Videos", partition_key="pk", sort_key="sk", item_count=1_000_000, size_bytes=10**9, read_capacity=1000,
    global_indexes=({"name": "byUser", "kind": "GSI", "partition_key": "user"},),
)  # fmt: skip


def seed_plan(name, source=None):
    return build_plan(load_spec(template_path(name)), seed_items(name), source, now_ms=NOW_MS)


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--hide-scrollbars"]  # fmt: skip


needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (tools/setup.sh installs it)")
