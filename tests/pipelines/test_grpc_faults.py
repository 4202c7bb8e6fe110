"""Connections to Bigtable reset under the calls on them (a TCP proxy in front of the emulator aborts them, the
client sees UNAVAILABLE), again and again, mid-MutateRows and mid-ReadRows: a migration still writes exactly the
table one undisturbed run writes, counted once, and validate through the same proxy finds it identical."""

from __future__ import annotations

import pytest

from ddb2bt.pipelines.local import servers as local_servers
from ddb2bt.pipelines.local.proxy import serving

from .bigtable_faults import ResetConnections
from .cells import expected_cells, read_cells
from .tables import kill_spec


@pytest.mark.slow
def test_a_migration_and_its_validation_through_connections_reset_again_and_again(bigtable_env, kill_source, tmp_path,
                                                                                   monkeypatch):
    from ddb2bt.app.migrate import migrate
    from ddb2bt.app.options import RunOptions
    from ddb2bt.app.validate import validate

    endpoint, table, items = kill_source
    spec = kill_spec(table, endpoint, migration_time="2024-01-01T00:00:00Z")
    spec = spec.model_copy(update={"target": spec.target.model_copy(update={"table": f"g{table[1:]}"})})
    host, port = bigtable_env.endpoint.rsplit(":", 1)
    with local_servers.patched_environ(local_servers.FAKE_AWS_ENV):
        proxy = ResetConnections(host, int(port), after=256 << 10, resets=6)
        with serving(proxy) as proxied:
            monkeypatch.setenv("BIGTABLE_EMULATOR_HOST", f"127.0.0.1:{proxied}")
            result = migrate(spec, RunOptions(run_dir=str(tmp_path / "run")))  # mid-MutateRows
        reads = ResetConnections(host, int(port), after=256 << 10, resets=6, answers=True)  # mid-ReadRows
        with serving(reads) as proxied:
            monkeypatch.setenv("BIGTABLE_EMULATOR_HOST", f"127.0.0.1:{proxied}")
            checked = validate(spec, RunOptions(run_dir=str(tmp_path / "validation")))
        monkeypatch.setenv("BIGTABLE_EMULATOR_HOST", bigtable_env.endpoint)
    assert proxy.done == 6 and reads.done == 6
    assert result.ok, result.problems
    assert result.counters["items_read"] == result.counters["rows_written"] == len(items)
    assert read_cells(spec.target) == expected_cells(spec, items)  # every cell, one version each
    assert checked.ok and checked.totals["items_compared"] == len(items), (checked.problems, checked.counts)
