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
    was torn down, and whether the bundle owes the letting go of the step's clients."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._thread: int | None = None
        self._torn_down = False
        self._owed = False

    def started(self, release: Callable[[], None]) -> None:
        """At ``start_bundle``: the bundle's thread noted, then :meth:`check` (a step already torn down stops it)."""
        with self._lock:
            self._thread = threading.get_ident()
        self.check(release)

    def check(self, release: Callable[[], None]) -> None:
        """In the bundle's thread, before it writes or passes anything on: once the step is torn down, stop the
        bundle (:class:`StepTornDown`), after calling ``release`` if the teardown left that to the bundle."""
        with self._lock:
            if not self._torn_down:
                return
            owed, self._owed = self._owed, False
        if owed:
            release()
        raise StepTornDown("the runner tore this step down while its bundle ran: stopped, nothing passed on "
                           "after it (run the command again, or resume)")

    def finished(self, release: Callable[[], None]) -> None:
        """At the end of ``finish_bundle``: ``release``, if a teardown came after the bundle's last check."""
        with self._lock:
            self._thread = None
            owed, self._owed = self._owed, False
        if owed:
            release()

    def defer(self) -> bool:
        """At ``teardown``: when a bundle of the step runs on another thread, mark the step torn down, leave the
        letting go to that bundle and say True; otherwise change nothing and say False."""
        with self._lock:
            if self._thread is None or self._thread == threading.get_ident():
                return False
            self._torn_down = self._owed = True
            return True

    def tear_down(self) -> bool:
        """At ``teardown``: mark the step torn down; True when the caller lets go of its clients now, False when a
        bundle of it runs on another thread (which lets go of them itself: :meth:`defer`)."""
        if self.defer():
            return False
        with self._lock:
            self._torn_down = True
        return True
