"""Helpers for the MCP feature tests (resources, prompts, completion, logging, roots, sampling,
elicitation).

* :class:`Wire` wraps a transport and records every message written and read, so a test judges
  by what crossed the wire; :meth:`Wire.wait_for` is a bounded wait on a predicate over it.
* :func:`pair` serves a :class:`~mcp_sync.Server` over an in-memory pair and yields a
  :class:`Pair` (client, server handle, and the recorded wires of both ends); both are closed
  afterwards.
* :func:`wait_event` is a bounded wait that fails with a message.

Ordering barrier used by the "no response was written" tests: with a pool of ONE worker, a
request's handling (handler, then the decision to write or drop its response) finishes before
the next request starts. So once the answer to a follow-up request has arrived, every message
the cancelled request could have produced would already be on the wire, in order.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from mcp_helpers import RecordingTransport, wait_event  # noqa: F401  (re-exported for the tests)
from mcp_sync import Client, Server, ServerHandle, memory_pair

REPO_ROOT = Path(__file__).resolve().parents[2]
SERVERS = Path(__file__).resolve().parents[1] / "peers"

WAIT = 5.0
"""Bound of every wait (a wait that expires is a test failure)."""


Wire = RecordingTransport
"""A transport wrapper recording decoded messages: ``sent`` (written by this end) and
``received`` (read by this end)."""


def requests(messages: list[Any], method: str) -> list[dict[str, Any]]:
    """The requests (with an id) of ``method`` among ``messages``."""
    return [m for m in messages if isinstance(m, dict) and m.get("method") == method and "id" in m]


def notifications(messages: list[Any], method: str) -> list[dict[str, Any]]:
    """The notifications (no id) of ``method`` among ``messages``."""
    return [m for m in messages if isinstance(m, dict) and m.get("method") == method and "id" not in m]


def responses(messages: list[Any], request_id: Any) -> list[dict[str, Any]]:
    """The responses (result or error) to ``request_id`` among ``messages``."""
    return [
        m
        for m in messages
        if isinstance(m, dict) and "method" not in m and m.get("id") == request_id and ("result" in m or "error" in m)
    ]


def cancels_of(messages: list[Any], request_id: Any) -> list[dict[str, Any]]:
    """The ``notifications/cancelled`` for ``request_id`` among ``messages``."""
    return [m for m in notifications(messages, "notifications/cancelled") if (m.get("params") or {}).get("requestId") == request_id]


@dataclass
class Pair:
    client: Client
    handle: ServerHandle
    server_wire: Wire
    """The server's end: ``sent`` is what the server wrote."""
    client_wire: Wire
    """The client's end: ``received`` is what the client read, ``sent`` what it wrote."""

    @property
    def session(self) -> Any:
        return self.handle.session


@contextmanager
def pair(server: Server, *, server_workers: int | None = None, **client_options: Any) -> Iterator[Pair]:
    """Serve ``server`` over an in-memory pair and yield a connected client; close both after."""
    client_end, server_end = memory_pair()
    server_wire, client_wire = Wire(server_end), Wire(client_end)
    handle = server.serve_in_thread(server_wire, max_workers=server_workers)
    client: Client | None = None
    try:
        client_options.setdefault("init_timeout", WAIT)
        client = Client.connect(client_wire, **client_options)
        yield Pair(client, handle, server_wire, client_wire)
    finally:
        if client is not None:
            client.close()
        else:
            client_end.close()
        handle.stop()


class Collector:
    """Thread-safe list of callback arguments with a bounded wait for a matching item."""

    def __init__(self) -> None:
        self.items: list[Any] = []
        self._cond = threading.Condition()

    def __call__(self, *args: Any) -> None:
        with self._cond:
            self.items.append(args if len(args) != 1 else args[0])
            self._cond.notify_all()

    def wait_for(self, predicate: Callable[[Any], bool], what: str, timeout: float = WAIT) -> Any:
        found: list[Any] = []

        def check() -> bool:
            found[:] = [item for item in self.items if predicate(item)]
            return bool(found)

        with self._cond:
            ok = self._cond.wait_for(check, timeout)
        assert ok, f"timed out after {timeout} s waiting for {what}; got {self.items!r}"
        return found[0]

    def snapshot(self) -> list[Any]:
        with self._cond:
            return list(self.items)
