"""docs/EXAMPLES.md §2 end to end: the three seed tables in real local DynamoDB servers, migrated on the
DirectRunner into the Bigtable emulator, read back with the Bigtable client and compared cell by
cell (values and timestamps) with the rows docs/EXAMPLES.md describes (tests/golden.py, written by hand)."""

from __future__ import annotations

import pytest

from ddb2bt.mappers.loader import load_spec
from ddb2bt.mappers.spec import MappingSpec
from ddb2bt.pipelines.bigtable.read import read_cells
from ddb2bt.app.migrate import migrate
from ddb2bt.app.options import RunOptions
from tests.golden import SEEDS, expected_cells, group_cells, seed_items, template_path

from .tables import load_table


class _Row:
    def __init__(self, row_key, cells):
        self.row_key, self.cells = row_key, cells


def migrate_seed(name: str, endpoint: str, table: str, run_dir: str, beam_args=()) -> dict:
    load_table(endpoint, table, seed_items(name))
    data = load_spec(template_path(name)).model_dump(by_alias=True)
    data["source"].update(table=table, endpoint_url=endpoint, region="us-east-1", partition_key=None, sort_key=None)
    data["target"]["table"] = table
    spec = MappingSpec.model_validate(data)
    result = migrate(spec, RunOptions(run_dir=run_dir, total_segments=3, beam_args=tuple(list(beam_args))))
    assert result.ok, result.problems
    items = len(seed_items(name))
    assert result.counters["items_read"] == result.counters["rows_written"] == items
    return group_cells(_Row(key, cells) for key, cells in read_cells(spec.target))


@pytest.mark.parametrize("server", ["moto_server", "dynalite"])
@pytest.mark.parametrize("name", SEEDS)
def test_seed_table_arrives_exactly_as_the_brief_describes(request, bigtable_env, unique_name, tmp_path, name, server):
    endpoint = request.getfixturevalue(server).endpoint
    assert migrate_seed(name, endpoint, unique_name, str(tmp_path / "run")) == expected_cells(name)


def test_multi_process_direct_runner_gives_the_same_rows(bigtable_env, dynalite, unique_name, tmp_path):
    beam_args = ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]
    rows = migrate_seed("videos", dynalite.endpoint, unique_name, str(tmp_path / "run"), beam_args)
    assert rows == expected_cells("videos")
