"""One process-wide deadline scheduler: a heap and a single thread.

Every timeout in mcp_sync (call timeouts, server-side tool deadlines,
:meth:`CancelToken.with_timeout`) is an entry in this heap, never a thread or a
``threading.Timer`` of its own. The thread starts on demand and exits as soon as no live
entry remains, so an idle process holds no scheduler thread.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from typing import Callable

__all__ = ["Deadline", "schedule", "scheduler_thread_alive", "check_timeout"]

_log = logging.getLogger("mcp_sync.deadlines")

_LONGEST_WAIT = min(threading.TIMEOUT_MAX, 86400.0)
"""The scheduler thread's longest single wait, in seconds (it wakes and waits again)."""


def check_timeout(seconds: float | None, name: str = "timeout") -> float | None:
    """Return ``seconds`` if it is ``None`` or a number >= 0; raise :class:`ValueError` for a
    negative number or NaN (a timeout of -1 s is a mistake, not "already expired")."""
    if seconds is not None and not seconds >= 0:
        raise ValueError(f"{name} must be a number of seconds >= 0 or None, not {seconds!r}")
    return seconds


class Deadline:
    """A scheduled callback; :meth:`cancel` prevents it from running if it has not started."""

    __slots__ = ("when", "_callback", "_seq")

    def __init__(self, when: float, callback: Callable[[], object], seq: int) -> None:
        self.when = when
        self._callback: Callable[[], object] | None = callback
        self._seq = seq

    def __lt__(self, other: Deadline) -> bool:
        return (self.when, self._seq) < (other.when, other._seq)

    @property
    def active(self) -> bool:
        """True until the callback has been taken to run or the deadline was cancelled."""
        return self._callback is not None

    def cancel(self) -> bool:
        """Cancel the deadline; True if the callback had not been taken to run yet."""
        return _SCHEDULER.cancel(self)


class _Scheduler:
    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._heap: list[Deadline] = []
        self._live = 0
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None

    def schedule(self, delay: float, callback: Callable[[], object]) -> Deadline:
        entry = Deadline(time.monotonic() + max(0.0, delay), callback, next(self._seq))
        with self._cond:
            heapq.heappush(self._heap, entry)
            self._live += 1
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="mcp_sync-deadlines", daemon=True
                )
                self._thread.start()
            elif self._heap[0] is entry:
                self._cond.notify()
        return entry

    def cancel(self, entry: Deadline) -> bool:
        with self._cond:
            if entry._callback is None:
                return False
            entry._callback = None
            self._live -= 1
            if self._live == 0:
                self._cond.notify()
            return True

    def alive(self) -> bool:
        with self._cond:
            return self._thread is not None

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    while self._heap and self._heap[0]._callback is None:
                        heapq.heappop(self._heap)
                    if self._live == 0:
                        self._heap.clear()
                        self._thread = None
                        return
                    delay = self._heap[0].when - time.monotonic()
                    if delay <= 0:
                        entry = heapq.heappop(self._heap)
                        callback, entry._callback = entry._callback, None
                        self._live -= 1
                        break
                    # an infinite or huge timeout is "no deadline yet": wait in steps the
                    # platform can represent (beyond that, Condition.wait raises OverflowError)
                    self._cond.wait(min(delay, _LONGEST_WAIT))
            try:
                assert callback is not None
                callback()
            except BaseException:  # a failing callback (SystemExit too) must not stop other deadlines
                _log.exception("deadline callback failed")


_SCHEDULER = _Scheduler()


def schedule(delay: float, callback: Callable[[], object]) -> Deadline:
    """Run ``callback`` on the scheduler thread after ``delay`` seconds (never under a lock).

    Callbacks must be short: they share one thread. mcp_sync's own callbacks only flip state
    and hand work elsewhere.
    """
    return _SCHEDULER.schedule(delay, callback)


def scheduler_thread_alive() -> bool:
    """True while the scheduler thread exists (it exits when no deadline is pending)."""
    return _SCHEDULER.alive()
