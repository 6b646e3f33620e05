"""A 2026-07-28 request answered as plain JSON notices that its client closed the connection
(where the WSGI server lets the app look, see :mod:`mcp_sync.http.disconnect`) and cancels its
handler within a bounded time: under the built-in server, waitress with
``channel_request_lookahead`` and gunicorn (gthread). The client accepts only JSON, so the
answer is never turned into SSE: without the probe, the handler would run to its end.
"""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from support.interop import wait_for_marker
from support.paths import PYTHON, ROOT
from support.probes import GateProbe
from support.processes import Proc, user_env
from support.waiting import PEER_WAIT, WAIT
from test_http_modern import headers_for, make_modern_server, modern

from mcp_sync.http import McpWsgiApp, serve_http
from mcp_sync.http.disconnect import disconnect_probe

pytestmark = pytest.mark.usefixtures("client_path")  # both client paths (conftest)


def send_and_vanish(
    url: str, body: dict[str, Any], accept: str = "application/json"
) -> socket.socket:
    """POST ``body`` on a raw connection accepting only JSON (or ``accept``); returns the
    socket (close it to disconnect)."""
    parts = urlsplit(url)
    data = json.dumps(body).encode()
    headers = {
        **headers_for(body, Accept=accept),
        "Host": parts.netloc,
        "Content-Type": "application/json",
        "Content-Length": str(len(data)),
    }
    head = f"POST {parts.path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    sock = socket.create_connection((parts.hostname, parts.port), timeout=WAIT)
    sock.sendall(head.encode() + b"\r\n" + data)
    return sock


def serve_gated(server_kind: str, **options: Any) -> Iterator[tuple[str, GateProbe]]:
    """The gated tools' app (``options`` for McpWsgiApp) under the built-in server or
    waitress with ``channel_request_lookahead``; yields its URL and the gates."""
    probe = GateProbe()
    app = McpWsgiApp(make_modern_server(probe), path="/mcp", modern_json_window=0.05, **options)
    if server_kind == "embedded":
        handle = serve_http(app, "127.0.0.1", 0)
        yield handle.url, probe
        handle.stop()
        return
    from support.http import run_waitress

    base, stop = run_waitress(app, channel_request_lookahead=1)
    yield str(base) + "/mcp", probe
    app.close()
    stop()


def read_until(sock: socket.socket, marker: bytes, reply: bytes = b"") -> bytes:
    """``reply`` and what ``sock`` brings after it, until ``marker`` is in it (the
    connection must not end first)."""
    while marker not in reply:
        chunk = sock.recv(65536)
        assert chunk, reply
        reply += chunk
    return reply


@pytest.fixture(params=["embedded", "waitress-lookahead"])
def served(request: pytest.FixtureRequest) -> Iterator[tuple[str, GateProbe]]:
    yield from serve_gated(request.param)


def test_a_json_answered_call_is_cancelled_when_its_client_disconnects(
    served: tuple[str, GateProbe],
) -> None:
    url, probe = served
    body = modern("tools/call", {"name": "gated", "arguments": {"tag": "vanish"}}, 5)
    sock = send_and_vanish(url, body)
    try:
        assert probe.started("vanish").wait(WAIT)
    finally:
        sock.close()
    assert probe.cancelled("vanish").wait(WAIT), "the disconnect was not noticed"
    assert not probe.completed("vanish").is_set()


def test_a_client_that_stays_gets_its_json_answer(served: tuple[str, GateProbe]) -> None:
    url, probe = served
    body = modern("tools/call", {"name": "gated", "arguments": {"tag": "stay"}}, 6)
    sock = send_and_vanish(url, body)
    try:
        assert probe.started("stay").wait(WAIT)
        probe.release("stay")
        reply = read_until(sock, b"stay: released")
    finally:
        sock.close()
    assert re.match(rb"HTTP/1\.[01] 200 ", reply), reply[:40]
    assert b"application/json" in reply
    assert not probe.cancelled("stay").is_set()


SSE = "application/json, text/event-stream"
NO_KEEPALIVE = 3600.0
"""A keep-alive interval no test waits for: a disconnect must be seen without a write."""


def read_sse_head(sock: socket.socket) -> bytes:
    """Read until the SSE answer's headers have arrived (the call outlived the JSON window)."""
    reply = read_until(sock, b"\r\n\r\n")
    assert b"text/event-stream" in reply, reply
    return reply


@pytest.fixture(params=["embedded", "waitress-lookahead"])
def served_sse(request: pytest.FixtureRequest) -> Iterator[tuple[str, GateProbe]]:
    yield from serve_gated(request.param, keepalive=NO_KEEPALIVE)


def test_an_sse_answered_call_is_cancelled_on_disconnect_before_any_keepalive(
    served_sse: tuple[str, GateProbe],
) -> None:
    """The SSE answer looks at its connection between events: a client that left is seen
    without waiting for the next keep-alive comment (an hour away here) to fail."""
    url, probe = served_sse
    body = modern("tools/call", {"name": "gated", "arguments": {"tag": "sse-vanish"}}, 8)
    sock = send_and_vanish(url, body, accept=SSE)
    try:
        assert probe.started("sse-vanish").wait(WAIT)
        read_sse_head(sock)
    finally:
        sock.close()
    assert probe.cancelled("sse-vanish").wait(WAIT), "the disconnect was not noticed"
    assert not probe.completed("sse-vanish").is_set()


def test_an_sse_answered_call_whose_client_stays_is_answered(
    served_sse: tuple[str, GateProbe],
) -> None:
    url, probe = served_sse
    body = modern("tools/call", {"name": "gated", "arguments": {"tag": "sse-stay"}}, 9)
    sock = send_and_vanish(url, body, accept=SSE)
    try:
        assert probe.started("sse-stay").wait(WAIT)
        reply = read_sse_head(sock)
        probe.release("sse-stay")
        read_until(sock, b"sse-stay: released", reply)
    finally:
        sock.close()
    assert not probe.cancelled("sse-stay").is_set()


def test_the_looks_at_a_connection_start_soon_and_back_off() -> None:
    from itertools import islice, pairwise

    from mcp_sync.http.disconnect import DISCONNECT_FIRST_POLL, DISCONNECT_POLL, poll_slices

    waits = list(islice(poll_slices(), 12))
    assert waits[0] == DISCONNECT_FIRST_POLL
    assert all(b == min(2 * a, DISCONNECT_POLL) for a, b in pairwise(waits))
    assert waits[-1] == DISCONNECT_POLL


def test_a_pipelined_next_request_is_not_a_disconnect() -> None:
    left, right = socket.socketpair()
    try:
        probe = disconnect_probe({"mcp_sync.socket": left})
        assert probe is not None
        assert probe() is False
        right.sendall(b"POST /next")  # bytes waiting: readable, but not the end
        assert probe() is False
        right.close()
        assert probe() is False  # the pipelined bytes come first...
        assert left.recv(100) == b"POST /next"
        assert probe() is True  # ...then the end of the stream
    finally:
        left.close()


def test_servers_without_a_way_to_look_get_no_probe() -> None:
    assert disconnect_probe({}) is None
    assert disconnect_probe({"wsgi.input": object()}) is None
    flag = {"gone": False}
    probe = disconnect_probe({"waitress.client_disconnected": lambda: flag["gone"]})
    assert probe is not None and probe() is False
    flag["gone"] = True
    assert probe() is True


@pytest.fixture
def gunicorn(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    pytest.importorskip("gunicorn")
    events = tmp_path / "events"
    argv = [
        PYTHON, "-m", "gunicorn", "-k", "gthread", "--workers", "1", "--threads", "4",
        "--bind", "127.0.0.1:0", "--no-control-socket", "--graceful-timeout", "1",
        "--pythonpath", str(ROOT / "tests" / "peers"), "gunicorn_disconnect_app:app",
    ]  # fmt: skip
    with Proc(argv, env={**user_env(), "PEER_EVENTS_FILE": str(events)}) as proc:
        line = proc.wait_for("stderr", "Listening at: ", 30)
        match = re.search(r"Listening at: (http://127\.0\.0\.1:\d+)", line)
        assert match, line
        proc.wait_for("stderr", "Booting worker", 30)
        yield match.group(1) + "/mcp", events


def test_under_gunicorn_a_json_answered_call_is_cancelled_on_disconnect(
    gunicorn: tuple[str, Path],
) -> None:
    url, events = gunicorn
    body = modern("tools/call", {"name": "hold", "arguments": {"tag": "g"}}, 7)
    sock = send_and_vanish(url, body)
    try:
        wait_for_marker(events, "STARTED hold g", PEER_WAIT)
    finally:
        sock.close()
    markers = wait_for_marker(events, "CANCELLED hold g", PEER_WAIT)
    assert "COMPLETED hold g" not in markers


def test_under_gunicorn_an_sse_answered_call_is_cancelled_on_disconnect(
    gunicorn: tuple[str, Path],
) -> None:
    """The app's keep-alive interval is the default 15 s, longer than the wait below: the
    disconnect is seen by looking at the socket, not by a failed write."""
    url, events = gunicorn
    body = modern("tools/call", {"name": "hold", "arguments": {"tag": "gs"}}, 10)
    sock = send_and_vanish(url, body, accept=SSE)
    try:
        wait_for_marker(events, "STARTED hold gs", PEER_WAIT)
        read_sse_head(sock)
    finally:
        sock.close()
    markers = wait_for_marker(events, "CANCELLED hold gs", PEER_WAIT)
    assert "COMPLETED hold gs" not in markers
