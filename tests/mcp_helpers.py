"""Shared helpers for the MCP-layer tests (server, client, lifecycle, processes).

* :class:`RecordingTransport` wraps a transport and records every JSON message written and
  read, so a test can judge by what crossed the wire.
* :func:`connected` serves a :class:`~mcp_sync.Server` over an in-memory pair and yields a
  connected :class:`~mcp_sync.Client` (both closed afterwards).
* :class:`FakeServer` is a raw :class:`~mcp_sync.Endpoint` playing a (mis)behaving server.
* :func:`wait_event` / :func:`wait_until` are bounded waits that fail with a message.
"""

from __future__ import annotations

import json
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from pydantic import BaseModel

from mcp_sync import Client, Context, Endpoint, Server, ServerHandle, memory_pair
from mcp_sync.wire import model_to_wire

REPO_ROOT = Path(__file__).resolve().parents[1]
SERVERS_DIR = Path(__file__).resolve().parent / "peers"

WAIT = 5.0
"""Default bound of every wait in these tests (a wait that expires is a failure)."""


def wait_event(event: threading.Event, what: str, timeout: float = WAIT) -> None:
    """Wait for ``event``; fail with a message if it is not set within ``timeout``."""
    assert event.wait(timeout), f"timed out after {timeout} s waiting for {what}"


def wait_until(predicate: Callable[[], bool], what: str, timeout: float = WAIT) -> None:
    """Poll ``predicate`` (for state that has no event) until true; fail with a message."""
    end = time.monotonic() + timeout
    pause = threading.Event()
    while not predicate():
        if time.monotonic() >= end:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        pause.wait(0.002)


class RecordingTransport:
    """A transport wrapper that records decoded messages in both directions."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.sent: list[Any] = []
        self.received: list[Any] = []
        self._cond = threading.Condition()

    @staticmethod
    def _decode(data: bytes) -> Any:
        try:
            return json.loads(data)
        except ValueError:
            return data

    def read_line(self) -> bytes | None:
        line = self.inner.read_line()
        if line is not None and line.strip():
            with self._cond:
                self.received.append(self._decode(line))
                self._cond.notify_all()
        return line

    def write(self, data: bytes) -> None:
        # record first: the peer may react to the message before inner.write returns
        entry = self._decode(data)
        with self._cond:
            self.sent.append(entry)
            self._cond.notify_all()
        try:
            self.inner.write(data)
        except BaseException:
            with self._cond:
                self.sent.remove(entry)
            raise

    def close(self) -> None:
        self.inner.close()

    def wait_for(self, predicate: Callable[[RecordingTransport], Any], what: str, timeout: float = WAIT) -> Any:
        """Wait until ``predicate(self)`` is truthy and return its value; fail with the wire."""
        box: list[Any] = []

        def check() -> bool:
            value = predicate(self)
            if value:
                box.append(value)
            return bool(value)

        with self._cond:
            ok = self._cond.wait_for(check, timeout)
        assert ok, f"timed out after {timeout} s waiting for {what}; sent={self.sent!r} received={self.received!r}"
        return box[-1]

    def snapshot(self) -> tuple[list[Any], list[Any]]:
        with self._cond:
            return list(self.sent), list(self.received)


def is_response(message: Any, request_id: Any = None) -> bool:
    """True if ``message`` is a JSON-RPC response (to ``request_id`` when given)."""
    if not isinstance(message, dict) or "method" in message or "id" not in message:
        return False
    if "result" not in message and "error" not in message:
        return False
    return request_id is None or message["id"] == request_id


def as_wire(models: Any) -> Any:
    """``mcp_types`` models (or a list of them) as the JSON objects they were parsed from,
    checking that they are models: the typed API never hands out raw dicts."""
    if isinstance(models, list):
        return [as_wire(m) for m in models]
    assert isinstance(models, BaseModel), f"expected an mcp_types model, got {type(models).__name__}"
    return model_to_wire(models, result=True)


def responses_to(messages: list[Any], request_id: Any) -> list[dict[str, Any]]:
    return [m for m in messages if is_response(m, request_id)]


def with_method(messages: list[Any], method: str) -> list[dict[str, Any]]:
    return [m for m in messages if isinstance(m, dict) and m.get("method") == method]


def methods(messages: list[Any]) -> list[str]:
    return [m["method"] for m in messages if isinstance(m, dict) and "method" in m]


@dataclass
class Connection:
    client: Client
    handle: ServerHandle
    wire: RecordingTransport
    """The server side of the connection: ``wire.sent`` is what the server wrote."""

    def barrier(self) -> None:
        """Return once every message the server queued so far has reached the client.

        Waits until the server has no inbound request in flight, then pings: the ping's answer
        is written after everything queued before it and read in order by the client.
        """
        endpoint = self.handle.session.endpoint
        wait_until(lambda: endpoint.in_flight()[0] == 0, "the server to finish its requests")
        self.client.ping(timeout=WAIT)


@contextmanager
def connected(server: Server, *, server_workers: int | None = None, **client_options: Any) -> Iterator[Connection]:
    """Serve ``server`` over a memory pair and yield a connected client; close both after."""
    client_side, server_side = memory_pair()
    wire = RecordingTransport(server_side)
    handle = server.serve_in_thread(wire, max_workers=server_workers)
    client: Client | None = None
    try:
        client_options.setdefault("init_timeout", WAIT)
        client = Client.connect(client_side, **client_options)
        yield Connection(client, handle, wire)
    finally:
        if client is not None:
            client.close()
        else:
            client_side.close()
        handle.stop()


INIT_RESULT = {
    "protocolVersion": "2025-11-25",
    "capabilities": {},
    "serverInfo": {"name": "fake", "version": "0"},
}


class FakeServer:
    """A raw endpoint playing the server side; records every line it receives.

    ``handler(request)`` answers requests (default: ``initialize`` with ``init_result``,
    everything else -32601). Runs on the endpoint's workers, gets the request's token.
    """

    def __init__(self, handler: Callable[[Any], Any] | None = None, init_result: dict[str, Any] | None = None) -> None:
        self.client_transport, server_side = memory_pair()
        self.wire = RecordingTransport(server_side)
        self.init_result = dict(INIT_RESULT if init_result is None else init_result)
        self.endpoint = Endpoint(
            self.wire,
            request_handler=handler or self._default,
            inline_handlers={"ping": lambda _request: {}},
            max_workers=2,
            name="fake-server",
        )
        self.endpoint.start()

    def _default(self, request: Any) -> Any:
        from mcp_sync import McpError

        if request.method == "initialize":
            return self.init_result
        raise McpError(-32601, f"Method not found: {request.method}")

    def close(self) -> None:
        self.client_transport.close()
        self.endpoint.close(WAIT)

    def __enter__(self) -> FakeServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def holding_server(name: str, release: threading.Event | None = None, **options: Any) -> tuple[Server, threading.Event]:
    """A server whose ``hold`` tool sets the returned event when it starts, then waits (bounded)
    for ``release`` -- or, without one, for its own cancellation."""
    server = Server(name, **options)
    started = threading.Event()

    @server.tool()
    def hold(ctx: Context) -> str:
        started.set()
        if release is None:
            ctx.wait(WAIT)
        else:
            release.wait(WAIT)
        return "done"

    return server, started
