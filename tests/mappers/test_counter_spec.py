"""Counters in the spec: an `aggregate: sum` family says what it is, and the decoder reads a counter as the sum of its
cells (what a counter spec may not do: COUNTER_CASES in spec_texts.py, run by test_spec_errors.py)."""

import pytest

from ddb2bt.mappers.decode import DecodeError, Decoder
from ddb2bt.mappers.gc import family_text
from ddb2bt.mappers.loader import load_spec
from ddb2bt.mappers.results import Cell
from .spec_texts import COUNTERS


def test_a_counter_spec_loads_and_its_family_says_what_it_is(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(COUNTERS)
    spec = load_spec(path)
    assert family_text(spec.target.families["stats"]) == "Int64 sum aggregate"
    assert family_text(spec.target.families["f"]) == "keep every version (no GC rule)"


def test_the_decoder_sums_a_counters_cells_and_refuses_what_is_no_int64(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(COUNTERS)
    decoder = Decoder(load_spec(path))
    cells = [Cell("stats", b"Likes", 1_000, (7).to_bytes(8, "big")), Cell("stats", b"Likes", 2_000,
                                                                          (-2).to_bytes(8, "big", signed=True))]
    assert decoder.decode_item("likes", b"v1", cells) == {"pk": {"S": "v1"}, "Count": {"N": "5"}}
    with pytest.raises(DecodeError, match="a counter cell holds 3 bytes, not an 8-byte Int64"):
        decoder.decode_item("likes", b"v1", [Cell("stats", b"Likes", 1_000, b"abc")])
