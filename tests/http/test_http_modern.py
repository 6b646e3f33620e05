"""Streamable HTTP at 2026-07-28 on the same WSGI app that serves 2025 sessions.

A POST whose body carries a 2026-07-28 envelope (or whose ``MCP-Protocol-Version`` names
2026-07-28) is served statelessly: no ``Mcp-Session-Id``, routing headers checked against the
body (-32020), the spec's status codes. 2025 traffic on the same app keeps its sessions.
Judged with raw ``httpx`` requests against real WSGI servers (the built-in one and waitress).
"""

from __future__ import annotations

import base64
import gc
import io
import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from support.http import ACCEPT_BOTH, run_waitress
from support.messages import initialize_request, notification
from support.probes import GateProbe
from support.waiting import WAIT, wait_until

from mcp_sync import Context, Server
from mcp_sync import endpoint as endpoint_module
from mcp_sync.http import McpWsgiApp, serve_http
from mcp_sync.http.routing_headers import decode_header_value

MODERN = "2026-07-28"
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
}


def make_modern_server(probe: GateProbe | None = None) -> Server:
    server = Server("modern-http", version="1.0.0")
    gates = probe or GateProbe()

    @server.tool()
    def gated(tag: str, ctx: Context) -> str:
        """Block until the test releases ``tag`` or the request is cancelled."""
        cancelled = gates.gate(tag, ctx)
        return f"{tag}: {'cancelled' if cancelled else 'released'}"

    @server.tool()
    def echo(text: str) -> str:
        """Echo the text."""
        return text

    @server.tool()
    def ask(ctx: Context) -> str:
        """Asks the client a question (needs the elicitation capability)."""
        ctx.session.elicit("name?", {"type": "object", "properties": {}})
        return "asked"

    @server.prompt()
    def greet(name: str) -> str:
        """Greets."""
        return f"hello {name}"

    return server


@pytest.fixture(params=["embedded", "waitress"])
def serve_app(request: pytest.FixtureRequest) -> Iterator[Callable[..., str]]:
    """``serve_app(**options)`` -> the URL of a fresh :class:`McpWsgiApp` under a real WSGI server."""
    stops: list[Callable[[], None]] = []

    def start(probe: GateProbe | None = None, **options: Any) -> str:
        app = McpWsgiApp(make_modern_server(probe), path="/mcp", **options)
        if request.param == "embedded":
            handle = serve_http(app, "127.0.0.1", 0)
            stops.append(handle.stop)
            return handle.url
        base, stop = run_waitress(app)

        def stop_both() -> None:
            app.close()
            stop()

        stops.append(stop_both)
        return str(base) + "/mcp"

    yield start
    for stop in reversed(stops):
        stop()


def modern(
    method: str, params: dict[str, Any] | None = None, request_id: Any = 1
) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": method,
        "params": {**(params or {}), "_meta": dict(ENVELOPE)},
    }


def headers_for(body: dict[str, Any], **extra: str) -> dict[str, str]:
    headers = {"Accept": ACCEPT_BOTH, "MCP-Protocol-Version": MODERN, "Mcp-Method": body["method"]}
    name = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}.get(
        body["method"]
    )
    if name is not None:
        headers["Mcp-Name"] = body["params"][name]
    headers.update(extra)
    return {k: v for k, v in headers.items() if v != "-"}  # "-": leave the header out


def post(url: str, body: Any, headers: dict[str, str]) -> httpx.Response:
    return httpx.post(
        url,
        content=json.dumps(body),
        headers={"Content-Type": "application/json", **headers},
        timeout=30,
    )


def error_code(response: httpx.Response) -> int:
    return int(response.json()["error"]["code"])


def b64(text: str) -> str:
    return "=?base64?" + base64.b64encode(text.encode()).decode() + "?="


def test_a_2026_call_is_answered_statelessly(serve_app: Callable[..., str]) -> None:
    url = serve_app()
    for request_id in (1, 2):  # the same id twice: nothing is remembered between POSTs
        body = modern("tools/call", {"name": "echo", "arguments": {"text": "hi"}}, request_id)
        response = post(url, body, headers_for(body, **{"Last-Event-ID": "r-0:3"}))
        assert response.status_code == 200, response.text
        assert "mcp-session-id" not in response.headers
        answer = response.json()
        assert answer["id"] == request_id
        assert answer["result"]["content"][0]["text"] == "hi"
        assert answer["result"]["resultType"] == "complete"


def test_discover_needs_no_session(serve_app: Callable[..., str]) -> None:
    url = serve_app()
    body = modern("server/discover")
    response = post(url, body, headers_for(body))
    assert response.status_code == 200, response.text
    assert "mcp-session-id" not in response.headers
    assert MODERN in response.json()["result"]["supportedVersions"]


def test_mcp_name_in_the_base64_form_is_decoded(serve_app: Callable[..., str]) -> None:
    url = serve_app()
    body = modern("prompts/get", {"name": "greet", "arguments": {"name": "x"}})
    assert post(url, body, headers_for(body, **{"Mcp-Name": b64("greet")})).status_code == 200
    mismatched = post(url, body, headers_for(body, **{"Mcp-Name": b64("other")}))
    assert (mismatched.status_code, error_code(mismatched)) == (400, -32020)


@pytest.mark.parametrize(
    "override",
    [
        {"MCP-Protocol-Version": "-"},
        {"MCP-Protocol-Version": "2025-11-25"},
        {"Mcp-Method": "-"},
        {"Mcp-Method": "tools/list"},
        {"Mcp-Name": "-"},
        {"Mcp-Name": "Echo"},  # values are case-sensitive
        {"Mcp-Name": "=?base64?not base64!?="},
    ],
)
def test_a_missing_or_mismatched_routing_header_is_400_with_32020(
    serve_app: Callable[..., str], override: dict[str, str]
) -> None:
    url = serve_app()
    body = modern("tools/call", {"name": "echo", "arguments": {"text": "hi"}}, "x7")
    response = post(url, body, headers_for(body, **override))
    assert response.status_code == 400, response.text
    assert response.json()["id"] == "x7"
    assert error_code(response) == -32020
    assert "mcp-session-id" not in response.headers


def test_status_codes_follow_the_error(serve_app: Callable[..., str]) -> None:
    url = serve_app()
    unknown = modern("no/such/method")
    response = post(url, unknown, headers_for(unknown))
    assert (response.status_code, error_code(response)) == (404, -32601)

    no_envelope = {"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {}}
    response = post(
        url, no_envelope, headers_for(no_envelope)
    )  # the header says 2026: the body lacks _meta
    assert (response.status_code, error_code(response)) == (400, -32602)

    future = modern("tools/list")
    future["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = "2099-01-01"
    response = post(url, future, headers_for(future, **{"MCP-Protocol-Version": "2099-01-01"}))
    assert (response.status_code, error_code(response)) == (400, -32022)
    assert MODERN in response.json()["error"]["data"]["supported"]

    needs_capability = modern("tools/call", {"name": "ask", "arguments": {}})
    response = post(url, needs_capability, headers_for(needs_capability))
    assert (response.status_code, error_code(response)) == (400, -32021)

    ping = {
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {"_meta": dict(ENVELOPE)},
    }
    response = httpx.post(
        url,
        content=json.dumps(ping),
        headers={
            "Content-Type": "application/json",
            "Accept": ACCEPT_BOTH,
            "MCP-Protocol-Version": MODERN,
        },
    )
    assert (response.status_code, response.content) == (202, b"")

    bare_discover = {
        "jsonrpc": "2.0",
        "id": "d",
        "method": "server/discover",
    }  # 2026 by its method: headers required
    response = httpx.post(
        url,
        content=json.dumps(bare_discover),
        headers={"Content-Type": "application/json", "Accept": ACCEPT_BOTH},
    )
    assert (response.status_code, error_code(response), response.json()["id"]) == (400, -32020, "d")

    body = modern("tools/list")
    response = post(url, body, headers_for(body, Origin="https://evil.example"))
    assert response.status_code == 403


def test_2025_sessions_are_unchanged_on_the_same_app(serve_app: Callable[..., str]) -> None:
    url = serve_app()
    with httpx.Client(
        timeout=30, headers={"Accept": ACCEPT_BOTH, "Content-Type": "application/json"}
    ) as http:
        started = http.post(url, content=json.dumps(initialize_request(0)))
        assert started.status_code == 200
        session_id = started.headers["mcp-session-id"]
        session = {"Mcp-Session-Id": session_id, "MCP-Protocol-Version": "2025-11-25"}
        assert (
            http.post(
                url, content=json.dumps(notification("notifications/initialized")), headers=session
            ).status_code
            == 202
        )
        call = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "old"}},
        }
        answered = http.post(url, content=json.dumps(call), headers=session)
        assert answered.status_code == 200
        assert "old" in answered.text
        assert "resultType" not in answered.text  # a 2025 result
        body = modern("tools/list", request_id=2)  # a 2026 request in between is stateless
        assert post(url, body, headers_for(body)).status_code == 200
        assert http.delete(url, headers=session).status_code == 200


def test_modern_only_refuses_get_delete_and_initialize(serve_app: Callable[..., str]) -> None:
    url = serve_app(modern_only=True)
    assert httpx.get(url, headers={"Accept": "text/event-stream"}).status_code == 405
    assert httpx.delete(url).status_code == 405
    response = httpx.post(
        url,
        content=json.dumps(initialize_request(0)),
        headers={"Content-Type": "application/json", "Accept": ACCEPT_BOTH},
    )
    assert (response.status_code, error_code(response)) == (400, -32022)
    assert "mcp-session-id" not in response.headers
    body = modern("tools/list")
    assert post(url, body, headers_for(body)).status_code == 200


@pytest.mark.parametrize(
    ("value", "decoded"),
    [
        ("plain", "plain"),
        (b64("héllo\n"), "héllo\n"),
        (b64("=?base64?x?="), "=?base64?x?="),
        ("=?base64?!!?=", None),
        ("=?base64??=", ""),
    ],
)
def test_header_values_decode(value: str, decoded: str | None) -> None:
    assert decode_header_value(value) == decoded


# -- long calls: SSE, and closing the stream cancels ---------------------------------------------------
def test_a_long_call_is_answered_as_sse_with_keepalive_comments(
    serve_app: Callable[..., str],
) -> None:
    probe = GateProbe()
    url = serve_app(probe, modern_json_window=0.05, keepalive=0.05)
    body = modern("tools/call", {"name": "gated", "arguments": {"tag": "long"}}, "L")
    chunks: list[bytes] = []
    with httpx.stream(
        "POST",
        url,
        content=json.dumps(body),
        headers={"Content-Type": "application/json", **headers_for(body)},
        timeout=WAIT,
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["x-accel-buffering"] == "no"
        assert "mcp-session-id" not in response.headers
        raw = response.iter_raw()
        for chunk in raw:
            chunks.append(chunk)
            if b"".join(chunks).count(b": ping") >= 2:
                break
        assert probe.started("long").wait(WAIT)
        probe.release("long")
        chunks.extend(raw)
    text = b"".join(chunks).decode()
    assert text.startswith(": ping\n\n")
    (event,) = [part for part in text.split("\n\n") if part.startswith("event: message")]
    answer = json.loads(event.split("data: ", 1)[1])
    assert answer["id"] == "L"
    assert answer["result"]["content"][0]["text"] == "long: released"
    assert not probe.cancelled("long").is_set()


def test_closing_the_stream_cancels_the_handler(serve_app: Callable[..., str]) -> None:
    probe = GateProbe()
    url = serve_app(probe, modern_json_window=0.05, keepalive=0.05)
    body = modern("tools/call", {"name": "gated", "arguments": {"tag": "gone"}}, 9)
    with httpx.stream(
        "POST",
        url,
        content=json.dumps(body),
        headers={"Content-Type": "application/json", **headers_for(body)},
        timeout=WAIT,
    ) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        first = next(response.iter_raw())
        assert first.startswith(b": ping")
        assert probe.started("gone").wait(WAIT)
    # the connection is closed: the next keep-alive write fails and the handler's token fires
    assert probe.cancelled("gone").wait(WAIT)
    assert not probe.completed("gone").is_set()


def _call_app(app: McpWsgiApp, body: bytes, headers: dict[str, str]) -> tuple[str, bytes]:
    """Call the WSGI app in-process with one POST; its status and whole body."""
    environ: dict[str, Any] = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": "/mcp",
        "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.input": io.BytesIO(body),
        **{"HTTP_" + name.upper().replace("-", "_"): value for name, value in headers.items()},
    }
    statuses: list[str] = []
    chunks = app(environ, lambda status, _headers, _exc=None: statuses.append(status))
    try:
        return statuses[0], b"".join(chunks)
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            close()


def test_a_2026_body_is_parsed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # the app parses the body for its checks and hands the message to the request's
    # endpoint, which does not parse it again; a body the endpoint's parser refuses at
    # first (a lone surrogate escape) is still handed over as a line, and answered alike
    lines: list[Any] = []
    real_decode = endpoint_module.decode

    def counting_decode(line: Any) -> Any:
        lines.append(line)
        return real_decode(line)

    monkeypatch.setattr(endpoint_module, "decode", counting_decode)
    app = McpWsgiApp(make_modern_server(), path="/mcp")
    try:
        for text in ("hi", "\ud800"):
            body = modern("tools/call", {"name": "echo", "arguments": {"text": text}})
            status, data = _call_app(app, json.dumps(body).encode(), headers_for(body))
            assert status == "200 OK", data
            assert json.loads(data)["result"]["content"][0]["text"] == text
        assert len(lines) == 1  # the second body only
        assert b"\\ud800" in lines[0]
    finally:
        app.close()


def test_a_2026_request_leaves_nothing_for_the_garbage_collector() -> None:
    # the one-shot session, its endpoint and the request's scope are freed as the request
    # ends: none of them keeps another alive through a reference cycle, so the collector
    # (whose runs the app's allocations would otherwise trigger again and again) finds no
    # garbage
    app = McpWsgiApp(make_modern_server(), path="/mcp")
    body = modern("tools/call", {"name": "echo", "arguments": {"text": "hi"}})
    data = json.dumps(body).encode()
    try:
        _call_app(app, data, headers_for(body))  # whatever is made once, for good
        gc.collect()
        gc.disable()
        try:
            for _ in range(5):
                status, answer = _call_app(app, data, headers_for(body))
                assert json.loads(answer)["result"]["content"][0]["text"] == "hi", (status, answer)
            # the worker that ran the handlers lets go of them once it waits for the next
            wait_until(lambda: app.pool.stats().busy == 0, "the worker is idle")
            assert gc.collect() == 0
        finally:
            gc.enable()
    finally:
        app.close()
