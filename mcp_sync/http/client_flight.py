"""One 2026-07-28 request in flight over HTTP, and how its stream is closed to cancel it.

At 2026-07-28 closing a request's response stream *is* its cancellation, and it must work at
once -- also before the answer's headers have arrived (a server answering JSON sends them
only with the result). httpx exposes a response's socket only with its headers, so the
client's own connection pool is given a network backend whose streams note, in a
thread-local, which stream the current thread last wrote to; the request's ``trace``
callback reads it once the request's headers are written (:meth:`Flight.trace`). Cancelling
then shuts that socket down from the cancelling thread, which wakes the thread blocked
reading the answer; the connection is discarded, never reused.

An ``httpx.Client`` of the user's own gets the same backend on its default transport (its
new connections only; it changes nothing else). Through a mounted transport (a proxy, a
custom transport) a cancel before the headers arrive closes the stream the moment they do.

The client's own plain ``http://`` path (:mod:`~mcp_sync.http.plain_http`) needs no tracing:
it hands the flight its connection's socket before it writes the request
(:meth:`Flight.attach_socket`), and marks the request finished when its response, read to
the end, is closed (:meth:`Flight.release`), before the connection goes back to the pool.
"""

from __future__ import annotations

import functools
import socket
import threading
from collections.abc import Iterator
from typing import Any

from ..errors import Cancelled

__all__ = ["Flight", "track", "tracking_transport"]

_local = threading.local()  # .stream: the network stream this thread last wrote to


class Flight:
    """The cancellation state of one request: cancelled or not, and what to close."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.cancelled = False
        self.body_sent = False
        self._finished = False  # the response was closed: its connection may serve another
        self._stream: Any = None
        self._response: Any = None
        self._socket: socket.socket | None = None  # the plain path's connection

    def trace(self) -> Any:
        """The httpcore ``trace`` callback for this request's POST."""
        return self._on_trace

    def _on_trace(self, name: str, info: Any) -> None:
        if name.endswith("send_request_headers.started"):
            _local.stream = None
            if self.cancelled:
                # stops httpx before the request's headers go out
                raise Cancelled("cancelled before it was sent")
        elif name.endswith("send_request_headers.complete"):
            stream = getattr(_local, "stream", None)
            if stream is not None and not self._attach("_stream", stream):
                _shutdown(stream)
        elif name.endswith("send_request_body.complete"):
            self.body_sent = True

    def attach_response(self, response: Any) -> bool:
        """Note the response (its headers arrived); False if the request was cancelled
        already (the caller closes it).

        The response's byte stream is wrapped so that the request counts as finished
        *before* its connection can go back to the pool: httpx closes a response by itself
        once its body is read to the end, and that close hands the connection on. A cancel
        that came after it would shut down a connection already carrying another request."""
        response.stream = _release_guard(response.stream, self)
        return self._attach("_response", response)

    def attach_socket(self, sock: socket.socket) -> bool:
        """Note the socket the request is about to be written to (the plain ``http://``
        path); False if the request was cancelled already (nothing is written then)."""
        return self._attach("_socket", sock)

    def release(self) -> bool:
        """The request's response was read to its end and is being closed: True if its
        connection may serve another request (the request was not cancelled). From now on
        a cancel shuts nothing down."""
        with self._lock:
            self._finished = True
            return not self.cancelled

    def _attach(self, slot: str, value: Any) -> bool:
        with self._lock:
            if self.cancelled:
                return False
            setattr(self, slot, value)
            return True

    def cancel(self) -> None:
        """Close the request's stream now, from any thread (idempotent); nothing once its
        response was closed, read to the end (see :meth:`attach_response`)."""
        with self._lock:
            if self.cancelled:
                return
            self.cancelled = True
            if self._finished:
                return
            stream, response = self._stream, self._response
            if self._socket is not None:
                _shutdown_socket(self._socket)
            if response is not None:
                network = response.extensions.get("network_stream")
                stream = network if network is not None else stream
            if stream is not None:
                _shutdown(stream)  # under the lock: the response's close cannot hand it on first
        if response is not None:
            try:
                response.close()
            except Exception:
                pass


def _release_guard(stream: Any, flight: Flight) -> Any:
    """``stream`` (an httpx ``SyncByteStream``) whose ``close()`` marks ``flight`` finished
    before the connection is released, under the flight's lock (see
    :meth:`Flight.attach_response`)."""
    return _release_guard_type()(stream, flight)


@functools.cache
def _release_guard_type() -> type:
    """The class of :func:`_release_guard` (made once: it subclasses httpx's byte stream, and
    httpx is imported only when the HTTP client is used)."""
    import httpx

    class ReleaseGuard(httpx.SyncByteStream):
        def __init__(self, stream: Any, flight: Flight) -> None:
            self._stream = stream
            self._flight = flight

        def __iter__(self) -> Iterator[bytes]:
            return iter(self._stream)

        def close(self) -> None:
            with self._flight._lock:
                self._flight._finished = True  # a cancel from now on shuts nothing down
            self._stream.close()

    return ReleaseGuard


def _shutdown(stream: Any) -> None:
    """Shut a network stream's socket down (wakes a thread blocked reading it)."""
    try:
        sock = stream.get_extra_info("socket")
    except Exception:
        return
    if sock is not None:
        _shutdown_socket(sock)


def _shutdown_socket(sock: socket.socket) -> None:
    """Shut a socket down (wakes a thread blocked reading it; its owner closes it)."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


class _TrackedStream:
    """A network stream that notes itself as the current thread's last written stream."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, timeout)  # type: ignore[no-any-return]

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        _local.stream = self
        self._inner.write(buffer, timeout)

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, *args: Any, **kwargs: Any) -> _TrackedStream:
        return _TrackedStream(self._inner.start_tls(*args, **kwargs))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _TrackingBackend:
    """A network backend whose streams are :class:`_TrackedStream`."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def connect_tcp(self, *args: Any, **kwargs: Any) -> _TrackedStream:
        return _TrackedStream(self._inner.connect_tcp(*args, **kwargs))

    def connect_unix_socket(self, *args: Any, **kwargs: Any) -> _TrackedStream:
        return _TrackedStream(self._inner.connect_unix_socket(*args, **kwargs))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def tracking_transport(httpx: Any, **options: Any) -> Any:
    """An ``httpx.HTTPTransport`` (``options``: its arguments) whose connections note their
    streams for :class:`Flight` (see :func:`track`)."""
    transport = httpx.HTTPTransport(**options)
    track(transport)
    return transport


def track(transport: Any) -> bool:
    """Make the new connections of an ``httpx.HTTPTransport`` note their streams for
    :class:`Flight` (it changes nothing else); False if ``transport`` is not one whose
    connection pool can be wrapped (a cancel then closes the stream once its headers come)."""
    pool = getattr(transport, "_pool", None)
    backend = getattr(pool, "_network_backend", None)
    if backend is None:
        return False
    if not isinstance(backend, _TrackingBackend):
        pool._network_backend = _TrackingBackend(backend)  # type: ignore[union-attr]
    return True
