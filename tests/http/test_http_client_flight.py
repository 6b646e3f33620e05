"""A 2026-07-28 request's Flight shuts its connection down on cancel -- but never once its
answer was read: the connection is back in the pool by then, perhaps carrying the next
request, which a late shutdown would break ("Server disconnected without sending a
response")."""

from __future__ import annotations

import select
import socket
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from support.http import run_waitress
from support.waiting import WAIT

from mcp_sync.http import client_flight
from mcp_sync.http.client_flight import Flight


class Stream:
    """A network stream over one end of a socket pair."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    def get_extra_info(self, name: str) -> Any:
        return self.sock if name == "socket" else None


class ByteStream:
    """A response body already read (its close is what would release the connection)."""

    def __iter__(self) -> Iterator[bytes]:
        return iter(())

    def close(self) -> None:
        pass


class Response:
    """What the flight sees of an httpx response: closing it closes its byte stream."""

    def __init__(self) -> None:
        self.extensions: dict[str, Any] = {}
        self.stream: Any = ByteStream()  # wrapped by attach_response
        self.closed = False

    def close(self) -> None:
        self.closed = True
        self.stream.close()


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    ours, theirs = socket.socketpair()
    theirs.settimeout(5.0)
    try:
        yield ours, theirs
    finally:
        ours.close()
        theirs.close()


def in_flight(sock: socket.socket) -> tuple[Flight, Response]:
    """A flight whose request was written on ``sock`` and whose answer's headers came."""
    flight = Flight()
    trace = flight.trace()
    trace("http11.send_request_headers.started", {})
    client_flight._local.stream = Stream(sock)  # what the tracking backend notes on write
    trace("http11.send_request_headers.complete", {})
    response = Response()
    assert flight.attach_response(response)
    return flight, response


def test_a_cancel_shuts_the_connection_of_a_request_in_flight_down(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    ours, theirs = pair
    flight, response = in_flight(ours)
    flight.cancel()
    assert theirs.recv(1) == b""  # shut down: the peer sees the end
    assert response.closed


def test_a_cancel_after_the_answer_was_read_leaves_the_connection_alone(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    ours, theirs = pair
    flight, response = in_flight(ours)
    response.close()  # the answer is read: the connection goes back to the pool
    assert response.closed
    flight.cancel()
    ours.sendall(b"next request")
    assert theirs.recv(12) == b"next request"


def _hello(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    environ["wsgi.input"].read()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "5")])
    return [b"hello"]


def test_a_cancel_after_httpx_released_the_connection_by_itself_leaves_it_alone() -> None:
    """httpx closes a response read to its end by itself, and that close puts the connection
    back in the pool -- before the reader itself closes it. A cancel in that gap used to
    shut down a connection that may already carry the next request."""
    base, stop = run_waitress(_hello)  # keep-alive HTTP/1.1: the connection is pooled
    try:
        with httpx.Client(transport=client_flight.tracking_transport(httpx), timeout=WAIT) as http:
            flight = Flight()
            request = http.build_request(
                "POST", base + "/", content=b"x", extensions={"trace": flight.trace()}
            )
            response = http.send(request, stream=True)
            assert flight.attach_response(response)
            sock = response.extensions["network_stream"].get_extra_info("socket")
            assert b"".join(response.iter_bytes()) == b"hello"
            assert response.is_closed  # closed by httpx: the connection is back in the pool
            flight.cancel()  # comes late: the request has its answer
            readable, _, _ = select.select([sock], [], [], 0)
            assert not readable, "the pooled connection was shut down by a late cancel"
            again = http.post(base + "/", content=b"y")
            assert again.text == "hello"
            assert again.extensions["network_stream"].get_extra_info("socket") is sock
    finally:
        stop()


class _WatchedLock:
    """A lock that says when a thread starts waiting for it while another holds it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.contended = threading.Event()

    def __enter__(self) -> bool:
        if not self._lock.acquire(blocking=False):
            self.contended.set()
            self._lock.acquire()
        return True

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


def test_close_racing_the_start_of_a_request_thread_joins_only_started_threads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """close() on another thread, while a request's thread is being started: it must never
    join a thread that has not started (RuntimeError, seen once in the check-cancel CLI)."""
    from mcp_sync.http import client_transport
    from mcp_sync.http.client_transport import HttpClientTransport

    transport = HttpClientTransport("http://127.0.0.1:9/mcp")
    lock = _WatchedLock()
    transport._lock = lock  # type: ignore[assignment]
    errors: list[BaseException] = []
    closed = threading.Event()

    def close() -> None:
        try:
            transport.close()
        except BaseException as exc:
            errors.append(exc)
        finally:
            closed.set()
            lock.contended.set()  # close() is over: the start need not wait any more

    real_start = threading.Thread.start

    def start(thread: threading.Thread) -> None:
        if thread.name == "under-test":
            closer = threading.Thread(target=close, name="closer")
            real_start(closer)
            # on once close() either ran to its end or waits for the transport's lock
            assert lock.contended.wait(WAIT)
            start.closer = closer  # type: ignore[attr-defined]
        real_start(thread)

    monkeypatch.setattr(client_transport.threading.Thread, "start", start)
    ran = threading.Event()
    transport._start(ran.set, "under-test")
    assert closed.wait(WAIT)
    start.closer.join(WAIT)  # type: ignore[attr-defined]
    assert errors == []
