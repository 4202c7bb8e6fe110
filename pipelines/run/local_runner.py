"""The runner of a job on this machine: Beam's FnApiRunner, as Beam's DirectRunner runs our batch pipelines.

Beam's DirectRunner (``SwitchingDirectRunner``; Beam 2.77) first offers a pipeline to Beam's Prism runner, which it downloads
from github.com (a Go binary, cached under ``~/.apache_beam``) and starts as a job server, and only when that fails
(as it does on a machine without that network access) runs the FnApiRunner. So on a machine with network a local
run would reach an internet host, run in another process model than ``--direct_running_mode`` and
``--direct_num_workers`` say, and none of what was measured and tested here would describe it. Every ddb2bt
pipeline is a batch pipeline the FnApiRunner runs (no TestStream, no real-time timers), so a local run goes to it
directly, built as the DirectRunner builds it (the job's options handed to the SDK workers it starts). An explicit
``--runner PrismRunner`` is left to Beam.
"""

from __future__ import annotations

from typing import Any

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.runners.direct.direct_runner import SwitchingDirectRunner

from .options import runner_key


class LocalRunner(SwitchingDirectRunner):
    """Beam's DirectRunner without its Prism attempt: the FnApiRunner in the mode the options say."""

    def run_pipeline(self, pipeline: Any, options: PipelineOptions) -> Any:
        from apache_beam.portability.api import beam_provision_api_pb2
        from apache_beam.runners.portability.fn_api_runner import fn_runner
        from apache_beam.runners.portability.portable_runner import JobServiceHandle

        encoded = JobServiceHandle.encode_pipeline_options(options.get_all_options())
        provision = fn_runner.ExtendedProvisionInfo(beam_provision_api_pb2.ProvisionInfo(pipeline_options=encoded))
        return fn_runner.FnApiRunner(provision_info=provision).run_pipeline(pipeline, options)


def new_pipeline(options: PipelineOptions | None = None) -> beam.Pipeline:
    """A Beam pipeline with ``options``; one for the DirectRunner (named, or by default) runs on :class:`LocalRunner`."""
    options = options if options is not None else PipelineOptions([])
    name = options.view_as(StandardOptions).runner
    # any spelling Beam takes for them (`--runner direct`, `directrunner`): Beam's own would try Prism first
    if runner_key(name) in ("direct", "switchingdirect"):
        return beam.Pipeline(runner=LocalRunner(), options=options)
    return beam.Pipeline(options=options)
