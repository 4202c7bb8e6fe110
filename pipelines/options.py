"""How a Beam runner configuration shapes the work (read from ``PipelineOptions``).

ddb2bt's own run options are defined once in :mod:`ddb2bt.app.options`; only Beam's own options
reach ``PipelineOptions``, so workers never see arguments they cannot parse.
"""

from __future__ import annotations

import os

from apache_beam.options.pipeline_options import PipelineOptions


def is_direct_runner(runner: object) -> bool:
    """Whether ``runner`` (a name or a runner) runs on this machine: the DirectRunner, or Beam's Prism runner."""
    name = str(runner or "DirectRunner")
    return "Direct" in name or "Prism" in name


def concurrent_segments(options: PipelineOptions, total_segments: int) -> int:
    """How many scan segments run at once, so the read budget is split among them and no more.

    Known for the DirectRunner (one in memory, `direct_num_workers` in the multi-process and
    multi-thread modes). Elsewhere (Dataflow autoscales) every segment is assumed in flight:
    that never overspends the budget, it only reads more slowly than it could.
    """
    from apache_beam.options.pipeline_options import DirectOptions, StandardOptions

    if not is_direct_runner(options.view_as(StandardOptions).runner):
        return total_segments
    direct = options.view_as(DirectOptions)
    if direct.direct_running_mode == "in_memory":
        return 1
    workers = direct.direct_num_workers or os.cpu_count() or 1  # 0 means one per core
    return max(1, min(total_segments, workers))
