"""Fixtures of the Streamable HTTP tests; the helpers live in ``support.http``."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from support.http import RawSession, Wire
from support.probes import GateProbe

from mcp_sync import Server
from mcp_sync.http import HttpServerHandle, McpWsgiApp, serve_http
from mcp_sync.http.session_transport import HttpSessionTransport
from mcp_sync.http.sse import EventStream


@pytest.fixture
def probe() -> GateProbe:
    return GateProbe()


@pytest.fixture
def serve() -> Iterator[Callable[..., HttpServerHandle]]:
    """``serve(server_or_app, **options)`` -> a running :class:`HttpServerHandle` on a free
    loopback port; stopped (sessions closed, threads joined) after the test."""
    handles: list[HttpServerHandle] = []

    def start(target: Server | McpWsgiApp | Callable[..., Any], **options: Any) -> HttpServerHandle:
        if isinstance(target, Server):
            handle = target.serve_http("127.0.0.1", 0, **options)
        else:
            assert not options, "options go to the app you pass"
            handle = serve_http(target, "127.0.0.1", 0)  # type: ignore[arg-type]
        handles.append(handle)
        return handle

    yield start
    for handle in reversed(handles):
        handle.stop()


@pytest.fixture
def wire(monkeypatch: pytest.MonkeyPatch) -> Wire:
    """Records what every server session of this test writes (see :class:`Wire`)."""
    record = Wire()
    original_push = EventStream.push
    original_cancelled = HttpSessionTransport.inbound_cancelled

    def push(self: EventStream, data: bytes, *, last: bool = False) -> bool:
        # recorded *before* the event can reach a reader (who may look at the record at once)
        entry = (self.id, json.loads(data))
        with record._lock:
            record.pushed.append(entry)
        pushed = original_push(self, data, last=last)
        if not pushed:  # the stream had ended: nobody can ever read it
            with record._lock:
                record.pushed.remove(entry)
        return pushed

    def inbound_cancelled(self: HttpSessionTransport, request_id: Any) -> None:
        with record._lock:
            record.accepted_cancels.append((self.session_id, request_id))
        original_cancelled(self, request_id)

    monkeypatch.setattr(EventStream, "push", push)
    monkeypatch.setattr(HttpSessionTransport, "inbound_cancelled", inbound_cancelled)
    return record


@pytest.fixture
def raw() -> Iterator[Callable[..., RawSession]]:
    """``raw(url, headers=None)`` -> a :class:`RawSession`, closed after the test."""
    sessions: list[RawSession] = []

    def open_session(url: str, headers: dict[str, str] | None = None) -> RawSession:
        session = RawSession(url, headers)
        sessions.append(session)
        return session

    yield open_session
    for session in sessions:
        session.close()


@pytest.fixture(params=["plain", "httpx"])
def client_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test over both paths of the HTTP client's 2026-07-28 requests: its own plain
    HTTP/1.1 client (the default for an ``http://`` URL) and httpx (TLS, a user's client, an
    auth flow). Modules opt in with ``pytestmark = pytest.mark.usefixtures("client_path")``."""
    if request.param == "httpx":
        from mcp_sync.http import client_transport

        monkeypatch.setattr(client_transport, "plain_origin", lambda url: False)
    return str(request.param)
