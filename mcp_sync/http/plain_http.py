"""A small HTTP/1.1 client for one plain ``http://`` origin, with a keep-alive pool.

The HTTP client transport uses it for 2026-07-28 requests when it owns its client (see
:mod:`~mcp_sync.http.client_transport`): a request costs a ``sendall`` and a ``recv`` or two
plus the sans-IO parser (:mod:`~mcp_sync.http.http11_parser`), a fraction of a general
client's bookkeeping. What it does:

* :meth:`PlainHttpClient.request` writes one request (head and body in one ``sendall``
  when small) on an idle connection or a new one (``TCP_NODELAY``, ``connect_timeout``)
  and returns a :class:`PlainResponse` once the response's head arrived; the checked and
  encoded start of a head is kept for the next request with the same headers (a few dozen
  header sets, short heads only);
* a :class:`~mcp_sync.http.client_flight.Flight` given with the request is handed the
  connection's socket before anything is written, so cancelling it shuts the socket down
  at once from any thread, with or without the response's head;
* idle connections are kept, at most :data:`MAX_IDLE_CONNECTIONS`, each for at most
  :data:`IDLE_EXPIRY` seconds; one that is readable when taken (the server closed it, or
  sent bytes nobody asked for) is discarded before it is used;
* a request whose write fails on a reused connection is written once more on a new one:
  the server cannot have read the whole request, so it cannot have acted on it. Once the
  request is written, a connection that breaks before the response came is
  :class:`ConnectionLost` -- the server may have got it -- and nothing is retried.

Errors: :class:`RequestNotWritten` (the server did not get the whole request: connecting
failed, writing failed, an invalid header), :class:`ConnectionLost` (after the request was
written), and the parser's :class:`~mcp_sync.http.http11_parser.HttpProtocolError` (the
answer is not valid HTTP/1.1). Nothing here starts a thread.
"""

from __future__ import annotations

import functools
import re
import select
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from urllib.parse import urlsplit

from ..errors import Cancelled, ConnectionLost, PlainHttpError, RequestNotWritten
from .client_flight import Flight
from .http11_parser import (
    NEED_DATA,
    Headers,
    HttpProtocolError,
    ResponseEnd,
    ResponseHead,
    ResponseParser,
)

__all__ = [
    "IDLE_EXPIRY",
    "MAX_CACHED_HEADS",
    "MAX_CACHED_HEAD_BYTES",
    "MAX_IDLE_CONNECTIONS",
    "ConnectionLost",
    "PlainHttpClient",
    "PlainHttpError",
    "PlainResponse",
    "RequestNotWritten",
    "plain_origin",
]

MAX_IDLE_CONNECTIONS = 32
"""Most idle keep-alive connections a :class:`PlainHttpClient` keeps."""

MAX_CACHED_HEADS = 64
"""Most request heads a :class:`PlainHttpClient` keeps checked and encoded, one per header
set (a client sends the same few each time); when full, they are all dropped."""

MAX_CACHED_HEAD_BYTES = 2048
"""The longest request head kept encoded; a longer one (a long ``Mcp-Param-*`` value, say)
is checked and encoded for every request."""

IDLE_EXPIRY = 5.0
"""Seconds an idle connection is kept (a server closes idle connections after a while: a
connection older than this is not risked)."""

WRITE_TIMEOUT = 30.0
"""Longest wait, in seconds, to write a large request body to a server that reads slowly."""

_RECV = 65536
_ONE_WRITE = 64 * 1024  # bodies up to this size go in the same sendall as the head


def plain_origin(url: str) -> bool:
    """True if ``url`` is one :class:`PlainHttpClient` serves: ``http://``, no user info."""
    try:
        parts = urlsplit(url)
        return parts.scheme.lower() == "http" and bool(parts.hostname) and not parts.username
    except ValueError:
        return False


@functools.lru_cache(maxsize=256)
def _valid_name(name: str) -> bool:
    return re.fullmatch(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+", name) is not None


class _Connection:
    """One keep-alive connection: its socket, its parser, and whether it served before."""

    __slots__ = ("sock", "parser", "reused", "idle_since")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.parser: ResponseParser | None = None
        self.reused = False
        self.idle_since = 0.0

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:  # pragma: no cover - close does not fail on Linux
            pass


_poll = getattr(select, "poll", None)


def _stale(sock: socket.socket) -> bool:
    """True if an idle connection is readable now: closed by the server (or sent to).

    One ``poll`` with no wait (``select`` where there is none): cheaper than a
    non-blocking ``recv(MSG_PEEK)``, which raises on every healthy connection."""
    if _poll is None:  # pragma: no cover - Windows
        readable, _, _ = select.select([sock], [], [], 0)
        return bool(readable)
    poller = _poll()
    try:
        poller.register(sock, select.POLLIN)
    except (OSError, ValueError):  # closed already
        return True
    return bool(poller.poll(0))  # POLLIN (bytes, or the server's FIN), POLLHUP, POLLERR


class PlainHttpClient:
    """Requests to one ``http://`` URL over a pool of keep-alive connections.

    Args:
        url: the URL every request goes to (see :func:`plain_origin`).
        connect_timeout: seconds to establish a connection.
        max_idle: most idle connections kept (:data:`MAX_IDLE_CONNECTIONS`).
        idle_expiry: seconds an idle connection is kept (:data:`IDLE_EXPIRY`).
        write_timeout: longest wait to write a large body (:data:`WRITE_TIMEOUT`).
    """

    def __init__(
        self,
        url: str,
        *,
        connect_timeout: float = 10.0,
        max_idle: int = MAX_IDLE_CONNECTIONS,
        idle_expiry: float = IDLE_EXPIRY,
        write_timeout: float = WRITE_TIMEOUT,
    ) -> None:
        if not plain_origin(url):
            raise ValueError(f"not a plain http:// URL: {url!r}")
        parts = urlsplit(url)
        host = parts.hostname
        assert host is not None
        self._address = (host, parts.port or 80)
        self._host_header = parts.netloc
        target = parts.path or "/"
        self._target = f"{target}?{parts.query}" if parts.query else target
        self._connect_timeout = connect_timeout
        self._max_idle = max_idle
        self._idle_expiry = idle_expiry
        self._write_timeout = write_timeout
        self._lock = threading.Lock()
        self._idle: list[_Connection] = []
        self._closed = False
        # (method, *header items) -> the checked, encoded start of the request's head
        self._heads: dict[tuple[object, ...], bytes] = {}
        self.connections_opened = 0
        """How many connections this client opened (reuse keeps it low)."""

    # -- requests ---------------------------------------------------------------------------
    def request(
        self,
        method: str,
        headers: Mapping[str, str],
        body: bytes = b"",
        *,
        flight: Flight | None = None,
        wait_head: bool = True,
    ) -> PlainResponse:
        """Write one request and wait for its response's head (with ``wait_head=False``,
        return at once: the head is then read by :meth:`PlainResponse.events`).

        Raises :class:`RequestNotWritten`, :class:`ConnectionLost`,
        :class:`~mcp_sync.http.http11_parser.HttpProtocolError`, or
        :class:`~mcp_sync.errors.Cancelled` when ``flight`` was cancelled before anything
        was written. Interrupted by anything else (``KeyboardInterrupt``), the connection is
        closed."""
        head = self._encode_head(method, headers, body)
        payload = head + body if len(body) <= _ONE_WRITE else None
        for attempt in (0, 1):
            conn = self._take() if attempt == 0 else None
            if conn is None:
                conn = self._connect()
            if flight is not None and not flight.attach_socket(conn.sock):
                self._give_back(conn)
                raise Cancelled("cancelled before it was sent")
            try:
                self._write(conn.sock, payload, head, body)
            except OSError as exc:
                conn.close()
                if conn.reused and attempt == 0 and not (flight is not None and flight.cancelled):
                    continue  # the server did not read it all: safe on a new connection
                raise RequestNotWritten(f"writing the request failed: {exc}") from exc
            except BaseException:
                conn.close()
                raise
            if flight is not None:
                flight.body_sent = True
            response = PlainResponse(self, conn, method, flight)
            if wait_head:
                response.wait_head()
            return response
        raise AssertionError("unreachable")  # pragma: no cover

    def _write(self, sock: socket.socket, payload: bytes | None, head: bytes, body: bytes) -> None:
        if payload is not None:
            sock.sendall(payload)
            return
        sock.settimeout(self._write_timeout)
        try:
            sock.sendall(head)
            sock.sendall(body)
        finally:
            sock.settimeout(None)

    def _encode_head(self, method: str, headers: Mapping[str, str], body: bytes) -> bytes:
        key: tuple[object, ...] | None = (method, *headers.items())
        try:
            start = self._heads.get(key)  # type: ignore[arg-type]
        except TypeError:  # a value that is not hashable (so not a str): never cached
            key = start = None
        if start is None:
            start = self._encode_start(method, headers)
            if key is not None and len(start) <= MAX_CACHED_HEAD_BYTES:
                heads = self._heads
                if len(heads) >= MAX_CACHED_HEADS:
                    heads.clear()
                heads[key] = start
        if body or method not in ("GET", "HEAD", "DELETE"):
            return b"%sContent-Length: %d\r\n\r\n" % (start, len(body))
        return start + b"\r\n"

    def _encode_start(self, method: str, headers: Mapping[str, str]) -> bytes:
        """The request line and the header lines of ``headers`` (checked), without the
        framing this client adds (``Content-Length``) and the blank line."""
        lines = [f"{method} {self._target} HTTP/1.1\r\n"]
        has_host = False
        for name, value in headers.items():
            if not _valid_name(name) or "\r" in value or "\n" in value or "\0" in value:
                raise RequestNotWritten(f"invalid header {name!r}: {value!r}")
            lowered = name.lower()
            if lowered in ("content-length", "transfer-encoding", "connection"):
                continue  # framing is this client's
            has_host = has_host or lowered == "host"
            lines.append(f"{name}: {value}\r\n")
        if not has_host:
            lines.insert(1, f"Host: {self._host_header}\r\n")
        try:
            return "".join(lines).encode("ascii")
        except UnicodeEncodeError as exc:
            raise RequestNotWritten(f"a header is not ASCII: {exc}") from exc

    # -- the pool ---------------------------------------------------------------------------
    def _connect(self) -> _Connection:
        try:
            sock = socket.create_connection(self._address, timeout=self._connect_timeout)
        except OSError as exc:
            raise RequestNotWritten(f"could not connect to {self._host_header}: {exc}") from exc
        try:
            sock.settimeout(None)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError as exc:  # pragma: no cover - a socket just connected
            sock.close()
            raise RequestNotWritten(f"could not set the connection up: {exc}") from exc
        with self._lock:
            self.connections_opened += 1
        return _Connection(sock)

    def _take(self) -> _Connection | None:
        """An idle connection that still looks alive, or ``None``."""
        while True:
            with self._lock:
                if not self._idle:
                    return None
                conn = self._idle.pop()
            if time.monotonic() - conn.idle_since > self._idle_expiry or _stale(conn.sock):
                conn.close()
                continue
            return conn

    def _give_back(self, conn: _Connection) -> None:
        """Keep an idle connection (or close it: pool full, or the client closed)."""
        conn.reused = True
        conn.idle_since = time.monotonic()
        with self._lock:
            if not self._closed and len(self._idle) < self._max_idle:
                self._idle.append(conn)
                return
        conn.close()

    @property
    def idle_connections(self) -> int:
        """How many idle connections are kept now."""
        with self._lock:
            return len(self._idle)

    def close(self) -> None:
        """Close the idle connections; a connection in use is closed with its response."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


class PlainResponse:
    """A response whose head arrived: :attr:`status_code`, :attr:`headers` (looked up
    without regard to case), and a body read by :meth:`iter_bytes` or :meth:`read`.

    :meth:`close` hands a connection whose response was read to its end (and which may be
    kept alive) back to the pool, and closes any other. Not thread-safe, but for
    :meth:`abort`.
    """

    def __init__(
        self,
        client: PlainHttpClient,
        conn: _Connection,
        method: str,
        flight: Flight | None,
    ) -> None:
        self._client = client
        self._conn = conn
        self._flight = flight
        parser = conn.parser
        if parser is None:
            parser = conn.parser = ResponseParser(method)
        else:
            parser.next_request(method)
        self._parser = parser
        self.head: ResponseHead | None = None
        """The status line and headers, once they arrived."""
        self.status_code = 0
        self.reason_phrase = ""
        self.http_version = ""
        self.headers: Headers = Headers([])
        self.end: ResponseEnd | None = None
        """The end of the body, once it was read."""
        self._lock = threading.Lock()
        self._closed = False

    @property
    def socket(self) -> socket.socket:
        """The connection's socket (for a selector: readable means :meth:`events` has
        something to read)."""
        return self._conn.sock

    def _set_head(self, head: ResponseHead) -> None:
        self.head = head
        self.status_code = head.status
        self.reason_phrase = head.reason
        self.http_version = head.http_version
        self.headers = head.headers

    def wait_head(self) -> None:
        """Block until the head arrived (the connection is closed if that fails)."""
        parser = self._parser
        try:
            while True:
                event = parser.next_event()
                if event is NEED_DATA:
                    self._receive()
                    continue
                assert isinstance(event, ResponseHead)
                self._set_head(event)
                return
        except (OSError, ConnectionLost, HttpProtocolError) as exc:
            self._conn.close()
            if isinstance(exc, HttpProtocolError) and parser.received_any:
                raise
            raise ConnectionLost(f"no response: {exc}") from exc
        except BaseException:
            self._conn.close()
            raise

    def _receive(self) -> None:
        """One ``recv`` into the parser (raises :class:`ConnectionLost`)."""
        try:
            data = self._conn.sock.recv(_RECV)
        except OSError as exc:
            raise ConnectionLost(f"reading the response failed: {exc}") from exc
        if data:
            self._parser.feed(data)
            return
        if self._flight is not None and self._flight.cancelled:
            raise ConnectionLost("the request was cancelled")
        self._parser.feed_eof()

    def events(self, *, receive: bool = True) -> list[ResponseHead | bytes | ResponseEnd]:
        """What arrived, parsed: after one ``recv`` (which blocks unless the socket is
        readable) with ``receive``, else only what was received already. For a reader
        that waits on many responses at once (a selector); raises :class:`ConnectionLost`
        or :class:`~mcp_sync.http.http11_parser.HttpProtocolError`."""
        if self._closed:
            raise ConnectionLost("the response is closed")
        if receive:
            self._receive()
        out: list[ResponseHead | bytes | ResponseEnd] = []
        parser = self._parser
        try:
            while self.end is None:
                event = parser.next_event()
                if event is NEED_DATA:
                    break
                if isinstance(event, ResponseHead):
                    self._set_head(event)
                elif isinstance(event, ResponseEnd):
                    self.end = event
                out.append(event)  # type: ignore[arg-type]
        except HttpProtocolError as exc:
            if self.head is None and not parser.received_any:
                raise ConnectionLost(f"no response: {exc}") from exc
            raise
        return out

    def iter_bytes(self) -> Iterator[bytes]:
        """The body's bytes as they arrive (raises :class:`ConnectionLost` or
        :class:`~mcp_sync.http.http11_parser.HttpProtocolError` when it breaks)."""
        parser = self._parser
        while self.end is None:
            if self._closed:
                raise ConnectionLost("the response is closed")
            event = parser.next_event()
            if event is NEED_DATA:
                self._receive()
            elif isinstance(event, bytes):
                yield event
            else:
                assert isinstance(event, ResponseEnd)
                self.end = event

    def read(self, limit: int | None = None) -> bytes:
        """The whole body; with ``limit``, at most about that many bytes (reading stops
        once more arrived: check ``len()`` against it)."""
        chunks: list[bytes] = []
        size = 0
        for chunk in self.iter_bytes():
            chunks.append(chunk)
            size += len(chunk)
            if limit is not None and size > limit:
                break
        return b"".join(chunks)

    def close(self) -> None:
        """Done with the response: its connection goes back to the pool if the body was
        read to its end and may be kept alive (and the request was not cancelled)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        # released first: a cancel from now on shuts nothing down (the socket may serve
        # another request, or be closed and its number reused)
        reusable = self._flight.release() if self._flight is not None else True
        if reusable and self.end is not None and self.end.keep_alive:
            self._client._give_back(self._conn)
        else:
            self._conn.close()

    def abort(self) -> None:
        """Shut the connection down from any thread: a read blocked on it ends (with
        :class:`ConnectionLost`); the reader closes the response."""
        if self._flight is not None:
            self._flight.cancel()
            return
        with self._lock:
            if self._closed:
                return
            try:
                self._conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
