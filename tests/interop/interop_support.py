"""Helpers for the interoperability tests against the official ``mcp`` SDK.

* :data:`OFFICIAL_SERVER`, :data:`OFFICIAL_CLIENT`, :data:`SYNC_SERVER`: the peer scripts.
* :class:`WireRecorder` wraps a transport and records every decoded message in both directions.
* :func:`wait_for_marker` polls a peer's events file (another process writes it, so polling
  with a deadline is the only way to observe it).
* :class:`OfficialClientRun` runs the official client CLI as a bounded subprocess.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from mcp_helpers import RecordingTransport

PY = sys.executable
"""The interpreter that runs the tests; it must have the official ``mcp`` SDK installed."""

REPO_ROOT = Path(__file__).resolve().parents[2]
PEERS = Path(__file__).resolve().parents[1] / "peers"
OFFICIAL_SERVER = [PY, str(PEERS / "official_server.py")]
OFFICIAL_CLIENT = [PY, str(PEERS / "official_client.py")]
SYNC_SERVER = [PY, str(PEERS / "sync_server.py")]

WAIT = 10.0
"""Default bound of every wait (the official SDK takes a second or more to start a process)."""


def wait_event(event: threading.Event, what: str, timeout: float = WAIT) -> None:
    """Wait for ``event``; fail with a message if it is not set within ``timeout``."""
    assert event.wait(timeout), f"timed out after {timeout} s waiting for {what}"


# -- events files written by the peers ---------------------------------------------------------
def read_events(path: Path) -> list[str]:
    """The marker lines a peer appended to its events file so far."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    return [line for line in text.split("\n") if line]


def wait_for_marker(path: Path, marker: str, timeout: float = WAIT) -> list[str]:
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
            raise AssertionError(f"marker {marker!r} did not appear in {path} within {timeout} s; lines: {lines}")
        time.sleep(0.01)


# -- JSON-RPC message predicates -----------------------------------------------------------------
def is_response(message: Any, request_id: Any = None) -> bool:
    """True for a JSON-RPC response (to ``request_id``, compared with its JSON type, if given)."""
    if not isinstance(message, dict) or "method" in message or "id" not in message:
        return False
    if "result" not in message and "error" not in message:
        return False
    return request_id is None or (type(message["id"]) is type(request_id) and message["id"] == request_id)


def cancelled_ids(messages: Sequence[Any]) -> list[Any]:
    """The ``requestId`` of every ``notifications/cancelled`` among ``messages``."""
    return [
        m["params"]["requestId"]
        for m in messages
        if isinstance(m, dict) and m.get("method") == "notifications/cancelled" and "id" not in m
    ]


class WireRecorder(RecordingTransport):
    """Wraps a transport; records decoded messages: ``sent`` (by us) and ``received``."""

    def wait_for(self, predicate: Callable[[list[Any], list[Any]], Any], what: str, timeout: float = WAIT) -> Any:  # type: ignore[override]
        """Wait until ``predicate(sent, received)`` holds; fail with the wire if it does not."""
        return super().wait_for(lambda wire: predicate(wire.sent, wire.received), what, timeout)

    def sent_requests(self, method: str) -> list[dict[str, Any]]:
        with self._cond:
            return [m for m in self.sent if isinstance(m, dict) and m.get("method") == method and "id" in m]

    def received_requests(self, method: str) -> list[dict[str, Any]]:
        with self._cond:
            return [m for m in self.received if isinstance(m, dict) and m.get("method") == method and "id" in m]


def prewarm_workers(client: Any) -> None:
    """Start every worker thread of a long-lived client's pool now.

    The pool starts threads on demand and keeps them until the client closes. A client shared
    by a module's tests would otherwise start a worker during some test, and the suite's
    per-test thread-leak check would blame that test. Occupying all workers at once (each
    waits at a barrier) makes the pool reach its bound here, so it never grows later.
    """
    pool = client.endpoint._pool  # test-only peek: no public way to size the pool up front
    barrier = threading.Barrier(pool.max_workers + 1, timeout=WAIT)
    for _ in range(pool.max_workers):
        pool.submit(barrier.wait)
    barrier.wait()


# -- the official client CLI -----------------------------------------------------------------------
class OfficialClientRun:
    """One run of the official client CLI (``tests/peers/official_client.py``), started at once.

    :meth:`result` waits (bounded), parses the JSON it printed and returns it; a run that
    does not finish in time is killed and fails the test.
    """

    def __init__(self, args: Sequence[str], server: Sequence[str], *, env: dict[str, str], timeout: float = 45.0) -> None:
        self.command = [*OFFICIAL_CLIENT, "--overall-timeout", str(timeout - 5), *args, "--", *server]
        self.timeout = timeout
        self.started = time.monotonic()
        self.process = subprocess.Popen(
            self.command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, **env},
            cwd=str(REPO_ROOT),
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
