"""The read budget is split among the segments that really run at once."""

import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from ddb2bt.pipelines.run.options import concurrent_segments


@pytest.mark.parametrize(
    "args, total, expected",
    [
        ([], 8, 1),  # DirectRunner in memory: one segment at a time gets the whole budget
        (["--direct_running_mode=multi_processing", "--direct_num_workers=2"], 8, 2),
        (["--direct_running_mode=multi_threading", "--direct_num_workers=16"], 4, 4),
        (["--runner=DataflowRunner", "--num_workers=3"], 8, 8),  # unknown concurrency: never overspend
    ],
)
def test_concurrent_segments(args, total, expected):
    assert concurrent_segments(PipelineOptions(args), total) == expected
