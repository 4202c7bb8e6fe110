"""The one run assembly: the source a spec reads, the runner and its Beam options, the segments and the rules for
shared folders, settled the same way for every Beam run (migrate, validate, redrive, catch-up).

A use case says what it reads and where it writes; this module turns the command line into Beam's
options (``--project`` for the job as for the instance, the S3 endpoint by the project's rule),
refuses before anything is read what a runner off this machine could not do (a local run folder,
dead-letter file or source, a bucket that cannot exist, options Beam would refuse once the job is
built, workers that would not get ddb2bt), and chooses how many pieces the source is read in.
Graphs are built in pipelines/; nothing here prints.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions, TestOptions

from ..mappers.errors import UsageError
from ..pipelines.dynamodb.aws import s3_beam_args
from ..pipelines.dynamodb.export import use_options
from ..pipelines.run import checkpoint as ckpt
from ..pipelines.run.options import (check_locations, check_pipeline_options, check_worker_setup, is_direct_runner,
                                     runner_key)
from ..pipelines.source import Source
from ..pipelines.sources import source_for
from .options import RunOptions

if TYPE_CHECKING:
    from ..mappers.table import SourceDescription
    from ..mappers.spec import MappingSpec

SHARED_SCHEMES = ("gs://", "s3://")

__all__ = ["SHARED_SCHEMES", "Runner", "default_run_dir", "require_shared", "runner_for", "segments", "source_for"]


def default_run_dir(table: str, kind: str = "") -> str:
    """``runs/<table>[-<kind>]-<UTC time>``: one folder per run, sortable by time (validations: kind ``validate``)."""
    return f"runs/{table}{'-' + kind if kind else ''}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"


@dataclass(frozen=True)
class Runner:
    """The runner a use case's Beam job runs on, and its options."""

    pipeline_options: Any
    name: str
    direct: bool
    """The runner works on this machine (DirectRunner, Prism): local folders are fine, and it is waited for."""
    dry_run: bool


def require_shared(flag: str, path: str | None, runner: str, *, reads: bool = False) -> None:
    """Off this machine, ``path`` must be on storage every worker shares."""
    if not path or not path.startswith(SHARED_SCHEMES):
        what = "read a local file" if reads else "write a local folder"
        raise UsageError(
            f"{flag} {path or '(not given)'}: {runner} workers run on other machines and cannot {what}",
            f"pass {flag} gs://BUCKET/... (or s3://...), a location only the migration's operators can read"
            if not reads else "copy it to gs://BUCKET/... (or s3://...) and give that",
        )


def _check_runner_name(name: str) -> None:
    """A runner Beam does not know, refused by its name (an unknown one was told its workers run on other machines
    and need a gs:// run folder). Beam takes a known name with or without `Runner`, any case, or a class's path."""
    known = StandardOptions.KNOWN_RUNNER_NAMES
    if "." in name or runner_key(name) in {runner_key(runner) for runner in known}:
        return
    from ..mappers.spelling import did_you_mean

    guess = did_you_mean(name, known)
    raise UsageError(f"--runner {name}: Beam knows no such runner{' (' + guess + ')' if guess else ''}",
                     "use DirectRunner (this machine, the default) or DataflowRunner (Google Cloud)")


def runner_for(spec: MappingSpec, options: RunOptions, *, source: Source | None = None,
               run_dir: str | None = None) -> Runner:
    """Beam's options from the command line, and every check that needs only them, in one order for every run:
    shared folders off this machine (``run_dir``: the run folder when the use case settled it, else --run-dir;
    --dead-letter; what ``source`` reads), then bucket names, Beam's own validation and the workers' setup.
    UsageError on the first problem; nothing is read or written."""

    beam_args = list(options.beam_args)
    if options.project and not any(a.split("=")[0] == "--project" for a in beam_args):
        beam_args.append(f"--project={options.project}")  # one project for the job and the instance, unless told apart
    pipeline_options = PipelineOptions(s3_beam_args(beam_args, spec.source))
    name = str(pipeline_options.view_as(StandardOptions).runner or "DirectRunner")
    _check_runner_name(name)
    direct = is_direct_runner(name)
    run_folder = run_dir if run_dir is not None else options.run_dir
    reads = source.locations() if source is not None else {}
    if not direct:
        require_shared("--run-dir", run_folder, name)
        if options.dead_letter:
            require_shared("--dead-letter", options.dead_letter, name)
        for flag, path in reads.items():
            require_shared(flag, path, name, reads=True)
    check_locations(pipeline_options, {"--run-dir": run_folder, "--dead-letter": options.dead_letter, **reads})
    check_pipeline_options(pipeline_options, name)  # what Beam would refuse once the job is built: refused now
    check_worker_setup(pipeline_options, name)
    use_options(pipeline_options)  # Beam's file systems (s3://) for what is read before the job: manifests, samples
    return Runner(pipeline_options, name, direct, bool(pipeline_options.view_as(TestOptions).dry_run))


def segments(source: Source, options: RunOptions, spec: MappingSpec, description: SourceDescription | None,
             fixed: int | None, *, run_dir: str, resume: bool) -> tuple[int | None, str | None]:
    """(pieces to read the source in, what was assumed): the pieces the source fixes (an export's data files), else
    --total-segments or the spec's, else those of the run resumed, else the source's choice (from its size).
    None for a run that reads items in hand (--sample)."""

    if fixed is not None:
        return fixed, None
    total = options.total_segments or spec.source.total_segments
    if total is not None or not source.positions or options.sample is not None:
        return total, None
    if resume:
        total = ckpt.Checkpoint.saved_total_segments(run_dir)
        if total is not None:
            return total, None
    total = source.choose_pieces(description)
    if description is not None and not description.size_bytes:
        counted = f"its {description.item_count:,} items but " if description.item_count else ""
        return total, (f"{total} scan segments: DescribeTable reports {counted}no size yet (it refreshes about every "
                       "six hours); pass --total-segments to choose")
    return total, None
