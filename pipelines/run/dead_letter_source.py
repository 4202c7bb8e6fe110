"""A dead-letter file as a source: its items back in wire format, for `ddb2bt redrive`.

Each line of a dead-letter file (docs/ARCHITECTURE.md, "Dead letter") holds the item as DynamoDB
JSON with ``B`` as base64 text, which is the wire format the mapper reads from exports, so a line's
``item`` goes back into the pipeline as it is. Lines without an item (a ``source`` record of an
export whose counts did not match its manifest) have nothing to re-drive: :func:`survey` lists them
for the report, and :class:`ReadDeadLetters` leaves them out.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any, Iterator

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics

from ...mappers.attrvalue import item_problem
from ...mappers.errors import UsageError
from ..source import Source, SourceRead
from .batches import BATCH_ITEMS, Batch
from .metrics import NAMESPACE


class DeadLetterFileError(UsageError):
    """The dead-letter file is missing or holds a line that is not a dead letter."""


@dataclass(frozen=True)
class DeadLetterSurvey:
    """What a dead-letter file holds: items by stage, and the records that carry no item."""

    path: str
    items_by_stage: dict[str, int]
    without_item: tuple[str, ...]
    """The reasons of lines with no item (export count mismatches): reported, never re-driven."""

    @property
    def items(self) -> int:
        return sum(self.items_by_stage.values())


def _parse(line: str, where: str) -> dict[str, Any]:
    try:
        letter = json.loads(line)
    except ValueError as err:
        raise DeadLetterFileError(f"{where} is not JSON: {err}", "give the dead_letters.jsonl of a ddb2bt run") from None
    if not isinstance(letter, dict) or "item" not in letter or not isinstance(letter.get("stage"), str) \
            or not (letter["item"] is None or isinstance(letter["item"], dict)):
        raise DeadLetterFileError(f"{where} is not a dead letter (an object with item and stage)",
                                  "give the dead_letters.jsonl of a ddb2bt run")
    return letter


def is_dead_letter(line: str) -> bool:
    """Whether ``line`` is a dead letter as runs write them (:func:`_parse`'s rule)."""
    try:
        _parse(line, "")
    except DeadLetterFileError:
        return False
    return True


def survey(path: str) -> DeadLetterSurvey:
    """Read the whole file once, before a run: every line must be a dead letter (else DeadLetterFileError)."""
    if not FileSystems.exists(path):
        raise DeadLetterFileError(f"no dead-letter file at {path}",
                                  "give a run folder (it holds dead_letters.jsonl) or the dead-letter file itself")
    stages: Counter[str] = Counter()
    without: list[str] = []
    with FileSystems.open(path) as handle:
        for number, raw in enumerate(handle, start=1):
            line = raw.decode("utf-8", "replace").strip()
            if not line:
                continue
            letter = _parse(line, f"{path} line {number}")
            if letter["item"] is None:
                without.append(str(letter.get("reason", "")))
            else:
                stages[letter["stage"]] += 1
    return DeadLetterSurvey(path, dict(stages), tuple(without))


def _items(line: str) -> Iterator[dict[str, Any]]:
    if line.strip():
        item = _parse(line, "a dead-letter line")["item"]
        if item is not None:
            yield item


class _CountedBatch(beam.DoFn):
    def __init__(self) -> None:
        self._read = Metrics.counter(NAMESPACE, "items_read")

    def process(self, items: list[dict[str, Any]]) -> Iterator[Batch]:
        self._read.inc(len(items))
        batch = Batch(items)
        # an item holding a value DynamoDB never writes (a damaged export's, dead-lettered for it) stays a dead letter
        # with its reason: the mapper would map some such as they are ({"SS": "abc"} as the set a, b, c)
        damaged = {place: found for place, item in enumerate(items) if (found := item_problem(item)) is not None}
        if damaged:
            batch.damaged = damaged
        yield batch


class ReadDeadLetters(beam.PTransform):
    """The items of a dead-letter file as batches (counted as items read), for ``build_pipeline(source=...)``."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path

    def expand(self, pbegin: beam.pvalue.PBegin) -> beam.PCollection:
        return (pbegin
                | "ReadLines" >> beam.io.ReadFromText(self.path)
                | "Items" >> beam.FlatMap(_items)
                | "Batch" >> beam.BatchElements(min_batch_size=1, max_batch_size=BATCH_ITEMS)
                | "Count" >> beam.ParDo(_CountedBatch()).with_output_types(Batch))


class DeadLetterSource(Source):
    """A dead-letter file as a :class:`~ddb2bt.pipelines.source.Source` (redrive's): one piece, no checkpoint; its
    check is :func:`survey` (every line, before anything is written), kept in ``found``."""

    kind = "dead letters"

    def __init__(self, path: str) -> None:
        self.path = path
        self.found: DeadLetterSurvey | None = None

    def name(self) -> str:
        return self.path

    def check(self, pipeline_options: Any = None) -> None:
        self.found = survey(self.path)

    def locations(self) -> dict[str, str | None]:
        return {"the dead-letter file": self.path}

    def expected_items(self, description: Any, total: int, done: frozenset[int],
                       pipeline_options: Any = None) -> tuple[int | None, str]:
        found = self.found or survey(self.path)
        return found.items, "the dead-letter file"

    def read(self, p: Any, *, total_segments: int = 1, completed: frozenset[int] = frozenset(),
             mark_done: bool = False, segments_in_flight: int | None = None,
             start_keys: dict[int, dict[str, Any]] | None = None, progress_dir: str | None = None,
             count_read: bool = True) -> SourceRead:
        return SourceRead(p | "Source" >> ReadDeadLetters(self.path))

    def items_iter(self) -> Iterator[dict]:
        """Every item of the file, one line at a time (a file of any length)."""
        with FileSystems.open(self.path) as handle:
            for raw in handle:
                yield from _items(raw.decode("utf-8", "replace"))

    def items(self, limit: int | None = None) -> list[dict]:
        found: list[dict] = []
        with FileSystems.open(self.path) as handle:
            for raw in handle:
                if limit is not None and len(found) >= limit:
                    break
                found.extend(_items(raw.decode("utf-8", "replace")))
        return found
