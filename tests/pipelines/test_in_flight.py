"""pipelines/run/in_flight.py: a step's clients are let go of exactly once, by whichever of its teardown (the
harness's thread) and its running bundle comes last, and a torn-down step's bundle passes nothing more on."""

from __future__ import annotations

import threading

import pytest

from ddb2bt.pipelines.run.in_flight import InFlight, StepTornDown


class Releases:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self) -> None:
        self.calls.append(threading.current_thread().name)


def on_a_thread(work) -> list[BaseException]:
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


def teardown(in_flight: InFlight, release: Releases) -> None:
    """What each step's teardown does with it."""
    if in_flight.tear_down():
        release()


def test_a_teardown_between_bundles_lets_go_at_once_and_a_later_bundle_stops_without_letting_go_again():
    in_flight, release = InFlight(), Releases()
    assert on_a_thread(lambda: (in_flight.started(release), in_flight.finished(release))) == []
    teardown(in_flight, release)
    assert release.calls == ["MainThread"]
    ended = on_a_thread(lambda: in_flight.started(release))
    assert [type(error) for error in ended] == [StepTornDown] and release.calls == ["MainThread"]


def test_a_teardown_under_a_running_bundle_leaves_the_letting_go_to_its_next_check():
    in_flight, release = InFlight(), Releases()
    started, torn = threading.Event(), threading.Event()

    def bundle() -> None:
        in_flight.started(release)
        started.set()
        torn.wait(30)
        in_flight.check(release)  # its next step

    thread_errors: list[BaseException] = []
    thread = threading.Thread(target=lambda: thread_errors.extend(on_a_thread(bundle)))
    thread.start()
    assert started.wait(30)
    teardown(in_flight, release)
    assert release.calls == []  # nothing closed under the running bundle
    torn.set()
    thread.join(30)
    assert [type(error) for error in thread_errors] == [StepTornDown] and release.calls == ["bundle"]


def test_a_teardown_after_the_bundles_last_check_lets_go_as_the_bundle_finishes():
    in_flight, release = InFlight(), Releases()
    checked, torn = threading.Event(), threading.Event()

    def bundle() -> None:
        in_flight.started(release)
        in_flight.check(release)  # its last check
        checked.set()
        torn.wait(30)
        in_flight.finished(release)

    thread_errors: list[BaseException] = []
    thread = threading.Thread(target=lambda: thread_errors.extend(on_a_thread(bundle)))
    thread.start()
    assert checked.wait(30)
    teardown(in_flight, release)
    torn.set()
    thread.join(30)
    assert thread_errors == [] and release.calls == ["bundle"]  # not leaked, not twice


@pytest.mark.parametrize("round_", range(200))
def test_whatever_the_interleaving_the_clients_are_let_go_of_exactly_once(round_):
    in_flight, release = InFlight(), Releases()
    go = threading.Barrier(2)

    def bundle() -> None:
        in_flight.started(release)
        go.wait()
        for _ in range(round_ % 7):
            in_flight.check(release)
        in_flight.finished(release)

    thread_errors: list[BaseException] = []
    thread = threading.Thread(target=lambda: thread_errors.extend(on_a_thread(bundle)))
    thread.start()
    go.wait()
    teardown(in_flight, release)
    thread.join(30)
    assert len(release.calls) == 1, release.calls
    assert all(type(error) is StepTornDown for error in thread_errors)
