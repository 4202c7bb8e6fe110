"""The catch-up's apply step torn down by Beam's SDK harness under a bundle still running (a multi-process run that
ended early: ``BundleProcessorCache.shutdown`` tears down in-flight bundles' steps from its own thread): the bundle
stops, writes no dead letter and applies nothing more -- closing its client under it used to turn every write of the
bundle into a change dead letter that the catch-up run again would keep."""

from __future__ import annotations

import random
import threading

import pytest

from ddb2bt.pipelines.bigtable.sink import Destination, WriterTornDown
from ddb2bt.pipelines.cutover.change_sink import ApplyChangesFn

from .catchups import HOUR, T0, backfill, simulate
from .cells import read_cells

pytestmark = pytest.mark.servers


def test_an_apply_step_torn_down_under_its_running_bundle_stops_and_writes_no_dead_letter(
        bigtable_env, unique_name, tmp_path):
    rng = random.Random(7)
    table: dict = {}
    simulate(rng, table, 200, T0 - HOUR, T0, posts=20)
    spec = backfill(tmp_path, unique_name, list(table.values()))
    changes = simulate(rng, table, 300, T0, T0 + HOUR, posts=20)
    before = read_cells(spec.target)
    dead_letter = tmp_path / "catch-up.dead_letters.jsonl"
    step = ApplyChangesFn(Destination.from_target(spec.target), spec.model_dump(mode="json", by_alias=True),
                          T0 // 1000, str(dead_letter))
    running, torn_down, ended = threading.Event(), threading.Event(), []

    def bundle() -> None:
        step.setup()
        step.start_bundle()
        running.set()
        torn_down.wait(30)
        try:
            step.process(changes)
            step.finish_bundle()
        except Exception as error:  # noqa: BLE001 - what ended the bundle is the outcome
            ended.append(error)

    thread = threading.Thread(target=bundle)
    thread.start()
    assert running.wait(60)
    step.teardown()  # from the harness's thread, as BundleProcessorCache.shutdown does
    torn_down.set()
    thread.join(60)
    assert not dead_letter.exists() and not list(tmp_path.glob("*.parts/*")), "no dead letter for a torn-down bundle"
    assert [type(error) for error in ended] == [WriterTornDown]
    assert read_cells(spec.target) == before  # nothing of the stopped bundle applied
