"""Test items and an exact matcher for big item collections; exports are written by ddb2bt.pipelines.dynamodb.export_writer
(AWS's layout, compared with real manifests in tests/data/aws_exports/)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from apache_beam.testing.util import BeamAssertException

from ddb2bt.mappers.attrvalue import to_export_json
from ddb2bt.pipelines.dynamodb.export_writer import EXPORT_TIME, write_export  # noqa: F401 - the tests' writer



def make_items(count: int, padding: int = 900) -> list[dict[str, Any]]:
    """``count`` distinct wire-format items (key ``pk`` S, ``sk`` N) of about ``padding`` + 250 bytes.

    They carry every attribute type with values that break careless code: exact decimals with
    trailing zeros, 38 significant digits, binary with non-UTF-8 bytes, sets, nested maps and lists.
    """
    return [
        {
            "pk": {"S": f"user#{number % 97:03d}"},
            "sk": {"N": str(number)},
            "price": {"N": f"{number}.50"},
            "exact": {"N": "1234567890123456789012345678.9012345678"},
            "blob": {"B": bytes([number % 256, 0xFF, 0x00, 0xFE])},
            "tags": {"SS": [f"t{number % 3}", "all"]},
            "scores": {"NS": ["1", "2.50", "-3"]},
            "bins": {"BS": [b"\x01", b"\x02\x80"]},
            "active": {"BOOL": number % 2 == 0},
            "nothing": {"NULL": True},
            "address": {"M": {"city": {"S": "Zürich"}, "zip": {"N": "8001"},
                              "lines": {"L": [{"S": "a"}, {"N": "0.10"}]}}},
            "padding": {"S": "x" * padding},
        }
        for number in range(count)
    ]


def item_key(item: dict[str, Any]) -> tuple[str, str]:
    """The (pk, sk) of a :func:`make_items` item, for comparing collections."""
    return item["pk"]["S"], item["sk"]["N"]


def fingerprint(item: dict[str, Any]) -> tuple[tuple[str, str], str]:
    """(key, digest of the whole item): cheap to shuffle into assert_that, yet any changed byte shows."""
    return item_key(item), hashlib.sha256(json.dumps(to_export_json(item), sort_keys=True).encode()).hexdigest()


def exactly(expected: Sequence[dict[str, Any]]) -> Any:
    """An assert_that matcher for big item collections: same keys, no duplicates, each item identical.

    Pipe the actual items through :func:`fingerprint` first (``items | beam.Map(fingerprint)``):
    shuffling digests instead of whole items keeps a 6 MB check to seconds on the DirectRunner.
    An export item (``B`` as base64 text) and its wire-format original have the same fingerprint.
    """
    want = dict(map(fingerprint, expected))

    def check(actual):
        got = dict(actual)
        if len(actual) != len(expected) or got != want:
            missing, extra = want.keys() - got.keys(), got.keys() - want.keys()
            changed = [key for key in want.keys() & got.keys() if want[key] != got[key]]
            raise BeamAssertException(
                f"{len(actual)} items read, {len(expected)} expected; missing {sorted(missing)[:5]}, "
                f"extra {sorted(extra)[:5]}, changed {sorted(changed)[:5]}")

    return check


def counter_totals(result: Any) -> dict[str, int]:
    """Committed Beam counters by name, summed over the steps that share a name."""
    totals: dict[str, int] = {}
    for metric in result.metrics().query()["counters"]:
        totals[metric.key.metric.name] = totals.get(metric.key.metric.name, 0) + metric.committed
    return totals
