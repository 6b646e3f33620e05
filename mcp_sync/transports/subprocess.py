"""The client side of stdio: spawn a server process and talk to it over its stdin/stdout.

Shutdown follows the MCP lifecycle: close the child's stdin, wait ``close_grace`` seconds,
then SIGTERM, wait ``terminate_grace`` seconds, then SIGKILL. The child is always reaped.

The child's stderr carries logs, which are not errors. It is read from a pipe by one thread
and copied to this process's stderr as it arrives (the default), or captured line by line
into a callback, or discarded; in every mode its last :data:`STDERR_TAIL_BYTES` are kept, so
that a server that exits on its own (a typo in its command, a missing module) fails the
pending calls with :class:`~mcp_sync.errors.ServerExited`, which quotes its exit status and
the end of its stderr.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Literal

from ..errors import ServerExited
from .base import FdLineReader, enlarge_pipe

__all__ = ["SubprocessTransport", "StderrMode", "STDERR_TAIL_BYTES", "STDERR_LINE_BYTES"]

_log = logging.getLogger("mcp_sync.subprocess")

StderrMode = Literal["inherit", "capture", "discard"] | Callable[[str], object]

STDERR_TAIL_BYTES = 4096
"""How much of the end of a child's stderr is kept for :class:`~mcp_sync.errors.ServerExited`."""

STDERR_LINE_BYTES = 64 * 1024
"""A stderr line longer than this is passed on (``"capture"`` or a callback) in pieces."""

EXIT_WAIT = 1.0
"""Seconds to wait, once the child closed its stdout, for it to exit and say why."""


class SubprocessTransport:
    """Spawns ``command`` and exchanges lines with it.

    Args:
        command: the program and its arguments.
        env: extra environment variables, merged over this process's environment.
        cwd: working directory of the child.
        stderr: ``"inherit"`` (default: copied to this process's stderr as it arrives),
            ``"capture"`` (kept in ``stderr_lines``, the last 1,000 lines),
            ``"discard"``, or a callable that receives each decoded line. Every mode keeps
            the last :data:`STDERR_TAIL_BYTES` (:attr:`stderr_tail`).
        new_session: start the child in a session of its own (POSIX), so that a Ctrl-C at
            the terminal reaches only this process, which cancels its calls on the wire and
            shuts the child down in order; SIGTERM and SIGKILL then go to the child's whole
            process group.
        close_grace: seconds to wait after closing stdin before SIGTERM.
        terminate_grace: seconds to wait after SIGTERM before SIGKILL.
    """

    def __init__(
        self,
        command: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        stderr: StderrMode = "inherit",
        new_session: bool = True,
        close_grace: float = 2.0,
        terminate_grace: float = 2.0,
    ) -> None:
        if not command:
            raise ValueError("command must not be empty")
        self.command = list(command)
        self._group = new_session and os.name == "posix"
        self.close_grace = close_grace
        self.terminate_grace = terminate_grace
        self.stderr_lines: deque[str] = deque(maxlen=1000)
        full_env = None
        if env is not None:
            full_env = dict(os.environ)
            full_env.update(env)
        self._forward_stderr = stderr == "inherit"
        self._on_stderr: Callable[[str], object] | None = (
            self.stderr_lines.append
            if stderr == "capture"
            else stderr
            if callable(stderr)
            else None
        )
        self._stderr_tail = bytearray()
        self._tail_lock = threading.Lock()
        self.process = subprocess.Popen(
            self.command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=full_env,
            cwd=cwd,
            bufsize=0,
            start_new_session=self._group,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        enlarge_pipe(self.process.stdin.fileno())
        enlarge_pipe(self.process.stdout.fileno())
        self._stdin = self.process.stdin
        self._reader = FdLineReader(self.process.stdout.fileno())
        self._write_lock = threading.Lock()
        self._close_lock = threading.Lock()
        self._closed = False
        self._stderr_thread: threading.Thread | None = None
        self._stderr_reader: FdLineReader | None = None
        if self.process.stderr is not None:  # always a pipe; None only for a stand-in Popen
            self._stderr_reader = FdLineReader(self.process.stderr.fileno(), chunk_size=65536)
            self._stderr_thread = threading.Thread(
                target=self._pump_stderr,
                args=(self._stderr_reader,),
                name=f"mcp_sync-stderr-{self.process.pid}",
                daemon=True,
            )
            self._stderr_thread.start()

    @property
    def pid(self) -> int:
        """The child's process id."""
        return self.process.pid

    @property
    def stderr_tail(self) -> str:
        """The last :data:`STDERR_TAIL_BYTES` the child wrote to its stderr (decoded)."""
        with self._tail_lock:
            return bytes(self._stderr_tail).decode("utf-8", "replace")

    def read_line(self) -> bytes | None:
        """Next line from the child's stdout; ``None`` after :meth:`close`.

        Raises :class:`~mcp_sync.errors.ServerExited` when the child ends its stdout on its
        own: with its exit status and the end of its stderr.
        """
        line = self._reader.read_line()
        if line is None and self.process.stdout is not None:
            self.process.stdout.close()  # the reading thread owns the descriptor
            if not self._closed:
                raise self._exited()
        return line

    def _exited(self) -> ServerExited:
        """What to say when the child closed its stdout without being asked to."""
        try:
            code: int | None = self.process.wait(EXIT_WAIT)
        except subprocess.TimeoutExpired:
            code = None
        if code is not None and self._stderr_thread is not None:
            self._stderr_thread.join(EXIT_WAIT)  # its last words are on their way
        if code is None:
            what = f"the server process {self.process.pid} closed its stdout"
        elif code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = str(-code)
            what = f"the server process {self.process.pid} was killed by signal {name}"
        else:
            what = f"the server process {self.process.pid} exited with status {code}"
        tail = self.stderr_tail.rstrip()
        message = (
            f"{what}; the end of its stderr:\n{tail}"
            if tail
            else f"{what} (it wrote nothing to stderr)"
        )
        return ServerExited(message, returncode=code, stderr_tail=tail, what=what)

    def write(self, data: bytes) -> None:
        """Write one line to the child's stdin."""
        with self._write_lock:
            if self._closed:
                raise BrokenPipeError("subprocess transport is closed")
            # unbuffered (raw) file: write() may write only part of the data
            view = memoryview(data)
            try:
                while view:
                    view = view[self._stdin.write(view) :]
            except BrokenPipeError as exc:  # the child is gone: say how it ended, as read_line does
                raise self._exited() from exc

    def _pump_stderr(self, reader: FdLineReader) -> None:
        stream = self.process.stderr
        assert stream is not None
        partial = b""
        try:
            while True:
                chunk = reader.read_chunk()
                if chunk is None:
                    break
                with self._tail_lock:
                    self._stderr_tail += chunk
                    del self._stderr_tail[:-STDERR_TAIL_BYTES]
                if self._forward_stderr:
                    _write_all(2, chunk)
                if self._on_stderr is not None:
                    partial = self._stderr_lines(partial + chunk)
            if partial and self._on_stderr is not None:
                self._emit_stderr(partial)
        finally:
            stream.close()

    def _stderr_lines(self, data: bytes) -> bytes:
        """Pass on each whole line of ``data`` (long ones in pieces); return the rest."""
        *lines, rest = data.split(b"\n")
        for line in lines:
            self._emit_stderr(line)
        while len(rest) > STDERR_LINE_BYTES:
            self._emit_stderr(rest[:STDERR_LINE_BYTES])
            rest = rest[STDERR_LINE_BYTES:]
        return rest

    def _emit_stderr(self, raw: bytes) -> None:
        assert self._on_stderr is not None
        try:
            self._on_stderr(raw.decode("utf-8", "replace").rstrip("\r"))
        except Exception:
            _log.exception("stderr callback failed")

    def _signal(self, signum: int) -> None:
        try:
            if self._group:
                os.killpg(self.process.pid, signum)
            else:
                self.process.send_signal(signum)
        except (ProcessLookupError, PermissionError):
            pass

    def close(self) -> None:
        """Close stdin, then SIGTERM, then SIGKILL, each after its grace period; reap the child."""
        with self._close_lock:
            if self._closed:
                return
            with self._write_lock:
                self._closed = True
                try:
                    self._stdin.close()
                except OSError:
                    pass
        proc = self.process
        try:
            proc.wait(self.close_grace)
        except subprocess.TimeoutExpired:
            _log.debug("server %s did not exit after stdin closed; terminating", proc.pid)
            self._signal(signal.SIGTERM)
            try:
                proc.wait(self.terminate_grace)
            except subprocess.TimeoutExpired:
                _log.warning("server %s ignored SIGTERM; killing", proc.pid)
                self._signal(signal.SIGKILL)
                proc.wait()
        self._reader.wake()
        pump = self._stderr_thread
        if pump is not None and pump is not threading.current_thread():
            pump.join(1.0)  # the child's last words
            if pump.is_alive() and self._stderr_reader is not None:
                # a process the server left behind still holds its stderr: stop reading it
                self._stderr_reader.wake()
                pump.join(1.0)


def _write_all(fd: int, data: bytes) -> None:
    """Write ``data`` to ``fd`` whole; give up quietly if it is closed."""
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view) :]
    except OSError:
        pass
