"""A step torn down while one of its bundles still runs on another thread.

When a run ends early (a bundle failed, or Ctrl-C stopped it), Beam's SDK harness tears down the steps of every bundle
still in flight, from its own thread, while those bundles go on (``BundleProcessorCache.shutdown``; multi_processing
and multi_threading). A step that closed its Bigtable client there failed the running bundle's writes, which the
bundle took for Bigtable refusing them: dead letters or refusals counted, and a segment's marker passed on after them
(docs/PIPELINE.md, "Progress and Ctrl-C"). So such a step's teardown only marks it torn down and leaves the letting go
of its clients to the bundle: at its next step the bundle lets go and stops (:meth:`InFlight.check`), passing nothing
more on; a bundle already past its last check lets go as it finishes (:meth:`InFlight.finished`). The clients are let
go of exactly once, by whichever side comes last.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class StepTornDown(RuntimeError):
    """The runner tore the step down while this bundle ran: the bundle stopped, passing nothing more on."""


class InFlight:
    """Which thread runs the step's bundle (from ``start_bundle`` to the end of ``finish_bundle``), whether the step
    was torn down, and whether the bundle owes the letting go of the step's clients (``release``: the step's own
    method, tolerant of what its ``setup`` did not get to)."""

    def __init__(self, release: Callable[[], None]) -> None:
        self._release = release
        self._lock = threading.Lock()
        self._thread: int | None = None
        self._torn_down = False
        self._owed = False

    def started(self) -> None:
        """At ``start_bundle``: the bundle's thread noted, then :meth:`check` (a step already torn down stops it)."""
        with self._lock:
            self._thread = threading.get_ident()
        self.check()

    def check(self) -> None:
        """In the bundle's thread, before it writes or passes anything on: once the step is torn down, stop the
        bundle (:class:`StepTornDown`), after letting go of the clients if the teardown left that to the bundle."""
        with self._lock:
            if not self._torn_down:
                return
            owed, self._owed = self._owed, False
        if owed:
            self._release()
        raise StepTornDown("the runner tore this step down while its bundle ran: stopped, nothing passed on "
                           "after it (run the command again, or resume)")

    def finished(self) -> None:
        """At the end of ``finish_bundle``: let go of the clients, if a teardown came after the bundle's last
        check."""
        with self._lock:
            self._thread = None
            owed, self._owed = self._owed, False
        if owed:
            self._release()

    def defer(self) -> bool:
        """At ``teardown``: when a bundle of the step runs on another thread, mark the step torn down, leave the
        letting go to that bundle and say True; otherwise change nothing and say False (a step with more to do
        before it lets go, such as a writer's flush, does it then and calls :meth:`teardown`)."""
        with self._lock:
            if self._thread is None or self._thread == threading.get_ident():
                return False
            self._torn_down = self._owed = True
            return True

    def teardown(self) -> None:
        """At ``teardown``: mark the step torn down and let go of its clients now, or, when a bundle of it runs on
        another thread, leave that to the bundle (:meth:`defer`)."""
        if self.defer():
            return
        with self._lock:
            self._torn_down = True
        self._release()
