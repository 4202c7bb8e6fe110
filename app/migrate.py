"""The migrate use case: prepare a run (everything checked before anything is written), then execute it.

``prepare`` reads the spec, settles the target, checks the source (DescribeTable, before the
target is touched), the run folder and, off the DirectRunner, that the run folder is on storage
every worker shares; it creates nothing. ``execute`` creates or checks the Bigtable table,
starts or resumes the checkpoint, runs the pipeline and reconciles it. A Dataflow ``--dry_run``
only builds the job: nothing remote is touched.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import GoogleCloudOptions, SetupOptions, WorkerOptions

from ..mappers.decode import one_item_per_row
from ..mappers.errors import Ddb2btError, Interrupted, ServiceError, UsageError
from ..pipelines.run import checkpoint as ckpt
from ..mappers.index_rows import index_targets
from ..pipelines.bigtable.sink import ensure_table
from ..pipelines.run.dead_letters import check_dead_letter_destination, check_writable, parts_dir
from ..pipelines.run.metrics import by_reason
from ..pipelines.run.options import concurrent_segments
from ..pipelines.pipeline import build_pipeline, reconcile
from ..pipelines.sources import source_for
from ..pipelines.bigtable.target import describe_target
from ..pipelines.sinks import BigtableSink
from ..pipelines.run.local_runner import new_pipeline
from . import runs
from .assembly import default_run_dir, runner_for, segments
from .context import Step, announce, load_spec, unfinished, wait_for, with_source_keys
from .options import RunOptions

if TYPE_CHECKING:
    from ..mappers.spec import MappingSpec

INTERRUPTED_STATE = "INTERRUPTED"
FAILED_STATE = "FAILED"


@dataclass(frozen=True)
class PreparedRun:
    """A run that passed every check; what it will do, for the user to see before it starts."""

    spec: Any
    options: RunOptions
    pipeline_options: Any
    run_dir: str
    dead_letter: str
    target: str
    """Where the writes go, one line (emulator or Cloud Bigtable, project/instance/table)."""
    runner: str
    direct: bool
    """The runner works on this machine (DirectRunner, Prism): local run folders are fine, and it is waited for."""
    dry_run: bool
    scanning: bool
    total_segments: int
    """Scan segments; for an export, its data files (the units a resumed run skips once stored)."""
    assumptions: tuple[str, ...] = ()
    """What a dry run assumed instead of asking a service (e.g. the segment count)."""
    now_ms: int = 0
    source_description: Any = None
    """DescribeTable boiled down (None for an export or a dry run)."""
    target_diff: Any = None
    """The target as read before the run (an ``app.target_diff.TargetDiff``; None in a dry run)."""
    expected_items: int | None = None
    """Items this attempt should read (for an ETA), when known; ``expected_from`` says from where."""
    expected_from: str = ""
    segments_done: int = 0
    """Segments a resumed run has already stored."""
    segments_part_way: int = 0
    """Segments a resumed scan continues from a savepoint (their pages up to it are stored)."""
    found_run_dir: bool = False
    """--resume without --run-dir: ``run_dir`` is the latest run of this spec under runs/."""

    @property
    def source(self) -> str:
        return runs.source_name(self.spec)

    @property
    def resumable(self) -> bool:
        """The run keeps a checkpoint (its "now", the segments or export files stored): a scan or an export, not a
        --sample. ``--resume`` continues it with the first attempt's "now", so rewritten cells replace themselves."""
        return self.options.sample is None



@dataclass
class MigrateResult:
    """How a run ended: counters that reconcile (or the problems), where its files are, the job for remote runners."""

    prepared: PreparedRun
    state: str
    counters: dict[str, int] = field(default_factory=dict)
    dead_letter_lines: int = 0
    """Lines of the dead-letter file; when it could not be written (``dead_letters_unjoined``), the dead letters its
    part files hold (-1: unknown)."""
    problems: list[str] = field(default_factory=list)
    job_id: str | None = None
    console_url: str | None = None
    stages: tuple[str, ...] = ()
    staged_package: str | None = None
    segments_done: int | None = None
    """Scan segments (an export's data files) stored by the end of this attempt (all unless it ended early)."""
    reasons: dict[str, dict[str, int]] = field(default_factory=dict)
    """Skipped and dead-lettered items by reason: ``{"skipped": {reason: n}, "dead_lettered": {reason: n}}``."""
    error: Ddb2btError | None = None
    """What ended a FAILED run (a dead dependency, too many dead letters, a broken export); None otherwise."""
    dead_letters_unjoined: str = ""
    """Why the dead letters so far could not be joined into the file (a full disk); they stay in its .parts folder."""

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def finished(self) -> bool:
        """False for a dry run or a detached (`--no-wait`) job: nothing to reconcile yet."""
        return self.state not in ("DRY_RUN", "RUNNING", "PENDING")

    @property
    def interrupted(self) -> bool:
        return self.state == INTERRUPTED_STATE

    @property
    def cells_exact(self) -> bool:
        """Whether ``cells_written`` is exactly what the table holds from this run: no two items can write into one
        row. Otherwise it is an upper bound (an item may overwrite another's cell unseen; validate counts them)."""

        return one_item_per_row(self.prepared.spec)

    @property
    def ended_early(self) -> bool:
        """Interrupted, or failed with an error: the counters are what was done so far, not a reconciliation."""
        return self.state in (INTERRUPTED_STATE, FAILED_STATE)

    def resume_command(self, spec_path: str | None = None, extra: tuple[str, ...] = (), *,
                       accept_dead_letters: bool = False) -> str:
        """The command that continues this run: the same options, ``--resume --run-dir`` (and ``extra``);
        ``accept_dead_letters``: with ``--max-dead-letters 100%`` instead of the limit that stopped it."""

        dropped = ("sample",) + (("max_dead_letters",) if accept_dead_letters else ())
        accept = ["--max-dead-letters", "100%"] if accept_dead_letters else []
        return self.prepared.options.go_on("migrate", spec_path or "SPEC", self.prepared.run_dir, *extra, *accept,
                                           without=dropped, resume=True)


def prepare(spec: MappingSpec | str | Path, options: RunOptions = RunOptions(), *,
            now_ms: int | None = None, where: Step | None = None) -> PreparedRun:
    """Check everything a run needs, in order, without writing anything; UsageError/ServiceError on the first problem.

    ``where`` is told first, before anything is read, where the writes go. The target is read
    (never written) after the source: a GC rule that differs is refused here, before any question.
    """



    if options.resume and options.sample is not None:
        raise UsageError("--resume and --sample do not go together: a --sample run is a trial run that keeps no "
                         "checkpoint, so there is nothing of it to resume",
                         "drop --sample to resume the run, or --resume for a trial run")

    spec = load_spec(spec, options)
    source = source_for(spec)
    announce(where, f"migrate {source.name()} → {describe_target(spec.target)}")
    run = runner_for(spec, options, source=source)
    pipeline_options, runner, dry_run, direct = run.pipeline_options, run.name, run.dry_run, run.direct
    scanning = source.positions and options.sample is None
    assumptions: list[str] = []

    run_dir = options.run_dir or ("" if options.resume else default_run_dir(spec.target.table))
    total = options.total_segments or spec.source.total_segments
    description = None
    if dry_run:
        if source.live and spec.source.partition_key is None:
            assumptions.append("key names: read from DescribeTable when the job is launched (not in a dry run)")
        if scanning and total is None:
            total = 1
            assumptions.append("1 scan segment (the table's size is not read in a dry run; pass --total-segments)")
    else:
        description = source.describe()  # the source is checked before the target is touched
        spec = with_source_keys(spec, description)
        fixed = source.check(pipeline_options)  # an export's damaged files: refused before writing
        if not run_dir:  # --resume alone: the latest run of this very spec
            run_dir = runs.latest_run(ckpt.spec_hash(spec))
        total, assumed = segments(source, options, spec, description, fixed, run_dir=run_dir, resume=options.resume)
        assumptions += [assumed] if assumed else []
    if not run_dir:
        run_dir = runs.latest_run(ckpt.spec_hash(spec))
    dead_letter = options.dead_letter or FileSystems.join(run_dir, "dead_letters.jsonl")
    if not dry_run:  # a flag's mistake is found before anything (a run folder, a checkpoint) is created
        _refuse_unreachable(run_dir, dead_letter, pipeline_options)
        ckpt.refuse_validation_folder(run_dir)
        if options.sample is None and not options.resume:
            ckpt.Checkpoint.refuse_taken(run_dir)  # said first: the dead letters there are that run's
        _check_run_dir(run_dir)
        check_dead_letter_destination(dead_letter, resume=options.resume, create=False)
    extra = runs.before_run(spec, source, options, description, run_dir, options.sample is None, total or 1, dry_run,
                            pipeline_options)
    return PreparedRun(**extra,
        spec=spec, options=options, pipeline_options=pipeline_options, run_dir=run_dir, dead_letter=dead_letter,
        target=describe_target(spec.target), runner=runner, direct=direct, dry_run=dry_run, scanning=scanning,
        total_segments=total or 1, assumptions=tuple(assumptions),
        now_ms=now_ms if now_ms is not None else int(time.time() * 1000),
    )


def _refuse_unreachable(run_dir: str, dead_letter: str, pipeline_options: Any) -> None:
    """A gs:// or s3:// run folder or dead-letter file that cannot be reached from here (no network to Cloud Storage,
    no AWS credentials) is one line at once: Beam's file systems retried them for minutes before saying anything."""
    from ..pipelines.run.service_errors import gcs_unreachable, s3_credentials_missing

    for path in dict.fromkeys((run_dir, dead_letter)):
        unreachable = gcs_unreachable(path) or s3_credentials_missing(path, pipeline_options)
        if unreachable is not None:
            raise unreachable


def _check_run_dir(run_dir: str) -> None:
    """A local run folder that cannot be made or written is refused naming --run-dir (its dead letters go there too)."""

    try:
        check_writable(os.path.join(run_dir, "checkpoint.json"))
    except OSError as err:
        raise UsageError(f"--run-dir {run_dir} cannot be written ({err.strerror or err})",
                         "choose a --run-dir this user can write") from None


def execute(prepared: PreparedRun, *, create_table: bool = True) -> MigrateResult:
    """Run a prepared migration to its end (or, detached, to its submission) and reconcile it.

    What comes before the pipeline (the target probed and created, the checkpoint started) raises
    its error as it is: nothing has been written. On this machine the run keeps live totals
    (:func:`live_totals`), and a run that ends early is reconciled from them (:func:`runs.ended_early`):
    stopped by :func:`request_stop`, the result is INTERRUPTED; failed with a ddb2bt error (a dead
    Bigtable or DynamoDB, too many dead letters, a broken export), it is FAILED with that error.
    Either way it says what was done, its dead letters so far and the segments stored.
    """
    folder = runs.live_folder(prepared)
    runs.reset_live(folder)
    completed, now_ms, sample, start_keys = _before_pipeline(prepared, create_table)
    try:
        result = _run(prepared, completed, now_ms, sample, progress_dir=folder, start_keys=start_keys)
    except Exception as error:
        if folder is not None and runs.stop_requested(folder):
            return runs.ended_early(prepared, MigrateResult(prepared, INTERRUPTED_STATE), folder)
        from ..pipelines.run.service_errors import as_ddb2bt_error

        failure = as_ddb2bt_error(error)
        if folder is None or failure is None:  # a remote run, or a bug: the error as it is
            _keep_dead_letters(prepared.dead_letter)
            raise
        return runs.ended_early(prepared, MigrateResult(prepared, FAILED_STATE, error=failure), folder)
    if prepared.resumable and not prepared.dry_run and result.finished:
        result.segments_done = runs.segments_done(prepared.run_dir)
    return result


def abandon(prepared: PreparedRun, stopped: bool, why: str) -> MigrateResult:
    """The result of a local run that cannot end by itself (``why``: a worker process of a multi-process run died,
    and the runner waits for it forever), from what it stored: INTERRUPTED if a stop was asked (a SIGTERM to the whole
    process group reaches the workers too), else FAILED with :class:`WorkerDied`. Reconciled as any early end."""
    folder = runs.live_folder(prepared)
    if stopped:
        return runs.ended_early(prepared, MigrateResult(prepared, INTERRUPTED_STATE), folder)
    log = runs.worker_log(prepared)
    error = WorkerDied(f"{why}: the batches it held are lost, and the run cannot end",
                       (f"see {log}; " if log else "") + "what it stored stays stored")
    return runs.ended_early(prepared, MigrateResult(prepared, FAILED_STATE, error=error), folder)


class WorkerDied(ServiceError):
    """A worker process of a local multi-process run ended under it (killed, out of memory): the run cannot go on,
    and what it stored is kept (``--resume`` goes on from there)."""


def live_totals(prepared: PreparedRun) -> dict[str, int]:
    """What the run has done so far (items read, rows, cells and bytes written, dead letters), from every process."""
    return runs.read_live(runs.live_folder(prepared))


def request_stop(prepared: PreparedRun) -> None:
    """Ask a running local migration to stop at its next batch (segments stored so far stay done)."""
    runs.stop(runs.live_folder(prepared))


def _before_pipeline(p: PreparedRun, create_table: bool) -> tuple[frozenset[int], int, list[dict] | None,
                                                                   dict[int, dict]]:
    """The target probed and created, the checkpoint started, a --sample read: (segments done, "now", sample,
    segment -> ExclusiveStartKey of the scan segments a resumed run continues part way)."""

    spec, options = p.spec, p.options
    completed: frozenset[int] = frozenset()
    start_keys: dict[int, dict] = {}
    now_ms = p.now_ms
    sink = BigtableSink(spec.target)
    if not p.dry_run:
        sink.check()  # a dead Bigtable fails here, in seconds
        check_dead_letter_destination(p.dead_letter, resume=options.resume)  # before the checkpoint is made
        if p.resumable:  # a scan or an export: the run's "now" is stored, and what is done is marked
            checkpoint = ckpt.Checkpoint.start(p.run_dir, ckpt.spec_hash(spec), p.total_segments, p.source,
                                               options.resume, now_ms=p.now_ms, export=not p.scanning)
            completed = checkpoint.completed() if options.resume else frozenset()
            if options.resume and p.scanning:
                start_keys = ckpt.saved_positions(p.run_dir)
            now_ms = checkpoint.now_ms or now_ms  # a resumed run keeps the first attempt's "now": no second versions
        sink.prepare(create=create_table)
        for _index, target in index_targets(spec):  # indexes in tables of their own
            ensure_table(target, create=create_table)
    sample = None
    if options.sample is not None:  # a trial run: the first N items, no checkpoint
        sample = [] if p.dry_run else source_for(spec).items(options.sample)
    return completed, now_ms, sample, start_keys


def _run(p: PreparedRun, completed: frozenset[int], now_ms: int, sample: list[dict] | None, *,
         progress_dir: str | None, start_keys: dict[int, dict] | None = None) -> MigrateResult:


    spec, options = p.spec, p.options
    pipeline = new_pipeline(p.pipeline_options)
    # On this machine the scan starts seconds after the source was described: its read rate comes from that
    # description (the capacity the plan showed) instead of a second DescribeTable before the first page, a round
    # trip the whole run waits for. A remote runner's workers start later, and ask again.
    source = source_for(spec).described(p.source_description) if p.direct else None
    build_pipeline(pipeline, spec, dead_letter=p.dead_letter, run_dir=p.run_dir if p.resumable else None,
                   total_segments=p.total_segments, completed=completed, flow=options.flow_control(),
                   sample=sample, now_ms=now_ms, max_dead_letters=options.dead_letter_limit(),
                   segments_in_flight=concurrent_segments(p.pipeline_options, p.total_segments),
                   progress_dir=progress_dir, start_keys=start_keys, source=source)
    if p.dry_run:
        return MigrateResult(p, "DRY_RUN", stages=pipeline_stages(pipeline), staged_package=_staged_package(p.pipeline_options))
    result = pipeline.run()  # a local runner runs the whole pipeline here
    job_id, console_url = _job(result, p.pipeline_options)
    if options.no_wait and not p.direct:
        return MigrateResult(p, str(getattr(result, "state", "RUNNING")), job_id=job_id, console_url=console_url)
    return _finish(p, result, job_id, console_url)


def migrate(spec: MappingSpec | str | Path, options: RunOptions = RunOptions(), *, create_table: bool = True,
            now_ms: int | None = None) -> MigrateResult:
    """prepare + execute: the whole run, for callers with nothing to show in between (demo, benchmarks, tests)."""
    return execute(prepare(spec, options, now_ms=now_ms), create_table=create_table)


class JobStillRunning(Interrupted):
    """The wait for a remote job was interrupted; the job itself goes on."""


def _finish(p: PreparedRun, result: Any, job_id: str | None, console_url: str | None) -> MigrateResult:

    try:
        state, counters, lines = wait_for(result, p.dead_letter)
    except KeyboardInterrupt:
        if p.direct:
            raise
        raise JobStillRunning(
            f"stopped waiting; Dataflow job {job_id} keeps running ({console_url})",
            f"cancel it with `gcloud dataflow jobs cancel {job_id} --region {_region(p.pipeline_options)}`",
        ) from None
    counters, reasons = by_reason(counters)
    problems = unfinished(state) + reconcile(counters, p.spec.unmatched)
    limit = p.options.dead_letter_limit()
    if limit.exceeded(counters["dead_lettered"], counters["items_read"], final=True):
        problems.append(f"{limit.describe(counters['dead_lettered'], counters['items_read'])}: see the dead letters")
    return MigrateResult(p, state, counters, lines, problems, job_id, console_url, reasons=reasons)


def _keep_dead_letters(path: str) -> None:
    """After a failed run: the dead letters so far, joined into the file the error names (never masking the error;
    a join that fails is logged, naming where they are)."""

    _lines, why = runs.join_dead_letters(path)
    if why:
        logging.getLogger(__name__).warning("the dead letters so far could not be joined into %s (%s): they are in "
                                            "%s", path, why, parts_dir(path))


def pipeline_stages(pipeline: Any) -> tuple[str, ...]:
    """The labels of the pipeline's top-level transforms, in order."""
    return tuple(part.full_label for part in pipeline.transforms_stack[0].parts)


def _staged_package(options: Any) -> str | None:
    """What the runner would stage for the workers: the setup file's sdist (built with `python -m build`)."""

    setup = options.view_as(SetupOptions)
    if setup.setup_file:
        if setup.setup_file.endswith("pyproject.toml") and importlib.util.find_spec("build") is None:
            raise UsageError(f"--setup_file {setup.setup_file} needs the `build` package to make the sdist",
                             "pip install build (it comes with ddb2bt's own install)")
        return f"sdist of {setup.setup_file} (python -m build --no-isolation --sdist)"
    if setup.extra_packages:
        return ", ".join(setup.extra_packages)
    image = options.view_as(WorkerOptions).sdk_container_image
    if image:
        return f"container image {image}"
    return None


def _region(options: Any) -> str:

    return options.view_as(GoogleCloudOptions).region or "REGION"


def _job(result: Any, options: Any) -> tuple[str | None, str | None]:

    job_id = result.job_id() if hasattr(result, "job_id") else None
    if not job_id:
        return None, None
    cloud = options.view_as(GoogleCloudOptions)
    return job_id, f"https://console.cloud.google.com/dataflow/jobs/{cloud.region}/{job_id}?project={cloud.project}"
