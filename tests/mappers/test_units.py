"""Durations and sizes: the spec's syntax parses and prints back the same, everywhere."""

from datetime import timedelta

import pytest

from ddb2bt.mappers.units import duration_text, human_duration, human_size, parse_duration


@pytest.mark.parametrize("text", ["1500ms", "45s", "90m", "36h", "30d", "1w", "2w"])
def test_duration_text_prints_what_parse_reads(text):
    assert duration_text(parse_duration(text)) == text


def test_the_largest_whole_unit_is_used():
    assert duration_text(timedelta(days=7)) == "1w"
    assert duration_text(timedelta(hours=48)) == "2d"
    assert duration_text(timedelta(milliseconds=60_000)) == "1m"


@pytest.mark.parametrize("text", ["", "1 week", "-1d", "1.5h", "d"])
def test_other_text_is_refused_with_an_example(text):
    with pytest.raises(ValueError, match="write e.g. '30d'"):
        parse_duration(text)


def test_a_gc_rule_is_described_in_the_spec_syntax():
    from google.cloud.bigtable.column_family import MaxAgeGCRule

    from ddb2bt.pipelines.bigtable.sink import describe_gc_rule

    assert describe_gc_rule(MaxAgeGCRule(timedelta(days=7))) == "drop cells older than 1w"


def test_human_units():
    assert [human_size(n) for n in (512, 1536, 3 * 1024**3)] == ["512 B", "1.5 KiB", "3.0 GiB"]
    assert [human_duration(s) for s in (None, 4.25, 42, 1000, 12_600)] == ["n/a", "4.2 s", "42 s", "17 min", "3.5 h"]


@pytest.mark.parametrize("text, micros", [
    ("1970-01-01T00:00:00Z", 0),
    ("2024-06-01T12:00:00.123456", 1_717_243_200_123_456),  # no offset: UTC
    ("2024-06-01T14:00:00.123456+02:00", 1_717_243_200_123_456),
    ("9999-12-31T23:59:59.999Z", 253_402_300_799_999_000),
])  # fmt: skip
def test_iso_times_convert_exactly_both_ways(text, micros):
    from ddb2bt.mappers.units import iso_to_micros, micros_to_iso

    assert iso_to_micros(text) == micros
    assert iso_to_micros(micros_to_iso(micros)) == micros - micros % 1000  # Bigtable keeps milliseconds


def test_iso_refuses_other_text_and_says_past_year_9999():
    from ddb2bt.mappers.units import iso_to_micros, micros_to_iso

    with pytest.raises(ValueError):
        iso_to_micros("yesterday")
    assert micros_to_iso(10**20) == "100000000000000000000 us since 1970"


def test_the_read_unit_rule():
    """One statement of DynamoDB's rule, used by the estimates, the run's ETA and the scan's page costs."""
    from ddb2bt.mappers.analysis.estimates import read_units

    assert [read_units(n, True) for n in (1, 4096, 4097, 1 << 20)] == [1, 1, 2, 256]
    assert [read_units(n, False) for n in (1, 4096, 4097, 1 << 20)] == [0.5, 0.5, 1, 128]
