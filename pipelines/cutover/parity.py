"""Parity of DynamoDB items and Bigtable, item by item: what ``cutover-status`` compares before it says READY.

Two kinds of keys are compared: random keys across the whole table (:func:`sample_keys`: a parallel
scan's segments taken in random order, a few keys from each, so every part of the key space can be
drawn, not only the items changed last), and every key the tail applied a change to since the last
check. Each item is read now (``BatchGetItem``, consistent), mapped through the spec, and its cells
looked up in its Bigtable row: every cell must be there with its value. Cells of other items folded
into the same row are not compared; an item deleted since is counted (``absent``), and where an image
of it is known (a backfill's dead letter, the stream's REMOVE) none of the cells that image maps to
may be left in Bigtable (``lingering``: a redrive that wrote a deleted item back). An item the spec
does not map (dead-lettered or skipped, as the backfill leaves it) expects nothing.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from ...mappers.attrvalue import from_typed_json, to_export_json

KEYS_PER_SEGMENT = 10
SEGMENT_FACTOR = 8
"""The scan is cut into this many times more segments than it draws from: the draw is random across the table."""
BATCH_GET = 100
UNPROCESSED_PAUSE_S = 0.05
"""The first pause before BatchGetItem's unprocessed keys are asked again (doubled each time, at most 1 s)."""


@dataclass(frozen=True)
class Mismatch:
    """An item that differs, in words (:attr:`text`, what ``cutover-status`` shows) and of a kind: ``"differs"``, cells
    it maps to are missing from Bigtable or hold another value; ``"lingering"``, it is deleted in DynamoDB and cells
    its last known image mapped to are still in Bigtable."""

    kind: Literal["differs", "lingering"]
    text: str

    def __str__(self) -> str:
        return self.text


@dataclass
class Parity:
    random_keys: int = 0
    """Keys drawn at random across the whole table."""
    changed_keys: int = 0
    """Keys the tail applied a change to since the last check (a key drawn both ways is counted here)."""
    checked: int = 0
    matching: int = 0
    absent: int = 0
    """Items deleted since: their last known image's cells (when one is known) must be gone from Bigtable."""
    lingering: int = 0
    """Of those, the items deleted in DynamoDB whose cells are still in Bigtable (counted in ``mismatches`` too)."""
    unmapped: int = 0
    """Items the spec does not map (dead-lettered or skipped): nothing expected in Bigtable."""
    failing: int = 0
    """Of those, the items the spec cannot map (it dead-letters them; the others it skips on purpose)."""
    mismatches: list[Mismatch] = field(default_factory=list)

    @property
    def holds(self) -> bool:
        return not self.mismatches


def sample_keys(client: Any, table: str, key_names: list[str], count: int,
                rng: random.Random | None = None) -> list[dict[str, Any]]:
    """Up to ``count`` keys drawn across the whole table (export JSON); the whole table when it is smaller."""
    if count <= 0:
        return []
    rng = rng or random.Random()
    wanted = math.ceil(count / KEYS_PER_SEGMENT)
    total = max(1, wanted * SEGMENT_FACTOR)
    names = {f"#k{i}": name for i, name in enumerate(key_names)}
    keys: list[dict[str, Any]] = []
    for segment in rng.sample(range(total), total):
        start: dict[str, Any] = {}
        taken = 0
        while taken < KEYS_PER_SEGMENT and len(keys) < count:
            page = client.scan(TableName=table, Segment=segment, TotalSegments=total, Limit=KEYS_PER_SEGMENT,
                               ProjectionExpression=", ".join(names), ExpressionAttributeNames=names, **start)
            for item in page.get("Items", [])[:KEYS_PER_SEGMENT - taken]:
                keys.append(to_export_json(item))
                taken += 1
            if "LastEvaluatedKey" not in page:
                break
            start = {"ExclusiveStartKey": page["LastEvaluatedKey"]}
        if len(keys) >= count:
            break
    return keys[:count]


def _wire(key: dict[str, Any]) -> dict[str, Any]:
    """An export-JSON key (``B`` as base64 text) as boto wants it (bytes)."""
    return {name: from_typed_json(value) for name, value in key.items()}


def read_items(client: Any, table: str, keys: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The items now (consistent reads), by the JSON of their export key; a deleted item is missing."""
    import json

    found: dict[str, dict[str, Any]] = {}
    for start in range(0, len(keys), BATCH_GET):
        request: dict[str, Any] = {table: {"Keys": [_wire(key) for key in keys[start:start + BATCH_GET]],
                                           "ConsistentRead": True}}
        attempt = 0
        while request:
            answer = client.batch_get_item(RequestItems=request)
            for item in answer.get("Responses", {}).get(table, []):
                exported = to_export_json(item)
                found[json.dumps({name: exported[name] for name in keys[0]}, sort_keys=True)] = item
            request = answer.get("UnprocessedKeys") or {}
            if request:  # throttled: asked again, after a growing pause (AWS's advice for BatchGetItem)
                time.sleep(min(UNPROCESSED_PAUSE_S * 2 ** attempt, 1.0))
                attempt += 1
    return found


def compare(client: Any, table: str, compiled: Any, target: Any, keys: list[dict[str, Any]],
            parity: Parity, images: dict[str, dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Compare each item with its Bigtable row, counting into ``parity``; the keys that differ (not yet recorded).
    ``images``: a known earlier image of some items (by the JSON of their export key), whose cells must be gone from
    Bigtable when the item is deleted."""
    import json

    from ...mappers.results import ItemError, MappedRow
    from ..bigtable.read import read_cells

    items = read_items(client, table, keys)
    expected: list[tuple[dict[str, Any], MappedRow]] = []
    gone: list[tuple[dict[str, Any], MappedRow]] = []
    for key in keys:
        text = json.dumps(key, sort_keys=True)
        item = items.get(text)
        if item is None:
            parity.absent += 1
            image = (images or {}).get(text)
            mapped = compiled.map_item(image) if image is not None else None
            if isinstance(mapped, MappedRow):  # deleted: none of the cells it mapped to may be left
                gone.append((key, mapped))
            continue
        result = compiled.map_item(item)
        if isinstance(result, MappedRow):
            expected.append((key, result))
        else:
            parity.unmapped += 1
            parity.failing += isinstance(result, ItemError)
    # an item's index rows (spec.indexes) are its rows too: a stale or missing one is a difference
    # (the rows of an index in a table of its own are read from that table)
    wanted: dict[str | None, set[bytes]] = {}
    for _key, mapped in [*expected, *gone]:
        for row in mapped.rows():
            wanted.setdefault(getattr(row, "table", None), set()).add(row.row_key)
    rows: dict[tuple[str | None, bytes], dict] = {}
    for name, row_keys in wanted.items():
        where = target if name is None else target.model_copy(update={"table": name})
        rows.update({(name, row_key): {(c.family, c.qualifier, c.timestamp_micros): c.value for c in cells}
                     for row_key, cells in read_cells(where, sorted(row_keys))})
    differing = []
    for key, mapped in expected:
        missing = [c for row in mapped.rows() for c in row.cells
                   if rows.get((getattr(row, "table", None), row.row_key), {}).get(c[:3]) != c.value]
        if missing:
            differing.append((key, mapped, missing, False))
        else:
            parity.matching += 1
    for key, mapped in gone:  # by exact coordinates, whatever the value: a cell of the deleted item left behind
        left = [c for row in mapped.rows() for c in row.cells
                if c[:3] in rows.get((getattr(row, "table", None), row.row_key), {})]
        if left:
            differing.append((key, mapped, left, True))
    return [{"key": key, "row_key": mapped.row_key, "missing": missing, "cells": len(mapped.cells), "deleted": deleted}
            for key, mapped, missing, deleted in differing]


def check(client: Any, table: str, compiled: Any, target: Any, random_keys: list[dict[str, Any]],
          changed_keys: list[dict[str, Any]], retry_s: float = 1.0,
          images: dict[str, dict[str, Any]] | None = None) -> Parity:
    """Compare every key given; a difference is compared once more after ``retry_s`` (the item may have been
    changing between the two reads) before it counts. ``images``: known earlier images of items (by the JSON of
    their export key): where such an item is deleted, none of its image's cells may be in Bigtable."""
    import json

    changed = {json.dumps(key, sort_keys=True): key for key in changed_keys}
    drawn = {text: key for key in random_keys if (text := json.dumps(key, sort_keys=True)) not in changed}
    parity = Parity(random_keys=len(drawn), changed_keys=len(changed))
    keys = [*changed.values(), *drawn.values()]
    parity.checked = len(keys)
    differing = compare(client, table, compiled, target, keys, parity, images) if keys else []
    if differing:
        time.sleep(retry_s)
        again = compare(client, table, compiled, target, [d["key"] for d in differing], parity, images)
        for difference in again:
            cell = difference["missing"][0]
            if difference["deleted"]:
                parity.lingering += 1
                parity.mismatches.append(Mismatch("lingering", (
                    f"item {json.dumps(difference['key'], sort_keys=True)}: deleted in DynamoDB, but "
                    f"{len(difference['missing'])} of its {difference['cells']} cells are still in row "
                    f"{difference['row_key']!r}, e.g. {cell.family}:{cell.qualifier!r} at {cell.timestamp_micros}")))
                continue
            parity.mismatches.append(Mismatch("differs", (
                f"item {json.dumps(difference['key'], sort_keys=True)}: {len(difference['missing'])} of its "
                f"{difference['cells']} cells differ in row {difference['row_key']!r}, e.g. "
                f"{cell.family}:{cell.qualifier!r} at {cell.timestamp_micros}")))
    return parity
