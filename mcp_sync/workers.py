"""A small bounded worker pool, and an ordered runner for user callbacks.

The pool starts threads on demand up to ``max_workers`` and never more, lets them exit when
idle, and can be shut down with a bounded join (a handler that ignores its cancellation
cannot hang ``close()``). One pool may serve many connections (the HTTP app shares one
between all its sessions).
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from . import deadlines

__all__ = [
    "WorkerPool",
    "PoolStats",
    "CallbackThread",
    "MAX_QUEUED_CALLBACKS",
    "DEFAULT_IDLE_TIMEOUT",
    "DEFAULT_WAIT_WARNING",
]

_log = logging.getLogger("mcp_sync.workers")


DEFAULT_IDLE_TIMEOUT = 1.0
"""Seconds a worker with nothing to do waits for work before its thread exits."""

DEFAULT_WAIT_WARNING = 5.0
"""Seconds a task may wait for a free worker before the pool logs a warning."""


@dataclass(frozen=True)
class PoolStats:
    """A snapshot of a :class:`WorkerPool` (see :meth:`WorkerPool.stats`).

    Attributes:
        max_workers: the bound on the pool's threads.
        threads: worker threads alive (busy or idle).
        busy: workers running a task.
        idle: workers waiting for a task (each exits after ``idle_timeout`` seconds).
        queued: tasks waiting for a free worker.
        longest_wait: seconds the oldest queued task has waited so far (0.0 when none).
    """

    max_workers: int
    threads: int
    busy: int
    idle: int
    queued: int
    longest_wait: float


class WorkerPool:
    """A bounded pool of daemon threads that exist only while there is work.

    A thread is started when a task is submitted and no worker is free, up to
    ``max_workers``; a worker that finds no task for ``idle_timeout`` seconds exits, so an
    idle pool holds no thread. Tasks run in submission order (first queued, first started).

    When a task has waited for a worker for more than ``wait_warning`` seconds (every worker
    busy -- typically with handlers that ignore their cancellation), the pool logs a warning
    on the ``mcp_sync.workers`` logger, once per waiting task, naming the pool and its state
    (``None`` turns the warning off). :meth:`stats` gives the same numbers at any time.

    Args:
        max_workers: the bound on threads.
        name: prefix of thread names (``<name>-worker-<n>``) and of warnings.
        idle_timeout: seconds an idle worker waits for work before exiting.
        wait_warning: the waiting time that triggers a warning.
    """

    def __init__(
        self,
        max_workers: int,
        name: str,
        *,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        wait_warning: float | None = DEFAULT_WAIT_WARNING,
    ) -> None:
        if max_workers < 1:
            raise ValueError("max_workers must be at least 1")
        self.max_workers = max_workers
        self.name = name
        self.idle_timeout = idle_timeout
        self.wait_warning = wait_warning
        self._cond = threading.Condition()  # an RLock: its ownership check is C, a Lock's is Python
        # (monotonic time queued, task, args), oldest first
        self._items: deque[tuple[float, Callable[..., Any], tuple[Any, ...]]] = deque()
        self._threads: set[threading.Thread] = set()
        self._idle = 0  # workers waiting for a task
        self._busy = 0  # workers running a task
        self._started = 0  # threads ever started (for their names)
        self._shutdown = False
        self._watch: deadlines.Deadline | None = None  # the next wait-warning check
        self._watch_seq = 0  # which scheduled check is the current one
        self._warned_through = float("-inf")  # queue time of the last task warned about

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        """Queue ``fn(*args)``; raises RuntimeError after :meth:`shutdown`."""
        with self._cond:
            if self._shutdown:
                raise RuntimeError("worker pool is shut down")
            self._items.append((time.monotonic(), fn, args))
            if len(self._items) <= self._idle:
                self._cond.notify()  # an idle worker takes it
                return
            if len(self._threads) < self.max_workers:
                self._started += 1
                thread = threading.Thread(
                    target=self._work, name=f"{self.name}-worker-{self._started}", daemon=True
                )
                self._threads.add(thread)
                try:
                    thread.start()
                    return
                except RuntimeError:  # the system refuses another thread
                    self._threads.discard(thread)
                    if not self._threads:
                        self._items.pop()  # nobody would ever run it
                        raise
                    _log.warning(
                        "%s: cannot start another worker; the task waits for a busy one", self.name
                    )
            self._arm_watch()  # every worker is busy: the task waits

    def _work(self) -> None:
        me = threading.current_thread()
        cond = self._cond
        with cond:
            while True:
                if self._items:
                    _, fn, args = self._items.popleft()
                    self._busy += 1
                    if not self._items and self._watch is not None:
                        self._watch.cancel()  # nothing waits any more
                        self._watch = None
                    cond.release()
                    try:
                        fn(*args)
                    except BaseException:  # never let one task kill a worker
                        _log.exception("%s: worker task %r failed", self.name, fn)
                    finally:
                        del fn, args
                        cond.acquire()
                        self._busy -= 1
                    continue
                if self._shutdown:
                    break
                self._idle += 1
                woken = cond.wait(self.idle_timeout)
                self._idle -= 1
                if not woken and not self._items:
                    break  # idle for idle_timeout: the thread exits
            self._threads.discard(me)

    # -- waiting too long ---------------------------------------------------------------------
    def _arm_watch(self) -> None:
        """Schedule the next wait-warning check, if one is due. Called with the lock held."""
        if self.wait_warning is None or self._watch is not None or self._shutdown:
            return
        for queued_at, _, _ in self._items:
            if queued_at > self._warned_through:
                delay = queued_at + self.wait_warning - time.monotonic()
                self._watch_seq += 1
                seq = self._watch_seq
                self._watch = deadlines.schedule(delay, functools.partial(self._check_waits, seq))
                return

    def _check_waits(self, seq: int) -> None:
        assert self.wait_warning is not None
        with self._cond:
            if seq != self._watch_seq or self._watch is None:
                return  # cancelled after it was taken to run; a newer check may be pending
            self._watch = None
            now = time.monotonic()
            late: list[float] = []
            for queued_at, _, _ in self._items:  # oldest first
                if now - queued_at < self.wait_warning:
                    break
                if queued_at > self._warned_through:
                    late.append(queued_at)
            if late:
                self._warned_through = late[-1]
                stats = self._stats_locked(now)
            self._arm_watch()
        if late:
            _log.warning(
                "%s: %d task(s) waited more than %g s for a worker (oldest %.1f s): %d of %d "
                "workers busy, %d queued -- are handlers ignoring their cancellation?",
                self.name,
                len(late),
                self.wait_warning,
                now - late[0],
                stats.busy,
                stats.max_workers,
                stats.queued,
            )

    # -- state --------------------------------------------------------------------------------
    def queued(self) -> int:
        """How many tasks wait for a free worker now (:attr:`PoolStats.queued`, without the
        rest of a snapshot: the HTTP app asks before every request)."""
        return len(self._items)

    def stats(self) -> PoolStats:
        """A consistent snapshot of the pool's threads and queue."""
        with self._cond:
            return self._stats_locked(time.monotonic())

    def _stats_locked(self, now: float) -> PoolStats:
        return PoolStats(
            max_workers=self.max_workers,
            threads=len(self._threads),
            busy=self._busy,
            idle=self._idle,
            queued=len(self._items),
            longest_wait=max(0.0, now - self._items[0][0]) if self._items else 0.0,
        )

    def shutdown(self, timeout: float | None = None) -> list[threading.Thread]:
        """Stop accepting work, let queued work finish, join the threads.

        Returns the threads still alive after ``timeout`` seconds (empty when all joined).
        """
        with self._cond:
            self._shutdown = True
            self._cond.notify_all()
            watch, self._watch = self._watch, None
            threads = list(self._threads)
        if watch is not None:
            watch.cancel()
        end = None if timeout is None else time.monotonic() + timeout
        current = threading.current_thread()
        for thread in threads:
            if thread is not current:
                thread.join(None if end is None else max(0.0, end - time.monotonic()))
        return [t for t in threads if t.is_alive() and t is not current]


MAX_QUEUED_CALLBACKS = 1000
"""Default bound of a connection's callback queue (notifications, progress, cancellation
observers waiting for the callback thread). When it is full the reader waits."""


class CallbackThread:
    """Runs user callbacks one at a time, in submission order, on a thread of their own.

    The thread exists only while callbacks are queued (it exits when the queue is empty),
    and it is separate from the handler pool: progress, notifications and ``on_cancel``
    callbacks are delivered promptly even while every worker is busy with a handler.

    The queue is bounded by ``max_queued`` for submissions made with ``wait=True`` (the
    connection's reader): such a submission waits while the queue is full, so a peer that
    floods notifications is slowed down by the pipe instead of filling memory. One case must
    not wait, or the connection would deadlock: the callback being run is itself blocked on a
    reply from this connection (see :meth:`waiting_for_reply`), which only the waiting reader
    could read. Then a submission to a full queue is refused (``submit`` returns False) and
    the caller counts it as dropped.
    """

    def __init__(self, name: str, max_queued: int = MAX_QUEUED_CALLBACKS) -> None:
        if max_queued < 1:
            raise ValueError("max_queued must be at least 1")
        self._name = name
        self.max_queued = max_queued
        self._cond = threading.Condition()  # an RLock: its ownership check is C, a Lock's is Python
        self._items: deque[tuple[Callable[..., Any], tuple[Any, ...]]] = deque()
        self._thread: threading.Thread | None = None
        self._replies_awaited = 0  # > 0 while the running callback waits for a reply
        self._stopped = False

    def __len__(self) -> int:
        """Callbacks queued and not started yet."""
        return len(self._items)

    def submit(self, fn: Callable[..., Any], *args: Any, wait: bool = False) -> bool:
        """Queue ``fn(*args)`` behind every earlier submission.

        With ``wait=True`` block while ``max_queued`` callbacks are queued; return False
        (nothing queued) if the queue is full while the running callback waits for a reply.
        Without it, queue at once whatever the length (for callbacks bounded by other means,
        such as one per request). Returns True when queued.
        """
        with self._cond:
            if wait:
                while len(self._items) >= self.max_queued and not self._stopped:
                    if self._replies_awaited:
                        return False
                    self._cond.wait()
            self._items.append((fn, args))
            if self._thread is not None:
                return True
            self._thread = threading.Thread(
                target=self._drain, name=f"{self._name}-callbacks", daemon=True
            )
            # started under the lock: join() must never see a thread that is not started yet
            # (the new thread's first step waits for this lock, so nothing can deadlock)
            self._thread.start()
        return True

    def is_current(self) -> bool:
        """True when called from a callback this runner is running."""
        return threading.current_thread() is self._thread

    @contextmanager
    def waiting_for_reply(self) -> Iterator[None]:
        """Mark the running callback as blocked on a reply from the connection (the caller
        checked :meth:`is_current`): a full queue then refuses submissions instead of
        making the reader wait for a callback that waits for the reader."""
        with self._cond:
            self._replies_awaited += 1
            self._cond.notify_all()
        try:
            yield
        finally:
            with self._cond:
                self._replies_awaited -= 1

    def stop_waiting(self) -> None:
        """Let every blocked and later ``submit(wait=True)`` through (the connection ended)."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()

    def _drain(self) -> None:
        while True:
            with self._cond:
                if not self._items:
                    self._thread = None
                    return
                fn, args = self._items.popleft()
                self._cond.notify_all()
            try:
                fn(*args)
            except BaseException:  # SystemExit too: the thread must go on draining the queue
                _log.exception("callback %r failed", fn)
            del fn, args

    def join(self, timeout: float | None = None) -> threading.Thread | None:
        """Wait for queued callbacks to run; returns the thread if it is still running."""
        with self._cond:
            thread = self._thread
        if thread is None or thread is threading.current_thread():
            return None
        thread.join(timeout)
        return thread if thread.is_alive() else None
