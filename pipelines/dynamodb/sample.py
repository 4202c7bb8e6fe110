"""Random samples of DynamoDB sources for `validate --sample N` (:meth:`.Source.random_sample`): spread over the whole table, not its first pages.

Live table: a parallel Scan cut into many small segments (about ``ITEMS_PER_SEGMENT`` items each,
from DescribeTable's item count); random segments give the first page of at most
``ITEMS_PER_SEGMENT`` items each until N items are in hand (or 2 × N requests were made, since
most segments of a table with few partition keys are empty). A segment is a range of
partition-key hashes, so the sample is spread over the whole key space, ten items at a time from
the start of random hash ranges (within one partition key, its lowest sort keys), at the cost of
reading about N items. A table of at most 4 × N items (by DescribeTable's count) is read whole
and sampled uniformly. Export: data files in random order, each read whole,
with a uniform reservoir sample of N over the items of the files read, which stop once 10 × N
items were seen (or the export ends).
"""

from __future__ import annotations

import math
import random
from typing import Any

from ...mappers.limits import SCAN_SEGMENTS_MAX
from ...mappers.spec import SourceSpec

ITEMS_PER_SEGMENT = 10
MAX_REQUESTS_PER_ITEM = 2
"""Scan requests at most per item wanted: most segments of a table with few partition keys are empty."""
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


def scan_sample(source: SourceSpec, n: int, rng: random.Random, item_count: int = 0) -> list[dict]:
    """Up to ``n`` items picked at random across a live table (see the module doc for how)."""
    from .client import ClientSettings
    from .scan import RetryPolicy, scan_client, scan_pages

    client = scan_client(ClientSettings.from_source(source), RetryPolicy())
    table = str(source.table)
    found: list[dict] = []
    if item_count <= 4 * n:  # small (or unknown): read it all, pick uniformly
        found = [item for page in scan_pages(client, table, consistent_read=source.consistent_read)
                 for item in page.items]
        return found if len(found) <= n else rng.sample(found, n)
    total = min(SCAN_SEGMENTS_MAX, math.ceil(item_count / ITEMS_PER_SEGMENT))
    for requests, segment in enumerate(rng.sample(range(total), total), start=1):
        page = next(scan_pages(client, table, segment, total, consistent_read=source.consistent_read,
                               limit=ITEMS_PER_SEGMENT))
        found.extend(page.items[: n - len(found)])
        if len(found) >= n or requests >= MAX_REQUESTS_PER_ITEM * n:
            break
    return found


def export_sample(path: str, n: int, rng: random.Random) -> list[dict]:
    """Up to ``n`` items picked at random among the items of an export's data files (see the module doc)."""
    from apache_beam.options.pipeline_options import PipelineOptions

    from .export import iter_file_items, read_manifest

    files = list(read_manifest(path, PipelineOptions([])).files)
    rng.shuffle(files)
    items = (item for data_file in files for item in iter_file_items(data_file.path))
    return reservoir(items, n, rng, stop_after=EXPORT_SEEN_FACTOR * n)
