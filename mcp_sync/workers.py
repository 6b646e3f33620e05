"""A small bounded worker pool, and an ordered runner for user callbacks.

The pool starts threads on demand up to ``max_workers`` and never more; it can be shut down
with a bounded join (a handler that ignores its cancellation cannot hang ``close()``).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import deque
from contextlib import contextmanager
from typing import Any, Callable, Iterator

__all__ = ["WorkerPool", "CallbackThread", "MAX_QUEUED_CALLBACKS"]

_log = logging.getLogger("mcp_sync.workers")


class WorkerPool:
    """A bounded pool of daemon threads fed from one queue."""

    def __init__(self, max_workers: int, name: str) -> None:
        if max_workers < 1:
            raise ValueError("max_workers must be at least 1")
        self.max_workers = max_workers
        self._name = name
        self._queue: queue.SimpleQueue[tuple[Callable[..., Any], tuple[Any, ...]] | None] = (
            queue.SimpleQueue()
        )
        self._idle = 0  # workers waiting for work, guarded by _lock
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._shutdown = False

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        """Queue ``fn(*args)``; raises RuntimeError after :meth:`shutdown`."""
        with self._lock:
            if self._shutdown:
                raise RuntimeError("worker pool is shut down")
            self._queue.put((fn, args))
            if self._idle > 0:
                self._idle -= 1  # that worker will take this item
                return
            if len(self._threads) < self.max_workers:
                thread = threading.Thread(
                    target=self._work,
                    name=f"{self._name}-worker-{len(self._threads) + 1}",
                    daemon=True,
                )
                self._threads.append(thread)
                thread.start()

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            fn, args = item
            try:
                fn(*args)
            except BaseException:  # never let one task kill a worker
                _log.exception("worker task %r failed", fn)
            del item, fn, args
            with self._lock:
                self._idle += 1

    def shutdown(self, timeout: float | None = None) -> list[threading.Thread]:
        """Stop accepting work, let queued work finish, join the threads.

        Returns the threads still alive after ``timeout`` seconds (empty when all joined).
        """
        with self._lock:
            if not self._shutdown:
                self._shutdown = True
                for _ in self._threads:
                    self._queue.put(None)
            threads = list(self._threads)
        end = None if timeout is None else time.monotonic() + timeout
        for thread in threads:
            if thread is threading.current_thread():
                continue
            thread.join(None if end is None else max(0.0, end - time.monotonic()))
        return [t for t in threads if t.is_alive() and t is not threading.current_thread()]


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
        self._cond = threading.Condition(threading.Lock())
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
            self._thread = threading.Thread(target=self._drain, name=f"{self._name}-callbacks", daemon=True)
            thread = self._thread
        thread.start()
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
