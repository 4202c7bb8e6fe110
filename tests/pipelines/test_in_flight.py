"""pipelines/run/in_flight.py: a step's clients are let go of exactly once, by whichever of its teardown (the
harness's thread) and its running bundle comes last, and a torn-down step's bundle passes nothing more on."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from ddb2bt.pipelines.run.in_flight import InFlight, StepTornDown


class Releases:
    """A step's release: which threads let go of its clients."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self) -> None:
        self.calls.append(threading.current_thread().name)


def a_step() -> tuple[InFlight, Releases]:
    release = Releases()
    return InFlight(release), release


def on_a_thread(work: Callable[[], None]) -> list[BaseException]:
    """Run ``work`` on a thread named "bundle"; what ended it (nothing, or the error)."""
    ended: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as error:  # noqa: BLE001 - what ended it is the outcome
            ended.append(error)

    thread = threading.Thread(target=run, name="bundle")
    thread.start()
    thread.join(30)
    return ended


def torn_down_while(bundle: Callable[[], None], ready: threading.Event | threading.Barrier,
                    in_flight: InFlight, resume: threading.Event | None = None) -> list[BaseException]:
    """The harness's teardown (this thread) once the bundle (another thread) is ``ready``, then ``resume`` it;
    what ended the bundle."""
    ended: list[BaseException] = []
    thread = threading.Thread(target=lambda: ended.extend(on_a_thread(bundle)))
    thread.start()
    if isinstance(ready, threading.Barrier):
        ready.wait(30)
    else:
        assert ready.wait(30)
    in_flight.teardown()
    if resume is not None:
        resume.set()
    thread.join(30)
    return ended


def test_a_teardown_between_bundles_lets_go_at_once_and_a_later_bundle_stops_without_letting_go_again():
    in_flight, release = a_step()
    assert on_a_thread(lambda: (in_flight.started(), in_flight.finished())) == []
    in_flight.teardown()
    assert release.calls == ["MainThread"]
    ended = on_a_thread(in_flight.started)
    assert [type(error) for error in ended] == [StepTornDown] and release.calls == ["MainThread"]


def test_a_teardown_under_a_running_bundle_leaves_the_letting_go_to_its_next_check():
    in_flight, release = a_step()
    started, torn = threading.Event(), threading.Event()
    closed_under_it: list[list[str]] = []

    def bundle() -> None:
        in_flight.started()
        started.set()
        torn.wait(30)
        closed_under_it.append(list(release.calls))
        in_flight.check()  # its next step

    ended = torn_down_while(bundle, started, in_flight, resume=torn)
    assert closed_under_it == [[]]  # nothing let go of under the running bundle
    assert [type(error) for error in ended] == [StepTornDown] and release.calls == ["bundle"]


def test_a_teardown_after_the_bundles_last_check_lets_go_as_the_bundle_finishes():
    in_flight, release = a_step()
    checked, torn = threading.Event(), threading.Event()

    def bundle() -> None:
        in_flight.started()
        in_flight.check()  # its last check
        checked.set()
        torn.wait(30)
        in_flight.finished()

    ended = torn_down_while(bundle, checked, in_flight, resume=torn)
    assert ended == [] and release.calls == ["bundle"]  # not leaked, not twice


@pytest.mark.parametrize("round_", range(200))
def test_whatever_the_interleaving_the_clients_are_let_go_of_exactly_once(round_):
    in_flight, release = a_step()
    go = threading.Barrier(2)

    def bundle() -> None:
        in_flight.started()
        go.wait(30)
        for _ in range(round_ % 7):
            in_flight.check()
        in_flight.finished()

    ended = torn_down_while(bundle, go, in_flight)
    assert len(release.calls) == 1, release.calls
    assert all(type(error) is StepTornDown for error in ended)
