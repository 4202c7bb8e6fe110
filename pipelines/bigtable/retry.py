"""How our own ReadRows reads retry: the table's retryable errors, its timeouts, a pause doubling between attempts.

Validate's lookups (`read.RowLookup`) and the rollback's range reads (`chunks.read_range`) send ReadRows themselves
(`calls.ChannelCall`), so the data client's retries do not wrap them; both ask again, after the last complete row,
by the same rules as the client's own reads (its ``default_read_rows_*`` settings of the table). They differ in
what the operation timeout bounds: a lookup's whole read (:class:`ReadRetry`), or a range's time without a row
(:meth:`ReadRetry.progressed`, which the range read calls whenever rows came).
"""

from __future__ import annotations

import time
from typing import Any

FIRST_PAUSE = 0.01
"""Seconds waited after the first retryable error; each one after waits twice the one before, up to MAX_PAUSE."""
MAX_PAUSE = 10.0
SHORTEST_ATTEMPT = 0.001
"""An attempt's timeout when the deadline has (just) passed: gRPC is not given a timeout of 0 or less."""


class ReadRetry:
    """The retries of one read of ``table`` (the data client's ``get_table``), from now.

    ``retryable``: the exception types to catch and ask again after (the table's own list: unavailable, deadline,
    aborted); :meth:`timeout`: the next attempt's; :meth:`wait`: after a retryable error, sleep before asking again,
    or raise it when the pause would pass the deadline."""

    def __init__(self, table: Any) -> None:
        self.retryable: tuple[type[Exception], ...] = tuple(table.default_read_rows_retryable_errors)
        self._operation = table.default_read_rows_operation_timeout
        self._attempt = table.default_read_rows_attempt_timeout or self._operation
        self._deadline = time.monotonic() + self._operation
        self._pause = FIRST_PAUSE

    def timeout(self) -> float:
        """The next attempt's timeout: the table's attempt timeout, cut to what is left before the deadline."""
        return min(self._attempt, max(self._deadline - time.monotonic(), SHORTEST_ATTEMPT))

    def progressed(self) -> None:
        """Rows came: the operation timeout counts again from now, and the pause starts again from the first."""
        self._deadline, self._pause = time.monotonic() + self._operation, FIRST_PAUSE

    def wait(self, error: Exception) -> None:
        """After ``error`` (a retryable one): raise it if pausing would pass the deadline, else pause (doubling the
        next pause, up to :data:`MAX_PAUSE`)."""
        if time.monotonic() + self._pause > self._deadline:
            raise error
        time.sleep(self._pause)
        self._pause = min(self._pause * 2, MAX_PAUSE)
