"""DynamoDB tables with streams, a workload on them, a backfill and a fresh migration to compare with: what the
cutover tests share."""

import random
from .cells import read_cells
from ddb2bt.pipelines.cutover.workload import make_spec
from ddb2bt.pipelines.cutover.workload import (  # noqa: F401 - the package's workload, for the cutover tests
    create_streamed_table, stream_changes, table_items, workload)
from .export_fixtures import write_export
from ddb2bt.app.migrate import migrate
from ddb2bt.app.options import RunOptions
from ddb2bt.mappers.index_rows import index_targets
from ddb2bt.mappers.spec import MappingSpec


FRESH = "f"
"""The suffix of the fresh migration's tables."""


def index_cells(spec, suffix: str = "") -> dict[str, dict]:
    """Every cell of each index in a table of its own (``suffix``: of the fresh migration's), by index name."""
    return {name: read_cells(target.model_copy(update={"table": target.table + suffix}))
            for name, target in index_targets(spec)}


def backfill(moto_server, name: str, run_dir: str, rng: random.Random):
    client = create_streamed_table(moto_server.endpoint, name)
    workload(client, name, rng, 40)
    spec = make_spec(name, endpoint_url=moto_server.endpoint)
    result = migrate(spec, RunOptions(run_dir=run_dir, total_segments=2))
    assert result.counters["items_read"] > 0
    return client, spec


def fresh_migration(spec, tmp_path, items: list[dict]) -> dict:
    """Migrate the final table (exported) into a new Bigtable table with the same spec; its cells."""
    data = spec.model_dump(mode="json", by_alias=True)
    data["target"]["table"] = spec.target.table + FRESH
    for index in data["indexes"]:  # an index in a table of its own: a fresh one too (index_cells(spec, FRESH))
        if index["target"]["table"] is not None:
            index["target"]["table"] += FRESH
    data["source"].update(table=None, export={"path": write_export(tmp_path / "final", items, files=1)})
    fresh = MappingSpec.model_validate(data)
    result = migrate(fresh, RunOptions(run_dir=str(tmp_path / "fresh")))
    assert result.ok, result.problems
    return read_cells(fresh.target)
