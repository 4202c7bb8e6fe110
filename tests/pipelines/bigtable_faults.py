"""Faults of the Bigtable data client's MutateRows transport, for tests that pin how its retries go."""

from __future__ import annotations

__all__ = ["LostResponse"]


class LostResponse:
    """The data client's MutateRows transport, except that the first request is applied by Bigtable and then answered
    UNAVAILABLE (the response lost): the client retries the entries that say they are idempotent."""

    def __init__(self, real) -> None:
        self.real, self.calls = real, 0

    def __call__(self, *args, **kwargs):
        from google.api_core.exceptions import ServiceUnavailable

        self.calls += 1
        answers = list(self.real(*args, **kwargs))
        if self.calls == 1:
            raise ServiceUnavailable("response lost after the write was applied")
        return iter(answers)
