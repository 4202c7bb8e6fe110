"""The rollback's worker pool (app/rollback.py ``_Workers.run``) when a worker dies between asking for a range and
being given it: the run stops as for any dead worker (exit 3, resumable), never as a reader gone away (exit 0)."""

from __future__ import annotations

import json
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


@pytest.mark.parametrize("name, text", [
    ("rollback.json", "{"), ("rollback.json", "[]"), ("rollback.json", '{"ranges": [[5, null]]}'),
    ("checkpoint.json", '{"after": {"0": "AA=="'), ("checkpoint.json", '{"after": [1], "done": 5}'),
    ("checkpoint.json", '{"counters": {"items_read": "many"}}'),
])
def test_a_damaged_rollback_folder_is_named_with_what_to_do(tmp_path, name, text):
    """A rollback folder's rollback.json or checkpoint.json damaged or edited: --resume said "unexpected
    JSONDecodeError ... (a bug: please report it)" (AttributeError, TypeError alike). Now one RollbackError (exit 2)
    naming the file and what to do, before anything is written."""
    from ddb2bt.app.rollback import RollbackError, _Checkpoint

    run_dir = tmp_path / "rb"
    run_dir.mkdir()
    record = {"spec_hash": "h"}
    (run_dir / "rollback.json").write_text(json.dumps({**record, "ranges": [[None, None]]}))
    (run_dir / "dead_letters.jsonl").write_text("")
    (run_dir / name).write_text(text)
    with pytest.raises(RollbackError) as refused:
        _Checkpoint.open(str(run_dir), record, True, lambda: [])
    message = str(refused.value)
    assert message.startswith(f"{run_dir / name} is not what a rollback wrote ("), message
    assert message.endswith("start the rollback again with another --run-dir"), message
