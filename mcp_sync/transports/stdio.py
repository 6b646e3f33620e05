"""The stdio transport for a server process: this process's own stdin and stdout.

stdout must carry only MCP messages, so the transport writes to the raw binary stdout and the
library logs only to stderr. Reading uses :class:`~.base.FdLineReader`, so :meth:`close`
stops a reader blocked on stdin.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import BinaryIO

from .base import FdLineReader

__all__ = ["StdioTransport"]


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
