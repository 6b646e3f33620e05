"""The bound on open 2026-07-28 ``subscriptions/listen`` streams of one WSGI app.

Over Streamable HTTP a listen stream is an SSE response held open for as long as the client
listens: it holds a thread of the WSGI server all that time. :class:`ListenSlots` counts them
so that listeners cannot take every thread; the app refuses one more listen with ``503`` and
``Retry-After`` (the server is busy, not the client wrong) before any work is done for it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ["DEFAULT_MAX_LISTEN_STREAMS", "ListenSlots"]

DEFAULT_MAX_LISTEN_STREAMS = 8
"""Default cap on 2026-07-28 listen streams open at once, per app."""


class ListenSlots:
    """A counter of open listen streams with a limit.

    Args:
        limit: streams open at once, at most (at least 1).
    """

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("max_listen_streams must be at least 1")
        self.limit = limit
        self._lock = threading.Lock()
        self._open = 0

    @property
    def open(self) -> int:
        """How many listen streams are open now."""
        with self._lock:
            return self._open

    def acquire(self) -> Callable[[], None] | None:
        """Take a slot: the function that gives it back (calling it again does nothing), or
        ``None`` when all ``limit`` slots are taken."""
        with self._lock:
            if self._open >= self.limit:
                return None
            self._open += 1
        released = threading.Event()

        def release() -> None:
            with self._lock:
                if released.is_set():
                    return
                released.set()
                self._open -= 1

        return release
