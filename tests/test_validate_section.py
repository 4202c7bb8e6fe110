"""The validate section's own-CPU summary (benchmarks/validate_section.py): each side's steady state and start-up per
round with their medians, and validate's steady items/s over migrate's, from the runs' ``own_cpu`` splits; a run
without a steady state (no live counts) is carried as None, not dropped or counted as zero."""

from __future__ import annotations

import pytest

from benchmarks.validate_section import own_cpu_summary, render


def _run(steady, startup, rate):
    if steady is None:
        return {"own_cpu": {"steady_us_per_item": None, "method": "no steady state"}}
    return {"own_cpu": {"steady_us_per_item": steady, "startup_s": startup, "startup_in_run_s": startup - 1.4,
                        "steady_items_per_s": rate, "startup_wall_s": 0.7}}


def test_each_side_split_per_round_and_the_steady_rate_ratio():
    rounds = [{"migrate": _run(30.0, 2.2, 10_000), "validate": _run(40.0, 2.3, 8_000)},
              {"migrate": _run(28.0, 2.1, 12_000), "validate": _run(None, None, None)},
              {"migrate": _run(31.0, 2.3, 9_000), "validate": _run(38.0, 2.2, 9_900)}]
    summary = own_cpu_summary(rounds)
    assert summary["migrate"]["steady_us_per_item"] == {"median": 30.0, "per_round": [30.0, 28.0, 31.0]}
    assert summary["validate"]["steady_us_per_item"] == {"median": 39.0, "per_round": [40.0, None, 38.0]}
    assert summary["validate"]["startup_s"]["median"] == 2.25
    ratio = summary["steady_rate_ratio"]
    assert ratio["median"] == pytest.approx(0.95) and ratio["per_round"] == [pytest.approx(0.8), None, pytest.approx(1.1)]
    section = {"live_scan": {"migrate": {"items_per_s": 10_000}, "validate": {"items_per_s": 8_000}, "ratio": 0.8,
                             "round_ratios": [0.8], "cpu_ratio": 0.9, "round_cpu_ratios": [0.9], "own_cpu": summary},
               "memory": {}}
    lines = render(section)
    assert "    own CPU, migrate: steady 30.0 us/item, start-up 2.20 s (medians)" in lines
    assert "    own CPU, validate: steady 39.0 us/item, start-up 2.25 s (medians)" in lines
    assert "    steady items/s, validate's over migrate's (start-up apart): 0.95" in lines


def test_no_steady_state_on_either_side_prints_no_split():
    rounds = [{"migrate": _run(None, None, None), "validate": {}}]
    summary = own_cpu_summary(rounds)
    assert summary["validate"]["steady_us_per_item"] == {"median": None, "per_round": [None]}
    assert summary["steady_rate_ratio"]["median"] is None
    lines = render({"live_scan": {"migrate": {"items_per_s": 1.0}, "validate": {"items_per_s": 1.0}, "ratio": 1.0,
                                  "cpu_ratio": None, "own_cpu": summary}, "memory": {}})
    assert not [line for line in lines if "own CPU" in line or "steady items/s" in line]
