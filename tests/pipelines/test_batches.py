"""Batches and segment markers: equal by content, pickled whole, sized without encoding."""

from __future__ import annotations

import apache_beam as beam
from apache_beam.testing.util import assert_that, equal_to

from ddb2bt.pipelines.run.batches import Batch, BatchCoder, SegmentDone
from ddb2bt.pipelines.run.local_runner import new_pipeline


def test_coder_round_trips_batches_and_markers_and_sizes_from_nbytes():
    coder = beam.coders.registry.get_coder(Batch)
    assert isinstance(coder, BatchCoder)
    batch = Batch([{"pk": {"S": "a"}}, {"pk": {"N": "12345678901234567890123456789012345678"}}], nbytes=321)
    back = coder.decode(coder.encode(batch))
    assert type(back) is Batch and back == batch and back.nbytes == 321
    marker = coder.decode(coder.encode(SegmentDone(7)))
    assert type(marker) is SegmentDone and marker.segment == 7 and marker == SegmentDone(7) != SegmentDone(8)
    assert coder.estimate_size(batch) == 321  # not the encoded length
    assert len(coder.encode(batch)) != 321


def test_markers_are_empty_batches_told_apart_by_segment():
    assert SegmentDone(1) != Batch() and Batch() != SegmentDone(1)
    assert len({SegmentDone(1), SegmentDone(1), SegmentDone(2)}) == 2
    assert not SegmentDone(3) and repr(SegmentDone(3)) == "SegmentDone(3)"


def test_batches_cross_a_stage_boundary_intact():
    with new_pipeline() as p:
        out = (p | beam.Create([Batch([1, 2], 10), SegmentDone(4)]) | beam.Reshuffle()
               | beam.Map(lambda b: (type(b).__name__, list(b), getattr(b, "segment", None), b.nbytes)))
        assert_that(out, equal_to([("Batch", [1, 2], None, 10), ("SegmentDone", [], 4, 0)]))
