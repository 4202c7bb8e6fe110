"""Command-line options of a migration run, as Beam ``PipelineOptions``.

Being a ``PipelineOptions`` subclass means every standard Beam/Dataflow option (``--runner``,
``--project``, ``--region``, ``--temp_location``, ``--num_workers``, ``--setup_file`` (a
``pyproject.toml`` works in Beam >= 2.57), ``--sdk_container_image``, ``--direct_num_workers``,
``--direct_running_mode=multi_processing``, ...) passes through unchanged, and the job's options
record the migration settings too.
"""

from __future__ import annotations

import os
import time

from apache_beam.options.pipeline_options import PipelineOptions

from .bigtable_sink import FlowControl

_FLOW_DEFAULTS = FlowControl()


class MigrationOptions(PipelineOptions):
    @classmethod
    def _add_argparse_args(cls, parser) -> None:
        parser.add_argument("--spec", help="Mapping spec (YAML or JSON).")
        parser.add_argument(
            "--run_dir", "--run-dir", dest="run_dir", default=None,
            help="Folder for this run's checkpoint and dead letters (default runs/<table>-<UTC time>).",
        )
        parser.add_argument(
            "--dead_letter", "--dead-letter", dest="dead_letter", default=None,
            help="Dead-letter JSON-lines file (local, gs://, s3://; default <run dir>/dead_letters.jsonl). "
                 "It holds whole items, i.e. user data.",
        )
        parser.add_argument("--resume", action="store_true", default=False,
                            help="Continue the run in --run_dir, skipping scan segments it completed.")
        parser.add_argument("--total_segments", "--total-segments", dest="total_segments", type=int, default=None,
                            help="Parallel scan segments (overrides the spec).")
        parser.add_argument("--sample", type=int, default=None,
                            help="Migrate only the first N items read (no checkpoint).")
        for name in ("flush_limit_mutation_count", "flush_limit_bytes", "flow_control_max_mutation_count",
                     "flow_control_max_bytes", "max_pending_entries"):
            parser.add_argument(f"--{name}", f"--{name.replace('_', '-')}", dest=name, type=int,
                                default=getattr(_FLOW_DEFAULTS, name), help=f"Bigtable writer: {name}.")

    def flow_control(self) -> FlowControl:
        view = self.get_all_options()
        return FlowControl(**{name: view[name] for name in FlowControl.__dataclass_fields__})


def default_run_dir(table: str) -> str:
    """``runs/<table>-<UTC time>``: one folder per run, sortable by time."""
    return f"runs/{table}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"


def concurrent_segments(options: PipelineOptions, total_segments: int) -> int:
    """How many scan segments run at once, so the read budget is split among them and no more.

    Known for the DirectRunner (one in memory, `direct_num_workers` in the multi-process and
    multi-thread modes). Elsewhere (Dataflow autoscales) every segment is assumed in flight:
    that never overspends the budget, it only reads more slowly than it could.
    """
    from apache_beam.options.pipeline_options import DirectOptions, StandardOptions

    runner = options.view_as(StandardOptions).runner or "DirectRunner"
    if "Direct" not in str(runner):
        return total_segments
    direct = options.view_as(DirectOptions)
    if direct.direct_running_mode == "in_memory":
        return 1
    workers = direct.direct_num_workers or os.cpu_count() or 1  # 0 means one per core
    return max(1, min(total_segments, workers))
