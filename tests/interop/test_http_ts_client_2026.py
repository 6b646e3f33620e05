"""Real clients at 2026-07-28 against an mcp_sync WSGI app over Streamable HTTP, cancelling.

The TypeScript SDK v2 client (``tests/node/ts_client_2026.mjs``, pinned to 2026-07-28) and the
official ``mcp`` 2.3.0 client (``tests/peers/official_client_2026.py``, its default ``auto``
mode) each discover (the TypeScript one), list, call, answer an input round and then cancel a
running call: the TypeScript client aborts the call's ``AbortSignal``, the official one
cancels the task awaiting it. At 2026-07-28 over HTTP either way must **close that request's
response stream** and POST nothing; the app notices the closed stream and fires the
handler's token. Judged from three places: the handler's markers (``STARTED`` then
``CANCELLED``, never ``FINISHED``), the POSTs the app received (their ``Mcp-Method`` header:
no notification), and the client's own wire (no response for the cancelled id). Served by the
built-in server and by waitress.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.http import run_waitress
from support.paths import PEERS, PYTHON
from support.peers_2026 import (
    call_requests,
    of,
    requests,
    response,
    run_client,
    step,
    text_of,
    ts_client_2026,
    wire,
)
from support.waiting import wait_until

from mcp_sync import Context, Server
from mcp_sync.http import McpWsgiApp, serve_http

pytestmark = pytest.mark.interop

MODERN = "2026-07-28"
HOLD_LIMIT = 60.0
OFFICIAL_CLIENT_2026 = [PYTHON, str(PEERS / "official_client_2026.py")]
STEPS: list[dict[str, Any]] = [
    {"op": "list"},
    {"op": "call", "name": "echo", "arguments": {"text": "over http"}},
    {"op": "call", "name": "ask_name", "arguments": {}},
    {"op": "cancel", "name": "slow", "arguments": {"tag": "c1"}, "after_marker": "STARTED slow c1"},
    {"op": "wait_marker", "marker": "CANCELLED slow c1"},
    {"op": "call", "name": "echo", "arguments": {"text": "after cancel"}},
]


def make_server(events: Path) -> Server:
    server = Server("http-2026-cancel", version="1.0.0")

    def mark(line: str) -> None:
        with events.open("a", encoding="utf-8") as f:
            f.write(line + "\n")

    @server.tool()
    def echo(text: str) -> str:
        """Echo the text."""
        return text

    @server.tool()
    def ask_name(ctx: Context) -> str:
        """Ask the user's name (an input round at 2026-07-28)."""
        answer = ctx.session.elicit(
            "Your name?", {"type": "object", "properties": {"name": {"type": "string"}}}
        )
        return f"hello {(answer.content or {}).get('name')}"

    @server.tool()
    def slow(tag: str, ctx: Context) -> str:
        """Run until cancelled (bounded)."""
        mark(f"STARTED slow {tag}")
        if ctx.wait(HOLD_LIMIT):
            mark(f"CANCELLED slow {tag}")
            return "cancelled"
        mark(f"FINISHED slow {tag}")
        return "finished"

    return server


class PostLog:
    """WSGI middleware recording the ``Mcp-Method`` header of every POST the app receives."""

    def __init__(self, app: McpWsgiApp) -> None:
        self.app = app
        self.lock = threading.Lock()
        self.methods: list[str | None] = []

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        if environ["REQUEST_METHOD"] == "POST":
            with self.lock:
                self.methods.append(environ.get("HTTP_MCP_METHOD"))
        return self.app(environ, start_response)


@pytest.fixture(params=["embedded", "waitress"])
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, PostLog, Path]]:
    """``(url, post log, markers file)`` of a fresh app under a real WSGI server."""
    events = tmp_path / "events"
    events.touch()
    app = McpWsgiApp(make_server(events), path="/mcp", modern_json_window=0.05, keepalive=0.05)
    log = PostLog(app)
    if request.param == "embedded":
        handle = serve_http(log, "127.0.0.1", 0)
        try:
            yield handle.url, log, events
        finally:
            handle.stop()
            app.close()
        return
    base, stop = run_waitress(log)
    try:
        yield base + "/mcp", log, events
    finally:
        app.close()
        stop()


CLIENTS = {"ts-v2": ts_client_2026, "official": lambda: OFFICIAL_CLIENT_2026}


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_a_2026_client_cancels_by_closing_the_stream_and_the_handler_sees_it(
    client: str, served: tuple[str, PostLog, Path]
) -> None:
    url, log, events = served
    lines = run_client(CLIENTS[client](), ["--url", url], STEPS, PEER_EVENTS_FILE=str(events))
    assert not of(lines, "error") or all(e["step"] == 3 for e in of(lines, "error")), lines
    (connected,) = of(lines, "connected")
    assert connected["protocolVersion"] == MODERN
    sent = [m for m in wire(lines, ">>") if "id" in m]
    assert all(m.get("method") != "initialize" for m in sent), sent
    assert all(
        m["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] == MODERN for m in sent
    )
    results = [text_of(line["result"]) for line in of(lines, "result")]
    assert results == ["over http", "hello Ada", "after cancel"], results
    # the cancelled call: never answered, its handler saw the token and did not finish
    (slow,) = call_requests(lines, "slow")
    assert response(lines, slow["id"]) == []
    assert of(step(lines, 3), "result") == []
    markers = events.read_text(encoding="utf-8").splitlines()
    assert markers.index("STARTED slow c1") < markers.index("CANCELLED slow c1"), markers
    assert "FINISHED slow c1" not in markers, markers
    # closing the stream was the cancel: nothing was POSTed for it (a notification POST has
    # no Mcp-Method of a request; at 2026 none is sent at all)
    with log.lock:
        posted = list(log.methods)
    assert not [m for m in posted if m is None or m.startswith("notifications/")], posted
    assert posted.count("tools/call") == len(requests(lines, "tools/call")), posted
    # the app keeps nothing of it: no session was minted, no request is left running
    assert all("mcp-session-id" not in json.dumps(line).lower() for line in of(lines, "wire"))
    wait_until(lambda: log.app.stats().sessions == 0, "the app to hold no session")
