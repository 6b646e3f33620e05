"""One process-wide deadline scheduler: a heap and a single thread.

Every timeout in mcp_sync (call timeouts, server-side tool deadlines,
:meth:`CancelToken.with_timeout <mcp_sync.cancel.CancelToken.with_timeout>`) is an entry in
this heap, never a thread or a ``threading.Timer`` of its own. The thread starts on demand
and, once no live entry remains, lingers for :data:`IDLE_LINGER` seconds before it exits:
sequential calls with a timeout reuse one thread instead of starting one about every other
call, and an idle process still holds no scheduler thread for long. :func:`stop_idle_scheduler` ends an idle
thread at once (tests use it to check that nothing is left behind).

The thread sleeps until the earliest entry is due, and is woken only when a new entry is
due sooner than that: a call whose timeout is scheduled and removed again before it
expires costs a heap push and a flag, not a thread switch. Removed entries are dropped from
the heap lazily, and the heap is compacted when they outnumber the live ones.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import threading
import time
from collections.abc import Callable

__all__ = [
    "IDLE_LINGER",
    "Deadline",
    "schedule",
    "pending_deadlines",
    "scheduler_thread_alive",
    "stop_idle_scheduler",
    "check_timeout",
]

_log = logging.getLogger("mcp_sync.deadlines")

IDLE_LINGER = 3.0
"""Seconds the scheduler thread stays after the last pending deadline is gone, then exits."""

_LONGEST_WAIT = min(threading.TIMEOUT_MAX, 86400.0)
"""The scheduler thread's longest single wait, in seconds (it wakes and waits again)."""

_COMPACT_MIN = 64
"""Removed entries are purged from the heap once it holds this many and twice the live ones."""


def check_timeout(seconds: float | None, name: str = "timeout") -> float | None:
    """Return ``seconds`` if it is ``None`` or a number >= 0; raise :class:`ValueError` for a
    negative number or NaN (a timeout of -1 s is a mistake, not "already expired")."""
    if seconds is not None and not seconds >= 0:
        raise ValueError(f"{name} must be a number of seconds >= 0 or None, not {seconds!r}")
    return seconds


class Deadline:
    """A scheduled callback; :meth:`cancel` prevents it from running if it has not started."""

    __slots__ = ("when", "_callback", "_seq", "_scheduler")

    def __init__(
        self, when: float, callback: Callable[[], object], seq: int, scheduler: _Scheduler
    ) -> None:
        self.when = when
        self._callback: Callable[[], object] | None = callback
        self._seq = seq
        self._scheduler = scheduler

    def __lt__(self, other: Deadline) -> bool:
        return (self.when, self._seq) < (other.when, other._seq)

    @property
    def active(self) -> bool:
        """True until the callback has been taken to run or the deadline was cancelled."""
        return self._callback is not None

    def cancel(self) -> bool:
        """Cancel the deadline; True if the callback had not been taken to run yet."""
        return self._scheduler.cancel(self)


class _Scheduler:
    """The heap and its thread; one instance serves the process (others only in tests).

    ``clock`` (monotonic seconds) and ``linger`` can be replaced to test the thread's
    lifetime without waiting in real time; the thread then still blocks on real
    :meth:`threading.Condition.wait` calls and re-reads the clock whenever it is woken.
    """

    def __init__(
        self,
        *,
        linger: float = IDLE_LINGER,
        clock: Callable[[], float] = time.monotonic,
        thread_name: str = "mcp_sync-deadlines",
    ) -> None:
        self._linger = linger
        self._clock = clock
        self._thread_name = thread_name
        self._seq = itertools.count()
        self._reset()

    def _reset(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._heap: list[Deadline] = []
        self._live = 0
        self._thread: threading.Thread | None = None
        self._wake_at = -float("inf")  # when the thread's current wait ends (if it is waiting)
        self._idle_since: float | None = None  # when the last live entry went away

    def schedule(self, delay: float, callback: Callable[[], object]) -> Deadline:
        entry = Deadline(self._clock() + max(0.0, delay), callback, next(self._seq), self)
        with self._cond:
            heapq.heappush(self._heap, entry)
            self._live += 1
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name=self._thread_name, daemon=True
                )
                self._thread.start()
            elif entry.when < self._wake_at:
                self._cond.notify_all()
        return entry

    def cancel(self, entry: Deadline) -> bool:
        with self._cond:
            if entry._callback is None:
                return False
            entry._callback = None
            self._live -= 1
            if self._live == 0:
                self._idle_since = self._clock()
                if self._wake_at > self._idle_since + self._linger:
                    self._cond.notify_all()  # it would oversleep its linger
            if len(self._heap) >= _COMPACT_MIN and len(self._heap) > 2 * self._live:
                self._heap = [e for e in self._heap if e._callback is not None]
                heapq.heapify(self._heap)
            return True

    def pending(self) -> int:
        with self._cond:
            return self._live

    def alive(self) -> bool:
        with self._cond:
            return self._thread is not None

    def stop_idle(self, timeout: float | None) -> bool:
        with self._cond:
            if self._live:
                return False
            thread, self._thread = self._thread, None
            self._cond.notify_all()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
            return not thread.is_alive()
        return True

    def _after_fork_in_child(self) -> None:
        # the parent's deadlines belong to its requests and threads, none of which exist here
        for entry in self._heap:
            entry._callback = None
        self._reset()

    def _run(self) -> None:
        me = threading.current_thread()
        while True:
            with self._cond:
                while True:
                    if self._thread is not me:  # stopped while idle
                        return
                    while self._heap and self._heap[0]._callback is None:
                        heapq.heappop(self._heap)
                    now = self._clock()
                    if self._live == 0:
                        self._heap.clear()
                        if self._idle_since is None:
                            self._idle_since = now
                        wait_until = self._idle_since + self._linger
                        if wait_until <= now:
                            self._thread = None
                            return
                    else:
                        self._idle_since = None
                        wait_until = self._heap[0].when
                        if wait_until <= now:
                            entry = heapq.heappop(self._heap)
                            callback, entry._callback = entry._callback, None
                            self._live -= 1
                            if self._live == 0:
                                self._idle_since = now
                            break
                    # an infinite or huge timeout is "no deadline yet": wait in steps the
                    # platform can represent (beyond that, Condition.wait raises OverflowError)
                    # (_wake_at may be stale while the thread runs: that only costs a spare notify)
                    self._wake_at = wait_until
                    self._cond.wait(min(wait_until - now, _LONGEST_WAIT))
            try:
                assert callback is not None
                callback()
            except BaseException:
                # a failing callback (SystemExit too) must not stop the other deadlines
                _log.exception("deadline callback failed")


_SCHEDULER = _Scheduler()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_SCHEDULER._after_fork_in_child)


def schedule(delay: float, callback: Callable[[], object]) -> Deadline:
    """Run ``callback`` on the scheduler thread after ``delay`` seconds (never under a lock).

    Callbacks must be short: they share one thread. mcp_sync's own callbacks only flip state
    and hand work elsewhere.
    """
    return _SCHEDULER.schedule(delay, callback)


def pending_deadlines() -> int:
    """How many deadlines are scheduled and neither cancelled nor taken to run yet."""
    return _SCHEDULER.pending()


def scheduler_thread_alive() -> bool:
    """True while the scheduler thread exists: while a deadline is pending, and for up to
    :data:`IDLE_LINGER` seconds after the last one is gone."""
    return _SCHEDULER.alive()


def stop_idle_scheduler(timeout: float | None = None) -> bool:
    """End the scheduler thread now if no deadline is pending, waiting up to ``timeout``
    seconds for it to exit; True if no scheduler thread is left.

    With a deadline pending nothing is stopped and the result is False. A deadline
    scheduled later starts a new thread, so this is always safe to call; it exists for
    tests and for programs that check that they leave no thread behind.
    """
    return _SCHEDULER.stop_idle(timeout)
