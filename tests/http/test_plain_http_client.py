"""The plain ``http://`` client (mcp_sync.http.plain_http) against real servers: waitress,
the library's embedded server, and raw sockets for what a server rarely does (close an idle
connection, reset one, drop a request it read)."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from support.http import run_waitress
from support.raw_http import RawHttpServer, read_request
from support.waiting import WAIT

from mcp_sync import Server
from mcp_sync.errors import Cancelled
from mcp_sync.http import plain_http
from mcp_sync.http.client_flight import Flight
from mcp_sync.http.plain_http import (
    ConnectionLost,
    PlainHttpClient,
    RequestNotWritten,
    plain_origin,
)


class Peers:
    """A WSGI app that answers ``ok <n>`` and notes each connection's client port."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ports: list[str] = []

    def __call__(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        body = environ["wsgi.input"].read()
        with self.lock:
            self.ports.append(environ.get("REMOTE_PORT", "?"))
        if environ["PATH_INFO"] == "/stream":
            start_response("200 OK", [("Content-Type", "text/event-stream")])
            return [b"data: one\n\n", b"data: two\n\n"]  # no length: chunked or until close
        answer = b"ok " + body
        start_response(
            "200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(answer)))]
        )
        return [answer]

    def connections(self) -> int:
        with self.lock:
            return len(set(self.ports))


@pytest.fixture
def waitress_peers() -> Iterator[tuple[str, Peers]]:
    peers = Peers()
    base, stop = run_waitress(peers)
    try:
        yield base, peers
    finally:
        stop()


def post(client: PlainHttpClient, body: bytes, flight: Flight | None = None) -> bytes:
    response = client.request("POST", {"Content-Type": "text/plain"}, body, flight=flight)
    try:
        assert response.status_code == 200
        return response.read()
    finally:
        response.close()


def test_plain_origins_are_http_urls_without_user_info() -> None:
    assert plain_origin("http://127.0.0.1:8000/mcp")
    assert plain_origin("HTTP://example.com")
    assert not plain_origin("https://example.com/mcp")
    assert not plain_origin("http://user:pw@example.com/mcp")
    assert not plain_origin("http:///nohost")


def test_sequential_requests_reuse_one_connection(waitress_peers: tuple[str, Peers]) -> None:
    base, peers = waitress_peers
    client = PlainHttpClient(base + "/echo")
    try:
        for n in range(20):
            assert post(client, b"%d" % n) == b"ok %d" % n
        assert peers.connections() == 1
        assert client.connections_opened == 1
        assert client.idle_connections == 1
    finally:
        client.close()
    assert client.idle_connections == 0


def test_a_response_not_read_to_its_end_closes_its_connection(
    waitress_peers: tuple[str, Peers],
) -> None:
    base, peers = waitress_peers
    client = PlainHttpClient(base + "/echo")
    try:
        response = client.request("POST", {}, b"abandoned")
        response.close()  # the body is unread: the connection cannot serve another request
        assert client.idle_connections == 0
        assert post(client, b"next") == b"ok next"
        assert client.connections_opened == 2 and peers.connections() == 2
    finally:
        client.close()


def test_a_streamed_body_is_read_as_it_comes_and_the_connection_kept(
    waitress_peers: tuple[str, Peers],
) -> None:
    base, _ = waitress_peers
    client = PlainHttpClient(base + "/stream")
    try:
        response = client.request("POST", {}, b"")
        assert response.headers.get("content-type") == "text/event-stream"
        assert b"".join(response.iter_bytes()) == b"data: one\n\ndata: two\n\n"
        response.close()
        assert client.idle_connections == (1 if response.end and response.end.keep_alive else 0)
    finally:
        client.close()


def test_the_idle_pool_is_bounded(waitress_peers: tuple[str, Peers]) -> None:
    base, _peers = waitress_peers
    client = PlainHttpClient(base + "/echo", max_idle=2)
    try:
        open_responses = [client.request("POST", {}, b"%d" % n) for n in range(4)]
        assert client.connections_opened == 4  # each request in flight has its own
        for response in open_responses:
            response.read()
            response.close()
        assert client.idle_connections == 2
        for _n in range(4):
            post(client, b"again")
        assert client.connections_opened == 4  # the two idle ones served the rest
    finally:
        client.close()


def test_the_embedded_servers_http_1_0_connections_are_not_reused() -> None:
    """The embedded server answers HTTP/1.0 without keep-alive: every request gets a
    connection of its own, and none is kept idle (one would be dead)."""
    server = Server("plain", version="1")
    handle = server.serve_http("127.0.0.1", 0)
    try:
        client = PlainHttpClient(handle.url)
        try:
            for n in range(3):
                body = b'{"jsonrpc":"2.0","id":%d,"method":"ping"}' % n
                response = client.request(
                    "POST",
                    {
                        "Content-Type": "application/json",
                        "Accept": "application/json, text/event-stream",
                    },
                    body,
                )
                assert b'"id":%d' % n in response.read()
                response.close()
                assert response.http_version == "1.0"
                assert response.end is not None and not response.end.keep_alive
                assert client.idle_connections == 0
            assert client.connections_opened == 3
        finally:
            client.close()
    finally:
        handle.stop()


def test_an_invalid_header_is_not_written() -> None:
    client = PlainHttpClient("http://127.0.0.1:9/")
    with pytest.raises(RequestNotWritten, match="invalid header"):
        client.request("POST", {"X-Bad": "a\r\nInjected: 1"}, b"")
    with pytest.raises(RequestNotWritten, match="invalid header"):
        client.request("POST", {"Bad Name": "a"}, b"")
    with pytest.raises(RequestNotWritten, match="not ASCII"):
        client.request("POST", {"X-Name": "caf\u00e9"}, b"")
    assert client.connections_opened == 0


def test_an_invalid_header_is_refused_every_time_it_is_given() -> None:
    client = PlainHttpClient("http://127.0.0.1:9/")
    for _ in range(2):  # a refused head is never kept for the next request
        with pytest.raises(RequestNotWritten, match="invalid header"):
            client.request("POST", {"X-Bad": "a\r\nInjected: 1"}, b"")
    assert client.connections_opened == 0


def test_a_refused_connection_is_not_written() -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
    client = PlainHttpClient(f"http://127.0.0.1:{port}/")  # nothing listens there now
    with pytest.raises(RequestNotWritten, match="could not connect"):
        client.request("POST", {}, b"x")


# -- raw servers: what a server rarely does -------------------------------------------------------
OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


class RawServer(RawHttpServer):
    """Answers each request on a connection with ``script(conn, index)``: it returns False to
    stop serving that connection (which is then closed, or reset if the script set
    ``SO_LINGER`` so). Counts connections and requests."""

    name = "raw"

    def __init__(self, script: Callable[[socket.socket, int], bool]) -> None:
        self.script = script
        self.requests = 0
        self.closed = threading.Event()  # a connection was closed by this server
        super().__init__()

    def serve(self, conn: socket.socket) -> None:
        buffer = b""
        index = 0
        try:
            while True:
                request = read_request(conn, buffer)
                if request is None:
                    return
                buffer = request[2]
                with self.lock:
                    self.requests += 1
                if not self.script(conn, index):
                    return
                index += 1
        finally:
            conn.close()
            self.closed.set()


@pytest.fixture
def raw_server() -> Iterator[Callable[[Callable[[socket.socket, int], bool]], RawServer]]:
    servers: list[RawServer] = []

    def start(script: Callable[[socket.socket, int], bool]) -> RawServer:
        server = RawServer(script)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


class HeadRecorder(RawHttpServer):
    """Answers every request ``ok`` and keeps each request as it came (head, blank line,
    body)."""

    name = "heads"

    def __init__(self) -> None:
        self.received: list[bytes] = []
        super().__init__()

    def serve(self, conn: socket.socket) -> None:
        buffer = b""
        try:
            while (request := read_request(conn, buffer)) is not None:
                head, body, buffer = request
                with self.lock:
                    self.received.append(head + b"\r\n\r\n" + body)
                conn.sendall(OK)
        finally:
            conn.close()


def test_request_heads_are_kept_encoded_for_a_bounded_few_header_sets() -> None:
    server = HeadRecorder()
    client = PlainHttpClient(server.url)

    def send(headers: dict[str, str], body: bytes = b"") -> None:
        response = client.request("POST", headers, body)
        assert response.read() == b"ok"
        response.close()

    try:
        for body in (b"1", b"22", b""):  # the same headers: only the length differs
            send({"X-A": "1"}, body)
        for n in range(3 * plain_http.MAX_CACHED_HEADS):
            send({"X-N": str(n)})
        assert len(client._heads) <= plain_http.MAX_CACHED_HEADS
        send({"X-Big": "v" * plain_http.MAX_CACHED_HEAD_BYTES})  # too long to keep
        assert all("X-Big" not in dict(key[1:]) for key in client._heads)
    finally:
        client.close()
        server.close()
    host = server.url.split("/")[2].encode()
    assert server.received[:3] == [
        b"POST / HTTP/1.1\r\nHost: %s\r\nX-A: 1\r\nContent-Length: %d\r\n\r\n%s"
        % (host, len(body), body)
        for body in (b"1", b"22", b"")
    ]
    assert server.received[-2].startswith(
        b"POST / HTTP/1.1\r\nHost: %s\r\nX-N: %d\r\n" % (host, 3 * plain_http.MAX_CACHED_HEADS - 1)
    )
    assert b"X-Big: " + b"v" * plain_http.MAX_CACHED_HEAD_BYTES + b"\r\n" in server.received[-1]


def _idle_socket(client: PlainHttpClient) -> socket.socket:
    assert client.idle_connections == 1
    return client._idle[0].sock


def _wait_readable(sock: socket.socket) -> None:
    import select

    readable, _, _ = select.select([sock], [], [], WAIT)
    assert readable, "the server's close never reached the idle connection"


def test_an_idle_connection_the_server_closed_is_discarded_before_reuse(
    raw_server: Callable[..., RawServer],
) -> None:
    def answer_once(conn: socket.socket, index: int) -> bool:
        conn.sendall(OK)
        return False  # then close the kept-alive connection

    server = raw_server(answer_once)
    client = PlainHttpClient(server.url)
    try:
        assert post(client, b"1") == b"ok"
        _wait_readable(_idle_socket(client))  # the server's FIN is here
        assert post(client, b"2") == b"ok"  # on a new connection, not the dead one
        assert client.connections_opened == 2 and server.connections == 2
        assert server.requests == 2
    finally:
        client.close()


def _reset(conn: socket.socket) -> None:
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def test_a_write_failing_on_a_reused_connection_is_retried_once_on_a_new_one(
    raw_server: Callable[..., RawServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    def answer_then_reset(conn: socket.socket, index: int) -> bool:
        conn.sendall(OK)
        _reset(conn)
        return False

    server = raw_server(answer_then_reset)
    client = PlainHttpClient(server.url)
    try:
        assert post(client, b"1") == b"ok"
        _wait_readable(_idle_socket(client))  # the reset is here
        monkeypatch.setattr(plain_http, "_stale", lambda sock: False)  # so the write meets it
        assert post(client, b"2") == b"ok"
        assert client.connections_opened == 2
        assert server.requests == 2  # the failed write never reached a server's read
    finally:
        client.close()


def test_a_request_written_whose_connection_then_closes_is_lost_not_retried(
    raw_server: Callable[..., RawServer],
) -> None:
    def answer_first_drop_second(conn: socket.socket, index: int) -> bool:
        if index == 0:
            conn.sendall(OK)
            return True
        return False  # read the second request, then close without an answer

    server = raw_server(answer_first_drop_second)
    client = PlainHttpClient(server.url)
    try:
        assert post(client, b"1") == b"ok"
        with pytest.raises(ConnectionLost):
            post(client, b"2")
        assert server.requests == 2  # the server got it once: nothing was sent again
        assert client.connections_opened == 1
    finally:
        client.close()


def test_a_malformed_answer_is_a_protocol_error(raw_server: Callable[..., RawServer]) -> None:
    from mcp_sync.http.http11_parser import HttpProtocolError

    def garbage(conn: socket.socket, index: int) -> bool:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: nope\r\n\r\n")
        return False

    client = PlainHttpClient(raw_server(garbage).url)
    try:
        with pytest.raises(HttpProtocolError, match="Content-Length"):
            post(client, b"x")
        assert client.idle_connections == 0
    finally:
        client.close()


# -- cancellation ---------------------------------------------------------------------------------
def test_a_cancel_before_the_head_arrives_shuts_the_socket_down_at_once(
    raw_server: Callable[..., RawServer],
) -> None:
    held = threading.Event()

    def hold(conn: socket.socket, index: int) -> bool:
        held.set()
        return conn.recv(1) != b""  # the client's shutdown ends this read

    server = raw_server(hold)
    client = PlainHttpClient(server.url)
    flight = Flight()
    failures: list[BaseException] = []

    def request() -> None:
        try:
            post(client, b"x", flight)
        except BaseException as exc:
            failures.append(exc)

    thread = threading.Thread(target=request)
    thread.start()
    try:
        assert held.wait(WAIT)
        flight.cancel()
        assert server.closed.wait(WAIT)  # the server saw the connection end
        thread.join(WAIT)
        assert not thread.is_alive()
        assert len(failures) == 1 and isinstance(failures[0], ConnectionLost)
        assert client.idle_connections == 0
    finally:
        client.close()


def test_a_cancel_during_a_streamed_body_ends_the_read(
    raw_server: Callable[..., RawServer],
) -> None:
    def stream_and_hold(conn: socket.socket, index: int) -> bool:
        conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6\r\ndata:1\r\n")
        return conn.recv(1) != b""

    server = raw_server(stream_and_hold)
    client = PlainHttpClient(server.url)
    flight = Flight()
    try:
        response = client.request("POST", {}, b"x", flight=flight)
        chunks = response.iter_bytes()
        assert next(chunks) == b"data:1"
        flight.cancel()
        with pytest.raises(ConnectionLost):
            next(chunks)
        response.close()
        assert server.closed.wait(WAIT)
        assert client.idle_connections == 0
    finally:
        client.close()


def test_a_cancelled_flight_writes_nothing(waitress_peers: tuple[str, Peers]) -> None:
    base, peers = waitress_peers
    client = PlainHttpClient(base + "/echo")
    try:
        flight = Flight()
        flight.cancel()
        with pytest.raises(Cancelled):
            post(client, b"never", flight)
        assert peers.ports == []
    finally:
        client.close()


def test_a_cancel_after_the_answer_was_read_leaves_the_pooled_connection_alone(
    waitress_peers: tuple[str, Peers],
) -> None:
    base, peers = waitress_peers
    client = PlainHttpClient(base + "/echo")
    try:
        flight = Flight()
        assert post(client, b"1", flight) == b"ok 1"  # closed: the connection is pooled
        flight.cancel()  # late: must not shut the pooled connection down
        assert post(client, b"2") == b"ok 2"
        assert client.connections_opened == 1 and peers.connections() == 1
    finally:
        client.close()


def test_a_flight_shuts_its_attached_socket_down_unless_released_first() -> None:
    ours, theirs = socket.socketpair()
    try:
        flight = Flight()
        assert flight.attach_socket(ours)
        flight.cancel()
        theirs.settimeout(WAIT)
        assert theirs.recv(1) == b""  # shut down: the peer sees the end
        assert flight.release() is False  # a cancelled request's connection is not reused
        assert Flight().release() is True
        late = Flight()
        late.cancel()
        assert late.attach_socket(ours) is False  # nothing is written once cancelled
    finally:
        ours.close()
        theirs.close()
