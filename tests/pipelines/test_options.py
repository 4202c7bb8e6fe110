"""The read budget is split among the segments that really run at once."""

import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from ddb2bt.pipelines.run.options import concurrent_segments, segments_at_once


@pytest.mark.parametrize(
    "args, total, calls, at_once",
    [
        ([], 8, 1, 4),  # DirectRunner in memory: one scan call at a time, reading 4 of its segments at once
        (["--direct_running_mode=multi_processing", "--direct_num_workers=2"], 8, 2, 8),  # 2 lanes of 4
        (["--direct_running_mode=multi_threading", "--direct_num_workers=16"], 4, 4, 4),
        (["--runner=DataflowRunner", "--num_workers=3"], 8, 8, 8),  # unknown concurrency: never overspend
    ],
)
def test_concurrent_segments(args, total, calls, at_once):
    assert concurrent_segments(PipelineOptions(args), total) == calls
    assert segments_at_once(calls, total) == at_once
