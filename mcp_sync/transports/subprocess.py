"""The client side of stdio: spawn a server process and talk to it over its stdin/stdout.

Shutdown follows the MCP lifecycle: close the child's stdin, wait ``close_grace`` seconds,
then SIGTERM, wait ``terminate_grace`` seconds, then SIGKILL. The child is always reaped.
The child's stderr is inherited by default (it carries logs, which are not errors), or
captured line by line into a callback, or discarded.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import threading
from collections import deque
from typing import Callable, Literal, Mapping, Sequence, Union

from .base import FdLineReader, enlarge_pipe

__all__ = ["SubprocessTransport", "StderrMode"]

_log = logging.getLogger("mcp_sync.subprocess")

StderrMode = Union[Literal["inherit", "capture", "discard"], Callable[[str], object]]


class SubprocessTransport:
    """Spawns ``command`` and exchanges lines with it.

    Args:
        command: the program and its arguments.
        env: extra environment variables, merged over this process's environment.
        cwd: working directory of the child.
        stderr: ``"inherit"`` (default), ``"capture"`` (kept in :attr:`stderr_lines`, the last
            1,000 lines), ``"discard"``, or a callable that receives each decoded line.
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
        stderr_target: int | None
        if stderr == "inherit":
            stderr_target = None
        elif stderr == "discard":
            stderr_target = subprocess.DEVNULL
        else:
            stderr_target = subprocess.PIPE
        self._on_stderr: Callable[[str], object] | None = (
            self.stderr_lines.append if stderr == "capture" else stderr if callable(stderr) else None
        )
        self.process = subprocess.Popen(
            self.command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr_target,
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
        if self.process.stderr is not None:
            self._stderr_thread = threading.Thread(
                target=self._pump_stderr, name=f"mcp_sync-stderr-{self.process.pid}", daemon=True
            )
            self._stderr_thread.start()

    @property
    def pid(self) -> int:
        """The child's process id."""
        return self.process.pid

    def read_line(self) -> bytes | None:
        """Next line from the child's stdout; ``None`` when it exits or after :meth:`close`."""
        line = self._reader.read_line()
        if line is None and self.process.stdout is not None:
            self.process.stdout.close()  # the reading thread owns the descriptor
        return line

    def write(self, data: bytes) -> None:
        """Write one line to the child's stdin."""
        with self._write_lock:
            if self._closed:
                raise BrokenPipeError("subprocess transport is closed")
            # unbuffered (raw) file: write() may write only part of the data
            view = memoryview(data)
            while view:
                view = view[self._stdin.write(view) :]

    def _pump_stderr(self) -> None:
        stream = self.process.stderr
        assert stream is not None
        for raw in iter(stream.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            try:
                if self._on_stderr is not None:
                    self._on_stderr(line)
            except Exception:
                _log.exception("stderr callback failed")
        stream.close()

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
        if self._stderr_thread is not None and self._stderr_thread is not threading.current_thread():
            self._stderr_thread.join(1.0)

