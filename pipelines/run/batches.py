"""What moves between the pipeline's steps: batches of items (or of mapped rows), and segment markers.

Items travel in batches (a Scan page, or up to 1000 export lines) rather than one Beam element
each: Beam's per-element cost is a few microseconds per step, which was a quarter of the whole
per-item cost (docs/PERFORMANCE.md). Batches have a coder of their own for one reason: Beam samples the
byte size of elements for its metrics by *encoding* them, and with few, large elements most of
them are sampled; encoding every sampled page took a tenth of the run. ``nbytes``,
known for free where a batch is read, answers that question instead.
"""

from __future__ import annotations

import pickle
from typing import Any, Iterable

import apache_beam as beam

BATCH_ITEMS = 1000
"""Items per batch where ddb2bt chooses (export lines, samples; a Scan page is its own size): big
enough that Beam's per-element cost vanishes, small enough to spread over workers."""


class Batch(list):
    """Items, or ``(MappedRow, item)`` pairs, moving as one element; ``nbytes`` estimates their source size."""

    damaged: dict[int, tuple[str | None, str]] | None = None
    """Items the source read but DynamoDB never wrote (a damaged export line): their place in the batch -> ``(the
    attribute, what is wrong)``; the map step dead-letters them with that reason instead of mapping them."""

    def __init__(self, elements: Iterable[Any] = (), nbytes: int = 0) -> None:
        super().__init__(elements)
        self.nbytes = nbytes


class Barrier(Batch):
    """An empty batch that marks a point in the stream: it flows through Map and Write like the data does, and the
    writer passes it on only once the rows before it are stored, so seeing it downstream of the writer means they are."""


class SegmentDone(Barrier):
    """The barrier that follows a scan segment's last batch, in the same stream."""

    def __init__(self, segment: int) -> None:
        super().__init__()
        self.segment = segment

    def __eq__(self, other: object) -> bool:
        return type(other) is SegmentDone and other.segment == self.segment

    def __ne__(self, other: object) -> bool:  # list's own would compare two empty lists
        return not self == other

    def __hash__(self) -> int:  # type: ignore[override]  # list is unhashable; a marker is a value
        return hash(("SegmentDone", self.segment))

    def __repr__(self) -> str:
        return f"SegmentDone({self.segment})"


class SegmentAt(Barrier):
    """The barrier that follows each Scan page of a segment (a savepoint): ``key`` is the page's LastEvaluatedKey,
    where the segment goes on. Seen downstream of the writer, every page up to this one is stored, so a resumed run
    may start the segment there (``ExclusiveStartKey``)."""

    def __init__(self, segment: int, key: dict[str, Any]) -> None:
        super().__init__()
        self.segment, self.key = segment, key

    def __eq__(self, other: object) -> bool:
        return type(other) is SegmentAt and (other.segment, other.key) == (self.segment, self.key)

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(("SegmentAt", self.segment))

    def __repr__(self) -> str:
        return f"SegmentAt({self.segment}, {self.key!r})"


class BatchCoder(beam.coders.Coder):
    """Pickles batches whole; sizes them from ``nbytes`` instead of by encoding them."""

    def encode(self, value: Batch) -> bytes:
        return pickle.dumps(value, pickle.HIGHEST_PROTOCOL)

    def decode(self, encoded: bytes) -> Batch:
        return pickle.loads(encoded)

    def estimate_size(self, value: Batch) -> int:
        return getattr(value, "nbytes", 0) or 64

    def is_deterministic(self) -> bool:
        return False

    def to_type_hint(self) -> type:
        return Batch


beam.coders.registry.register_coder(Batch, BatchCoder)
