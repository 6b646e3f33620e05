"""mcp_sync's own client over Streamable HTTP: ``legacy_http(url)`` against ``serve_http``.

Calls, progress, ``timeout=``, ``PendingCall.cancel()``, ``cancel_token=``, server-to-client
requests on the SSE streams (and their cancellation when the tool's own request is
cancelled), session end (404, DELETE), refusals (401/403), and a concurrent stress run.
"""

from __future__ import annotations

import concurrent.futures
import io
import json
import queue
import random
import threading
from collections import Counter
from typing import Any

import pytest
from support.http import legacy_http, make_server
from support.messages import as_wire
from support.probes import GateProbe
from support.waiting import WAIT, wait_until

from mcp_sync import (
    Cancelled,
    CancelToken,
    Client,
    ConnectionClosed,
    Context,
    McpError,
    RequestTimeout,
    Server,
)
from mcp_sync.errors import HttpError, SessionEnded
from mcp_sync.http.client_transport import HttpClientTransport, ReconnectPolicy, header_int
from mcp_sync.jsonrpc import id_key

# the names of the threads an HTTP client starts
CLIENT_THREADS = (
    "mcp_sync-http-stream",
    "mcp_sync-http-get",
    "mcp_sync-http-request",
    "mcp_sync-http-sender",
)


def full_server(probe: GateProbe, **options: Any) -> Server:
    """The standard test tools plus tools that make requests to the client."""
    server = make_server(probe, **options)

    @server.tool()
    def ask_roots(ctx: Context) -> str:
        """roots/list to the client; the roots as JSON text."""
        return json.dumps(as_wire(ctx.session.list_roots()))

    @server.tool()
    def ask_sample(prompt: str, ctx: Context) -> str:
        """sampling/createMessage to the client; the sampled text."""
        result = ctx.session.create_message(
            [{"role": "user", "content": {"type": "text", "text": prompt}}], max_tokens=20
        )
        return str(result.content.text)

    @server.tool()
    def ask_name(ctx: Context) -> str:
        """elicitation/create (form) to the client."""
        schema = {
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "required": ["name"],
        }
        result = ctx.session.elicit("Your name?", schema)
        return f"{result.action}:{(result.content or {}).get('name')}"

    @server.tool()
    def ask_sample_and_wait(ctx: Context) -> str:
        """sampling/createMessage to the client; records how the nested request ended."""
        probe.event("nested.started").set()
        try:
            result = ctx.session.create_message(
                [{"role": "user", "content": {"type": "text", "text": "hold"}}], max_tokens=5
            )
        except Cancelled:
            probe.event("nested.cancelled").set()
            raise
        return str(result)

    return server


@pytest.fixture
def served(probe, serve):
    """A running server with every test tool: (server, handle)."""
    server = full_server(probe)
    return server, serve(server)


# -- calls -----------------------------------------------------------------------------------------
def test_tools_over_http(served):
    _, handle = served
    with legacy_http(handle.url) as client:
        assert client.server_info.name == "http-test"
        assert client.protocol_version == "2025-11-25"
        names = {tool.name for tool in client.list_tools()}
        assert {"echo", "gated", "ask_roots"} <= names
        result = client.call_tool("echo", {"text": "héllo"})
        assert result.content[0].text == "héllo" and not result.is_error
        with pytest.raises(McpError) as info:
            client.call_tool("no_such_tool", {})
        assert info.value.code == -32602
        client.ping()
        assert len(handle.app.sessions()) == 1


def test_progress_over_http(probe, served):
    _, handle = served
    seen: list[tuple[float, float | None, str | None]] = []
    third = threading.Event()

    def on_progress(progress, total, message):
        seen.append((progress, total, message))
        if progress == 3:
            third.set()

    with legacy_http(handle.url) as client:
        future = client.call_tool_future("progress_gated", {"tag": "p"}, on_progress=on_progress)
        assert probe.started("p").wait(WAIT)
        probe.release("p")
        assert future.result(WAIT).content[0].text == "p: done"
        assert third.wait(WAIT)
    assert seen == [(1, 3, "one"), (2, 3, "two"), (3, 3, "three")]


def test_timeout_cancels_on_the_server(probe, served):
    _, handle = served
    with legacy_http(handle.url) as client:
        with pytest.raises(RequestTimeout):
            client.call_tool("gated", {"tag": "t"}, timeout=0.3)
        assert probe.cancelled("t").wait(WAIT), "the server handler did not see the cancellation"
        assert "timed out" in (probe.reasons["t"] or "")
        assert not probe.completed("t").is_set()
        assert client.call_tool("echo", {"text": "still fine"}).content[0].text == "still fine"
        assert client.endpoint.in_flight() == (0, 0)


def test_pending_call_cancel(probe, served):
    _, handle = served
    with legacy_http(handle.url) as client:
        future = client.call_tool_future("gated", {"tag": "c"})
        assert probe.started("c").wait(WAIT)
        assert future.cancel("changed my mind") is True
        with pytest.raises(Cancelled):
            future.result(WAIT)
        assert probe.cancelled("c").wait(WAIT)
        assert probe.reasons["c"] == "changed my mind"
        assert future.cancel() is True  # idempotent
        done = client.call_tool_future("echo", {"text": "x"})
        assert done.result(WAIT).content[0].text == "x"
        assert done.cancel() is False  # already completed


def test_cancel_token(probe, served):
    _, handle = served
    token = CancelToken()
    with legacy_http(handle.url) as client:
        canceller = threading.Thread(
            target=lambda: probe.started("k").wait(WAIT) and token.cancel("user pressed stop")
        )
        canceller.start()
        try:
            with pytest.raises(Cancelled):
                client.call_tool("gated", {"tag": "k"}, cancel_token=token)
        finally:
            canceller.join(WAIT)
        assert probe.cancelled("k").wait(WAIT)
        assert probe.reasons["k"] == "user pressed stop"
        # an already-cancelled token sends nothing at all
        with pytest.raises(Cancelled):
            client.call_tool("touch", {"tag": "never"}, cancel_token=token)
        assert client.call_tool("echo", {"text": "y"}).content[0].text == "y"
    assert not probe.event("never").is_set()


# -- requests from the server to the client ----------------------------------------------------------
def test_server_to_client_requests_over_sse(served):
    _, handle = served

    def sampling(params: dict[str, Any], ctx: Context) -> dict[str, Any]:
        text = params["messages"][0]["content"]["text"]
        return {
            "role": "assistant",
            "content": {"type": "text", "text": f"sampled {text}"},
            "model": "fake",
        }

    def elicitation(params: dict[str, Any], ctx: Context) -> dict[str, Any]:
        assert params["message"] == "Your name?"
        return {"action": "accept", "content": {"name": "Ada"}}

    roots = ["/srv/data", {"uri": "file:///home/ada", "name": "home"}]
    with legacy_http(
        handle.url, roots=roots, sampling_handler=sampling, elicitation_handler=elicitation
    ) as client:
        listed = json.loads(client.call_tool("ask_roots").content[0].text)
        assert listed == [{"uri": "file:///srv/data"}, {"uri": "file:///home/ada", "name": "home"}]
        assert client.call_tool("ask_sample", {"prompt": "hi"}).content[0].text == "sampled hi"
        assert client.call_tool("ask_name").content[0].text == "accept:Ada"


def test_cancelling_the_tool_cancels_its_request_to_the_client(probe, served):
    _, handle = served
    handler_started = threading.Event()
    handler_cancelled = threading.Event()
    handler_returned = threading.Event()

    def sampling(params: dict[str, Any], ctx: Context) -> dict[str, Any]:
        handler_started.set()
        try:
            if ctx.wait(WAIT):
                handler_cancelled.set()
            return {
                "role": "assistant",
                "content": {"type": "text", "text": "too late"},
                "model": "fake",
            }
        finally:
            handler_returned.set()

    # one client worker: the roots/list below runs only after the sampling request's run
    # (and any answer it might write) is over: a barrier, not a sleep
    client = legacy_http(handle.url, sampling_handler=sampling, roots=["/r"], max_workers=1)
    written: list[dict[str, Any]] = []
    original_send = client.transport.send

    def recording_send(data: bytes, meta: Any) -> None:
        written.append(json.loads(data))
        original_send(data, meta)

    client.transport.send = recording_send  # type: ignore[method-assign]
    with client:
        future = client.call_tool_future("ask_sample_and_wait")
        assert handler_started.wait(WAIT)
        assert future.cancel("stop everything") is True
        assert probe.event("nested.cancelled").wait(WAIT), (
            "the server's nested request was not cancelled"
        )
        assert handler_cancelled.wait(WAIT), "the client's sampling handler token did not fire"
        assert handler_returned.wait(WAIT)
        # barrier: another server-to-client request is answered only after that run ended
        assert json.loads(client.call_tool("ask_roots").content[0].text) == [{"uri": "file:///r"}]
        server_session = handle.app.sessions()[0]
        answers = [m for m in written if "method" not in m]
        # the only answer the client wrote is the one to roots/list
        assert len(answers) == 1 and answers[0]["result"] == {"roots": [{"uri": "file:///r"}]}
        assert server_session.endpoint.dropped["late response after cancellation"] == 0
        assert server_session.endpoint.in_flight() == (0, 0)
        assert client.endpoint.in_flight() == (0, 0)


# -- session end and refusals ------------------------------------------------------------------------
def test_later_call_after_the_server_deleted_the_session_fails_with_session_ended(served):
    _, handle = served
    with legacy_http(handle.url, open_get_stream=False) as client:
        assert client.call_tool("echo", {"text": "a"}).content[0].text == "a"
        handle.app.sessions()[0].close()  # the server ends the session
        with pytest.raises(ConnectionClosed) as info:
            client.call_tool("echo", {"text": "b"}, timeout=WAIT)
        error = info.value
        assert isinstance(error, SessionEnded) and error.status == 404, repr(info.value)
        assert client.closed
        with pytest.raises(ConnectionClosed):
            client.call_tool("echo", {"text": "c"})


def test_call_in_flight_when_the_server_deletes_the_session_fails_with_session_ended(
    probe, served, raw
):
    _, handle = served
    with legacy_http(handle.url) as client:
        future = client.call_tool_future("gated", {"tag": "g"})
        assert probe.started("g").wait(WAIT)
        # another party ends the session with DELETE
        deleter = raw(handle.url)
        deleter.session_id = client.transport.session_id
        assert deleter.delete().status_code == 200
        assert probe.cancelled("g").wait(WAIT)
        with pytest.raises(ConnectionClosed) as info:
            future.result(WAIT)
        assert isinstance(info.value, SessionEnded), repr(info.value)


def test_auth_refusals_raise_http_error_with_status(probe, serve):
    def auth(environ):
        token = environ.get("HTTP_AUTHORIZATION")
        if token is None:
            return 401
        return None if token == "Bearer good" else 403

    handle = serve(make_server(probe), auth=auth)
    for headers, status in ((None, 401), ({"Authorization": "Bearer bad"}, 403)):
        with pytest.raises(ConnectionClosed) as info:
            legacy_http(handle.url, headers)
        error = info.value
        assert isinstance(error, HttpError) and error.status == status, repr(info.value)
        assert not isinstance(error, SessionEnded)
    with legacy_http(handle.url, {"Authorization": "Bearer good"}) as client:
        assert client.call_tool("echo", {"text": "in"}).content[0].text == "in"
    assert handle.app.sessions() == []


def test_close_sends_delete(served, raw):
    _, handle = served
    client = legacy_http(handle.url)
    session_id = client.transport.session_id
    assert session_id and len(handle.app.sessions()) == 1
    client.close()
    assert handle.app.sessions() == []
    probe_session = raw(handle.url)
    probe_session.session_id = session_id
    assert probe_session.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}).status_code == 404


def test_server_stop_fails_pending_calls(probe, serve):
    handle = serve(make_server(probe))
    client = Client.connect(
        HttpClientTransport(handle.url, reconnect=ReconnectPolicy(delay=0.05)), protocol="legacy"
    )  # as Client.http
    try:
        future = client.call_tool_future("gated", {"tag": "s"})
        assert probe.started("s").wait(WAIT)
        handle.stop()  # sessions closed (404), then the port closed (connection refused)
        with pytest.raises(ConnectionClosed):
            future.result(WAIT)
    finally:
        client.close()


def _read_request(conn) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


def test_close_does_not_hang_on_a_server_that_stopped_answering():
    """A server that opened the GET stream and then went silent: close() must still end
    every reader thread (closing an httpx response alone does not wake its reader)."""
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    connections: list[socket.socket] = []
    silent = threading.Event()
    stop = threading.Event()
    init = {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "serverInfo": {"name": "mute", "version": "0"},
    }

    def fake_server() -> None:
        while not stop.is_set():
            conn, _ = listener.accept()
            connections.append(conn)
            data = _read_request(conn)
            message = json.loads(data.partition(b"\r\n\r\n")[2] or b"null")
            if data.startswith(b"POST") and message.get("method") == "initialize":
                body = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": init}).encode()
                head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nMcp-Session-Id: s1\r\nConnection: close\r\n"
                conn.sendall(
                    head + b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
                )
                conn.close()
            elif data.startswith(b"POST"):
                conn.sendall(
                    b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                )
                conn.close()
            elif data.startswith(b"GET"):
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
                )
                silent.set()  # and then nothing, ever
            else:  # DELETE: hang up without an answer
                conn.close()

    thread = threading.Thread(target=fake_server, name="mute-server")
    thread.start()
    try:
        client = legacy_http(
            f"http://127.0.0.1:{port}/mcp", connect_timeout=WAIT, open_get_stream=True
        )
        assert silent.wait(WAIT)  # the GET stream is open, and silent
        closer = threading.Thread(target=client.close, name="closer")
        closer.start()
        closer.join(10)
        assert not closer.is_alive(), "close() hung on the silent stream"
        assert not [t.name for t in threading.enumerate() if t.name.startswith(CLIENT_THREADS)]
    finally:
        stop.set()
        socket.create_connection(("127.0.0.1", port), timeout=WAIT).close()  # wakes accept()
        thread.join(WAIT)
        listener.close()
        for conn in connections:
            conn.close()


# -- concurrency -------------------------------------------------------------------------------------
def test_200_concurrent_calls_with_random_cancellations(serve, wire, fast_switching):
    server = Server("stress", max_workers=8)

    @server.tool()
    def work(n: int, delay: float, ctx: Context) -> int:
        if ctx.wait(delay):
            return -1  # discarded: a cancelled request gets no answer
        return n

    handle = serve(server)
    rng = random.Random(20251125)
    plans = [(n, rng.choice([0, 0.002, 0.01, 0.05]), rng.random()) for n in range(200)]
    settled: Counter[int] = Counter()
    settled_lock = threading.Lock()
    cancel_returned: dict[int, list[bool]] = {n: [] for n in range(200)}
    futures: dict[int, Any] = {}
    to_cancel: queue.SimpleQueue[int | None] = queue.SimpleQueue()

    with legacy_http(handle.url, max_workers=4) as client:

        def submitter(ns: list[tuple[int, float, float]]) -> None:
            for n, delay, roll in ns:
                timeout = 0.01 if roll < 0.1 else None
                future = client.call_tool_future("work", {"n": n, "delay": delay}, timeout=timeout)

                def on_done(_f: Any, n: int = n) -> None:
                    with settled_lock:
                        settled[n] += 1

                future.add_done_callback(on_done)
                futures[n] = future
                if roll > 0.6:
                    to_cancel.put(n)

        def canceller(seed: int) -> None:
            local = random.Random(seed)
            while True:
                n = to_cancel.get()
                if n is None:
                    return
                cancel_returned[n].append(futures[n].cancel(f"random {seed}"))
                if local.random() < 0.2:  # cancelling twice is harmless and consistent
                    cancel_returned[n].append(futures[n].cancel("again"))

        submitters = [
            threading.Thread(target=submitter, args=(plans[i::4],), name=f"submit-{i}")
            for i in range(4)
        ]
        cancellers = [
            threading.Thread(target=canceller, args=(i,), name=f"cancel-{i}") for i in range(3)
        ]
        for t in submitters + cancellers:
            t.start()
        for t in submitters:
            t.join(30)
        for _ in cancellers:
            to_cancel.put(None)
        for t in cancellers:
            t.join(30)
        assert not [t for t in submitters + cancellers if t.is_alive()]

        _, not_done = concurrent.futures.wait(list(futures.values()), timeout=30)
        assert not not_done, f"{len(not_done)} calls never settled"

        outcomes: dict[int, str] = {}
        for n, future in futures.items():
            try:
                value = future.result(0)
                assert value.structured_content == {"result": n}
                outcomes[n] = "result"
            except Cancelled:
                outcomes[n] = "cancelled"
            except RequestTimeout:
                outcomes[n] = "timeout"
        # every call ended exactly once
        assert settled == Counter(dict.fromkeys(range(200), 1))
        for n, returned in cancel_returned.items():
            if True in returned:
                assert outcomes[n] == "cancelled", (n, returned, outcomes[n])
            if outcomes[n] == "cancelled":
                assert True in returned

        # the server's view: at most one answer per request, none after an accepted cancel,
        # and each request either answered or cancelled
        ids = {n: futures[n].request_id for n in futures}

        # a cancelled call settles at once, while its request and cancellation are still
        # being POSTed: wait (bounded) until the server has seen the end of every request
        def every_request_ended_on_the_server() -> bool:
            counts = wire.response_counts()
            accepted = {rid for _, rid in wire.accepted_cancels}
            return all(counts.get(id_key(rid), 0) or rid in accepted for rid in ids.values())

        wait_until(every_request_ended_on_the_server, "the server to see every request end")
        counts = wire.response_counts()
        accepted = {rid for _, rid in wire.accepted_cancels}
        for n, rid in ids.items():
            answered = counts.get(id_key(rid), 0)
            assert answered <= 1, (n, rid, answered)
            assert (answered == 1) != (rid in accepted), (n, rid, answered, outcomes[n])
            if outcomes[n] == "result":
                assert answered == 1
        # the client dropped exactly the answers that raced its cancellation on the wire
        for t in [t for t in threading.enumerate() if t.name.startswith("mcp_sync-http-stream")]:
            t.join(WAIT)
        client.ping()  # barrier: the reader thread has processed everything those streams carried
        late = {
            rid for n, rid in ids.items() if outcomes[n] != "result" and counts.get(id_key(rid), 0)
        }
        assert client.endpoint.dropped["late response after cancellation"] == len(late)
        assert client.endpoint.in_flight() == (0, 0)
        print(
            Counter(outcomes.values()),
            "cancels accepted:",
            len(accepted),
            "late answers dropped:",
            len(late),
        )
    assert handle.app.sessions() == []
    assert not [t.name for t in threading.enumerate() if t.name.startswith(CLIENT_THREADS)]


class PostLog:
    """A WSGI middleware that records the JSON-RPC message of every POST, in arrival order."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.lock = threading.Lock()
        self.messages: list[dict[str, Any]] = []

    def __call__(self, environ: dict, start_response: Any) -> Any:
        if environ["REQUEST_METHOD"] == "POST":
            body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
            with self.lock:
                self.messages.append(json.loads(body))
            environ["wsgi.input"] = io.BytesIO(body)
        return self.app(environ, start_response)


def test_a_cancellation_issued_at_once_is_never_lost(probe, serve, wire, fast_switching):
    """Requests are POSTed by threads of their own and a cancel goes as soon as its request's
    body is written, on another connection: the server may see the cancel first. Every one
    must still land -- the handler never starts, or sees its token -- and none is answered."""
    log = PostLog(make_server(probe).wsgi_app())
    handle = serve(log)
    with legacy_http(handle.url.rsplit("/", 1)[0] + "/", open_get_stream=False) as client:
        calls = [client.call_tool_future("gated", {"tag": f"c{i}"}) for i in range(30)]
        for call in calls:
            assert call.cancel("at once") is True
        ids = {call.request_id for call in calls}

        def every_cancel_arrived() -> bool:
            with log.lock:
                return ids <= {
                    m["params"]["requestId"]
                    for m in log.messages
                    if m.get("method") == "notifications/cancelled"
                }

        wait_until(every_cancel_arrived, "every cancellation to reach the server")
        client.ping(timeout=WAIT)
        session = log.app.sessions()[0]
        wait_until(
            lambda: session.endpoint.in_flight()[0] == 0,
            "the server to end every cancelled request",
        )
        for i in range(30):
            assert probe.cancelled(f"c{i}").is_set() or not probe.started(f"c{i}").is_set(), (
                f"c{i} ran uncancelled"
            )
            assert not probe.completed(f"c{i}").is_set()
        assert all(wire.responses(rid) == [] for rid in ids)


def test_a_server_that_answers_with_json_stalls_no_other_call(probe, serve):
    """With JSON answers the POST lasts as long as the call: it runs on its own thread, so
    other calls, cancellations and timeouts go on meanwhile."""
    handle = serve(make_server(probe).wsgi_app(path="/mcp", json_response=True))
    with legacy_http(handle.url, open_get_stream=False) as client:
        blocked = client.call_tool_future("gated", {"tag": "slow"})
        assert probe.started("slow").wait(WAIT)
        client.ping(timeout=WAIT)  # not stuck behind the blocked POST
        assert (
            client.call_tool("echo", {"text": "meanwhile"}, timeout=WAIT).content[0].text
            == "meanwhile"
        )
        with pytest.raises(RequestTimeout):
            client.call_tool("gated", {"tag": "timed"}, timeout=0.3)
        assert blocked.cancel("done waiting") is True
        with pytest.raises(Cancelled):
            blocked.result(WAIT)
        probe.release("slow")
        probe.release("timed")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("0", 0),
        ("120", 120),
        ("", None),
        ("²", None),
        ("١٢", None),
        ("１", None),  # noqa: RUF001 - a fullwidth digit, on purpose
        ("-1", None),
        ("1.5", None),
        (" 3", None),
    ],
)
def test_header_int_takes_ascii_digits_only(value: str, expected: int | None) -> None:
    """Content-Length and Retry-After: httpx decodes header bytes as Latin-1, where "²" is a
    digit to str.isdigit() but not to int()."""
    assert header_int(value) == expected


def test_connect_on_the_http_transport_in_auto_mode_negotiates_2026(served):
    """``protocol="auto"`` on the HTTP client transport probes with server/discover (with
    the 2026-07-28 routing headers) and ends on 2026-07-28 with the server's capabilities;
    ``protocol="legacy"`` on it still speaks 2025-11-25."""
    _server, handle = served
    with Client.connect(HttpClientTransport(handle.url)) as client:
        assert client.protocol_version == "2026-07-28"
        assert "tools" in client.server_capabilities
        assert {tool.name for tool in client.list_tools()} >= {"echo"}
    with Client.connect(HttpClientTransport(handle.url), protocol="legacy") as client:
        assert client.protocol_version == "2025-11-25"
