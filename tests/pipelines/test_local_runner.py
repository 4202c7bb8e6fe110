"""A local run never offers its pipeline to Beam's Prism runner, which Beam's own DirectRunner downloads from
github.com and runs the job on when it can: it runs on the FnApiRunner, in the mode its options say."""

from __future__ import annotations

import os

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from ddb2bt.app.migrate import migrate
from ddb2bt.app.options import RunOptions
from ddb2bt.mappers.spec import MappingSpec
from ddb2bt.pipelines.run.local_runner import new_pipeline

from .cells import expected_cells, read_cells
from .export_fixtures import write_export


def prism_offers(monkeypatch) -> list:
    """Every pipeline offered to Prism from now on (each refused, as a machine without github.com refuses it)."""
    from apache_beam.runners.portability import prism_runner

    offered: list = []

    def refuse(self, pipeline, options):
        offered.append(pipeline)
        raise RuntimeError("offered to Prism")

    monkeypatch.setattr(prism_runner.PrismRunner, "run_pipeline", refuse)
    return offered


def test_beams_own_direct_runner_offers_prism_first(monkeypatch):
    """What the local runner is for: Beam's DirectRunner tries Prism before its FnApiRunner."""
    offered = prism_offers(monkeypatch)
    with beam.Pipeline() as p:
        _ = p | beam.Create([1, 2, 3]) | beam.Map(lambda x: x * 2)
    assert len(offered) == 1


@pytest.mark.parametrize("runner", ["DirectRunner", "direct", "directrunner", "SwitchingDirectRunner"])
def test_every_spelling_beam_takes_for_the_direct_runner_runs_without_prism(monkeypatch, runner):
    """`--runner direct` (Beam's own spelling) went to Beam's DirectRunner, which offers the job to Prism first."""
    offered = prism_offers(monkeypatch)
    with new_pipeline(PipelineOptions([f"--runner={runner}"])) as p:
        _ = p | beam.Create([1, 2, 3]) | beam.Map(lambda x: x * 2)
    assert offered == []


@pytest.mark.parametrize("mode", ["in_memory", "multi_processing"])
def test_a_local_pipeline_runs_without_prism_in_the_mode_asked(monkeypatch, tmp_path, mode):
    offered = prism_offers(monkeypatch)
    options = PipelineOptions([f"--direct_running_mode={mode}", "--direct_num_workers=2"])
    with new_pipeline(options) as p:
        _ = (p | beam.Create(range(8)) | beam.Reshuffle()
             | beam.Map(lambda x, folder=str(tmp_path): open(os.path.join(folder, f"{os.getpid()}-{x}"), "w").close()))
    assert offered == []
    done = os.listdir(tmp_path)
    assert sorted(int(name.split("-")[1]) for name in done) == list(range(8))
    processes = {int(name.split("-")[0]) for name in done}
    assert (processes == {os.getpid()}) if mode == "in_memory" else (os.getpid() not in processes)


def test_migrate_never_offers_its_pipeline_to_prism(bigtable_env, unique_name, tmp_path, monkeypatch):
    offered = prism_offers(monkeypatch)
    items = [{"pk": {"S": f"p{i % 3}"}, "sk": {"N": str(i)}, "v": {"S": f"value {i}"}} for i in range(20)]
    spec = MappingSpec.model_validate({
        "source": {"table": unique_name, "region": "us-east-1", "partition_key": "pk", "sort_key": "sk",
                   "export": {"path": write_export(tmp_path / "export", items, files=2, table=unique_name)}},
        "target": {"table": unique_name, "families": {"d": {"max_versions": 1}}},
        "migration_time": "2024-01-01T00:00:00Z",
        "entities": [{"name": "item", "row_key": "{pk}#{sk}", "rest": {"family": "d"}}],
    })
    result = migrate(spec, RunOptions(run_dir=str(tmp_path / "run")))
    assert result.ok, result.problems
    assert offered == []
    assert read_cells(spec.target) == expected_cells(spec, items)


def test_every_pipeline_is_built_by_new_pipeline():
    """A ``beam.Pipeline(...)`` made anywhere else (product, tests, benchmarks) would run on Beam's DirectRunner."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    made_elsewhere = [
        f"{path.relative_to(root)}:{number}"
        for folder in ("app", "cli", "mappers", "pipelines", "benchmarks", "tests")
        for path in sorted((root / folder).rglob("*.py"))
        if path.name not in ("local_runner.py", Path(__file__).name)
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if "beam.Pipeline(" in line or "TestPipeline(" in line
    ]
    assert made_elsewhere == []


@pytest.mark.parametrize(("runner", "key", "local"), [
    (None, "direct", True), ("", "direct", True), ("DirectRunner", "direct", True), ("direct", "direct", True),
    ("DIRECTRUNNER", "direct", True), ("apache_beam.runners.direct.direct_runner.DirectRunner", "direct", True),
    ("SwitchingDirectRunner", "switchingdirect", True), ("BundleBasedDirectRunner", "bundlebaseddirect", True),
    ("PrismRunner", "prism", True), ("prism", "prism", True), ("FnApiRunner", "fnapi", True),
    ("DataflowRunner", "dataflow", False), ("dataflow", "dataflow", False), ("TestDataflowRunner", "testdataflow", False),
    ("FlinkRunner", "flink", False), ("PortableRunner", "portable", False),
])
def test_one_key_per_runner_however_beam_is_told_it(runner, key, local):
    """Every spelling Beam takes names one runner for every check: the runner-name check, the shared-folder and
    worker-image checks (local or not), and the local runner's choice. They were spelled three ways apart, and a
    local FnApiRunner was asked for a gs:// run folder (its name has no `direct`)."""
    from ddb2bt.pipelines.run.options import is_direct_runner, runner_key

    assert runner_key(runner) == key
    assert is_direct_runner(runner) is local


def test_a_runner_object_is_known_by_its_class():
    from apache_beam.runners.dataflow.dataflow_runner import DataflowRunner
    from apache_beam.runners.direct.direct_runner import SwitchingDirectRunner

    from ddb2bt.pipelines.run.local_runner import LocalRunner
    from ddb2bt.pipelines.run.options import is_direct_runner, runner_key

    assert runner_key(SwitchingDirectRunner()) == "switchingdirect" and is_direct_runner(SwitchingDirectRunner())
    assert runner_key(LocalRunner()) == "local" and is_direct_runner(LocalRunner())
    assert not is_direct_runner(DataflowRunner())


@pytest.mark.parametrize("runner", ["apache_beam.runners.direct.direct_runner.DirectRunner", "DIRECT"])
def test_the_direct_runner_by_its_path_or_any_case_runs_without_prism(monkeypatch, runner):
    offered = prism_offers(monkeypatch)
    with new_pipeline(PipelineOptions([f"--runner={runner}"])) as p:
        _ = p | beam.Create([1, 2]) | beam.Map(lambda x: x + 1)
    assert offered == []
