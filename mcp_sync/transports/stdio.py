"""The stdio transport for a server process: this process's own stdin and stdout.

stdout must carry only MCP messages, so the transport writes to the raw binary stdout and the
library logs only to stderr. Reading uses :class:`~.base.FdLineReader`, so :meth:`~StdioTransport.close`
stops a reader blocked on stdin.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator
from typing import BinaryIO

from .base import FdLineReader

__all__ = ["StdioTransport", "claim_stdout"]


@contextlib.contextmanager
def claim_stdout() -> Iterator[BinaryIO]:
    """Reserve this process's stdout for MCP messages while the block runs.

    Yields a binary file on the real stdout, and points file descriptor 1 at stderr: a
    ``print()`` in a handler, a library that logs to stdout, or a child process that
    inherits the descriptor then writes to stderr instead of corrupting the protocol.
    Descriptor 1 is restored afterwards.
    """
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    out = os.fdopen(os.dup(saved), "wb", buffering=0)
    try:
        yield out
    finally:
        try:
            sys.stdout.flush()
        except (OSError, ValueError):
            pass
        out.close()
        os.dup2(saved, 1)
        os.close(saved)


class StdioTransport:
    """Lines in on ``stdin``, lines out on ``stdout`` (binary, UTF-8, one message a line)."""

    def __init__(self, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> None:
        self._in = stdin if stdin is not None else sys.stdin.buffer
        self._out = stdout if stdout is not None else sys.stdout.buffer
        self._reader = FdLineReader(self._in.fileno())
        self._write_lock = threading.Lock()
        self._closed = False

    def read_line(self) -> bytes | None:
        """Next line from stdin, or ``None`` at end of input or after :meth:`close`."""
        return self._reader.read_line()

    def write(self, data: bytes) -> None:
        """Write one line to stdout and flush it."""
        if self._closed:
            raise BrokenPipeError("stdio transport is closed")
        with self._write_lock:
            fd = self._out.fileno()
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]

    def close(self) -> None:
        """Stop reading; stdin and stdout themselves are left open for the process."""
        if self._closed:
            return
        self._closed = True
        self._reader.wake()
