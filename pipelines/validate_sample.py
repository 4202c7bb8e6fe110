"""A random sample of a source for `validate --sample N`: spread over the whole table, not its first pages.

Live table: a parallel Scan cut into many small segments (about ``ITEMS_PER_SEGMENT`` items each,
from DescribeTable's item count), of which random ones are read whole until N items are in hand;
a segment is a range of partition-key hashes, so the sample is a cluster sample of random hash
ranges over the whole key space, at the cost of reading about N items. A table smaller than a
few N is read whole and sampled uniformly. Export: data files in random order, each read whole,
with a uniform reservoir sample of N over the items of the files read, which stop once 10 × N
items were seen (or the export ends).
"""

from __future__ import annotations

import math
import random
from typing import Any

from ..mappers.limits import SCAN_SEGMENTS_MAX
from ..mappers.spec import SourceSpec

ITEMS_PER_SEGMENT = 10
EXPORT_SEEN_FACTOR = 10


def reservoir(items: Any, n: int, rng: random.Random, stop_after: int | None = None) -> list[dict]:
    """A uniform sample of ``n`` of ``items`` (Algorithm R), reading at most ``stop_after`` of them."""
    chosen: list[dict] = []
    for seen, item in enumerate(items):
        if stop_after is not None and seen >= stop_after:
            break
        if len(chosen) < n:
            chosen.append(item)
        else:
            slot = rng.randrange(seen + 1)
            if slot < n:
                chosen[slot] = item
    return chosen


def random_sample(source: SourceSpec, n: int, *, item_count: int = 0, seed: int | None = None) -> list[dict]:
    """Up to ``n`` items picked at random across the source (see the module doc for how)."""
    rng = random.Random(seed)
    if source.export is not None:
        return _export_sample(source.export.path, n, rng)
    from .dynamodb_client import ClientSettings
    from .dynamodb_scan import RetryPolicy, scan_client, scan_pages

    client = scan_client(ClientSettings.from_source(source), RetryPolicy())
    total = max(1, min(SCAN_SEGMENTS_MAX, math.ceil(item_count / ITEMS_PER_SEGMENT)))
    if item_count <= 4 * n:
        total = 1
    segments = list(range(total))
    rng.shuffle(segments)
    found: list[dict] = []
    for segment in segments:
        for page in scan_pages(client, source.table, segment, total, consistent_read=source.consistent_read):
            found.extend(page.items)
        if len(found) >= n and total > 1:
            break
    return found if len(found) <= n else rng.sample(found, n)


def _export_sample(path: str, n: int, rng: random.Random) -> list[dict]:
    from apache_beam.options.pipeline_options import PipelineOptions

    from .export_source import iter_file_items, read_manifest

    files = list(read_manifest(path, PipelineOptions([])).files)
    rng.shuffle(files)
    items = (item for data_file in files for item in iter_file_items(data_file.path))
    return reservoir(items, n, rng, stop_after=EXPORT_SEEN_FACTOR * n)
