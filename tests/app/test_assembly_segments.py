"""What a run assumes when it chooses its scan segments, said in words that agree with the counts beside them."""

from __future__ import annotations

import yaml

from ddb2bt.app.assembly import segments
from ddb2bt.app.options import RunOptions
from ddb2bt.mappers.loader import validate_data
from ddb2bt.mappers.table import SourceDescription
from ddb2bt.pipelines.sources import source_for

from .specs import SPEC


def run_segments(description: SourceDescription, tmp_path) -> tuple[int | None, str | None]:
    spec = validate_data(yaml.safe_load(SPEC.format(table="t", endpoint="http://127.0.0.1:9")), "spec.yaml")
    return segments(source_for(spec), RunOptions(), spec, description, None, run_dir=str(tmp_path), resume=False)


def test_a_count_without_a_size_is_said_as_such(tmp_path):
    """moto (and a table DynamoDB has only counted) reports ItemCount with TableSizeBytes 0: the assumption names both,
    so it does not read as a contradiction of the "9 items to read (from DescribeTable)" line beside it."""
    total, assumed = run_segments(SourceDescription(table="t", partition_key="pk", item_count=9), tmp_path)
    assert total == 8 and assumed is not None
    assert assumed.startswith("8 scan segments: DescribeTable reports its 9 items but no size yet")
    _, unknown = run_segments(SourceDescription(table="t", partition_key="pk"), tmp_path)
    assert unknown is not None and unknown.startswith("8 scan segments: DescribeTable reports no size yet")
    _, sized = run_segments(SourceDescription(table="t", partition_key="pk", item_count=9, size_bytes=900), tmp_path)
    assert sized is None
