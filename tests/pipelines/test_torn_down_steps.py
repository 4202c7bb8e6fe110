"""Steps torn down by Beam's SDK harness under a bundle still running (a multi-process run that ended early:
``BundleProcessorCache.shutdown`` tears down in-flight bundles' steps from its own thread; pipelines/run/in_flight.py):
the bundle stops at its next step, writes no dead letter, counts no refusal and applies nothing more. Closing the
client under it used to turn the bundle's writes into refusals: change dead letters that the catch-up run again
would keep, validate's repairs counted as refused deletions. (The backfill's writer: tests/pipelines/test_savepoints.py,
through Beam's own harness.)"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable

import pytest

from ddb2bt.mappers.results import Cell
from ddb2bt.pipelines.bigtable.sink import Destination
from ddb2bt.pipelines.run.in_flight import StepTornDown

from .catchups import HOUR, T0, backfill, simulate
from .cells import read_cells

pytestmark = pytest.mark.servers


def torn_down_under_a_bundle(setup: Callable, start_bundle: Callable, body: Callable,
                             teardown: Callable) -> list[Exception]:
    """``setup`` and ``start_bundle`` on a thread of their own, then ``teardown`` from this (the harness's) thread,
    then ``body`` (the rest of the bundle) on the bundle's thread: what ended the bundle, if anything."""
    running, torn_down, ended = threading.Event(), threading.Event(), []

    def bundle() -> None:
        setup()
        start_bundle()
        running.set()
        torn_down.wait(30)
        try:
            body()
        except Exception as error:  # noqa: BLE001 - what ended the bundle is the outcome
            ended.append(error)

    thread = threading.Thread(target=bundle)
    thread.start()
    assert running.wait(60)
    teardown()
    torn_down.set()
    thread.join(60)
    return ended


def test_the_catch_ups_apply_step_torn_down_under_its_running_bundle_stops_and_writes_no_dead_letter(
        bigtable_env, unique_name, tmp_path):
    from ddb2bt.pipelines.cutover.change_sink import ApplyChangesFn

    rng = random.Random(7)
    table: dict = {}
    simulate(rng, table, 200, T0 - HOUR, T0, posts=20)
    spec = backfill(tmp_path, unique_name, list(table.values()))
    changes = simulate(rng, table, 300, T0, T0 + HOUR, posts=20)
    before = read_cells(spec.target)
    dead_letter = tmp_path / "catch-up.dead_letters.jsonl"
    step = ApplyChangesFn(Destination.from_target(spec.target), spec.model_dump(mode="json", by_alias=True),
                          T0 // 1000, str(dead_letter))
    ended = torn_down_under_a_bundle(step.setup, step.start_bundle,
                                     lambda: (step.process(changes), step.finish_bundle()), step.teardown)
    assert not dead_letter.exists() and not list(tmp_path.glob("*.parts/*")), "no dead letter for a torn-down bundle"
    assert [type(error) for error in ended] == [StepTornDown]
    assert read_cells(spec.target) == before  # nothing of the stopped bundle applied


def test_validates_delete_step_torn_down_under_its_running_bundle_deletes_nothing_and_counts_no_refusal(
        bigtable_env, unique_name):
    """Its teardown closed the lookups under the bundle: a delete request in flight then failed as refused (the
    window is a request's length; here the bundle's next step finds the step torn down and stops, deleting nothing
    and counting nothing; the old teardown let it open a new client and go on)."""
    from google.cloud.bigtable import Client
    from google.cloud.bigtable.data import BigtableDataClient, ReadRowsQuery, RowMutationEntry, SetCell

    from ddb2bt.pipelines.validate.extra import Deletion
    from ddb2bt.pipelines.validate.rows import _DeleteFn

    project, instance = "torn-down", "i"
    Client(project=project, admin=True).instance(instance).table(unique_name).create(column_families={"c": None})
    with BigtableDataClient(project=project) as client:
        client.get_table(instance, unique_name).bulk_mutate_rows(
            [RowMutationEntry(b"extra", [SetCell("c", b"q", b"v", 1000)])])
    step = _DeleteFn(Destination(project, instance, unique_name))
    refused: list[int] = []
    step._refused = type("Counted", (), {"inc": lambda self, n: refused.append(n)})()  # its Metrics counter, read
    deletion = Deletion(b"extra", (Cell("c", b"q", 1000, b"v"),))
    ended = torn_down_under_a_bundle(step.setup, step.start_bundle,
                                     lambda: (step.process(deletion), step.finish_bundle()), step.teardown)
    assert not any(refused), "no deletion counted refused for a client closed under the bundle"
    assert [type(error) for error in ended] == [StepTornDown]
    with BigtableDataClient(project=project) as client:
        rows = list(client.get_table(instance, unique_name).read_rows(ReadRowsQuery()))
    assert [row.row_key for row in rows] == [b"extra"]  # the stopped bundle deleted nothing
