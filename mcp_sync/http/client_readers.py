"""The threads that POST 2026-07-28 requests and read their answers, reused from call to call.

HTTP/1.1 over a blocking client (httpx, or the plain path of
:mod:`~mcp_sync.http.plain_http`) needs one blocked reader per open response, so a request
in flight holds a thread. Starting a thread per request costs more than the rest of
a call on a busy machine (``Thread.start`` waits for the new thread to run), so the readers
are kept: a reader that finished its request waits up to :data:`READER_IDLE` seconds for the
next one, and at most :data:`MAX_IDLE_READERS` wait at once; a request that finds no idle
reader starts a new one. Threads therefore number the requests in flight (no more), plus at
most :data:`MAX_IDLE_READERS` idle ones, which exit when idle for long.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["MAX_IDLE_READERS", "READER_IDLE", "ReaderPool"]

_log = logging.getLogger("mcp_sync.http_client")

MAX_IDLE_READERS = 16
"""Most reader threads of one HTTP client kept waiting for the next request."""

READER_IDLE = 10.0
"""Seconds an idle reader thread waits for the next request before it exits."""

Job = Callable[[], Any]


class ReaderPool:
    """Runs each job on an idle reader thread, or on a new one when none is idle."""

    def __init__(
        self,
        name: str = "mcp_sync-http-reader",
        *,
        max_idle: int = MAX_IDLE_READERS,
        idle_timeout: float = READER_IDLE,
    ) -> None:
        self._name = name
        self._max_idle = max_idle
        self._idle_timeout = idle_timeout
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        # readers waiting for a job and not yet promised one: idle + queued == waiting
        self._idle = 0
        self._threads: set[threading.Thread] = set()
        self._closed = False

    def submit(self, job: Job) -> bool:
        """Run ``job`` on a reader; False (not run) once the pool is closed."""
        with self._lock:
            if self._closed:
                return False
            if self._idle > 0:
                self._idle -= 1
                self._jobs.put(job)
                return True
            thread = threading.Thread(target=self._run, args=(job,), name=self._name, daemon=True)
            self._threads.add(thread)
        thread.start()
        return True

    def _run(self, job: Job | None) -> None:
        try:
            while job is not None:
                try:
                    job()
                except Exception:  # pragma: no cover - jobs handle their own failures
                    _log.debug("an HTTP reader job failed", exc_info=True)
                job = self._next()
        finally:
            with self._lock:
                self._threads.discard(threading.current_thread())

    def _next(self) -> Job | None:
        """The next job, or ``None``: exit (closed, enough idle readers, or idle too long)."""
        with self._lock:
            if self._closed or self._idle >= self._max_idle:
                return None
            self._idle += 1
        try:
            return self._jobs.get(timeout=self._idle_timeout)
        except queue.Empty:
            with self._lock:
                try:
                    return self._jobs.get_nowait()  # promised to us as we timed out
                except queue.Empty:
                    self._idle -= 1
                    return None

    @property
    def threads(self) -> int:
        """Reader threads alive now (busy and idle)."""
        with self._lock:
            return len(self._threads)

    def close(self, timeout: float = 5.0) -> None:
        """Stop taking jobs, wake the idle readers and join every reader (each at most
        ``timeout`` seconds: a busy one ends when its response is closed)."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, 0
            threads = list(self._threads)
        for _ in range(idle):
            self._jobs.put(None)
        current = threading.current_thread()
        for thread in threads:
            if thread is not current:
                thread.join(timeout)
