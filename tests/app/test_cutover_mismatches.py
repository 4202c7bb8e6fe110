"""cutover-status tells parity's mismatches apart by their kind, not by their words: an item whose key holds the words
of the other kind is still counted as what it is; the status's JSON keeps each mismatch as its words."""

from __future__ import annotations

import json

from ddb2bt.app.cutover import CutoverStatus, _backfill_letters
from ddb2bt.pipelines.cutover.parity import Mismatch, Parity

TRICKY = 'item {"pk": {"S": "x: deleted in DynamoDB, but "}}: 1 of its 2 cells differ in row b\'x\', e.g. d:b\'a\' at 1'
GONE = 'item {"pk": {"S": "y"}}: deleted in DynamoDB, but 2 of its 2 cells are still in row b\'y\', e.g. d:b\'a\' at 1'


def held() -> Parity:
    return Parity(checked=3, lingering=1, mismatches=[Mismatch("differs", TRICKY), Mismatch("lingering", GONE)])


def test_the_backfill_letters_are_counted_by_the_kind_of_each_mismatch():
    left, detail = _backfill_letters(held(), 0, "runs/r")
    assert left == 2
    assert f"1 mapped but not in Bigtable (e.g. {TRICKY})" in detail, detail
    assert f"1 deleted in DynamoDB but still in Bigtable (e.g. {GONE};" in detail, detail
    assert "1 resolved since" in detail


def test_the_status_json_keeps_the_mismatches_as_words():
    status = CutoverStatus("runs/r", [], [], {}, held(), False, ["parity"], 30.0)
    data = json.loads(json.dumps(status.to_json()))
    assert data["parity"]["mismatches"] == [TRICKY, GONE] and data["parity"]["holds"] is False
    assert held().mismatches[0].text == str(held().mismatches[0]) == TRICKY
