"""The writer flags of docs/PIPELINE.md change what the Bigtable writer does when given to `ddb2bt migrate`.

A real run (moto_server → map → the Bigtable emulator) through the CLI; the DirectRunner runs in
this process, so the test watches the client's batcher: which limits it was opened with, and how
many entries went out in each request.
"""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from ddb2bt.cli.main import app
from ddb2bt.pipelines.dynamodb.client import ClientSettings, create_table, make_client, put_items

from .specs import SPEC  # one two-column spec for the app tests' small tables

ITEMS = 12


@pytest.fixture
def spec(moto_server, bigtable_env, unique_name, tmp_path):
    client = make_client(ClientSettings(endpoint_url=moto_server.endpoint))
    create_table(client, unique_name, "pk")
    put_items(client, unique_name, [{"pk": {"S": f"k{i:02d}"}, "v": {"S": str(i)}} for i in range(ITEMS)])
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC.format(table=unique_name, endpoint=moto_server.endpoint))
    return path


@pytest.fixture
def batchers(monkeypatch):
    """Every batcher the writer opens: its keyword arguments and the size of each request it sent."""
    from google.cloud.bigtable.data import MutationsBatcher

    opened: list[dict] = []
    init = MutationsBatcher.__init__

    def spy(self, table, **kwargs):
        init(self, table, **kwargs)
        record = {"kwargs": kwargs, "requests": []}
        opened.append(record)
        flush = self._flush_internal  # the client's one place where a request's entries are sent

        def counting_flush(entries):
            record["requests"].append(len(entries))
            return flush(entries)

        self._flush_internal = counting_flush

    monkeypatch.setattr(MutationsBatcher, "__init__", spy)
    return opened


def migrate(spec, tmp_path, *flags):
    args = ["migrate", str(spec), "--yes", "--run-dir", str(tmp_path / "run"), *flags, "--direct_running_mode=in_memory"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert f"read {ITEMS} items: {ITEMS} written" in result.stdout
    return result


def test_defaults_send_the_page_in_one_request(spec, tmp_path, batchers):
    migrate(spec, tmp_path, "--total-segments", "1")  # one segment, one page (a page's batcher is its own)
    assert [b["kwargs"]["flush_limit_mutation_count"] for b in batchers] == [10_000]
    assert [n for b in batchers for n in b["requests"]] == [ITEMS]


def test_flush_limit_mutation_count_splits_requests(spec, tmp_path, batchers):
    migrate(spec, tmp_path, "--flush_limit_mutation_count=5", "--flush-limit-bytes", "100000")
    assert {b["kwargs"]["flush_limit_mutation_count"] for b in batchers} == {5}
    assert {b["kwargs"]["flush_limit_bytes"] for b in batchers} == {100_000}
    sizes = [n for b in batchers for n in b["requests"]]
    assert sum(sizes) == ITEMS and max(sizes) <= 5 and len(sizes) >= 3


def test_flow_control_limit_reaches_the_batcher(spec, tmp_path, batchers):
    migrate(spec, tmp_path, "--flow_control_max_mutation_count=7")
    assert {b["kwargs"]["flow_control_max_mutation_count"] for b in batchers} == {7}
