"""Task stores for the tests: a factory per backend, each with an injectable clock.

``make_store(kind)`` gives a fresh store of that kind (``"memory"``, ``"sqlite"`` on a
temporary file, ``"redis"`` on a redis-server the tests start); every store made is closed
at the end of the test. :class:`FakeClock` moves time without sleeping.
"""

from __future__ import annotations

import threading
import time


class FakeClock:
    """Seconds since the epoch that move only when a test says so."""

    def __init__(self, start: float | None = None) -> None:
        self._lock = threading.Lock()
        self._now = time.time() if start is None else start

    def __call__(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds
