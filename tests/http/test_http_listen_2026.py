"""``subscriptions/listen`` over Streamable HTTP at 2026-07-28: an SSE response held open,
acknowledged first, every frame tagged with the subscription id; a change raised while it is
open is delivered on it; at most ``max_listen_streams`` are open at once (one more: 503,
-32000, ``Retry-After``), and a stream the client closes gives its slot back. Judged with raw
``httpx`` streams against real WSGI servers (the built-in one and waitress); the same across
gunicorn workers through Redis is tests/http/test_http_listen_workers.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from support.http import run_waitress
from support.waiting import WAIT, wait_until
from test_http_modern import error_code, headers_for, modern, post

from mcp_sync import Server
from mcp_sync.http import McpWsgiApp, serve_http

SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"


class Served:
    def __init__(self, server: Server, app: McpWsgiApp, url: str) -> None:
        self.server, self.app, self.url = server, app, url


@pytest.fixture(params=["embedded", "waitress"])
def serve(request: pytest.FixtureRequest) -> Iterator[Any]:
    stops: list[Any] = []

    def start(**options: Any) -> Served:
        server = Server("listen-http", version="1.0.0")

        @server.tool()
        def echo(text: str) -> str:
            """Echo the text."""
            return text

        app = McpWsgiApp(server, path="/mcp", keepalive=0.05, modern_json_window=0.05, **options)
        if request.param == "embedded":
            handle = serve_http(app, "127.0.0.1", 0)
            stops.append(handle.stop)
            return Served(server, app, handle.url)
        base, stop = run_waitress(app)
        stops.append(lambda: (app.close(), stop()))
        return Served(server, app, str(base) + "/mcp")

    yield start
    for stop in reversed(stops):
        stop()


def listen_body(request_id: Any) -> dict[str, Any]:
    return modern("subscriptions/listen", {"notifications": {"toolsListChanged": True}}, request_id)


class ListenStream:
    """A listen POST whose SSE answer is read message by message."""

    def __init__(self, url: str, request_id: Any) -> None:
        body = listen_body(request_id)
        self._client = httpx.Client(timeout=httpx.Timeout(WAIT))
        self._cm = self._client.stream(
            "POST",
            url,
            content=json.dumps(body),
            headers={"Content-Type": "application/json", **headers_for(body)},
        )
        self.response = self._cm.__enter__()
        self._lines = self.response.iter_lines()

    def next_message(self) -> dict[str, Any]:
        """The next message on the stream (keep-alive comments skipped)."""
        for line in self._lines:
            if line.startswith("data:") and line[5:].strip():
                return dict(json.loads(line[5:]))
        raise AssertionError("the listen stream ended")

    def close(self) -> None:
        self._cm.__exit__(None, None, None)
        self._client.close()


def test_a_listen_stream_is_acknowledged_then_gets_changes(serve: Any) -> None:
    served = serve()
    stream = ListenStream(served.url, "L1")
    try:
        assert stream.response.status_code == 200
        assert stream.response.headers["content-type"].startswith("text/event-stream")
        assert "mcp-session-id" not in stream.response.headers
        ack = stream.next_message()
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        assert ack["params"]["notifications"] == {"toolsListChanged": True}
        assert ack["params"]["_meta"][SUBSCRIPTION_ID] == "L1"
        served.server.add_tool(lambda: "x", name="added")
        change = stream.next_message()
        assert change["method"] == "notifications/tools/list_changed"
        assert change["params"]["_meta"][SUBSCRIPTION_ID] == "L1"
        assert served.app.listen_slots.open == 1
    finally:
        stream.close()
    wait_until(lambda: served.app.listen_slots.open == 0, "the listen slot is given back")


def test_listen_streams_beyond_the_cap_are_refused_and_a_closed_one_frees_its_slot(
    serve: Any,
) -> None:
    served = serve(max_listen_streams=1)
    first = ListenStream(served.url, "a")
    try:
        assert first.next_message()["method"] == "notifications/subscriptions/acknowledged"
        body = listen_body("b")
        refused = post(served.url, body, headers_for(body))
        assert refused.status_code == 503
        assert int(refused.headers["retry-after"]) >= 1
        assert error_code(refused) == -32000 and refused.json()["id"] == "b"
        assert "max_listen_streams=1" in refused.json()["error"]["message"]
        # other requests are not affected by the cap
        call = modern("tools/call", {"name": "echo", "arguments": {"text": "hi"}})
        assert post(served.url, call, headers_for(call)).status_code == 200
    finally:
        first.close()
    # the closed stream is noticed at its next keep-alive write: the slot comes back
    wait_until(lambda: served.app.listen_slots.open == 0, "the listen slot is given back")
    again = ListenStream(served.url, "c")
    try:
        assert again.next_message()["params"]["_meta"][SUBSCRIPTION_ID] == "c"
    finally:
        again.close()


def test_a_listen_from_a_client_that_accepts_only_json_is_406(serve: Any) -> None:
    served = serve()
    body = listen_body("j")
    response = post(served.url, body, headers_for(body, Accept="application/json"))
    assert response.status_code == 406
    assert served.app.listen_slots.open == 0


def test_a_listen_refused_by_the_server_frees_its_slot(serve: Any) -> None:
    served = serve(max_listen_streams=1)
    body = modern("subscriptions/listen", {"notifications": "not an object"}, "bad")
    response = post(served.url, body, headers_for(body))
    assert response.status_code == 400 and error_code(response) == -32602
    wait_until(lambda: served.app.listen_slots.open == 0, "the listen slot is given back")


def test_closing_the_app_ends_a_listen_stream_with_its_closing_result(serve: Any) -> None:
    served = serve()
    stream = ListenStream(served.url, "bye")
    try:
        assert stream.next_message()["method"] == "notifications/subscriptions/acknowledged"
        served.app.close()
        closing = stream.next_message()
        assert closing["id"] == "bye"
        assert closing["result"]["resultType"] == "complete"
        assert closing["result"]["_meta"][SUBSCRIPTION_ID] == "bye"
    finally:
        stream.close()
