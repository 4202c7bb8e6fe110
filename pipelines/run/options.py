"""How a Beam runner configuration shapes the work (read from ``PipelineOptions``).

ddb2bt's own run options are defined once in :mod:`ddb2bt.app.options`; only Beam's own options
reach ``PipelineOptions``, so workers never see arguments they cannot parse.
"""

from __future__ import annotations

import os

from apache_beam.options.pipeline_options import PipelineOptions


SEGMENTS_PER_CALL = 4
"""Segments one scan call reads at once, each in a thread of its own (``pipelines/dynamodb/scan.py``
``read_segments``): a Scan page's round trip (tens of ms in a region, plus the server's time to build a 1 MB page)
overlaps the mapping and writing of the pages before it, and a runner that makes one call at a time (the
DirectRunner in_memory) still has requests of several segments in flight. Each reader holds at most one page
ahead (and, having gone on to its lane's next segment, the last page of the one before until it is taken), so
memory stays at a few pages per call."""


def lanes(segments: list[int], calls: int) -> list[tuple[int, ...]]:
    """``segments`` dealt into ``calls`` lanes, each scanned by one call reading up to :data:`SEGMENTS_PER_CALL`
    of its segments at once; one segment per lane when there are as many calls as segments (a runner that
    spreads the segments over its workers itself, e.g. Dataflow)."""
    if calls >= len(segments):
        return [(segment,) for segment in segments]
    return [tuple(segments[lane::calls]) for lane in range(max(1, calls))]


def readers(segment_lanes: list[tuple[int, ...]]) -> int:
    """Segments being read at once when every lane is scanned at the same time: how the read budget is split."""
    return max(1, sum(min(SEGMENTS_PER_CALL, len(lane)) for lane in segment_lanes))


def segments_at_once(calls: int, total_segments: int) -> int:
    """Segments read at once by ``calls`` scan calls at a time over ``total_segments`` (see :func:`lanes`)."""
    return readers(lanes(list(range(total_segments)), calls))


LOCAL_RUNNERS = frozenset({"direct", "switchingdirect", "bundlebaseddirect", "testdirect", "prism", "fnapi", "local"})
"""The runners (by :func:`runner_key`) whose workers are this machine: Beam's DirectRunners, Prism, the FnApiRunner,
and ours (``local_runner.LocalRunner``, as an object; Beam knows no such name)."""


def runner_key(runner: object) -> str:
    """A runner as Beam matches its name: any case, with or without `Runner`, a class path by its class
    (`--runner direct`, `DirectRunner`, `apache_beam.runners.direct.direct_runner.DirectRunner` are one key,
    ``direct``); a runner object by its class; none is the DirectRunner."""
    if runner is None or runner == "":
        name = "DirectRunner"
    else:
        name = runner if isinstance(runner, str) else type(runner).__name__
    return name.rsplit(".", 1)[-1].lower().removesuffix("runner")


def is_direct_runner(runner: object) -> bool:
    """Whether ``runner`` (a name or a runner) runs on this machine (:data:`LOCAL_RUNNERS`)."""
    return runner_key(runner) in LOCAL_RUNNERS


def concurrent_segments(options: PipelineOptions, total_segments: int) -> int:
    """How many scan calls run at once (each reads a lane of segments, :func:`lanes`; the segments read at once,
    among which the read budget is split, are :func:`segments_at_once` of it).

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


def check_pipeline_options(options: PipelineOptions, runner: str) -> None:
    """Beam's own validation of ``options`` for ``runner``, done while the run is prepared.

    ``Pipeline()`` runs the same ``PipelineOptionsValidator`` only when the job is built and raises a bare
    ValueError; here every problem becomes one UsageError line, a missing option named as the flag that gives it.
    """
    import re

    from apache_beam.options.pipeline_options_validator import PipelineOptionsValidator
    from apache_beam.runners.runner import create_runner

    from ...mappers.errors import UsageError

    try:
        instance = create_runner(runner)
    except (ValueError, ImportError) as err:
        raise UsageError(f"--runner {runner}: {err}", "use DirectRunner (the default) or DataflowRunner") from None
    errors = PipelineOptionsValidator(options, instance).validate()
    if not errors:
        return
    template = re.escape(PipelineOptionsValidator.ERR_MISSING_OPTION).replace("%s", "(\\w+)")
    missing = [m.group(1) for m in (re.fullmatch(template, e) for e in errors) if m]
    said = [f"--{name} is required with {runner}" for name in missing]
    said += [e.rstrip(".") for e in errors if not re.fullmatch(template, e)]
    flags = " ".join(f"--{name}=…" for name in missing)
    raise UsageError("; ".join(said), (f"add {flags} after the spec; " if flags else "")
                     + "docs/DATAFLOW.md lists the options a Dataflow run needs")


LOCATION_OPTIONS = ("temp_location", "staging_location")
"""Beam's options that name a folder on Cloud Storage (or S3) for the job."""


def check_locations(options: PipelineOptions, ddb2bt_paths: dict[str, str | None] | None = None) -> None:
    """Offline: every gs:// or s3:// path given (Beam's ``--temp_location``/``--staging_location``, ddb2bt's
    ``ddb2bt_paths`` by flag) names a bucket that can exist, and ``--setup_file`` is a file here.

    One UsageError line naming the flag and the fix, before anything is looked up: a malformed bucket
    otherwise costs Beam's bucket lookup minutes, and then fails as something else.
    """
    from apache_beam.options.pipeline_options import GoogleCloudOptions, SetupOptions

    from ...mappers.cloud_paths import bucket_problem
    from ...mappers.errors import UsageError

    cloud = options.view_as(GoogleCloudOptions)
    given = {f"--{name}": getattr(cloud, name) for name in LOCATION_OPTIONS}
    given.update(ddb2bt_paths or {})
    for flag, path in given.items():
        problem = bucket_problem(path) if path else None
        if problem:
            raise UsageError(f"{flag} {path}: {problem}",
                             f"pass {flag} gs://BUCKET/folder (or s3://BUCKET/folder) with a bucket that exists")
    setup_file = options.view_as(SetupOptions).setup_file
    if setup_file and not os.path.isfile(setup_file):
        raise UsageError(f"--setup_file {setup_file}: no such file",
                         "pass the path of ddb2bt's pyproject.toml (--setup_file ./pyproject.toml from a checkout), "
                         "or --sdk_container_image with the ddb2bt image (docs/DATAFLOW.md)")


def check_worker_setup(options: PipelineOptions, runner: str) -> None:
    """Off this machine, the workers must get ddb2bt: from ``--sdk_container_image`` (the image holds it, nothing
    is installed when a worker starts) or a package Beam stages (``--setup_file``, ``--extra_package``)."""
    from apache_beam.options.pipeline_options import SetupOptions, WorkerOptions

    from ...mappers.errors import UsageError

    if is_direct_runner(runner):
        return
    setup = options.view_as(SetupOptions)
    if options.view_as(WorkerOptions).sdk_container_image or setup.setup_file or setup.extra_packages:
        return
    raise UsageError(f"{runner} workers would run Beam's default image, which has no ddb2bt",
                     "pass --sdk_container_image with the ddb2bt image (templates/flex/Dockerfile; workers then "
                     "need no internet access) or --setup_file ./pyproject.toml (workers pip-install the "
                     "dependencies from PyPI when they start)")
