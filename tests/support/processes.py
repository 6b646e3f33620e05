"""Run programs the way a user would, with every wait bounded.

:class:`Proc` starts a subprocess (``sys.executable``, ``PYTHONPATH`` = the repository root),
pumps its stdout and stderr line by line on two threads, and lets a test wait for a line
with a deadline (:meth:`Proc.wait_for`), send a signal, and collect the exit code
(:meth:`Proc.finish`). The process runs in its own session, so a process that overstays
its limit is killed together with any server it spawned; the pump threads are always joined.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from support.paths import ROOT


def user_env(**extra: str) -> dict[str, str]:
    """This environment with ``PYTHONPATH`` set to the repository root only."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT)
    env.pop("PYTHONUNBUFFERED", None)  # programs must flush what a user waits for
    env.update(extra)
    return env


@dataclass
class Finished:
    """How a process ended."""

    code: int
    stdout: str
    stderr: str
    seconds: float

    def describe(self) -> str:
        return f"exit {self.code} after {self.seconds:.2f} s\n--- stdout ---\n{self.stdout}\n--- stderr ---\n{self.stderr}"


class Proc:
    """A running program whose output is read line by line with deadlines."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        stdin: bool = False,
    ) -> None:
        self.argv = list(argv)
        self.started = time.monotonic()
        self.popen = subprocess.Popen(
            self.argv,
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env if env is not None else user_env(),
            cwd=str(cwd or ROOT),
            start_new_session=True,  # a Ctrl-C in the test runner's terminal does not reach it
        )
        self._changed = threading.Condition()
        self._lines: dict[str, list[str]] = {"stdout": [], "stderr": []}
        self._pumps = [
            threading.Thread(
                target=self._pump,
                args=(name, stream),
                name=f"pump-{name}-{self.popen.pid}",
                daemon=True,
            )
            for name, stream in (("stdout", self.popen.stdout), ("stderr", self.popen.stderr))
        ]
        for pump in self._pumps:
            pump.start()

    def _pump(self, name: str, stream: IO[bytes] | None) -> None:
        assert stream is not None
        with stream:
            for raw in iter(stream.readline, b""):
                with self._changed:
                    self._lines[name].append(raw.decode("utf-8", "replace"))
                    self._changed.notify_all()

    def text(self, name: str) -> str:
        with self._changed:
            return "".join(self._lines[name])

    def wait_for(self, name: str, fragment: str, timeout: float) -> str:
        """Wait (at most ``timeout`` s) for a line of ``name`` containing ``fragment``."""
        end = time.monotonic() + timeout
        with self._changed:
            while True:
                for line in self._lines[name]:
                    if fragment in line:
                        return line
                left = end - time.monotonic()
                if left <= 0 or (
                    self.popen.poll() is not None and not any(p.is_alive() for p in self._pumps)
                ):
                    break
                self._changed.wait(min(left, 0.1))
        self.kill()
        raise AssertionError(
            f"no {name} line containing {fragment!r} within {timeout} s\n{self.finish(5).describe()}"
        )

    def line_at(self, name: str, index: int, timeout: float) -> str:
        """Wait (at most ``timeout`` s) for line number ``index`` (from 0) of ``name``."""
        end = time.monotonic() + timeout
        with self._changed:
            while len(self._lines[name]) <= index:
                left = end - time.monotonic()
                if left <= 0 or not self._pumps[0 if name == "stdout" else 1].is_alive():
                    break
                self._changed.wait(min(left, 0.1))
            else:
                return self._lines[name][index]
        self.kill()
        raise AssertionError(
            f"no {name} line {index} within {timeout} s\n{self.finish(5).describe()}"
        )

    def write_line(self, data: bytes) -> None:
        assert self.popen.stdin is not None
        self.popen.stdin.write(data + b"\n")
        self.popen.stdin.flush()

    def close_stdin(self) -> None:
        if self.popen.stdin is not None and not self.popen.stdin.closed:
            self.popen.stdin.close()

    def send_signal(self, sig: int) -> None:
        self.popen.send_signal(sig)

    def kill(self) -> None:
        """Kill the process and everything still alive in its session (its process group)."""
        try:
            os.killpg(self.popen.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if self.popen.poll() is None:
            self.popen.kill()

    def finish(self, timeout: float) -> Finished:
        """Wait (at most ``timeout`` s) for the exit; a process that overstays is killed and
        reported as exit code -9. Always joins the pump threads."""
        code: int
        try:
            code = self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            self.popen.wait(5)
            code = -9
        self.close_stdin()
        for pump in self._pumps:
            pump.join(5)
            if pump.is_alive():  # a grandchild still holds the pipe: kill the whole session
                self.kill()
                pump.join(5)
        return Finished(
            code, self.text("stdout"), self.text("stderr"), time.monotonic() - self.started
        )

    def __enter__(self) -> Proc:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()
        self.finish(5)


def run(argv: Sequence[str], timeout: float, **options: object) -> Finished:
    """Run a program to completion (killed after ``timeout`` s) and return how it ended."""
    with Proc(argv, **options) as proc:  # type: ignore[arg-type]
        result = proc.finish(timeout)
    assert result.code != -9, f"{argv} did not finish within {timeout} s\n{result.describe()}"
    return result
