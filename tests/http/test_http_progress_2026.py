"""Notifications about a request travel with its answer, never after it.

At 2026-07-28 a call's progress and log messages are written on that call's SSE stream,
before its response (a call that sends one inside the JSON window is answered as SSE at
once). A client that accepts only JSON gets the response alone. At 2025-11-25 with
``json_response=True`` the notifications about a request are dropped: the JSON answer has no
room for them, and the GET stream, where they would race the answer, SHOULD carry only
messages unrelated to a running request.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from support.http import ACCEPT_BOTH, run_waitress
from support.messages import call_tool, initialize_request, notification
from test_http_gunicorn import sse_messages
from test_http_modern import headers_for, modern, post

from mcp_sync import Context, Server
from mcp_sync.http import McpWsgiApp, serve_http
from mcp_sync.http.session_transport import HttpSessionTransport
from mcp_sync.transports.base import OutboundMeta


def make_progress_server() -> Server:
    server = Server("progress-http", version="1.0.0")

    @server.tool()
    def steps(n: int, ctx: Context) -> str:
        """Reports ``n`` steps of progress and logs each."""
        for i in range(1, n + 1):
            ctx.report_progress(i, n, f"step {i}")
            ctx.info(f"did step {i}")
        return "done"

    @server.tool()
    def touch() -> str:
        """Changes the tool list (an unrelated notification for every session)."""
        server.add_tool(lambda: "x", name="added")
        return "touched"

    return server


@pytest.fixture(params=["embedded", "waitress"])
def serve(request: pytest.FixtureRequest) -> Iterator[Any]:
    stops: list[Any] = []

    def start(**options: Any) -> str:
        app = McpWsgiApp(make_progress_server(), path="/mcp", **options)
        if request.param == "embedded":
            handle = serve_http(app, "127.0.0.1", 0)
            stops.append(handle.stop)
            return handle.url
        base, stop = run_waitress(app)
        stops.append(lambda: (app.close(), stop()))
        return str(base) + "/mcp"

    yield start
    for stop in reversed(stops):
        stop()


def modern_steps(n: int, accept: str = ACCEPT_BOTH) -> tuple[dict[str, Any], dict[str, str]]:
    body = modern("tools/call", {"name": "steps", "arguments": {"n": n}}, "p")
    body["params"]["_meta"]["progressToken"] = "tok"
    body["params"]["_meta"]["io.modelcontextprotocol/logLevel"] = "info"
    return body, headers_for(body, Accept=accept)


def test_2026_progress_and_logs_come_on_the_call_stream_before_its_answer(serve: Any) -> None:
    url = serve(modern_json_window=5.0)  # the window is long: the notifications end it
    body, headers = modern_steps(3)
    response = post(url, body, headers)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    messages = sse_messages(response.text)
    methods = [m.get("method", "response") for m in messages]
    assert methods == ["notifications/progress", "notifications/message"] * 3 + ["response"]
    progress = [
        m["params"]["progress"] for m in messages if m.get("method") == "notifications/progress"
    ]
    assert progress == [1, 2, 3]
    assert all(m["params"]["progressToken"] == "tok" for m in messages[:-1:2])
    assert messages[-1]["id"] == "p" and messages[-1]["result"]["content"][0]["text"] == "done"


def test_2026_a_json_only_client_gets_the_answer_alone(serve: Any) -> None:
    url = serve()
    body, headers = modern_steps(3, accept="application/json")
    response = post(url, body, headers)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.json()["result"]["content"][0]["text"] == "done"


def test_2026_json_response_apps_answer_with_json_alone(serve: Any) -> None:
    url = serve(json_response=True)
    body, headers = modern_steps(2)
    response = post(url, body, headers)
    assert response.headers["content-type"] == "application/json"
    assert response.json()["result"]["content"][0]["text"] == "done"


def test_2025_json_answers_never_have_their_progress_arrive_after_them(serve: Any) -> None:
    """The GET stream is read up to an unrelated notification raised after the answer: no
    progress of the answered call is on it, before or after."""
    url = serve(json_response=True)
    init = post(url, initialize_request(), {"Accept": ACCEPT_BOTH})
    common = {
        "Accept": ACCEPT_BOTH,
        "Mcp-Session-Id": init.headers["mcp-session-id"],
        "MCP-Protocol-Version": "2025-11-25",
    }
    assert post(url, notification("notifications/initialized"), common).status_code == 202
    with (
        httpx.Client(timeout=30) as getter,
        getter.stream("GET", url, headers={**common, "Accept": "text/event-stream"}) as stream,
    ):
        assert stream.status_code == 200
        chunks = stream.iter_raw()
        seen = next(chunks)  # the priming event: the stream is open
        answer = post(url, call_tool("steps", {"n": 3}, 2, progress_token="tok"), common)
        assert answer.headers["content-type"] == "application/json"
        assert answer.json()["result"]["content"][0]["text"] == "done"
        assert post(url, call_tool("touch", {}, 3), common).json()["id"] == 3
        for chunk in chunks:
            seen += chunk
            if b"notifications/tools/list_changed" in seen:
                break
    methods = [m.get("method") for m in sse_messages(seen.decode())]
    assert "notifications/tools/list_changed" in methods
    assert "notifications/progress" not in methods


def test_json_mode_streams_drop_related_notifications_but_not_requests() -> None:
    transport = HttpSessionTransport("s")
    stream = transport.open_request_stream(1, json_mode=True)
    assert stream is not None
    transport.send(b'{"p":1}', OutboundMeta("notification", "notifications/progress", None, 1))
    transport.send(b'{"q":1}', OutboundMeta("request", "sampling/createMessage", 9, 1))
    transport.send(b'{"r":1}', OutboundMeta("response", None, None, 1))
    assert stream.wait_for_event(0) == b'{"r":1}'
    standalone = [json.loads(e.split(b"data: ", 1)[1]) for e in _pending(transport)]
    assert standalone == [{"q": 1}]


def _pending(transport: HttpSessionTransport) -> list[bytes]:
    events = transport.standalone.events(0, keepalive=0)
    next(events)  # the priming event
    out = []
    for event in events:
        if event.startswith(b":"):
            break
        out.append(event)
    events.close()
    return out
