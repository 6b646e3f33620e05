"""Endpoints over memory pairs for the threaded endpoint tests: recorded raw transports,
gated handlers, raw peers.

Every wait here is bounded and fails the test with a message when it expires.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

import pytest

from mcp_sync.endpoint import Endpoint
from mcp_sync.errors import McpError
from mcp_sync.jsonrpc import METHOD_NOT_FOUND, id_key
from mcp_sync.transports.memory import MemoryTransport, memory_pair
from support.messages import same_id
from support.waiting import WAIT


class Gate:
    """One-shot hold on lines read through a :class:`Recorder`."""

    def __init__(self, predicate: Callable[[dict], bool]) -> None:
        self.predicate = predicate
        self.arrived = threading.Event()
        self.release = threading.Event()
        self.used = False


class Recorder:
    """Wraps a transport and records every line successfully written through it.

    ``hold_reads(predicate)`` makes the reader stop on the first incoming line that matches
    (so a test can act "after the peer wrote X but before we read it").
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.lines: list[bytes] = []
        self._cond = threading.Condition()
        self._gate: Gate | None = None
        self.write_hook: Callable[[dict], None] | None = None

    # transport interface
    def read_line(self) -> bytes | None:
        line = self.inner.read_line()
        gate = self._gate
        if gate is not None and not gate.used and line is not None:
            try:
                msg = json.loads(line)
            except ValueError:
                msg = None
            if isinstance(msg, dict) and gate.predicate(msg):
                gate.used = True
                gate.arrived.set()
                gate.release.wait(WAIT * 2)
        return line

    def write(self, data: bytes) -> None:
        self.inner.write(data)
        with self._cond:
            self.lines.append(data)
            self._cond.notify_all()
        if self.write_hook is not None:
            self.write_hook(json.loads(data))

    def close(self) -> None:
        self.inner.close()
        gate = self._gate
        if gate is not None:
            gate.release.set()

    # inspection
    def hold_reads(self, predicate: Callable[[dict], bool]) -> Gate:
        self._gate = Gate(predicate)
        return self._gate

    def messages(self) -> list[dict]:
        with self._cond:
            return [json.loads(line) for line in self.lines]

    def responses_to(self, request_id: Any) -> list[dict]:
        return [
            m
            for m in self.messages()
            if "method" not in m
            and ("result" in m or "error" in m)
            and same_id(m.get("id"), request_id)
        ]

    def cancels(self) -> list[dict]:
        return [m for m in self.messages() if m.get("method") == "notifications/cancelled"]

    def wait_for(
        self, predicate: Callable[[list[dict]], bool], timeout: float = WAIT, what: str = "message"
    ) -> None:
        end = time.monotonic() + timeout
        with self._cond:
            while not predicate([json.loads(line) for line in self.lines]):
                remaining = end - time.monotonic()
                if remaining <= 0:
                    pytest.fail(f"{what} was not written within {timeout} s")
                self._cond.wait(remaining)


class Blocker:
    """A request handler that records each request, signals that it started, then blocks until
    its token fires or the test releases it. Returns ``{"released": id}``."""

    def __init__(self, *, honour_token: bool = True, limit: float = WAIT) -> None:
        self.honour_token = honour_token
        self.limit = limit
        self._cond = threading.Condition()
        self.started: list[Any] = []
        self.finished: dict[Any, tuple[bool, bool]] = {}  # id_key -> (woken, token.cancelled)
        self._wakes: dict[Any, threading.Event] = {}

    def __call__(self, req: Any) -> Any:
        wake = threading.Event()
        if self.honour_token:
            req.token.add_callback(lambda _t: wake.set())
        with self._cond:
            self.started.append(req)
            self._wakes[id_key(req.id)] = wake
            self._cond.notify_all()
        woken = wake.wait(self.limit)
        with self._cond:
            self.finished[id_key(req.id)] = (woken, req.token.cancelled)
            self._cond.notify_all()
        return {"released": req.id}

    def wait_started(self, count: int = 1, timeout: float = WAIT) -> list[Any]:
        end = time.monotonic() + timeout
        with self._cond:
            while len(self.started) < count:
                remaining = end - time.monotonic()
                if remaining <= 0:
                    pytest.fail(
                        f"only {len(self.started)} of {count} handlers started within {timeout} s"
                    )
                self._cond.wait(remaining)
            return list(self.started)

    def wait_finished(self, request_id: Any, timeout: float = WAIT) -> tuple[bool, bool]:
        key = id_key(request_id)
        end = time.monotonic() + timeout
        with self._cond:
            while key not in self.finished:
                remaining = end - time.monotonic()
                if remaining <= 0:
                    pytest.fail(f"handler for {request_id!r} did not finish within {timeout} s")
                self._cond.wait(remaining)
            return self.finished[key]

    def request(self, request_id: Any) -> Any:
        with self._cond:
            for req in self.started:
                if same_id(req.id, request_id):
                    return req
        raise AssertionError(f"no request {request_id!r} started")

    def release(self, request_id: Any) -> None:
        with self._cond:
            self._wakes[id_key(request_id)].set()

    def release_all(self) -> None:
        with self._cond:
            for wake in self._wakes.values():
                wake.set()


def dispatcher(handlers: dict[str, Callable[[Any], Any]]) -> Callable[[Any], Any]:
    """A request handler that routes by method; unknown methods get -32601."""

    def handle(req: Any) -> Any:
        handler = handlers.get(req.method)
        if handler is None:
            raise McpError(METHOD_NOT_FOUND, f"Method not found: {req.method}")
        return handler(req)

    return handle


@contextmanager
def endpoint_pair(
    handlers: dict[str, Callable[[Any], Any]] | None = None,
    *,
    server_workers: int = 4,
    client_workers: int = 4,
    inline: dict[str, Callable[[Any], Any]] | None = None,
    notification_handler: Callable[[Any], Any] | None = None,
    client_handlers: dict[str, Callable[[Any], Any]] | None = None,
) -> Iterator[SimpleNamespace]:
    """A client Endpoint and a server Endpoint over a memory pair, both transports recorded."""
    a, b = memory_pair()
    client_t, server_t = Recorder(a), Recorder(b)
    server = Endpoint(
        server_t,
        request_handler=dispatcher(handlers or {}),
        notification_handler=notification_handler,
        max_workers=server_workers,
        inline_handlers=inline,
        name="server",
    )
    client = Endpoint(
        client_t,
        request_handler=dispatcher(client_handlers) if client_handlers is not None else None,
        max_workers=client_workers,
        name="client",
    )
    server.start()
    client.start()
    try:
        yield SimpleNamespace(client=client, server=server, client_t=client_t, server_t=server_t)
    finally:
        client.close(grace=WAIT)
        server.close(grace=WAIT)


class RawPeer:
    """The far end of a memory pair driven by hand: write raw lines, read replies (bounded)."""

    def __init__(self, transport: MemoryTransport) -> None:
        self.transport = transport

    def send(self, message: Any) -> None:
        if isinstance(message, (bytes, bytearray)):
            data = bytes(message)
        elif isinstance(message, str):
            data = message.encode("utf-8")
        else:
            data = json.dumps(message).encode("utf-8")
        self.transport.write(data + b"\n")

    def recv(self, timeout: float = WAIT) -> dict:
        try:
            line = self.transport._inbox.get(timeout=timeout)
        except queue.Empty:
            pytest.fail(f"the endpoint wrote nothing within {timeout} s")
        assert line is not None, "the endpoint closed the connection"
        return json.loads(line)

    def drain(self) -> list[dict]:
        """Everything written so far (call after the endpoint is closed)."""
        out = []
        while True:
            try:
                line = self.transport._inbox.get_nowait()
            except queue.Empty:
                return out
            if line is not None:
                out.append(json.loads(line))


@contextmanager
def raw_server(
    handlers: dict[str, Callable[[Any], Any]] | None = None,
    *,
    max_workers: int = 4,
    inline: dict[str, Callable[[Any], Any]] | None = None,
    request_handler: Any = "dispatch",
) -> Iterator[SimpleNamespace]:
    """A server Endpoint whose peer is a :class:`RawPeer`."""
    a, b = memory_pair()
    server_t = Recorder(b)
    server = Endpoint(
        server_t,
        request_handler=dispatcher(handlers or {})
        if request_handler == "dispatch"
        else request_handler,
        max_workers=max_workers,
        inline_handlers=inline,
        name="server",
    )
    server.start()
    try:
        yield SimpleNamespace(server=server, peer=RawPeer(a), server_t=server_t)
    finally:
        server.close(grace=WAIT)
        a.close()
