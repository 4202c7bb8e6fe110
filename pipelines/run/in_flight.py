"""A step torn down while one of its bundles still runs on another thread.

When a run ends early (a bundle failed, or Ctrl-C stopped it), Beam's SDK harness tears down the steps of every bundle
still in flight, from its own thread, while those bundles go on (``BundleProcessorCache.shutdown``; multi_processing
and multi_threading). A step that closed its Bigtable client there failed the running bundle's writes, which the
bundle took for Bigtable refusing them: dead letters or refusals counted, and a segment's marker passed on after them
(docs/PIPELINE.md, "Progress and Ctrl-C"). So such a step's teardown only marks it torn down (:meth:`InFlight.tear_down`
says when it may let go of its clients at once), and the bundle lets go of them itself at its next step and stops
(:meth:`InFlight.check`), passing nothing more on.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class StepTornDown(RuntimeError):
    """The runner tore the step down while this bundle ran: the bundle stopped, passing nothing more on."""


class InFlight:
    """Which thread runs the step's bundle (from ``start_bundle`` to the end of ``finish_bundle``), and whether the
    step was torn down."""

    def __init__(self) -> None:
        self._torn_down = threading.Event()
        self._thread: int | None = None

    @property
    def torn_down(self) -> bool:
        return self._torn_down.is_set()

    def started(self, release: Callable[[], None]) -> None:
        """At ``start_bundle``: a bundle on a step already torn down stops at once (see :meth:`check`)."""
        self.check(release)
        self._thread = threading.get_ident()

    def finished(self) -> None:
        """At the end of ``finish_bundle``."""
        self._thread = None

    def check(self, release: Callable[[], None]) -> None:
        """In the bundle's thread, before it writes or passes anything on: once the step is torn down, ``release``
        its clients and stop the bundle (:class:`StepTornDown`)."""
        if self._torn_down.is_set():
            release()
            raise StepTornDown("the runner tore this step down while its bundle ran: stopped, nothing passed on "
                               "after it (run the command again, or resume)")

    def running_elsewhere(self) -> bool:
        """A bundle of the step runs on another thread than the caller's (the harness's, in ``teardown``)."""
        running = self._thread
        return running is not None and running != threading.get_ident()

    def tear_down(self) -> bool:
        """At ``teardown``: mark the step torn down; True when the caller may let go of its clients now, False when a
        bundle of it runs on another thread (which lets go of them itself at its next step)."""
        self._torn_down.set()
        return not self.running_elsewhere()
