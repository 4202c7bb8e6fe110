"""Compare what a spec says Bigtable should hold with what it holds, cell by cell: pure, no client.

Expected cells come from mapping the source again (`expected_rows(results)`); actual cells are
read from Bigtable by the caller. Garbage collection is allowed for: a cell that its family's
`max_versions` (counted over the cells seen in that column) or `max_age` may already have removed
is not reported missing. With `full=False` (a sample) only the sampled items' cells are checked,
because other items may write into the same rows.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import Literal, NamedTuple

from .results import Cell, MappedRow, MapResult
from .sample import readable_bytes
from .spec import GcPolicy

CellKey = tuple[str, bytes, int]
"""(family, qualifier, timestamp_micros): what identifies a cell within a row."""
ExpectedRows = dict[bytes, dict[CellKey, set[bytes]]]
Kind = Literal["missing_row", "extra_row", "missing_cell", "extra_cell", "different_value"]


class Difference(NamedTuple):
    kind: Kind
    row_key: bytes
    family: str | None = None
    qualifier: bytes | None = None
    timestamp_micros: int | None = None
    expected: bytes | None = None
    actual: bytes | None = None

    def describe(self) -> str:
        where = readable_bytes(self.row_key)
        if self.family is not None:
            where += f" {self.family}:{readable_bytes(self.qualifier or b'')}@{self.timestamp_micros}"
        text = f"{self.kind.replace('_', ' ')}: {where}"
        if self.kind == "different_value":
            text += f" expected {_clip(self.expected)} got {_clip(self.actual)}"
        return text


def _clip(value: bytes | None, limit: int = 60) -> str:
    text = readable_bytes(value or b"")
    return text if len(text) <= limit else text[: limit - 1] + "…"


class Comparison(NamedTuple):
    rows_expected: int
    rows_found: int
    cells_expected: int
    cells_matched: int
    differences: tuple[Difference, ...]

    @property
    def ok(self) -> bool:
        return not self.differences

    def counts(self) -> dict[str, int]:
        return dict(Counter(d.kind for d in self.differences))


def expected_rows(results: Iterable[MapResult]) -> ExpectedRows:
    """Cells by row key; one cell key written with two values (two items colliding) accepts either."""
    rows: ExpectedRows = defaultdict(dict)
    for result in results:
        if isinstance(result, MappedRow):
            cells = rows[result.row_key]
            for cell in result.cells:
                cells.setdefault((cell.family, cell.qualifier, cell.timestamp_micros), set()).add(cell.value)
    return dict(rows)


def _collectable(key: CellKey, column_times: list[int], policy: GcPolicy | None, now_us: int) -> bool:
    """Whether GC may already have dropped this cell: older than max_age, or not among the newest max_versions."""
    if policy is None:
        return False
    _, _, ts = key
    too_old = policy.max_age is not None and ts < now_us - policy.max_age // timedelta(microseconds=1)
    newer = sum(1 for t in column_times if t > ts)
    too_many = policy.max_versions is not None and newer >= policy.max_versions
    if policy.max_age is not None and policy.max_versions is not None and policy.combine == "intersection":
        return too_old and too_many
    return too_old or too_many


def compare(
    expected: ExpectedRows,
    actual: Mapping[bytes, Iterable[Cell]],
    families: Mapping[str, GcPolicy | None],
    *,
    full: bool,
    now_us: int,
) -> Comparison:
    """Every difference between the expected and the actual rows."""
    differences: list[Difference] = []
    cells_expected = cells_matched = 0
    for row_key, wanted in expected.items():
        cells_expected += len(wanted)
        found = actual.get(row_key)
        if found is None:
            differences.append(Difference("missing_row", row_key))
            continue
        have = {(c.family, c.qualifier, c.timestamp_micros): c.value for c in found}
        times: dict[tuple[str, bytes], list[int]] = defaultdict(list)
        for family, qualifier, ts in set(wanted) | set(have):
            times[(family, qualifier)].append(ts)
        for key, values in sorted(wanted.items()):
            family, qualifier, ts = key
            if key not in have:
                if not _collectable(key, times[(family, qualifier)], families.get(family), now_us):
                    differences.append(Difference("missing_cell", row_key, family, qualifier, ts, min(values)))
                else:
                    cells_matched += 1  # gone by the family's GC rule, as the spec asked
            elif have[key] not in values:
                differences.append(Difference("different_value", row_key, family, qualifier, ts, min(values), have[key]))
            else:
                cells_matched += 1
        if full:
            for key in sorted(set(have) - set(wanted)):
                differences.append(Difference("extra_cell", row_key, key[0], key[1], key[2], None, have[key]))
    if full:
        differences += [Difference("extra_row", row_key) for row_key in sorted(set(actual) - set(expected))]
    rows_found = sum(1 for key in expected if key in actual)
    return Comparison(len(expected), rows_found, cells_expected, cells_matched, tuple(differences))
