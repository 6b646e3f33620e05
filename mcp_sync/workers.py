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
from typing import Any, Callable

__all__ = ["WorkerPool", "CallbackThread"]

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


class CallbackThread:
    """Runs user callbacks one at a time, in submission order, on a thread of their own.

    The thread exists only while callbacks are queued (it exits when the queue is empty),
    and it is separate from the handler pool: progress, notifications and ``on_cancel``
    callbacks are delivered promptly even while every worker is busy with a handler.
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._lock = threading.Lock()
        self._items: deque[tuple[Callable[..., Any], tuple[Any, ...]]] = deque()
        self._thread: threading.Thread | None = None

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        """Queue ``fn(*args)`` behind every earlier submission."""
        with self._lock:
            self._items.append((fn, args))
            if self._thread is not None:
                return
            self._thread = threading.Thread(target=self._drain, name=f"{self._name}-callbacks", daemon=True)
            thread = self._thread
        thread.start()

    def _drain(self) -> None:
        while True:
            with self._lock:
                if not self._items:
                    self._thread = None
                    return
                fn, args = self._items.popleft()
            try:
                fn(*args)
            except BaseException:  # SystemExit too: the thread must go on draining the queue
                _log.exception("callback %r failed", fn)

    def join(self, timeout: float | None = None) -> threading.Thread | None:
        """Wait for queued callbacks to run; returns the thread if it is still running."""
        with self._lock:
            thread = self._thread
        if thread is None or thread is threading.current_thread():
            return None
        thread.join(timeout)
        return thread if thread.is_alive() else None
