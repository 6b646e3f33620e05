"""Helpers for the interoperability tests against the official ``mcp`` SDK.

* :data:`OFFICIAL_SERVER`, :data:`OFFICIAL_CLIENT`, :data:`SYNC_SERVER`: the peer commands.
* :func:`wait_for_marker` polls a peer's events file (another process writes it, so polling
  with a deadline is the only way to observe it).
* :func:`prewarm_workers` starts a long-lived client's whole worker pool up front.
* :class:`OfficialClientRun` runs the official client CLI as a bounded subprocess.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from support.paths import PEERS, PYTHON, ROOT
from support.waiting import PEER_WAIT

OFFICIAL_SERVER = [PYTHON, str(PEERS / "official_server.py")]
OFFICIAL_CLIENT = [PYTHON, str(PEERS / "official_client.py")]
SYNC_SERVER = [PYTHON, str(PEERS / "sync_server.py")]


# -- events files written by the peers ---------------------------------------------------------
def read_events(path: Path) -> list[str]:
    """The marker lines a peer appended to its events file so far."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    return [line for line in text.split("\n") if line]


def wait_for_marker(path: Path, marker: str, timeout: float = PEER_WAIT) -> list[str]:
    """Poll the events file another process writes until ``marker`` appears; return the lines.

    Polling is the only way to observe another process's file; each pause is tiny and the
    whole wait is bounded by ``timeout`` (expiry is a failure that shows what was there).
    """
    deadline = time.monotonic() + timeout
    while True:
        lines = read_events(path)
        if marker in lines:
            return lines
        if time.monotonic() >= deadline:
            raise AssertionError(
                f"marker {marker!r} did not appear in {path} within {timeout} s; lines: {lines}"
            )
        time.sleep(0.01)


def prewarm_workers(client: Any) -> None:
    """Start every worker thread of a long-lived client's pool now.

    The pool starts threads on demand and keeps them until the client closes. A client shared
    by a module's tests would otherwise start a worker during some test, and the suite's
    per-test thread-leak check would blame that test. Occupying all workers at once (each
    waits at a barrier) makes the pool reach its bound here, so it never grows later.
    """
    pool = client.endpoint._pool  # test-only peek: no public way to size the pool up front
    barrier = threading.Barrier(pool.max_workers + 1, timeout=PEER_WAIT)
    for _ in range(pool.max_workers):
        pool.submit(barrier.wait)
    barrier.wait()


# -- the official client CLI -----------------------------------------------------------------------
class OfficialClientRun:
    """One run of the official client CLI (``tests/peers/official_client.py``), started at once.

    :meth:`result` waits (bounded), parses the JSON it printed and returns it; a run that
    does not finish in time is killed and fails the test.
    """

    def __init__(
        self,
        args: Sequence[str],
        server: Sequence[str],
        *,
        env: dict[str, str],
        timeout: float = 45.0,
    ) -> None:
        self.command = [
            *OFFICIAL_CLIENT,
            "--overall-timeout",
            str(timeout - 5),
            *args,
            "--",
            *server,
        ]
        self.timeout = timeout
        self.started = time.monotonic()
        self.process = subprocess.Popen(
            self.command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, **env},
            cwd=str(ROOT),
            text=True,
        )
        self.stdout: str | None = None
        self.stderr: str | None = None
        self._output: dict[str, Any] | None = None

    def result(self) -> dict[str, Any]:
        if self._output is not None:
            return self._output
        remaining = max(0.1, self.timeout - (time.monotonic() - self.started))
        try:
            self.stdout, self.stderr = self.process.communicate(timeout=remaining)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(
                f"the official client did not finish within {self.timeout} s: {self.command}\nstderr:\n{self.stderr}"
            ) from None
        try:
            self._output = json.loads(self.stdout)
        except ValueError:
            raise AssertionError(
                f"the official client printed no JSON (exit {self.process.returncode}): {self.command}\n"
                f"stdout:\n{self.stdout}\nstderr:\n{self.stderr}"
            ) from None
        return self._output

    def kill(self) -> None:
        """Kill and reap the run if it is still going (always safe to call)."""
        if self.process.poll() is None:
            self.process.kill()
        try:
            self.stdout, self.stderr = self.process.communicate(timeout=10)
        except (subprocess.TimeoutExpired, ValueError, OSError):
            pass
