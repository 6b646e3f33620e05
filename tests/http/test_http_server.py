"""The built-in threaded HTTP server (``serve_http``) under connection floods and slow clients.

Everything here uses real loopback sockets: a burst of connects while nothing accepts
(the listen backlog), clients that trickle their request a byte at a time (the read
timeout), and more slow clients than the server takes at once (the connection cap).
"""

from __future__ import annotations

import logging
import select
import socket
import threading
import time

import pytest
from support.http import Sse, make_server
from support.messages import call_tool
from support.waiting import WAIT, wait_until

from mcp_sync.http import McpWsgiApp, serve_http
from mcp_sync.http.embedded_server import CONNECTION_THREAD_NAME, DEFAULT_BACKLOG


def _burst() -> int:
    """Simultaneous connects of the backlog test: 200 (resets were seen from 120), or fewer
    where the kernel caps every backlog lower (``somaxconn``: 128 on older systems)."""
    try:
        with open("/proc/sys/net/core/somaxconn") as f:
            return min(200, int(f.read()) - 8)
    except (OSError, ValueError):
        return 100


BURST = _burst()


def connection_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == CONNECTION_THREAD_NAME and t.is_alive()]


def closed_by_peer(sock: socket.socket) -> bool:
    """True once the server has closed ``sock`` (EOF or reset); reads and drops any answer."""
    while True:
        readable, _, _ = select.select([sock], [], [], 0)
        if not readable:
            return False
        try:
            if not sock.recv(65536):
                return True
        except OSError:
            return True


class Trickler:
    """Slow clients: each socket sends the start of a request, then one byte of a header
    every ``interval`` seconds, for ever (until the server closes it or the test ends)."""

    def __init__(self, port: int, count: int, interval: float = 0.05) -> None:
        self.sockets = [
            socket.create_connection(("127.0.0.1", port), timeout=WAIT) for _ in range(count)
        ]
        for sock in self.sockets:
            sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="trickler")
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):  # pacing of the slow client, not a sync
            for sock in self.sockets:
                try:
                    sock.send(b"a")
                except OSError:
                    pass  # closed by the server: what the test waits for

    def all_closed_by_server(self) -> bool:
        return all(closed_by_peer(sock) for sock in self.sockets)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(WAIT)
        for sock in self.sockets:
            sock.close()


@pytest.fixture
def trickle():
    tricklers: list[Trickler] = []

    def start(port: int, count: int) -> Trickler:
        trickler = Trickler(port, count)
        tricklers.append(trickler)
        return trickler

    yield start
    for trickler in tricklers:
        trickler.close()


# -- the listen backlog ----------------------------------------------------------------------------
def test_the_backlog_holds_a_burst_of_connects_while_no_thread_accepts(probe):
    app = McpWsgiApp(make_server(probe), path="/mcp")
    handle = serve_http(app, "127.0.0.1", 0, in_thread=False)  # listening, but nothing accepts yet
    sockets: list[socket.socket] = []
    try:
        for _ in range(BURST):
            sock = socket.socket()
            sock.setblocking(False)
            sock.connect_ex((handle.host, handle.port))
            sockets.append(sock)
        pending = set(sockets)
        end = time.monotonic() + WAIT
        while pending and time.monotonic() < end:
            _, writable, _ = select.select([], list(pending), [], max(0.0, end - time.monotonic()))
            for sock in writable:
                assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0
                pending.discard(sock)
        assert not pending, f"{len(pending)} of {BURST} connects were not taken into the backlog"
    finally:
        for sock in sockets:
            sock.close()
        handle.stop()


def test_the_backlog_is_configurable_and_large_by_default(probe):
    assert DEFAULT_BACKLOG >= 1024
    app = McpWsgiApp(make_server(probe), path="/mcp")
    with serve_http(app, "127.0.0.1", 0, backlog=2048) as handle:
        assert handle.backlog == 2048
    with serve_http(app, "127.0.0.1", 0) as handle:
        assert handle.backlog == DEFAULT_BACKLOG


# -- slow clients: the read timeout ----------------------------------------------------------------
def test_clients_trickling_their_request_are_closed_after_the_read_timeout(probe, trickle, caplog):
    caplog.set_level(logging.DEBUG, logger="mcp_sync.http")
    baseline = len(connection_threads())
    app = McpWsgiApp(make_server(probe), path="/mcp")
    with serve_http(app, "127.0.0.1", 0, read_timeout=1.0) as handle:
        slow = trickle(handle.port, 8)
        # the high-water mark, not the count: the first ones may time out before the last is taken
        wait_until(
            lambda: handle.peak_connections == 8, "the server to take the 8 slow connections"
        )
        wait_until(slow.all_closed_by_server, "the server to close every trickling connection")
        wait_until(lambda: handle.active_connections == 0, "every connection slot to be free again")
        wait_until(lambda: len(connection_threads()) == baseline, "the connection threads to end")
    # routine for a server: logged at debug level, with no traceback above it
    timeouts = [r for r in caplog.records if "read timeout" in r.getMessage()]
    assert len(timeouts) == 8 and all(r.levelno == logging.DEBUG for r in timeouts), timeouts
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_body_that_stops_arriving_is_answered_408_after_the_read_timeout(probe):
    """The deadline covers the body too: headers in time, then a body that never completes."""
    app = McpWsgiApp(make_server(probe), path="/mcp")
    with serve_http(app, "127.0.0.1", 0, read_timeout=0.5) as handle:
        with socket.create_connection((handle.host, handle.port), timeout=WAIT) as sock:
            head = (
                "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                "Accept: application/json\r\nContent-Length: 100\r\n\r\n"
            )
            sock.sendall(head.encode() + b'{"jsonrpc": "2.0", ')
            answer = b""
            while chunk := sock.recv(65536):  # bounded by the socket's timeout (WAIT)
                answer += chunk
        assert answer.split(b"\r\n", 1)[0].split()[1:2] == [b"408"], answer[:100]
        assert not app.sessions()


def test_long_lived_response_streams_outlive_the_read_timeout(probe, serve, raw):
    """The read timeout bounds how long a request takes to arrive, not how long its answer
    (an SSE stream that may be idle for minutes) stays open."""
    handle = serve(make_server(probe), keepalive=0.1, read_timeout=0.3)
    session = raw(handle.url)
    session.initialize()
    get = Sse(session.get())
    stream = session.open(call_tool("gated", {"tag": "g"}, 2))
    assert probe.started("g").wait(WAIT)
    # five keep-alives on each stream: both stayed open well past the read timeout
    for _ in range(5):
        assert stream.next_comment() == ": keep-alive"
        assert get.next_comment() == ": keep-alive"
    probe.release("g")
    answer = [m for _, m in stream.rest() if m.get("id") == 2]
    assert answer and answer[0]["result"]["content"][0]["text"] == "g: released"


# -- slow clients: the connection cap --------------------------------------------------------------
def test_connections_beyond_the_cap_wait_in_the_backlog(probe, trickle):
    baseline = len(connection_threads())
    app = McpWsgiApp(make_server(probe), path="/mcp")
    with serve_http(app, "127.0.0.1", 0, read_timeout=0.5, max_connections=3) as handle:
        slow = trickle(handle.port, 7)
        wait_until(lambda: handle.peak_connections == 3, "the server to take 3 slow connections")
        # the first three time out, the next three are taken, and so on: all end
        wait_until(
            slow.all_closed_by_server,
            "the server to close all 7 slow connections, 3 at a time",
            timeout=WAIT * 2,
        )
        assert (
            handle.peak_connections == 3
        )  # counted from accept to the end of the connection's thread
        wait_until(lambda: len(connection_threads()) == baseline, "the connection threads to end")


def test_a_request_waiting_behind_the_cap_is_served_when_a_slot_frees(probe, trickle):
    import httpx

    app = McpWsgiApp(make_server(probe), path="/mcp")
    with serve_http(app, "127.0.0.1", 0, read_timeout=1.0, max_connections=2) as handle:
        trickle(handle.port, 2)
        wait_until(lambda: handle.peak_connections == 2, "the slow clients to hold every slot")
        answer = httpx.get(handle.url, timeout=WAIT)  # waits in the backlog, then is served
        assert answer.status_code == 406  # a GET without Accept: the app answered it
        assert handle.peak_connections == 2
