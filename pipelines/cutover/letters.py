"""Change dead letters: the tail's and the catch-up's, which carry a whole change record, and which of them are resolved.

A change dead letter's ``item`` is the change record (:meth:`ddb2bt.mappers.changes.Change.record`:
``Keys``, ``OldImage``, ``NewImage``, ``eventName``, time, sequence number), not an item: it goes back
through the change semantics (``ddb2bt redrive``), never through the backfill's. A redrive that
resolves letters records them beside the file (``<file>.resolved.json``: the SHA-256 of each resolved
line), so ``cutover-status`` counts only the others; a line the tail writes later is a new line, and
unresolved. The lines of a file are those of the file and of its part files (a tail killed before it
joined them), each once, as :func:`ddb2bt.pipelines.run.dead_letters.consolidate` joins them.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ...mappers.changes import Change, kind_of_change
from ..run.dead_letters import parts_dir
from ..run.json_files import read_json
from .timeline import write_json

RESOLVED_SUFFIX = ".resolved.json"
CHANGE_LETTER_GLOBS = ("tail.dead_letters.jsonl", "catch-up-*.dead_letters.jsonl")


def is_change_record(item: Any) -> bool:
    """A dead letter's ``item`` that is a change record (keys and images), not an item."""
    return isinstance(item, dict) and isinstance(item.get("Keys"), dict) and "eventName" in item \
        and ("NewImage" in item or "OldImage" in item)


def lines(path: str) -> list[bytes]:
    """Every line of a dead-letter file and of its part files, each once, in a stable order."""
    from apache_beam.io.filesystems import FileSystems

    paths = [path] if FileSystems.exists(path) else []
    pattern = FileSystems.join(parts_dir(path), "part-*.jsonl")
    paths += sorted(meta.path for meta in FileSystems.match([pattern])[0].metadata_list)
    seen: dict[bytes, None] = {}
    for name in paths:
        with FileSystems.open(name) as handle:
            for line in handle.read().splitlines():
                if line.strip():
                    seen.setdefault(line.strip(), None)
    return list(seen)


def digest(line: bytes) -> str:
    return hashlib.sha256(line.strip()).hexdigest()


def resolved(path: str) -> set[str]:
    saved = read_json(path + RESOLVED_SUFFIX)
    return set(saved.get("resolved", [])) if isinstance(saved, dict) else set()


def mark_resolved(path: str, done: list[bytes], by: str) -> None:
    """Record ``done`` lines of ``path`` as resolved (by the redrive in folder ``by``), with those resolved before."""
    saved = read_json(path + RESOLVED_SUFFIX) or {}
    history = list(saved.get("redrives", [])) + [{"run_dir": by, "lines": len(done)}]
    write_json(path + RESOLVED_SUFFIX, {"resolved": sorted(resolved(path) | {digest(line) for line in done}),
                                        "redrives": history})


def unresolved(path: str) -> tuple[int, int]:
    """(lines, unresolved lines) of one change dead-letter file."""
    found = lines(path)
    done = resolved(path)
    return len(found), sum(1 for line in found if digest(line) not in done)


def change_files(run_dir: str) -> list[str]:
    """The change dead-letter files of a run folder (the tail's, each catch-up's), with or without part files."""
    from apache_beam.io.filesystems import FileSystems

    from .timeline import join

    found: set[str] = set()
    for pattern in CHANGE_LETTER_GLOBS:
        found |= {meta.path for meta in FileSystems.match([join(run_dir, pattern)])[0].metadata_list}
        found |= {meta.path.rsplit(".parts/", 1)[0] for meta in
                  FileSystems.match([join(run_dir, pattern + ".parts", "part-*.jsonl")])[0].metadata_list}
    return sorted(found)


def to_change(record: dict[str, Any]) -> Change:
    """The change a dead letter carries, as the tail and the catch-up applied it."""
    old, new = record.get("OldImage"), record.get("NewImage")
    return Change(record["Keys"], old, new, record.get("eventName") or kind_of_change(old, new),
                  int(record.get("WriteTimestampMicros") or 0), record.get("SequenceNumber") or "",
                  bool(record.get("ttl")))


def order(change: Change) -> tuple[int, int]:
    """Stream order (sequence numbers grow along a shard lineage; times are rounded to the second), else the
    change's time (an export's WriteTimestampMicros)."""
    sequence = change.sequence
    return (int(sequence), change.time_us) if sequence.isascii() and sequence.isdigit() else (0, change.time_us)


def parse(line: bytes) -> dict[str, Any]:
    return json.loads(line)


def holds_changes(path: str) -> bool:
    """The first line of the file (or its parts) that carries anything carries a change record."""
    for line in lines(path):
        try:
            item = json.loads(line).get("item")
        except (ValueError, AttributeError):
            return False  # not a dead-letter file: the item redrive's survey says so, line by line
        if item is not None:
            return is_change_record(item)
    return False


def backfill_items(path: str, key_names: list[str]) -> tuple[dict[str, dict[str, Any]], int]:
    """(the items a backfill dead-lettered, as the backfill read them, by the JSON of their export key: the last line
    of each; the lines that hold no item, or an item without its key, which nothing can check: an export's count
    mismatch). No file: nothing."""
    from apache_beam.io.filesystems import FileSystems

    if not FileSystems.exists(path):
        return {}, 0
    items: dict[str, dict[str, Any]] = {}
    without = 0
    for line in lines(path):
        try:
            item = json.loads(line).get("item")
        except (ValueError, AttributeError):
            item = None
        if not isinstance(item, dict) or not all(isinstance(item.get(name), dict) for name in key_names):
            without += 1
            continue
        items[json.dumps({name: item[name] for name in key_names}, sort_keys=True)] = item
    return items, without
