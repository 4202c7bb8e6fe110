"""Our own ReadRows reads' retries (`retry.ReadRetry`) on a clock of our own: the attempt timeout cut to the deadline,
the pause doubling up to its cap, the error raised when the pause would pass the deadline; a range read's deadline
counted from its last row, a lookup's from its start."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from google.api_core.exceptions import DeadlineExceeded, ServiceUnavailable
from google.cloud.bigtable_v2.types import ReadRowsResponse

from ddb2bt.mappers.results import Cell
from ddb2bt.pipelines.bigtable import chunks, retry
from ddb2bt.pipelines.bigtable.read import RowLookup


class Clock:
    """``time`` for the retries: ``sleep`` moves it on, and so does ``pass_``."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds

    def pass_(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock(monkeypatch) -> Clock:
    made = Clock()
    monkeypatch.setattr(retry, "time", made)
    return made


def table(operation: float = 60.0, attempt: float | None = 20.0) -> SimpleNamespace:
    return SimpleNamespace(default_read_rows_retryable_errors=[ServiceUnavailable, DeadlineExceeded],
                           default_read_rows_operation_timeout=operation, default_read_rows_attempt_timeout=attempt,
                           table_name="projects/p/instances/i/tables/t", app_profile_id=None,
                           _request_path={"table_name": "projects/p/instances/i/tables/t"})


def test_an_attempt_times_out_at_the_attempt_timeout_or_the_deadline_if_sooner(clock):
    reads = retry.ReadRetry(table(operation=30.0, attempt=20.0))
    assert reads.retryable == (ServiceUnavailable, DeadlineExceeded)
    assert reads.timeout() == 20.0
    clock.pass_(25.0)
    assert reads.timeout() == 5.0
    clock.pass_(10.0)
    assert reads.timeout() == retry.SHORTEST_ATTEMPT  # past the deadline: never a timeout of 0 or less
    assert retry.ReadRetry(table(operation=30.0, attempt=None)).timeout() == 30.0  # no attempt timeout: the operation's


def test_the_pause_doubles_up_to_its_cap_and_the_error_is_raised_when_it_would_pass_the_deadline(clock):
    reads = retry.ReadRetry(table(operation=60.0))
    error = ServiceUnavailable("gone")
    while True:
        try:
            reads.wait(error)
        except ServiceUnavailable as raised:
            assert raised is error
            break
    assert clock.slept[:4] == [0.01, 0.02, 0.04, 0.08]
    assert max(clock.slept) == retry.MAX_PAUSE and clock.slept[-1] == retry.MAX_PAUSE
    assert sum(clock.slept) <= 60.0 < sum(clock.slept) + retry.MAX_PAUSE


def test_progress_restarts_the_deadline_and_the_pause(clock):
    reads = retry.ReadRetry(table(operation=5.0))
    for _ in range(5):
        reads.wait(ServiceUnavailable("gone"))
    clock.pass_(4.9)
    reads.progressed()
    assert reads.timeout() == 5.0
    reads.wait(ServiceUnavailable("gone"))
    assert clock.slept[-1] == retry.FIRST_PAUSE


def _row(key: bytes) -> bytes:
    return ReadRowsResponse.serialize(ReadRowsResponse(chunks=[ReadRowsResponse.CellChunk(
        row_key=key, family_name="c", qualifier=b"q", timestamp_micros=1000, value=key, commit_row=True)]))


def _one_row_then_cut(keys: list[bytes], clock: Clock, taking: float, timeouts: list[float]):
    """A ReadRows that answers the next key's row, takes ``taking`` seconds, then fails as the connection drops."""
    def read_rows(request, metadata=(), timeout=None):
        timeouts.append(timeout)
        asked = [key for key in keys if key not in sent]
        if asked:
            sent.append(asked[0])
            yield _row(asked[0])
        clock.pass_(taking)
        if len(sent) < len(keys):
            raise ServiceUnavailable("cut")
    sent: list[bytes] = []
    return read_rows


def test_a_range_read_goes_on_while_rows_come_for_longer_than_the_operation_timeout(clock, monkeypatch):
    keys = [f"r{n:02d}".encode() for n in range(10)]
    timeouts: list[float] = []
    monkeypatch.setattr(chunks, "raw_read_rows", lambda client: _one_row_then_cut(keys, clock, 2.0, timeouts))
    got = list(chunks.read_range(None, table(operation=3.0, attempt=20.0), (b"", b"")))
    assert [key for key, _ in got] == keys and got[0][1] == [Cell("c", b"q", 1000, b"r00")]
    assert clock.now - 1000.0 > 3 * 3.0  # the read outlived the operation timeout three times over
    assert set(clock.slept) == {retry.FIRST_PAUSE}  # each attempt brought a row: the pause starts over
    assert timeouts[0] == 3.0 and all(0 < timeout <= 3.0 for timeout in timeouts)


def test_a_range_read_without_rows_fails_at_the_operation_timeout_from_its_last_row(clock, monkeypatch):
    """One row, then attempts that each fail after a second (or their timeout) with nothing: the read fails at three
    seconds after the row (the operation timeout), the last attempt cut to it."""
    attempts: list[float] = []

    def read_rows(request, metadata=(), timeout=None):
        attempts.append(clock.now)
        clock.pass_(min(1.0, timeout))
        if len(attempts) == 1:
            yield _row(b"a")
        raise ServiceUnavailable("cut")

    monkeypatch.setattr(chunks, "raw_read_rows", lambda client: read_rows)
    got = []
    read = chunks.read_range(None, table(operation=3.0, attempt=20.0), (b"", b""))
    with pytest.raises(ServiceUnavailable):
        for row_key, _cells in read:
            got.append(row_key)
    assert got == [b"a"]
    assert clock.now == pytest.approx(attempts[0] + 1.0 + 3.0) and len(attempts) == 4


def test_a_lookup_fails_at_its_operation_timeout_even_while_rows_come(clock):
    """The lookup's timeout bounds the whole lookup (LOOKUP_TIMEOUT), rows coming or not."""
    keys = [f"r{n:02d}".encode() for n in range(10)]
    timeouts: list[float] = []
    lookup = object.__new__(RowLookup)  # no client: the table and the call are ours
    lookup.table, lookup._read_rows = table(operation=3.0, attempt=20.0), _one_row_then_cut(keys, clock, 1.0, timeouts)
    with pytest.raises(ServiceUnavailable):
        lookup._read_keys(keys)
    assert clock.now - 1000.0 <= 3.0 + 1.0 + retry.MAX_PAUSE and len(timeouts) < len(keys)
    assert timeouts[0] == 3.0 and timeouts[1] < 2.0  # the deadline did not move when a row came


def test_a_lookup_cut_midway_asks_again_for_the_keys_after_the_last_row(clock):
    keys = [f"r{n:02d}".encode() for n in range(5)]
    timeouts: list[float] = []
    lookup = object.__new__(RowLookup)
    lookup.table, lookup._read_rows = table(operation=60.0), _one_row_then_cut(keys, clock, 1.0, timeouts)
    found = lookup._read_keys(keys)
    assert sorted(found) == keys and found[b"r03"] == [Cell("c", b"q", 1000, b"r03")]
    assert clock.slept == [0.01, 0.02, 0.04, 0.08]
