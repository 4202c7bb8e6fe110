"""docs/EXAMPLES.md §2: the seed tables' items produce exactly the Bigtable rows it describes."""

import pytest

from ddb2bt.mappers.compiler import compile_spec
from ddb2bt.mappers.loader import load_spec
from ddb2bt.mappers.results import MappedRow
from tests.golden import SEEDS, expected_cells, group_cells, seed_items, template_path


@pytest.mark.parametrize("name", SEEDS)
def test_seed_translation_is_exact(name):
    compiled = compile_spec(load_spec(template_path(name)))
    results = [compiled.map_item(item) for item in seed_items(name)]
    assert all(isinstance(result, MappedRow) for result in results), results
    assert group_cells(results) == expected_cells(name)


def test_videos_fold_into_one_row_per_video_with_comments_in_one_column():
    compiled = compile_spec(load_spec(template_path("videos")))
    rows = group_cells(compiled.map_item(item) for item in seed_items("videos"))
    assert sorted(rows) == [b"0123", b"0124"]
    comments = rows[b"0123"]["video:UserComments"]
    assert len(comments) == 2 and comments[0][0] > comments[1][0]  # newest first, by cell timestamp
    assert "video:UploadDate" not in rows[b"0123"]  # the upload time lives in the Formats cell's timestamp


def test_invoices_have_a_payment_family_keyed_by_payment_id():
    compiled = compile_spec(load_spec(template_path("invoices")))
    rows = group_cells(compiled.map_item(item) for item in seed_items("invoices"))
    assert sorted(column for column in rows[b"0123"] if column.startswith("Payment:")) == ["Payment:0680", "Payment:0789"]


@pytest.mark.parametrize("name", SEEDS)
def test_mapping_is_deterministic(name):
    """A re-run writes the same cells: nothing depends on the clock when migration_time or item times are set."""
    items = seed_items(name)
    first = [compile_spec(load_spec(template_path(name)), now_ms=1).map_item(item) for item in items]
    second = [compile_spec(load_spec(template_path(name)), now_ms=2_000_000_000_000).map_item(item) for item in items]
    assert first == second
