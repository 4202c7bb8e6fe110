"""Progress on stderr for the long steps, so stdout stays clean for the results (and `--format json`)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")


def _console():
    from rich.console import Console

    return Console(stderr=True)


@contextmanager
def spinner() -> Iterator[Callable[[str], None]]:
    """A spinner for steps whose length nobody knows in advance; yields the callback that names the current step."""
    with _console().status("starting…") as status:
        yield lambda message: status.update(message)


def run_with_segment_progress(label: str, run_dir: str, run: Callable[[], T]) -> T:
    """Run a migration in a thread and show scan segments done, elapsed time and ETA from its checkpoint.

    Beam's DirectRunner reports counters only when the run ends; segment markers appear as each
    segment's rows are stored, so they are what a live bar can honestly show. Exports and --sample
    runs have no segments: the bar then only spins.
    """
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn,
                               TimeRemainingColumn)

    from ..pipelines.checkpoint import segment_progress

    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["result"] = run()
        except BaseException as err:  # re-raised in the caller's thread, where the CLI's error handler is
            outcome["error"] = err

    worker = threading.Thread(target=target, name="ddb2bt-migrate", daemon=True)
    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("segments"), TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn())
    with Progress(*columns, console=_console(), transient=True) as progress:
        task = progress.add_task(f"migrating {label}", total=None)
        worker.start()
        while worker.is_alive():
            worker.join(0.5)
            done, total = segment_progress(run_dir)
            if total is not None:
                progress.update(task, completed=done, total=total)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]
