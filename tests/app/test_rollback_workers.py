"""The rollback's worker pool (app/rollback.py ``_Workers.run``) when a worker dies between asking for a range and
being given it: the run stops as for any dead worker (exit 3, resumable), never as a reader gone away (exit 0)."""

from __future__ import annotations

import multiprocessing
import threading

import pytest

from ddb2bt.app.rollback import _Workers
from ddb2bt.mappers.errors import ServiceError


class _Ended:
    """A worker process that has ended (killed by SIGKILL), as ``multiprocessing.Process`` reports one."""

    pid = 4242
    exitcode = -9

    def join(self, timeout: float | None = None) -> None:
        return None


def test_a_worker_gone_after_asking_for_a_range_stops_the_run_as_a_dead_worker():
    mine, theirs = multiprocessing.Pipe()
    theirs.send(("next",))  # what a worker sends, then it is killed before the answer
    theirs.close()
    workers = _Workers.__new__(_Workers)  # without its processes: one pipe stands for one worker
    workers.processes, workers._lives, workers._error = {mine: _Ended()}, [], None
    workers._started = threading.Thread(target=lambda: None)
    workers._started.start()

    messages: list = []
    with pytest.raises(ServiceError) as stopped:
        workers.run(None, "write", [0, 1], {}, messages.append, "continue with --resume")  # type: ignore[arg-type]
    assert "rollback worker process 4242 ended (killed by SIGKILL) before its ranges were done" in str(stopped.value)
    assert messages == []
