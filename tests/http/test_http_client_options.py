"""``Client.http`` options and per-call failures: ``auth=`` (an auth flow that refreshes its
token on 401), a user-supplied ``httpx.Client`` (used, never closed), a request that never
reached the server (``RequestNotSent``; the connection lives on), HTTP errors that carry
JSON-RPC (``McpError`` with ``http_status``), the reconnect policy, and no CA bundle for
``http://``."""

from __future__ import annotations

import io
import json
import math
import ssl
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from support.http import legacy_http, make_server
from support.waiting import WAIT

from mcp_sync import ConnectionClosed, McpError
from mcp_sync.errors import HttpError, RequestNotSent
from mcp_sync.http import serve_http
from mcp_sync.http.client_transport import HttpClientTransport, ReconnectPolicy

pytestmark = pytest.mark.usefixtures("client_path")  # both client paths (conftest)


class RefreshingAuth(httpx.Auth):
    """Adds a bearer token; on 401 fetches a fresh one from ``issuer`` and retries once."""

    def __init__(self, issuer: dict[str, str]) -> None:
        self.issuer = issuer
        self.token = issuer["token"]
        self.refreshes = 0
        self._lock = threading.Lock()

    def auth_flow(self, request: httpx.Request) -> Iterator[httpx.Request]:
        request.headers["Authorization"] = f"Bearer {self.token}"
        response = yield request
        if response.status_code == 401:
            with self._lock:
                self.token = self.issuer["token"]
                self.refreshes += 1
            request.headers["Authorization"] = f"Bearer {self.token}"
            yield request


def test_an_auth_flow_that_refreshes_its_token_on_401_works_end_to_end(probe, serve):
    issuer = {"token": "t1"}
    refused: list[str] = []

    def check(environ: dict) -> Any:
        if environ.get("HTTP_AUTHORIZATION") == f"Bearer {issuer['token']}":
            return None
        refused.append(environ["REQUEST_METHOD"])
        return 401

    handle = serve(make_server(probe), auth=check)
    auth = RefreshingAuth(issuer)
    with legacy_http(handle.url, auth=auth, open_get_stream=True) as client:
        assert client.call_tool("echo", {"text": "one"}, timeout=WAIT).content[0].text == "one"
        assert auth.refreshes == 0
        issuer["token"] = "t2"  # the old token expires
        assert client.call_tool("echo", {"text": "two"}, timeout=WAIT).content[0].text == "two"
        assert auth.refreshes >= 1 and auth.token == "t2" and "POST" in refused
        assert not client.closed
    assert handle.app.sessions() == []  # the DELETE went through with the fresh token


def test_a_user_supplied_httpx_client_is_used_and_left_open(probe, serve):
    handle = serve(make_server(probe))
    seen: list[str] = []
    http = httpx.Client(
        headers={"X-Mine": "1"},
        timeout=httpx.Timeout(2.0, read=0.05),
        event_hooks={
            "request": [lambda r: seen.append(f"{r.method} {r.headers.get('x-mine', '')}")]
        },
    )
    try:
        with legacy_http(handle.url, http_client=http) as client:
            assert (
                client.call_tool("echo", {"text": "mine"}, timeout=WAIT).content[0].text == "mine"
            )
            # its 50 ms read timeout is not applied to a stream that idles for longer
            future = client.call_tool_future("gated", {"tag": "long"})
            assert probe.started("long").wait(WAIT)
            with pytest.raises(TimeoutError):
                future.result(0.3)  # this wait's own timeout: the call goes on
            probe.release("long")
            assert future.result(WAIT).content[0].text == "long: released"
        # every request went through it, and no stream broke (a broken one is resumed by a GET)
        assert seen and set(seen) == {"POST 1", "DELETE 1"}, seen
        assert not http.is_closed
        assert http.get(handle.url.replace("/mcp", "/other")).status_code == 404  # still usable
    finally:
        http.close()


def test_a_request_that_never_reached_the_server_fails_that_call_only(probe):
    app = make_server(probe).wsgi_app(path="/mcp")

    def front(environ: dict, start_response: Any) -> Any:  # no close(): stopping keeps the sessions
        return app(environ, start_response)

    first = serve_http(front, "127.0.0.1", 0)
    port, url = first.port, first.url
    second = None
    try:
        with legacy_http(url) as client:
            assert client.call_tool("echo", {"text": "a"}, timeout=WAIT).content[0].text == "a"
            first.stop()  # connection refused from now on; the session lives on in the app
            with pytest.raises(RequestNotSent) as info:
                client.call_tool("echo", {"text": "b"}, timeout=WAIT)
            assert "did not reach" in str(info.value)
            assert not client.closed and client.endpoint.in_flight() == (0, 0)
            second = serve_http(front, "127.0.0.1", port)  # the server is back
            assert client.call_tool("echo", {"text": "c"}, timeout=WAIT).content[0].text == "c"
    finally:
        if second is not None:
            second.stop()
        app.close()


@pytest.fixture
def refusing(probe, serve):
    """A server in front of which a middleware answers like a 2026-era server would: a
    ``tools/call`` of ``refuse`` gets 400 with a JSON-RPC error (-32022, ``data.supported``),
    ``too_big`` gets a plain 413, and ``notifications/roots/list_changed`` gets 400 with an
    id-less JSON-RPC error."""
    app = make_server(probe).wsgi_app(path="/mcp")
    refused_notification = threading.Event()

    def middleware(environ: dict, start_response: Any) -> Any:
        if environ["REQUEST_METHOD"] == "POST":
            body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
            message = json.loads(body)
            error = None
            if message.get("method") == "tools/call" and message["params"]["name"] == "refuse":
                error = {
                    "jsonrpc": "2.0",
                    "id": message["id"],
                    "error": {
                        "code": -32022,
                        "message": "Unsupported protocol version",
                        "data": {"supported": ["2026-07-28"]},
                    },
                }
            elif message.get("method") == "tools/call" and message["params"]["name"] == "too_big":
                start_response(
                    "413 Payload Too Large",
                    [("Content-Type", "text/plain"), ("Content-Length", "8")],
                )
                return [b"too big!"]
            elif message.get("method") == "notifications/roots/list_changed":
                error = {
                    "jsonrpc": "2.0",
                    "id": None,
                    "error": {"code": -32600, "message": "not now"},
                }
                refused_notification.set()
            if error is not None:
                data = json.dumps(error).encode()
                start_response(
                    "400 Bad Request",
                    [("Content-Type", "application/json"), ("Content-Length", str(len(data)))],
                )
                return [data]
            environ["wsgi.input"] = io.BytesIO(body)
        return app(environ, start_response)

    middleware.path = "/mcp"  # type: ignore[attr-defined]
    middleware.close = app.close  # type: ignore[attr-defined]
    return serve(middleware), refused_notification


def test_an_http_error_carrying_jsonrpc_is_an_mcp_error_with_the_status(refusing):
    handle, _ = refusing
    with legacy_http(handle.url) as client:
        with pytest.raises(McpError) as info:
            client.call_tool("refuse", {}, timeout=WAIT)
        error = info.value
        assert (error.code, error.message, error.data, error.http_status) == (
            -32022,
            "Unsupported protocol version",
            {"supported": ["2026-07-28"]},
            400,
        )
        assert not client.closed
        assert client.call_tool("echo", {"text": "still"}, timeout=WAIT).content[0].text == "still"
        with pytest.raises(McpError) as unknown:  # an answer over SSE has no HTTP status
            client.call_tool("no_such_tool", {}, timeout=WAIT)
        assert unknown.value.http_status is None


def test_a_refused_notification_does_not_end_the_connection(refusing):
    handle, refused = refusing
    with legacy_http(handle.url, roots=["/a"]) as client:
        client.set_roots(["/b"])
        assert refused.wait(WAIT)
        assert client.call_tool("echo", {"text": "on"}, timeout=WAIT).content[0].text == "on"
        assert not client.closed


def test_reconnect_policy_backs_off_up_to_its_maximum():
    policy = ReconnectPolicy(attempts=5, delay=0.5, max_delay=3.0, backoff=2.0)
    assert [policy.wait(n) for n in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]


def test_no_certificate_bundle_is_loaded_for_http_urls(monkeypatch):
    loads: list[Any] = []
    original = ssl.SSLContext.load_verify_locations

    def recording(self: ssl.SSLContext, *args: Any, **kwargs: Any) -> None:
        loads.append(args or kwargs)
        original(self, *args, **kwargs)

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", recording)
    HttpClientTransport("http://127.0.0.1:1/mcp").close()
    assert loads == []
    HttpClientTransport("https://127.0.0.1:1/mcp").close()
    assert loads, "an https:// client must load the CA bundle (the check above would prove nothing)"


def test_an_unreachable_server_still_fails_the_connect_with_connection_closed():
    listener = __import__("socket").socket()
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()  # nothing listens there
    with pytest.raises(ConnectionClosed) as info:
        legacy_http(f"http://127.0.0.1:{port}/mcp", init_timeout=WAIT)
    assert isinstance(info.value, RequestNotSent), repr(info.value)


def test_a_4xx_without_jsonrpc_fails_that_call_with_http_error(refusing):
    handle, _ = refusing
    with legacy_http(handle.url) as client:
        with pytest.raises(HttpError) as info:
            client.call_tool("too_big", {}, timeout=WAIT)
        assert info.value.status == 413 and "too big!" in str(info.value)
        assert not client.closed
        assert client.call_tool("echo", {"text": "fine"}, timeout=WAIT).content[0].text == "fine"


def test_init_timeout_bounds_a_server_that_accepts_but_never_answers():
    """``initialize`` is POSTed in the caller's thread; it used to wait for the answer's
    headers without limit, so ``init_timeout`` (and ``mcp-sync --timeout``) never fired."""
    import socket

    from mcp_sync import RequestTimeout

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)  # connections complete in the kernel; nobody reads them
    outcome: list[BaseException] = []
    done = threading.Event()

    def connect() -> None:
        try:
            legacy_http(
                f"http://127.0.0.1:{listener.getsockname()[1]}/mcp", init_timeout=0.5
            ).close()
        except BaseException as exc:
            outcome.append(exc)
        done.set()

    thread = threading.Thread(target=connect, name="connecting-client")
    thread.start()
    try:
        assert done.wait(WAIT), "Client.http ignored init_timeout while the server stayed silent"
    finally:
        listener.close()  # resets the silent connection: a stuck client gets an error and ends
        thread.join(WAIT)
    assert len(outcome) == 1 and isinstance(outcome[0], RequestTimeout), outcome


@pytest.mark.parametrize("forever", [math.inf, 1e300, None])
def test_an_infinite_init_timeout_means_no_limit(probe, serve, forever):
    """A socket cannot wait for an infinite time: that read timeout raised OverflowError."""
    handle = serve(make_server(probe))
    with legacy_http(handle.url, init_timeout=forever) as client:
        assert client.call_tool("echo", {"text": "x"}, timeout=WAIT).content[0].text == "x"
