"""An in-memory pair of connected transports, for tests and in-process embedding."""

from __future__ import annotations

import queue
import threading

__all__ = ["MemoryTransport", "memory_pair"]


class MemoryTransport:
    """One end of an in-memory connection made by :func:`memory_pair`."""

    def __init__(self, inbox: queue.SimpleQueue[bytes | None], name: str) -> None:
        self._inbox = inbox
        self._peer: MemoryTransport | None = None
        self._closed = threading.Event()
        self.name = name

    def read_line(self) -> bytes | None:
        """Next line from the peer, or ``None`` once either end closed."""
        if self._closed.is_set():
            return None
        line = self._inbox.get()
        if line is None:
            self._closed.set()
        return line

    def write(self, data: bytes) -> None:
        """Deliver ``data`` (one line, newline included) to the peer."""
        if self._closed.is_set() or self._peer is None or self._peer._closed.is_set():
            raise BrokenPipeError("memory transport is closed")
        self._peer._inbox.put(data.rstrip(b"\n"))

    def close(self) -> None:
        """Close both directions: this end's reader and the peer's reader see the end."""
        if self._closed.is_set():
            return
        self._closed.set()
        self._inbox.put(None)
        if self._peer is not None:
            self._peer._inbox.put(None)


def memory_pair() -> tuple[MemoryTransport, MemoryTransport]:
    """Two transports wired to each other: what one writes, the other reads."""
    a = MemoryTransport(queue.SimpleQueue(), "a")
    b = MemoryTransport(queue.SimpleQueue(), "b")
    a._peer, b._peer = b, a
    return a, b
