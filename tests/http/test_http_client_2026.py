"""The client over Streamable HTTP at 2026-07-28, against our own WSGI app under waitress.

``Client.http(url)`` negotiates like stdio (server/discover first, ``initialize`` as the
fallback), stamps the routing headers on every POST (recorded by a WSGI middleware in front
of the real app), and cancels a 2026-07-28 call by closing its stream: the call ends
``Cancelled`` at once, nothing is POSTed, and the server's handler sees its token.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

import pytest
from support.http import run_waitress
from support.probes import GateProbe
from support.raw_http import RawHttpServer, read_request
from support.waiting import WAIT

from mcp_sync import Client, Context, Server
from mcp_sync.cancel import CancelToken
from mcp_sync.errors import (
    Cancelled,
    ConnectionClosed,
    HttpError,
    McpError,
    RequestTimeout,
    ResponseTooLarge,
)
from mcp_sync.http import McpWsgiApp
from mcp_sync.lifecycle import Era

pytestmark = pytest.mark.usefixtures("client_path")  # both client paths (conftest)

MODERN = "2026-07-28"

ANNOTATED = {
    "type": "object",
    "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "limit": {"type": "integer", "x-mcp-header": "Limit"},
        "dry": {"type": "boolean", "x-mcp-header": "Dry"},
        "where": {
            "type": "object",
            "properties": {"zone": {"type": "string", "x-mcp-header": "Zone"}},
        },
        "query": {"type": "string"},
    },
}

BROKEN = {  # an annotation on an array item is invalid: the tool must be dropped
    "type": "object",
    "properties": {
        "tags": {"type": "array", "items": {"type": "string", "x-mcp-header": "Tag"}},
    },
}


def make_server(probe: GateProbe) -> Server:
    server = Server("client-2026", version="1.0.0")

    @server.tool()
    def echo(text: str) -> str:
        """Echo the text."""
        return text

    @server.tool()
    def gated(tag: str, ctx: Context) -> str:
        """Block until released or cancelled."""
        cancelled = probe.gate(tag, ctx)
        return f"{tag}: {'cancelled' if cancelled else 'released'}"

    @server.tool()
    def stepped(steps: int, ctx: Context) -> str:
        """Report ``steps`` progress notifications, then answer."""
        for step in range(steps):
            ctx.report_progress(step + 1, steps, f"step {step + 1}")
        return "stepped"

    @server.tool()
    def ask(ctx: Context) -> str:
        """Ask the client for a name (an input round at 2026-07-28)."""
        answer = ctx.session.elicit("name?", {"type": "object", "properties": {}})
        return f"hello {answer.content}"

    @server.tool()
    def nap(tag: str, seconds: float, ctx: Context) -> str:
        """Wait ``seconds`` unless cancelled (then the probe's ``<tag>.cancelled`` is set)."""
        probe.started(tag).set()
        if ctx.wait(seconds):
            probe.cancelled(tag).set()
            return "cancelled"
        return "rested"

    @server.tool(input_schema=ANNOTATED)
    def query(**arguments: Any) -> str:
        """A tool whose arguments are mirrored in headers."""
        return json.dumps(arguments, sort_keys=True)

    @server.tool(input_schema=BROKEN)
    def broken(**arguments: Any) -> str:
        """A tool with an invalid x-mcp-header annotation."""
        return "never listed"

    @server.prompt()
    def greet(name: str) -> str:
        """Greets."""
        return f"hello {name}"

    return server


class Recorder:
    """A WSGI middleware that records the method and headers of every POST."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.lock = threading.Lock()
        self.posts: list[tuple[dict[str, Any], dict[str, str]]] = []

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        if environ["REQUEST_METHOD"] == "POST":
            import io

            length = int(environ.get("CONTENT_LENGTH") or 0)
            body = environ["wsgi.input"].read(length)
            environ["wsgi.input"] = io.BytesIO(body)
            headers = {
                key[5:].replace("_", "-").lower(): value
                for key, value in environ.items()
                if key.startswith("HTTP_")
            }
            with self.lock:
                self.posts.append((json.loads(body), headers))
        return self.app(environ, start_response)

    def headers_of(self, method: str) -> list[dict[str, str]]:
        with self.lock:
            return [headers for body, headers in self.posts if body.get("method") == method]


@pytest.fixture
def served() -> Iterator[Callable[..., tuple[str, GateProbe, Recorder]]]:
    """``served(**app_options)`` -> (url, probe, recorder) of our app under waitress."""
    stops: list[Callable[[], None]] = []

    def start(**options: Any) -> tuple[str, GateProbe, Recorder]:
        probe = GateProbe()
        app = McpWsgiApp(make_server(probe), path="/mcp", **options)
        recorder = Recorder(app)
        base, stop = run_waitress(recorder)

        def stop_both() -> None:
            app.close()
            stop()

        stops.append(stop_both)
        return base + "/mcp", probe, recorder

    yield start
    for stop in reversed(stops):
        stop()


def test_the_default_mode_ends_on_2026_without_a_session(served: Any) -> None:
    url, _probe, recorder = served()
    with Client.http(url) as client:
        assert client.era is Era.MODERN
        assert client.protocol_version == MODERN
        assert client.server_info.name == "client-2026"
        assert client.call_tool("echo", {"text": "hi"}).content[0].text == "hi"
    methods = [body.get("method") for body, _ in recorder.posts]
    assert "initialize" not in methods
    assert methods[0] == "server/discover"
    assert all("mcp-session-id" not in headers for _, headers in recorder.posts)


def test_every_post_carries_the_routing_headers(served: Any) -> None:
    url, _probe, recorder = served()
    with Client.http(url) as client:
        client.list_tools()
        client.call_tool("echo", {"text": "x"})
        client.get_prompt("greet", {"name": "ann"})
        client.call_tool("echo", {"text": "y"}, timeout=WAIT)
    for method in ("server/discover", "tools/list", "tools/call", "prompts/get"):
        for headers in recorder.headers_of(method):
            assert headers["mcp-protocol-version"] == MODERN
            assert headers["mcp-method"] == method
            assert "application/json" in headers["accept"]
            assert "text/event-stream" in headers["accept"]
    assert [h["mcp-name"] for h in recorder.headers_of("tools/call")] == ["echo", "echo"]
    assert [h["mcp-name"] for h in recorder.headers_of("prompts/get")] == ["greet"]
    assert "mcp-name" not in recorder.headers_of("tools/list")[0]


def test_x_mcp_header_arguments_are_mirrored_and_invalid_tools_dropped(served: Any) -> None:
    url, _probe, recorder = served()
    with Client.http(url) as client:
        names = {tool.name for tool in client.list_tools()}
        assert "query" in names and "broken" not in names
        arguments = {
            "region": "Hello, 世界",
            "limit": 42,
            "dry": False,
            "where": {"zone": "=?base64?literal?="},
            "query": "select",
        }
        client.call_tool("query", arguments)
        client.call_tool("query", {"region": "us-west1", "limit": None})
    first, second = recorder.headers_of("tools/call")
    assert first["mcp-param-region"] == "=?base64?SGVsbG8sIOS4lueVjA==?="
    assert first["mcp-param-limit"] == "42"
    assert first["mcp-param-dry"] == "false"
    assert first["mcp-param-zone"] == "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="
    assert second["mcp-param-region"] == "us-west1"
    assert "mcp-param-limit" not in second and "mcp-param-zone" not in second


def test_a_mirrored_argument_is_read_as_its_json_says(served: Any) -> None:
    """The header of an annotated argument is what the body carries: a ``Decimal`` is sent
    as a JSON string, so it is mirrored as that string (and the server accepts the call)."""
    url, _probe, recorder = served()
    with Client.http(url) as client:
        client.list_tools()
        result = client.call_tool("query", {"region": Decimal("1.5"), "query": "q"})
        assert not result.is_error
        assert json.loads(result.content[0].text)["region"] == "1.5"
    (headers,) = recorder.headers_of("tools/call")
    assert headers["mcp-param-region"] == "1.5"


def test_cancel_closes_the_stream_and_the_handler_sees_its_token(served: Any) -> None:
    url, probe, recorder = served(modern_json_window=0.05, keepalive=0.05)
    with Client.http(url) as client:
        token = CancelToken()
        call = client.call_tool_future("gated", {"tag": "c"}, cancel_token=token)
        assert probe.started("c").wait(WAIT)
        token.cancel("changed my mind")
        with pytest.raises(Cancelled):
            call.result(WAIT)
        assert probe.cancelled("c").wait(WAIT)
        assert not probe.completed("c").is_set()
        assert client.call_tool("echo", {"text": "after"}).content[0].text == "after"
    assert recorder.headers_of("notifications/cancelled") == []


def test_a_timeout_closes_the_stream_too(served: Any) -> None:
    url, probe, recorder = served(modern_json_window=0.05, keepalive=0.05)
    with Client.http(url) as client:
        with pytest.raises(RequestTimeout):
            client.call_tool("gated", {"tag": "t"}, timeout=0.3)
        assert probe.cancelled("t").wait(WAIT)
    assert recorder.headers_of("notifications/cancelled") == []


def test_a_2025_session_still_posts_notifications_cancelled(served: Any) -> None:
    url, probe, recorder = served()
    with Client.http(url, protocol="legacy") as client:
        assert client.era is Era.HANDSHAKE
        token = CancelToken()
        call = client.call_tool_future("gated", {"tag": "old"}, cancel_token=token)
        assert probe.started("old").wait(WAIT)
        token.cancel()
        with pytest.raises(Cancelled):
            call.result(WAIT)
        assert probe.cancelled("old").wait(WAIT)
    assert len(recorder.headers_of("notifications/cancelled")) == 1


def test_progress_from_our_app_reaches_on_progress(served: Any) -> None:
    url, _probe, _recorder = served(modern_json_window=0.0)
    seen: list[tuple[float, float | None, str | None]] = []
    with Client.http(url) as client:
        result = client.call_tool(
            "stepped", {"steps": 3}, on_progress=lambda p, t, m: seen.append((p, t, m))
        )
    assert result.content[0].text == "stepped"
    assert [progress for progress, _, _ in seen] == [1, 2, 3]


def test_input_rounds_over_http_are_answered_by_the_handler(served: Any) -> None:
    url, _probe, recorder = served()
    asked: list[dict[str, Any]] = []

    def elicit(params: dict[str, Any], ctx: Context) -> dict[str, Any]:
        asked.append(params)
        return {"action": "accept", "content": {"name": "ann"}}

    with Client.http(url, elicitation_handler=elicit) as client:
        text = client.call_tool("ask", {}).content[0].text
    assert "ann" in text
    assert len(asked) == 1
    calls = recorder.headers_of("tools/call")
    assert len(calls) == 2 and all(h["mcp-name"] == "ask" for h in calls)


def test_protocol_modern_on_http_fails_against_a_legacy_only_server(served: Any) -> None:
    url, _probe, _recorder = served()
    with Client.http(url, protocol=MODERN) as client:
        assert client.era is Era.MODERN
    with Client.http(url, protocol="2025-11-25") as client:
        assert client.protocol_version == "2025-11-25"


def test_an_mcp_error_of_a_call_leaves_the_client_usable(served: Any) -> None:
    url, _probe, _recorder = served()
    with Client.http(url) as client:
        with pytest.raises(McpError) as raised:
            client.get_prompt("no-such-prompt", {})
        assert raised.value.http_status in (200, 400, 404)
        assert client.call_tool("echo", {"text": "ok"}).content[0].text == "ok"


# -- a scripted server: what older or odd servers answer ------------------------------------
class Scripted:
    """A WSGI app that answers every 2026-07-28 POST (a body with the envelope) as scripted
    by ``modern(body) -> (status, content type, body bytes)``, and hands everything else to
    ``legacy`` (a real app serving 2025 sessions), like an older server would."""

    def __init__(self, legacy: Any, modern: Callable[[dict[str, Any]], tuple[str, str, bytes]]):
        self.legacy = legacy
        self.modern = modern
        self.modern_posts: list[dict[str, Any]] = []

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        import io

        if environ["REQUEST_METHOD"] == "POST":
            body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
            environ["wsgi.input"] = io.BytesIO(body)
            message = json.loads(body)
            meta = (message.get("params") or {}).get("_meta") or {}
            if "io.modelcontextprotocol/protocolVersion" in meta:
                self.modern_posts.append(message)
                status, content_type, payload = self.modern(message)
                start_response(status, [("Content-Type", content_type)])
                return [payload]
        return self.legacy(environ, start_response)


@pytest.fixture
def scripted() -> Iterator[Callable[..., tuple[str, Scripted]]]:
    stops: list[Callable[[], None]] = []

    def start(modern: Callable[[dict[str, Any]], tuple[str, str, bytes]]) -> tuple[str, Scripted]:
        legacy = McpWsgiApp(make_server(GateProbe()), path="/mcp")
        app = Scripted(legacy, modern)
        base, stop = run_waitress(app)

        def stop_both() -> None:
            legacy.close()
            stop()

        stops.append(stop_both)
        return base + "/mcp", app

    yield start
    for stop in reversed(stops):
        stop()


def _error(request: dict[str, Any], code: int, data: Any = None) -> bytes:
    error: dict[str, Any] = {"code": code, "message": "scripted"}
    if data is not None:
        error["data"] = data
    return json.dumps({"jsonrpc": "2.0", "id": request.get("id"), "error": error}).encode()


DISCOVER_RESULT = {
    "supportedVersions": [MODERN],
    "capabilities": {"tools": {}},
    "resultType": "complete",
    "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "scripted", "version": "1"}},
}


@pytest.mark.parametrize(
    "answer",
    [
        ("404 Not Found", "text/html", b"<html><body>Not Found</body></html>"),
        ("405 Method Not Allowed", "text/plain", b""),
        ("200 OK", "text/html", b"<!doctype html><p>a web page</p>"),
        (
            "400 Bad Request",
            "application/json",
            b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Bad Request: No valid session ID provided"}}',
        ),
        ("400 Bad Request", "text/plain", b"Bad Request"),
    ],
    ids=["404-html", "405", "200-html", "400-no-session", "400-text"],
)
def test_anything_but_a_2026_error_falls_back_to_initialize(
    scripted: Any, answer: tuple[str, str, bytes]
) -> None:
    url, app = scripted(lambda _request: answer)
    with Client.http(url) as client:
        assert client.era is Era.HANDSHAKE
        assert client.protocol_version == "2025-11-25"
        assert client.call_tool("echo", {"text": "old"}).content[0].text == "old"
    assert [post["method"] for post in app.modern_posts] == ["server/discover"]


def test_a_400_with_32022_and_a_supported_list_stays_2026(scripted: Any) -> None:
    def modern(request: dict[str, Any]) -> tuple[str, str, bytes]:
        version = request["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"]
        if request["method"] == "server/discover" and len(seen) == 0:
            seen.append(version)
            body = _error(request, -32022, {"supported": ["2099-01-01", MODERN]})
            return "400 Bad Request", "application/json", body
        answer = {"jsonrpc": "2.0", "id": request["id"], "result": DISCOVER_RESULT}
        return "200 OK", "application/json", json.dumps(answer).encode()

    seen: list[str] = []
    url, _app = scripted(modern)
    with Client.http(url) as client:
        assert client.era is Era.MODERN
        assert client.protocol_version == MODERN
        assert client.peer_info["name"] == "scripted"


def test_a_400_with_32020_stays_2026(scripted: Any) -> None:
    def modern(request: dict[str, Any]) -> tuple[str, str, bytes]:
        if request["method"] == "server/discover" and not refused:
            refused.append(True)
            return "400 Bad Request", "application/json", _error(request, -32020)
        answer = {"jsonrpc": "2.0", "id": request["id"], "result": DISCOVER_RESULT}
        return "200 OK", "application/json", json.dumps(answer).encode()

    refused: list[bool] = []
    url, _app = scripted(modern)
    with Client.http(url) as client:
        assert client.era is Era.MODERN


def test_protocol_2026_only_refuses_an_old_server(scripted: Any) -> None:
    url, _app = scripted(lambda _request: ("404 Not Found", "text/html", b"<html></html>"))
    with pytest.raises(ConnectionClosed, match="does not speak"):
        Client.http(url, protocol="modern")


def test_progress_on_a_2026_sse_answer_reaches_on_progress(scripted: Any) -> None:
    def modern(request: dict[str, Any]) -> tuple[str, str, bytes]:
        if request["method"] == "server/discover":
            answer = {"jsonrpc": "2.0", "id": request["id"], "result": DISCOVER_RESULT}
            return "200 OK", "application/json", json.dumps(answer).encode()
        token = request["params"]["_meta"]["progressToken"]
        events = [
            {
                "jsonrpc": "2.0",
                "method": "notifications/progress",
                "params": {"progressToken": token, "progress": step, "total": 2},
            }
            for step in (1, 2)
        ]
        result = {"content": [{"type": "text", "text": "done"}], "resultType": "complete"}
        events.append({"jsonrpc": "2.0", "id": request["id"], "result": result})
        body = b"".join(
            b"event: message\ndata: " + json.dumps(e).encode() + b"\n\n" for e in events
        )
        return "200 OK", "text/event-stream", b": ping\n\n" + body

    url, _app = scripted(modern)
    seen: list[float] = []
    done = threading.Event()

    def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)
        if progress == 2:
            done.set()

    with Client.http(url) as client:
        result = client.call_tool("anything", {}, on_progress=on_progress)
        assert result.content[0].text == "done"
        assert done.wait(WAIT)
    assert seen == [1, 2]


# -- cancelling before the answer's headers arrive ------------------------------------------
class SilentServer(RawHttpServer):
    """A TCP server that reads one HTTP request per connection and never answers 2026
    calls (``server/discover`` is answered, so the client stays on 2026-07-28); it records
    when the client closed a connection whose request it holds. With ``legacy`` it is a
    2025-11-25 server instead: ``initialize`` is answered with a session, notifications and
    bodiless requests (the closing ``DELETE``) get 202, and every other request is held."""

    name = "silent"

    def __init__(self, legacy: bool = False) -> None:
        self.legacy = legacy
        self.held = threading.Event()
        self.closed_by_client = threading.Event()
        super().__init__("/mcp")

    def serve(self, conn: Any) -> None:
        buffer = b""
        while True:
            request = read_request(conn, buffer)
            if request is None:
                return
            _, raw, buffer = request
            body = json.loads(raw) if raw else {}
            if self.legacy and self._answer_legacy(conn, body):
                continue
            if body.get("method") == "server/discover":
                answer = json.dumps(
                    {"jsonrpc": "2.0", "id": body["id"], "result": DISCOVER_RESULT}
                ).encode()
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    b"Content-Length: %d\r\n\r\n" % len(answer) + answer
                )
                continue
            self.held.set()
            if conn.recv(65536) == b"":  # the client closed the connection
                self.closed_by_client.set()
            return

    def _answer_legacy(self, conn: Any, body: dict[str, Any]) -> bool:
        """Answer what a 2025-11-25 session needs before its call; False to hold it."""
        if body.get("method") == "initialize":
            result = {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "silent", "version": "1"},
            }
            answer = json.dumps({"jsonrpc": "2.0", "id": body["id"], "result": result}).encode()
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                b"Mcp-Session-Id: silent-1\r\nContent-Length: %d\r\n\r\n" % len(answer) + answer
            )
            return True
        if "id" not in body:  # a notification, or the DELETE that ends the session
            conn.sendall(b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n")
            return True
        return False


@pytest.fixture
def silent() -> Iterator[SilentServer]:
    server = SilentServer()
    yield server
    server.close()


def test_a_cancel_before_the_headers_arrive_closes_the_connection_at_once(
    silent: SilentServer,
) -> None:
    with Client.http(silent.url) as client:
        assert client.era is Era.MODERN
        token = CancelToken()
        call = client.call_tool_future("anything", {}, cancel_token=token)
        assert silent.held.wait(WAIT)  # the request is at the server; no headers came back
        token.cancel()
        with pytest.raises(Cancelled):
            call.result(WAIT)
        assert silent.closed_by_client.wait(WAIT)


def test_closing_a_2025_client_shuts_down_a_post_still_waiting_for_its_headers() -> None:
    """close() must not wait for a server that never answers: the 2025-11-25 request's
    connection is shut down, so its thread ends with the close (it used to outlive the
    client until the server answered; seen as a leaked thread under waitress)."""
    server = SilentServer(legacy=True)
    try:
        client = Client.http(server.url, protocol="legacy", open_get_stream=False)
        call = client.call_tool_future("anything", {})
        assert server.held.wait(WAIT)  # at the server; no headers came back
        client.close()
        assert server.closed_by_client.wait(WAIT)
        with pytest.raises(ConnectionClosed):
            call.result(WAIT)
        assert not [t.name for t in threading.enumerate() if t.name.startswith("mcp_sync-http")]
    finally:
        server.close()


def test_a_timeout_before_the_headers_arrive_closes_the_connection(
    silent: SilentServer,
) -> None:
    with Client.http(silent.url) as client:
        with pytest.raises(RequestTimeout):
            client.call_tool("anything", {}, timeout=0.2)
        assert silent.closed_by_client.wait(WAIT)


LONG = 60.0  # longer than any wait of the test: only a cancel ends it


def test_many_threads_cancelling_at_random_moments_over_one_client(served: Any) -> None:
    """Calls cancelled at random moments -- before the POST, while it is sent, before the
    headers, while the SSE stream is open, after the answer -- each end exactly once (a
    result or Cancelled), every cancel that won is seen by its handler, and the client keeps
    working."""
    import random
    import sys

    url, probe, recorder = served(modern_json_window=0.02, keepalive=0.02)
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    outcomes: dict[str, str] = {}
    naps: dict[str, float] = {}
    lock = threading.Lock()
    try:
        with Client.http(url, max_workers=8) as client:

            def worker(index: int) -> None:
                rng = random.Random(index)
                for n in range(8):
                    tag = f"w{index}-{n}"
                    token = CancelToken()
                    seconds = rng.choice([0.0, 0.05, LONG])
                    naps[tag] = seconds
                    call = client.call_tool_future(
                        "nap",
                        {"tag": tag, "seconds": seconds},
                        cancel_token=token,
                    )
                    threading.Event().wait(rng.random() * 0.06)  # a random moment
                    token.cancel()
                    try:
                        outcome = call.result(WAIT).content[0].text
                    except Cancelled:
                        outcome = "Cancelled"
                    with lock:
                        assert tag not in outcomes
                        outcomes[tag] = outcome

            threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(WAIT * 4)
            assert client.call_tool("echo", {"text": "alive"}).content[0].text == "alive"
    finally:
        sys.setswitchinterval(previous)
    assert len(outcomes) == 48
    assert set(outcomes.values()) <= {"rested", "Cancelled"}
    # a long handler that started and whose call was cancelled saw its token (a short one
    # may have finished first; one that never started has nothing to see)
    for tag, outcome in outcomes.items():
        if outcome == "Cancelled" and naps[tag] == LONG and probe.started(tag).is_set():
            assert probe.cancelled(tag).wait(WAIT), tag
    assert recorder.headers_of("notifications/cancelled") == []


def test_a_cancel_before_the_headers_closes_the_connection_of_a_users_httpx_client(
    silent: SilentServer,
) -> None:
    import httpx

    with httpx.Client() as own, Client.http(silent.url, http_client=own) as client:
        token = CancelToken()
        call = client.call_tool_future("anything", {}, cancel_token=token)
        assert silent.held.wait(WAIT)
        token.cancel()
        with pytest.raises(Cancelled):
            call.result(WAIT)
        assert silent.closed_by_client.wait(WAIT)
        assert not own.is_closed


def test_a_32022_on_a_call_fails_that_call_only(scripted: Any) -> None:
    """-32022 on a call with no other version both sides speak: the call fails with the
    McpError (HTTP 400), the client stays on 2026-07-28 and the next call works."""

    def modern(request: dict[str, Any]) -> tuple[str, str, bytes]:
        if request["method"] == "server/discover":
            answer = {"jsonrpc": "2.0", "id": request["id"], "result": DISCOVER_RESULT}
            return "200 OK", "application/json", json.dumps(answer).encode()
        if request["params"]["name"] == "refused":
            body = _error(request, -32022, {"supported": [MODERN]})
            return "400 Bad Request", "application/json", body
        result = {"content": [{"type": "text", "text": "fine"}], "resultType": "complete"}
        answer = {"jsonrpc": "2.0", "id": request["id"], "result": result}
        return "200 OK", "application/json", json.dumps(answer).encode()

    url, app = scripted(modern)
    with Client.http(url) as client:
        with pytest.raises(McpError) as raised:
            client.call_tool("refused", {})
        assert (raised.value.code, raised.value.http_status) == (-32022, 400)
        assert client.call_tool("ok", {}).content[0].text == "fine"
        assert client.era is Era.MODERN
    assert [post["params"].get("name") for post in app.modern_posts[1:]] == ["refused", "ok"]


def _future_answers(request: dict[str, Any], answer: str) -> tuple[str, str, bytes]:
    if request["method"] == "server/discover":
        found = {"jsonrpc": "2.0", "id": request["id"], "result": DISCOVER_RESULT}
        return "200 OK", "application/json", json.dumps(found).encode()
    if answer == "jsonrpc-400":
        return "400 Bad Request", "application/json", _error(request, -32602)
    if answer == "html-404":
        return "404 Not Found", "text/html", b"<html><body>Not Found</body></html>"
    if answer == "html-200":
        return "200 OK", "text/html", b"<!doctype html><p>a web page</p>"
    if answer == "json-oversize":
        return "200 OK", "application/json", b'{"pad":"' + b"x" * 8192 + b'"}'
    if answer == "sse-oversize":
        return "200 OK", "text/event-stream", b"data: " + b"x" * 8192 + b"\n\n"
    assert answer == "sse-no-answer"
    return "200 OK", "text/event-stream", b": nothing but a comment\n\n"


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        ("jsonrpc-400", McpError),
        ("html-404", HttpError),
        ("html-200", HttpError),
        ("json-oversize", ResponseTooLarge),
        ("sse-oversize", ResponseTooLarge),
        ("sse-no-answer", ConnectionClosed),
    ],
)
def test_a_future_fails_as_a_blocking_call_does(
    scripted: Any, answer: str, error: type[Exception]
) -> None:
    """A future's answer is read elsewhere (a reader thread, or the plain path's response
    loop) than a blocking call's: both fail the same, and the client lives on."""
    url, _app = scripted(lambda request: _future_answers(request, answer))
    with Client.http(url, max_response_bytes=4096, max_event_bytes=4096) as client:
        future = client.call_tool_future("anything", {})
        with pytest.raises(error):
            future.result(WAIT)
        with pytest.raises(error):
            client.call_tool("anything", {})
