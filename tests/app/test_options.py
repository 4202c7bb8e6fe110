"""One definition of run options: CLI flags and `--name=value` arguments agree, Beam's are checked, ours stay ours."""

from __future__ import annotations

import pytest

from ddb2bt.app.options import RUN_OPTIONS, RunOptions, beam_unknown_args, parse_args
from ddb2bt.mappers.errors import UsageError


def test_both_spellings_and_flex_booleans():
    options, spec = parse_args(["--run-dir=r", "--total_segments=4", "--resume=true", "--spec=s.yaml"], with_spec=True)
    assert (options.run_dir, options.total_segments, options.resume, spec) == ("r", 4, True, "s.yaml")
    assert parse_args(["--resume"])[0].resume is True
    assert parse_args(["--resume=false"])[0].resume is False


def test_beam_options_pass_ddb2bt_options_do_not():
    options, _ = parse_args(["--run_dir=r", "--runner=DataflowRunner", "--region=us-central1", "--aws-region=eu-west-1"])
    assert options.beam_args == ("--runner=DataflowRunner", "--region=us-central1")  # --region is Beam's (Dataflow)
    assert options.aws_region == "eu-west-1"


@pytest.mark.parametrize("args", [["--bogus-flag"], ["--sampel=10"], ["--runner=DirectRunner", "--temp-locaton=x"]])
def test_unknown_arguments_are_usage_errors(args):
    with pytest.raises(UsageError, match="unknown option"):
        parse_args(args)


def test_beam_touch_point_knows_beam_options():
    """Pinned private API (app/options.beam_unknown_args): Beam's own options are known, others are not."""
    known = ["--runner=DataflowRunner", "--project=p", "--region=r", "--temp_location=gs://b/t", "--setup_file=x",
             "--direct_running_mode=multi_processing", "--direct_num_workers=2", "--dry_run=True", "--num_workers=3"]
    assert beam_unknown_args(known) == []
    assert beam_unknown_args(["--nope=1", "--run_dir=x"]) == ["--nope=1", "--run_dir=x"]


@pytest.mark.parametrize("name,value", [("total_segments", 0), ("total_segments", 1_000_001), ("sample", 0),
                                        ("flush_limit_mutation_count", 0)])
def test_ranges_are_checked_wherever_options_come_from(name, value):
    with pytest.raises(UsageError, match="out of range"):
        RunOptions(**{name: value})
    with pytest.raises(UsageError, match="out of range"):
        parse_args([f"--{name}={value}"])


def test_flow_control_from_options():
    flow = RunOptions(flush_limit_mutation_count=5, max_pending_entries=7).flow_control()
    assert (flow.flush_limit_mutation_count, flow.max_pending_entries) == (5, 7)
    assert RunOptions().flow_control() == type(flow)()


def test_every_option_is_a_cli_flag_of_migrate():
    from typer.testing import CliRunner

    from ddb2bt.cli.main import app

    help_text = CliRunner().invoke(app, ["migrate", "--help"], env={"COLUMNS": "300"}).output
    for option in RUN_OPTIONS:
        assert option.flags[0] in help_text


def test_a_runner_beam_does_not_know_is_named_as_such():
    """`--runner Nope` was told its workers run on other machines and need a gs:// run folder."""
    from ddb2bt.app.assembly import runner_for
    from ddb2bt.mappers.spec import MappingSpec
    from ddb2bt.templates import catalog

    import yaml

    spec = MappingSpec.model_validate(yaml.safe_load(catalog.starter_spec("key-value")))
    for name, guess in (("Nope", ""), ("DirectRuner", "did you mean 'DirectRunner'?")):
        with pytest.raises(UsageError) as refused:
            runner_for(spec, RunOptions(run_dir="runs/x", beam_args=(f"--runner={name}",)))
        assert f"--runner {name}: Beam knows no such runner" in str(refused.value) and guess in str(refused.value)
        assert "other machines" not in str(refused.value)
    for name in ("DirectRunner", "direct", "directrunner"):  # Beam's own spellings still pass
        assert runner_for(spec, RunOptions(run_dir="runs/x", beam_args=(f"--runner={name}",))).direct
