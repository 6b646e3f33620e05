"""What a standalone (GET) stream may cost, and cancellations that do not wait for headers.

* A GET stream lives at most ``stream_lifetime``; the server then sends ``retry:`` and
  closes it, and the client reconnects with ``Last-Event-ID``: no notification is lost.
* At most ``max_standalone_streams`` are open per app (503 + ``Retry-After`` beyond), so
  idle clients cannot take every thread of a small waitress.
* ``Client.http`` opens the GET stream only when it has something to receive on it.
* A cancellation is POSTed once the request's body is written: a server that sends its
  headers only with the result (JSON answers) still sees it in time, and a cancel that
  overtakes its request on another connection is kept by the server until the request comes.
"""

from __future__ import annotations

import io
import json
import socket
import struct
import threading
import time
from typing import Any, ClassVar

import pytest
from support.http import legacy_http, make_server, run_waitress
from support.messages import call_tool, initialize_request, notification
from support.waiting import WAIT, wait_until

from mcp_sync import Client
from mcp_sync.errors import RequestNotSent
from mcp_sync.http import McpWsgiApp
from mcp_sync.http.client_transport import ReconnectPolicy
from mcp_sync.http.session_transport import EARLY_CANCEL_BYTES, EARLY_CANCELS, HttpSessionTransport
from mcp_sync.http.sse import EventStream
from mcp_sync.transports.base import OutboundMeta


class Notes:
    """Collects the ``notifications/test/tick`` numbers a client receives."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.ticks: list[int] = []

    def __call__(self, method: str, params: dict[str, Any]) -> None:
        if method == "notifications/test/tick":
            with self.cond:
                self.ticks.append(params["n"])
                self.cond.notify_all()

    def wait_for(self, count: int) -> list[int]:
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.ticks) >= count, WAIT), (
                f"got {self.ticks}, wanted {count}"
            )
            return list(self.ticks)


def tick(app: McpWsgiApp, n: int) -> None:
    """Push ``notifications/test/tick {n}`` to every session (on its standalone stream)."""
    for session in app.sessions():
        session.send_notification("notifications/test/tick", {"n": n})


# -- the stream's lifetime -----------------------------------------------------------------------
def test_stream_lifetime_ends_with_a_retry_hint(probe, serve, raw):
    handle = serve(make_server(probe), stream_lifetime=0.2, stream_retry=0.05)
    session = raw(handle.url)
    session.initialize()
    response = session.get()
    assert response.status_code == 200
    lines = list(response.iter_lines())  # ends by itself: the lifetime passed
    assert "retry: 50" in lines, lines
    assert lines[0].startswith("id: ")  # the priming event, for Last-Event-ID
    wait_until(lambda: handle.app.standalone_streams == 0, "the stream's slot to be released")


def test_a_stream_that_ends_with_its_session_gets_no_retry_hint(probe, serve, raw):
    handle = serve(make_server(probe), stream_lifetime=30, stream_retry=0.05)
    session = raw(handle.url)
    session.initialize()
    response = session.get()
    lines = response.iter_lines()
    assert next(lines).startswith("id: ")  # the priming event: the stream is open
    assert session.delete().status_code == 200  # the session ends: nothing to come back to
    rest = list(lines)
    assert not [line for line in rest if line.startswith("retry:")], rest


def test_lifetime_expiry_and_reconnect_lose_no_notification(probe):
    """The client reconnects per ``retry:`` (its own delay is 30 s) with Last-Event-ID; the
    notifications pushed while it was away come first on the new stream."""
    app = make_server(probe).wsgi_app(path="/mcp", stream_lifetime=0.3, stream_retry=0.05)
    resume_arrived = threading.Event()
    resume_release = threading.Event()
    resumes: list[str] = []

    def gate(environ: dict, start_response: Any) -> Any:
        last = environ.get("HTTP_LAST_EVENT_ID")
        if environ["REQUEST_METHOD"] == "GET" and last:
            resumes.append(last)
            resume_arrived.set()
            assert resume_release.wait(WAIT * 2)
        return app(environ, start_response)

    base, stop = run_waitress(gate, threads=4)
    url = f"{base}/mcp"
    notes = Notes()
    try:
        with legacy_http(
            url, on_notification=notes, reconnect=ReconnectPolicy(delay=30.0)
        ) as client:
            wait_until(lambda: app.standalone_streams == 1, "the GET stream to open")
            tick(app, 0)
            assert notes.wait_for(1) == [0]
            assert resume_arrived.wait(WAIT), (
                "the client did not reconnect after the stream's lifetime"
            )
            assert app.standalone_streams == 0  # closed, and the reconnect is held at the gate
            for n in range(1, 21):  # pushed while no stream is open
                tick(app, n)
            resume_release.set()
            assert notes.wait_for(21) == list(range(21))
            # and again, across three more lifetimes, without a gate
            n = 21
            for _ in range(3):
                before = len(resumes)
                wait_until(lambda: len(resumes) > before, "the next reconnect")
                for _ in range(5):  # around the reconnect: some before, some after
                    tick(app, n)
                    n += 1
                notes.wait_for(n)
            assert notes.ticks == list(range(n))
            assert len(resumes) >= 4 and all(r.startswith("s-") for r in resumes)
            assert client.call_tool("echo", {"text": "x"}, timeout=WAIT).content[0].text == "x"
    finally:
        resume_release.set()
        app.close()
        stop()


# -- the cap -------------------------------------------------------------------------------------
def test_a_get_beyond_max_standalone_streams_is_503_with_retry_after(probe, serve, raw):
    handle = serve(make_server(probe), max_standalone_streams=1, stream_retry=3)
    first, second = raw(handle.url), raw(handle.url)
    first.initialize()
    second.initialize()
    held = first.get()
    assert held.status_code == 200
    refused = second.get()
    assert refused.status_code == 503 and refused.headers["retry-after"] == "3"
    refused.close()
    held.close()
    assert first.delete().status_code == 200  # ends its stream: the slot is free again
    wait_until(lambda: handle.app.standalone_streams == 0, "the slot to be released")
    again = second.get()
    assert again.status_code == 200


def test_idle_clients_do_not_lock_others_out_of_a_small_waitress(probe):
    """Four waitress threads, six clients that want a GET stream: two get one (the cap),
    the others are told 503 and wait; a seventh client still gets its calls through, and a
    client without notification handlers opens no stream at all."""
    app = make_server(probe).wsgi_app(path="/mcp", max_standalone_streams=2, stream_retry=0.05)
    opened: list[str] = []  # sessions whose GET got a stream, in order
    refused: list[str] = []  # ... and whose GET got 503

    def record(environ: dict, start_response: Any) -> Any:
        def recording_start_response(status: str, headers: Any, exc_info: Any = None) -> Any:
            if environ["REQUEST_METHOD"] == "GET":
                (
                    opened
                    if status.startswith("200")
                    else refused
                    if status.startswith("503")
                    else []
                ).append(environ.get("HTTP_MCP_SESSION_ID", ""))
            return start_response(status, headers, exc_info)

        return app(environ, recording_start_response)

    base, stop = run_waitress(record, threads=4)
    url = f"{base}/mcp"
    clients: list[Client] = []
    try:
        for _ in range(6):
            clients.append(legacy_http(url, on_notification=lambda m, p: None, init_timeout=WAIT))
        wait_until(
            lambda: app.standalone_streams == 2 and len(set(refused)) == 4,
            "two GET streams to open, four to be refused",
        )
        holders = set(opened)
        with legacy_http(url, init_timeout=WAIT) as other:
            assert (
                other.call_tool("echo", {"text": "through"}, timeout=WAIT).content[0].text
                == "through"
            )
            assert other.transport._get_started is False  # nothing to receive: no GET stream
            assert app.standalone_streams == 2
        holder = next(c for c in clients if c.transport.session_id in holders)
        clients.remove(holder)
        holder.close()  # frees a slot: one of the waiting clients takes it (503, then retry)
        wait_until(lambda: set(opened) - holders, "a waiting client to take the free slot")
        assert set(opened) - holders <= set(refused)
        for client in clients:
            assert client.call_tool("echo", {"text": "ok"}, timeout=WAIT).content[0].text == "ok"
    finally:
        for client in clients:
            client.close()
        app.close()
        stop()


def test_get_stream_is_opened_when_asked_or_when_there_is_something_to_receive(probe, serve):
    handle = serve(make_server(probe))
    app = handle.app
    with legacy_http(handle.url) as plain:
        plain.ping()
        assert app.standalone_streams == 0
    for options in (
        {"open_get_stream": True},
        {"on_log": lambda params: None},
        {"roots": ["/tmp"]},
    ):
        with legacy_http(handle.url, **options):
            wait_until(lambda: app.standalone_streams == 1, f"a GET stream with {options}")
        wait_until(lambda: app.standalone_streams == 0, "the stream to close with its client")


def wsgi_call(
    app: McpWsgiApp, method: str, body: bytes = b"", **headers: str
) -> tuple[str, dict[str, str], Any]:
    """Call the WSGI app directly: ``(status, headers, body iterable)``."""
    seen: dict[str, Any] = {}

    def start_response(status: str, response_headers: list, exc_info: Any = None) -> None:
        seen["status"], seen["headers"] = status, {k.lower(): v for k, v in response_headers}

    environ = {
        "REQUEST_METHOD": method,
        "PATH_INFO": "/mcp",
        "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": str(len(body)),
        "HTTP_ACCEPT": "application/json, text/event-stream",
        "wsgi.input": io.BytesIO(body),
    }
    environ.update({f"HTTP_{name.upper()}": value for name, value in headers.items()})
    result = app(environ, start_response)
    return seen["status"], seen["headers"], result


def new_session(app: McpWsgiApp) -> str:
    _, headers, body = wsgi_call(app, "POST", json.dumps(initialize_request(0)).encode())
    list(body)
    return headers["mcp-session-id"]


def test_a_standalone_body_never_iterated_still_gives_its_slot_back(probe):
    app = make_server(probe).wsgi_app(path="/mcp", max_standalone_streams=1)
    try:
        sid = new_session(app)
        status, _, body = wsgi_call(app, "GET", accept="text/event-stream", mcp_session_id=sid)
        assert status.startswith("200") and app.standalone_streams == 1
        body.close()  # the client vanished before the server wrote a byte
        assert app.standalone_streams == 0
    finally:
        app.close()


def test_concurrent_gets_of_one_session_open_one_stream(probe, fast_switching):
    app = make_server(probe).wsgi_app(path="/mcp")
    try:
        sid = new_session(app)
        for _ in range(20):
            barrier = threading.Barrier(6)
            answers: list[tuple[str, Any]] = []

            def get() -> None:
                barrier.wait(WAIT)
                status, _, body = wsgi_call(
                    app, "GET", accept="text/event-stream", mcp_session_id=sid
                )
                answers.append((status, body))

            threads = [threading.Thread(target=get, name="get") for _ in range(6)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(WAIT)
            statuses = sorted(status[:3] for status, _ in answers)
            assert statuses == ["200"] + ["409"] * 5, statuses
            for _, body in answers:
                getattr(body, "close", lambda: None)()
            assert app.standalone_streams == 0
    finally:
        app.close()


def test_event_stream_until_yields_what_was_pushed_then_stops():
    stream = EventStream("s-x")
    stream.push(b'{"n":1}')
    import time

    events = list(stream.events(0, keepalive=10, until=time.monotonic()))
    assert events[0].startswith(b"id: s-x:0") and b'{"n":1}' in events[1] and len(events) == 2
    stream.push(b'{"n":2}')
    later = list(stream.events(1, keepalive=10, until=time.monotonic()))  # resumed after event 1
    assert len(later) == 2 and b'{"n":2}' in later[1]


# -- cancellations that do not wait for headers --------------------------------------------------
def test_a_cancel_reaches_a_server_that_sends_headers_only_with_the_result(probe, serve):
    handle = serve(make_server(probe).wsgi_app(path="/mcp", json_response=True))
    with legacy_http(handle.url) as client:
        future = client.call_tool_future("gated", {"tag": "late"})
        assert probe.started("late").wait(WAIT)
        assert future.cancel("no more") is True
        assert probe.cancelled("late").wait(WAIT), "the handler never saw its cancellation"
        assert probe.reasons["late"] == "no more"
        assert client.call_tool("echo", {"text": "after"}, timeout=WAIT).content[0].text == "after"


def test_a_cancel_that_overtakes_its_request_is_applied_when_the_request_arrives(
    probe, serve, raw, wire
):
    handle = serve(make_server(probe))
    session = raw(handle.url)
    session.initialize()
    cancel = notification("notifications/cancelled", {"requestId": 7, "reason": "early"})
    assert session.post(cancel).status_code == 202  # before its request, as another connection may
    stream = session.open(call_tool("gated", {"tag": "e"}, 7))
    assert stream.rest() == []  # ended without an answer
    assert wire.responses(7) == []
    assert not probe.completed("e").is_set()
    assert session.call(call_tool("echo", {"text": "z"}, 8))["result"]["content"][0]["text"] == "z"


def test_early_cancels_are_bounded_and_only_for_requests_not_yet_received():
    transport = HttpSessionTransport("s")
    for n in range(EARLY_CANCELS + 10):
        assert transport.cancel_arrived(n, b"cancel %d" % n) is False
    assert transport.open_request_stream(0) is not None
    assert transport.request_received(0) is None  # the oldest was dropped
    assert transport.open_request_stream(EARLY_CANCELS + 9) is not None
    assert transport.request_received(EARLY_CANCELS + 9) == b"cancel %d" % (EARLY_CANCELS + 9)
    assert transport.open_request_stream("x") is not None
    assert transport.request_received("x") is None
    assert transport.cancel_arrived("x", b"now") is True  # known: deliver at once
    assert transport.cancel_arrived(True, b"bad id") is True  # not an id: the endpoint drops it
    assert transport.cancel_arrived("y", b"x" * (EARLY_CANCEL_BYTES + 1)) is True  # too big to keep
    assert transport.open_request_stream("y") is not None
    assert transport.request_received("y") is None


class RawServer:
    """A loopback HTTP server on raw sockets (a thread per connection) that speaks just
    enough Streamable HTTP, and treats a POST with a body over 1 MiB specially: it reads
    the headers, sets ``big_headers``, and then either waits for ``release`` and reads the
    body (``reset=False``) or resets the connection with the body half sent (``reset=True``).
    With ``hold_init_stream=True`` it answers ``initialize`` on an SSE stream that it keeps
    open, silent, until the test ends."""

    INIT: ClassVar[dict[str, Any]] = {
        "protocolVersion": "2025-11-25",
        "capabilities": {"tools": {}},
        "serverInfo": {"name": "raw", "version": "0"},
    }

    def __init__(self, *, reset: bool = False, hold_init_stream: bool = False) -> None:
        self.reset = reset
        self.hold_init_stream = hold_init_stream
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}/mcp"
        self.big_headers, self.release, self.cancel_seen = (
            threading.Event(),
            threading.Event(),
            threading.Event(),
        )
        self.conns: list[socket.socket] = []
        self.workers: list[threading.Thread] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, name="raw-server")

    def __enter__(self) -> RawServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.stop.set()
        socket.create_connection(
            self.listener.getsockname(), timeout=WAIT
        ).close()  # wakes accept()
        self.thread.join(WAIT)
        self.listener.close()
        for conn in self.conns:
            conn.close()

    def _serve(self) -> None:
        while True:
            conn, _ = self.listener.accept()
            if self.stop.is_set():
                conn.close()
                break
            self.conns.append(conn)
            worker = threading.Thread(target=self._handle, args=(conn,), name="raw-server-conn")
            self.workers.append(worker)
            worker.start()
        for worker in self.workers:
            worker.join(WAIT)

    @staticmethod
    def _reply(conn: socket.socket, status: str, body: bytes = b"", extra: str = "") -> None:
        head = (
            f"HTTP/1.1 {status}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n{extra}\r\n"
        )
        conn.sendall(head.encode() + body)
        conn.close()

    def _handle(self, conn: socket.socket) -> None:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = next(
            (
                int(line.split(b":")[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length")
            ),
            0,
        )
        if head.startswith(b"POST") and length > 1024 * 1024:
            self.big_headers.set()
            if self.reset:  # RST with most of the body unsent: the server never saw the request
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                conn.close()
                return
            self.release.wait(WAIT * 2)
            while len(body) < length:
                chunk = conn.recv(1 << 20)
                if not chunk:
                    return
                body += chunk
            self._reply(conn, "202 Accepted")  # the call was cancelled already: nothing to answer
            return
        while len(body) < length:
            body += conn.recv(65536)
        message = json.loads(body or b"null")
        json_type = "Content-Type: application/json\r\n"
        if (
            head.startswith(b"POST")
            and message.get("method") == "initialize"
            and self.hold_init_stream
        ):
            event = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": self.INIT})
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nMcp-Session-Id: s1\r\nConnection: close\r\n\r\n"
                + f"event: message\ndata: {event}\n\n".encode()
            )
            self.release.wait(WAIT * 2)  # the stream stays open (the body ends when it closes)
            conn.close()
        elif head.startswith(b"POST") and message.get("method") == "initialize":
            answer = json.dumps(
                {"jsonrpc": "2.0", "id": message["id"], "result": self.INIT}
            ).encode()
            self._reply(conn, "200 OK", answer, json_type + "Mcp-Session-Id: s1\r\n")
        elif head.startswith(b"POST") and "id" in message:
            result = {"content": [{"type": "text", "text": "small"}], "isError": False}
            self._reply(
                conn,
                "200 OK",
                json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode(),
                json_type,
            )
        elif head.startswith(b"POST"):
            if message.get("method") == "notifications/cancelled":
                self.cancel_seen.set()
            self._reply(conn, "202 Accepted")
        else:
            self._reply(conn, "200 OK")


BIG = {"blob": "x" * (32 * 1024 * 1024)}  # more than the loopback socket buffers hold


def test_a_cancellation_is_not_sent_before_its_request_body_is_written():
    """A server that reads the headers of a big request but not yet its body: the client's
    cancel must wait until the body is written, then go at once (not wait for headers)."""
    with RawServer() as server, legacy_http(server.url, open_get_stream=False) as client:
        future = client.call_tool_future("big", BIG)
        assert server.big_headers.wait(WAIT)
        assert future.cancel("stop") is True
        assert not server.cancel_seen.wait(0.5), "the cancel went out before its request's body"
        server.release.set()
        assert server.cancel_seen.wait(WAIT), "the cancel did not follow the written body"


def test_an_initialize_stream_kept_open_after_its_answer_outlives_init_timeout():
    """The handshake's read timeout (``init_timeout``) also applies to the rest of the
    initialize POST's stream: when it fires after the answer came, nothing is lost, so the
    connection goes on (it used to be failed as 'the answer stream ... broke')."""
    with (
        RawServer(hold_init_stream=True) as server,
        legacy_http(server.url, open_get_stream=False, init_timeout=0.3) as client,
    ):
        end = time.monotonic() + WAIT
        while any(t.name.startswith("mcp_sync-http-stream-") for t in threading.enumerate()):
            assert time.monotonic() < end, "the initialize stream's read timeout never fired"
            threading.Event().wait(0.02)
        assert not client.closed, "the connection was failed after the handshake had succeeded"
        assert client.call_tool("small", {}, timeout=WAIT).content[0].text == "small"


def test_a_request_reset_while_its_body_was_being_sent_fails_that_call_only():
    with RawServer(reset=True) as server, legacy_http(server.url, open_get_stream=False) as client:
        with pytest.raises(RequestNotSent):
            client.call_tool("big", BIG, timeout=WAIT)
        assert server.big_headers.is_set()
        assert not client.closed
        assert client.call_tool("small", {}, timeout=WAIT).content[0].text == "small"


def test_the_handshake_returns_only_once_the_get_stream_is_answered(probe, serve):
    """A server may send a request on the GET stream right after the handshake and drop it
    if no stream is connected (the official SDK's server does, without an event store):
    ``Client.http`` returns only after the server answered the GET."""
    app = McpWsgiApp(make_server(probe))
    get_arrived, release_get = threading.Event(), threading.Event()

    def gated_get(environ: dict[str, Any], start_response: Any) -> Any:
        if environ["REQUEST_METHOD"] == "GET" and not release_get.is_set():
            get_arrived.set()
            assert release_get.wait(WAIT), "the test never released the GET"
        return app(environ, start_response)

    handle = serve(gated_get)
    clients: list[Client] = []
    connect = threading.Thread(
        target=lambda: clients.append(legacy_http(handle.url, open_get_stream=True)),
        name="connect",
    )
    connect.start()
    try:
        assert get_arrived.wait(WAIT), "the client never opened its GET stream"
        connect.join(0.5)  # the GET is held: the handshake must not have returned
        assert connect.is_alive() and not clients, (
            "Client.http returned before its GET stream was answered"
        )
    finally:
        release_get.set()
        connect.join(WAIT)
    assert clients, "Client.http did not return once the GET was answered"
    clients[0].close()


def test_a_standalone_stream_first_used_after_close_is_ended():
    # the standalone stream is made on first use: one made after close() ends at once, as
    # the ones that existed then did
    transport = HttpSessionTransport("s")
    transport.close()
    assert transport.standalone.ended
    with pytest.raises(BrokenPipeError):
        transport.send(b"{}\n", OutboundMeta("notification"))
    assert transport.read_line() is None  # closed: returns at once
