"""The client side of Streamable HTTP (revisions 2025-11-25 and 2026-07-28), without asyncio.

Built on httpx's synchronous client (the optional extra ``mcp-sync-threaded[http]``): a
maintained, thread-safe, connection-pooling client with streaming responses and per-phase
timeouts, which is what SSE over plain threads needs. Pass your own ``httpx.Client`` (TLS
certificates, proxies, limits) and any ``httpx.Auth`` (bearer tokens that refresh, custom
schemes); a client you pass is never closed here.

2026-07-28 requests to an ``http://`` URL, when the transport makes its own client and no
``auth=`` is given, go through the library's own HTTP/1.1 client instead
(:mod:`~mcp_sync.http.plain_http`): the same answers, errors, bounds and cancellation at a
fraction of httpx's cost per request. The httpx client is then made only when a 2025-11-25
session needs it, so a 2026-07-28-only client never imports httpx.

Every message the endpoint writes is POSTed, and :meth:`HttpClientTransport.write` never
waits for the network (after the handshake): each request is POSTed by a short-lived thread
of its own, which then reads the answer -- JSON, or an SSE stream that it follows to the
end (HTTP/1.1 needs one connection, and so one blocking reader, per open response). On
the plain path that thread only writes the request, and one selector thread reads the
answers of all of them (:mod:`~mcp_sync.http.plain_response_loop`). Notifications and responses are POSTed in order by one sender thread; a
``notifications/cancelled`` goes as soon as its request's body has been written (never
before, and without waiting for the answer's headers, which a server answering with JSON
sends only with the result).

After the handshake a thread may hold the GET stream for server-initiated messages (see
``open_get_stream``); a stream the server closes is reopened after its ``retry:`` hint, with
``Last-Event-ID``, so nothing is lost in between. Dropped request streams are resumed the same
way; one that cannot be resumed fails the connection.

Failures of one call do not end the connection where it is safe to tell:

* a request the server never received (connection refused, reset while sending) fails
  with :class:`~mcp_sync.errors.RequestNotSent`;
* an HTTP error whose body is a JSON-RPC error fails with :class:`~mcp_sync.errors.McpError`
  (its ``http_status`` set), another 4xx (but 401, 403 and a session's 404) with
  :class:`~mcp_sync.errors.HttpError`;
* an answer over ``max_response_bytes`` (JSON) or an SSE event over ``max_event_bytes`` on
  the request's stream fails with :class:`~mcp_sync.errors.ResponseTooLarge` (and the request is cancelled
  on the server). An oversize event on the GET stream is skipped: the stream is reopened
  after it (``Last-Event-ID``) when the event's id came first, else read through and
  discarded. Memory stays bounded either way.

:meth:`HttpClientTransport.close` ends the session with ``DELETE``.
"""

from __future__ import annotations

import json
import logging
import queue
import socket
import ssl
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import (
    AuthorizationError,
    Cancelled,
    ConnectionClosed,
    HttpError,
    McpError,
    RequestNotSent,
    RequestTimeout,
    ResponseTooLarge,
    SessionEnded,
)
from ..jsonrpc import (
    ErrorResponse,
    InvalidMessage,
    RequestId,
    Response,
    decode,
    is_valid_id,
    valid_id_key,
)
from ..lifecycle import PROTOCOL_VERSION_KEY
from ..transports.base import FailCall, OutboundMeta
from .client_flight import Flight, track, tracking_transport
from .client_headers import ToolHeaders, reads_as_its_json, request_headers
from .client_readers import ReaderPool
from .http11_parser import HttpProtocolError, ResponseEnd, ResponseHead
from .plain_http import PlainHttpClient, PlainHttpError, PlainResponse, plain_origin
from .plain_response_loop import ResponseLoop
from .sse import Oversize, SseParser

__all__ = [
    "HttpClientTransport",
    "header_int",
    "ReconnectPolicy",
    "MAX_EVENT_BYTES",
    "MAX_RESPONSE_BYTES",
]

_log = logging.getLogger("mcp_sync.http_client")

MAX_EVENT_BYTES = 8 * 1024 * 1024
"""Default bound of one SSE event the client reads (``max_event_bytes``)."""

MAX_RESPONSE_BYTES = 8 * 1024 * 1024
"""Default bound of one JSON answer body the client reads (``max_response_bytes``)."""

_ERROR_DETAIL_BYTES = 64 * 1024  # what is read of an HTTP error's body

GET_STREAM_READY_WAIT = 5.0
"""Longest wait, when the session starts, for the server's answer to the first ``GET``: a
client that wants server-initiated messages has its stream open (or refused) before the
handshake returns, so a request the server sends right after it is not lost (a server
without an event store drops what it cannot send at once)."""


def header_int(value: str) -> int | None:
    """A header's non-negative integer value (``Content-Length``, ``Retry-After`` in seconds),
    or ``None`` unless it is ASCII digits only: ``"²".isdigit()`` is true, and httpx decodes
    header bytes as Latin-1, so a plain ``isdigit()`` would let ``int()`` raise."""
    return int(value) if value.isascii() and value.isdigit() else None


@dataclass(frozen=True)
class ReconnectPolicy:
    """How the HTTP client reopens SSE streams: the GET stream, and a request's stream that
    broke before its answer (resumed with ``Last-Event-ID``).

    The n-th consecutive failure waits ``delay * backoff ** (n - 1)`` seconds, at most
    ``max_delay``; after ``attempts`` of them the client gives up (a request's answer is then
    lost: the connection fails; a GET stream that cannot reach the server fails it too). A
    stream the server closed normally is reopened after its ``retry:`` hint (or ``delay``)
    and counts as no failure; so does a 503/429 answer to a GET (too many streams on the
    server), retried after its ``Retry-After`` (at most ``max_delay``) for as long as the
    client lives.
    """

    attempts: int = 3
    delay: float = 0.5
    max_delay: float = 30.0
    backoff: float = 2.0

    def wait(self, failures: int) -> float:
        """Seconds to wait after the ``failures``-th consecutive failure."""
        return float(min(self.max_delay, self.delay * self.backoff ** max(0, failures - 1)))


def _httpx() -> Any:
    try:
        import httpx
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "the HTTP transport needs httpx: pip install 'mcp-sync-threaded[http]'"
        ) from exc
    return httpx


class _SendTrace:
    """What httpcore's ``trace`` extension told about one request: whether its body was
    written in full (then a cancel may follow it), and whether tracing works at all. Each
    event is also passed to ``forward`` (a :class:`~.client_flight.Flight`'s trace, which
    notes the request's stream so that closing the transport can shut it down)."""

    def __init__(
        self,
        written: threading.Event | None,
        forward: Callable[[str, Any], None] | None = None,
    ) -> None:
        self.written = written
        self.forward = forward
        self.traced = False
        self.body_sent = False

    def __call__(self, name: str, info: Any) -> None:
        self.traced = True
        if name.endswith("send_request_body.complete"):
            self.body_sent = True
            if self.written is not None:
                self.written.set()
        if self.forward is not None:
            self.forward(name, info)


class HttpClientTransport:
    """A transport that speaks Streamable HTTP to ``url``.

    Args:
        url: the MCP endpoint, e.g. ``http://127.0.0.1:8000/mcp``.
        headers: extra headers for every request (for example ``Authorization``).
        auth: any ``httpx.Auth`` (an auth flow may refresh a token on 401 and retry).
        http_client: an ``httpx.Client`` to use (TLS, proxies, limits); it is not closed by
            :meth:`close`. Its read timeout is not used: SSE streams stay open while idle
            (calls have ``timeout=``). Without it the transport makes its own, which for an
            ``http://`` URL loads no certificate bundle.
        connect_timeout: seconds to establish a connection (own client only).
        handshake_timeout: longest silence, in seconds, while waiting for the answer to
            ``initialize`` (which is POSTed in the caller's thread); then that call fails
            with :class:`~mcp_sync.errors.RequestTimeout`. ``None`` (or more than a day,
            ``math.inf`` say): no limit.
            :meth:`Client.http <mcp_sync.client.Client.http>` passes its ``init_timeout``.
        reconnect: how SSE streams are reopened (:class:`ReconnectPolicy`).
        open_get_stream: open the GET stream for server-initiated messages after the
            handshake. :meth:`Client.http <mcp_sync.client.Client.http>` opens it only for a
            client that has something to receive on it.
        max_event_bytes: the largest SSE event read (:data:`MAX_EVENT_BYTES`).
        max_response_bytes: the largest JSON answer read (:data:`MAX_RESPONSE_BYTES`).
    """

    def __init__(
        self,
        url: str,
        headers: Mapping[str, str] | None = None,
        *,
        auth: Any = None,
        http_client: Any = None,
        connect_timeout: float = 10.0,
        handshake_timeout: float | None = None,
        reconnect: ReconnectPolicy | None = None,
        open_get_stream: bool = True,
        max_event_bytes: int = MAX_EVENT_BYTES,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
    ) -> None:
        self.url = url
        self._headers = dict(headers or {})
        # what every 2026-07-28 POST on the plain path carries before its routing headers
        self._plain_headers = {**self._headers, **self._request_headers(modern=True)}
        self._auth_option = auth
        self._connect_timeout = connect_timeout
        self._httpx_lock = threading.Lock()
        self._httpx_client: Any = None  # made when first needed (see _client)
        self._auth: Any = None
        self._timeout: Any = None
        self._owns_client = http_client is None
        # 2026-07-28 requests to an http:// URL, with no user client or auth flow to honour,
        # go through the client's own HTTP/1.1 pool (plain_http): a fraction of the cost
        self._plain = (
            PlainHttpClient(url, connect_timeout=connect_timeout)
            if http_client is None and auth is None and plain_origin(url)
            else None
        )
        # the open answers of 2026-07-28 requests nobody waits for on a thread of their own
        # (futures) are read by one selector thread on the plain path
        self._loop = ResponseLoop() if self._plain is not None else None
        self._send_errors: tuple[type[BaseException], ...] = (
            (PlainHttpError, HttpProtocolError, Cancelled) if self._plain is not None else ()
        )
        if http_client is not None:
            self._use_httpx(http_client)
            track(getattr(http_client, "_transport", None))  # cancel before the headers too
        elif self._plain is None:
            self._use_httpx(None)
        # beyond a day is no limit (a socket cannot wait for an infinite or huge time)
        self._handshake_timeout = (
            handshake_timeout
            if handshake_timeout is not None and handshake_timeout <= 86400
            else None
        )
        self._reconnect = reconnect or ReconnectPolicy()
        self._open_get = open_get_stream
        self._max_event_bytes = max_event_bytes
        self._max_response_bytes = max_response_bytes
        self._inbox: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._responses: set[Any] = set()
        self._threads: set[threading.Thread] = set()
        self._closed = threading.Event()
        self._get_started = False
        self._get_answered = threading.Event()  # the first GET got headers, or failed
        self._failure: BaseException | None = None
        self._fail_call: FailCall | None = None
        # ids of our requests we cancelled: their streams end without an answer, by design
        self._cancelled: set[tuple[type, Any]] = set()
        # requests whose body is not written yet (a cancel waits for it)
        self._posted: dict[tuple[type, Any], threading.Event] = {}
        self._outgoing: queue.SimpleQueue[tuple[bytes, OutboundMeta] | None] = queue.SimpleQueue()
        self._sender: threading.Thread | None = None
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        # 2026-07-28 requests in flight: closing one's stream is its cancellation
        self._flights: dict[tuple[type, Any], Flight] = {}
        # 2025-11-25 requests being POSTed: shut down by close() (their answer may never come)
        self._legacy_flights: set[Flight] = set()
        self._tool_lists: set[tuple[type, Any]] = set()  # tools/list ids (x-mcp-header maps)
        self._initialize_key: tuple[type, Any] | None = None
        self._receive: Callable[[bytes], None] | None = None
        self._modern_sent = False  # a 2026-07-28 request went out (and no initialize yet)
        self._readers = ReaderPool()  # 2026-07-28 requests: reused threads (client_readers)
        # reads left to the caller that waits (read_on_caller), or its mark that it came first
        self._caller_reads: dict[tuple[type, Any], _CallerRead | str] = {}
        self.tool_headers = ToolHeaders()
        """The ``x-mcp-header`` annotations learnt from ``tools/list`` answers."""

    @property
    def _client(self) -> Any:
        """The ``httpx.Client`` (the user's, or one made now: a transport whose 2026-07-28
        requests use the plain path makes it only for the 2025-11-25 traffic)."""
        client = self._httpx_client
        if client is None:
            with self._httpx_lock:
                if self._httpx_client is None:
                    self._use_httpx(None)
                client = self._httpx_client
        return client

    def _use_httpx(self, http_client: Any) -> None:
        """Set up httpx: ``http_client``, or (``None``) a client of our own."""
        httpx = _httpx()
        self._auth = (
            self._auth_option if self._auth_option is not None else httpx.USE_CLIENT_DEFAULT
        )
        if http_client is None:
            options: dict[str, Any] = {}
            if self.url.lower().startswith("http://"):
                # plain HTTP never needs the CA bundle, whose loading costs tens of ms; a
                # context that trusts nothing fails closed should TLS ever be attempted
                options["verify"] = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            limits = httpx.Limits(max_connections=None, max_keepalive_connections=32)
            http_client = httpx.Client(
                timeout=httpx.Timeout(
                    connect=self._connect_timeout, read=None, write=30.0, pool=None
                ),
                transport=tracking_transport(httpx, limits=limits, **options),
                limits=limits,
                **options,
            )
        base = http_client.timeout
        self._timeout = httpx.Timeout(
            connect=base.connect, read=None, write=base.write, pool=base.pool
        )
        if not self._send_errors:
            self._send_errors = (httpx.HTTPError, Cancelled)
        self._httpx_client = http_client

    def bind_call_failure(self, fail_call: FailCall) -> None:
        """Called by the endpoint: ``fail_call(request_id, exception, cancel=...)`` fails one
        call without ending the connection."""
        self._fail_call = fail_call

    def inbound_cancelled(self, request_id: RequestId) -> None:
        """Nothing to route: a cancelled server-to-client request is simply never answered."""

    # -- transport interface ------------------------------------------------------------------
    def read_line(self) -> bytes | None:
        """The next message from any stream; ``None`` once closed. Raises the
        :class:`~mcp_sync.errors.SessionEnded` (or other :class:`~mcp_sync.errors.ConnectionClosed`) that
        ended the connection when a stream learnt it (a 404 while resuming, say)."""
        if self._closed.is_set():
            return None
        item = self._inbox.get()
        if item is None and self._failure is not None:
            raise self._failure
        return item

    def write(self, data: bytes) -> None:
        """Send one message, described by decoding it (the endpoint calls :meth:`send`)."""
        self.send(data, OutboundMeta.of_line(data))

    def send(self, data: bytes, meta: OutboundMeta) -> None:
        """Send one message without waiting for the network.

        ``initialize`` and ``notifications/initialized`` are POSTed here and now (nothing
        else may go before them). Every later request is POSTed by a thread of its own,
        which then reads its answer; notifications and responses are POSTed in order by
        one sender thread, and a ``notifications/cancelled`` only after its request's body
        was written. So neither a slow server nor a cancellation ever stalls the caller.
        """
        if self._closed.is_set():
            raise ConnectionClosed("the HTTP transport is closed")
        method = meta.method
        is_request = meta.kind == "request"
        if is_request and method is not None and _MODERN_MARK in data:
            # the params the endpoint encoded, unless the headers would read them otherwise
            params = meta.params
            if not reads_as_its_json(method, params, self.tool_headers):
                params = _params_of(data)
            routing = request_headers(method, params, self.tool_headers)
            if routing is not None:
                self._send_modern(data, meta, routing)
                return
        if meta.caller_reads:
            self._read_elsewhere(meta.request_id)
        if method == "notifications/cancelled" and self._modern_cancel(meta.cancelled_request_id):
            return  # at 2026-07-28 closing the request's stream is its cancellation
        if method == "initialize":
            self._initialize_key = valid_id_key(meta.request_id)
        if method in ("initialize", "notifications/initialized"):
            read = self._handshake_timeout if method == "initialize" else None
            self._post(data, meta, stream_inline=False, read_timeout=read)
            if method == "notifications/initialized" and self._start_get_stream():
                self._get_answered.wait(GET_STREAM_READY_WAIT)
            return
        if is_request:
            written = threading.Event()
            key = valid_id_key(meta.request_id)
            if key is not None:
                with self._lock:
                    self._posted[key] = written
            self._start(
                self._post_request, data, meta, written, f"mcp_sync-http-request-{meta.request_id}"
            )
            return
        if method == "notifications/cancelled":
            key = valid_id_key(meta.cancelled_request_id)
            if key is not None:
                with self._lock:
                    self._cancelled.add(key)
        with self._lock:
            if self._sender is None:
                self._sender = threading.Thread(
                    target=self._send_loop, name="mcp_sync-http-sender", daemon=True
                )
                self._threads.add(self._sender)
                self._sender.start()
        self._outgoing.put((data, meta))

    def _send_modern(self, data: bytes, meta: OutboundMeta, routing: dict[str, str]) -> None:
        """Start a 2026-07-28 request: POSTed with its routing headers by a thread that reads
        its answer -- the caller's own when it waits for it (:meth:`read_on_caller`), else a
        reader of the pool; its stream is tracked so that a cancel can close it."""
        key = valid_id_key(meta.request_id)
        flight = Flight()
        self._modern_sent = True

        def read(deliver: Callable[[bytes], None], to_loop: bool = False) -> None:
            self._post_modern(data, meta, routing, flight, deliver, to_loop)

        with self._lock:
            if key is not None:
                # the caller has not looked yet (no mark of its own): the read is its to run
                caller_runs = meta.caller_reads and self._caller_reads.pop(key, None) is None
                if caller_runs and self._closed.is_set():
                    raise ConnectionClosed("the HTTP transport is closed")
                self._flights[key] = flight
                if meta.method == "tools/list":
                    self._tool_lists.add(key)
                if caller_runs:
                    self._caller_reads[key] = _CallerRead(meta.request_id, flight, read)
                    return
        to_loop = self._loop is not None
        if not self._readers.submit(lambda: read(self._deliver_modern, to_loop)):
            raise ConnectionClosed("the HTTP transport is closed")

    def _read_elsewhere(self, request_id: Any) -> None:
        """A request sent with the caller-reads hint that is not read by its caller (a
        2025-11-25 request): note it, so that the caller's claim returns at once."""
        key = valid_id_key(request_id)
        with self._lock:
            if key is not None and self._caller_reads.pop(key, None) is None:
                self._caller_reads[key] = _ELSEWHERE

    def read_on_caller(
        self,
        request_id: RequestId,
        receive: Callable[[bytes], None],
        settled: Callable[[], bool],
    ) -> bool:
        """Run the read of a 2026-07-28 request sent with the caller-reads hint on this
        thread: POST it, read its answer (JSON or SSE) and hand every message to
        ``receive`` (the endpoint's ``receive_line``). Claimed once, under the transport's
        lock: when the request was not sent yet, a mark makes the send give the read to a
        reader thread instead. False, at once, unless the read ran here (see
        :class:`~mcp_sync.transports.base.CallerReadTransport`). Anything raised inside the
        read (``KeyboardInterrupt``) closes the request's stream, then propagates."""
        key = valid_id_key(request_id)
        if key is None:
            return False
        with self._lock:
            entry = self._caller_reads.pop(key, None)
            if entry is None:
                # not sent yet (or dropped by a cancel, which settled the call first)
                if not settled() and not self._closed.is_set():
                    self._caller_reads[key] = _POOL
                return False
            if not isinstance(entry, _CallerRead):
                return False
            if settled():  # cancelled, timed out or failed before it was read: nothing to do
                self._forget(key)
                return False

        def deliver(data: bytes) -> None:
            if self._tool_lists:
                data = self._learn_tools(data)
            try:
                receive(data)
            except Exception:  # one bad message must not end the read (as in the endpoint)
                _log.exception("failed to process a message from %s", self.url)

        try:
            entry.read(deliver)
        except BaseException:
            entry.flight.cancel()  # no response is left half read on the connection
            raise
        return True

    def _forget(self, key: tuple[type, Any]) -> None:
        """Drop what is kept for the request ``key`` (with the transport lock held)."""
        self._flights.pop(key, None)
        self._cancelled.discard(key)
        self._tool_lists.discard(key)

    def _modern_cancel(self, request_id: Any) -> bool:
        """Cancel the 2026-07-28 request ``request_id`` by closing its stream (at once, with
        or without its answer's headers). True at 2026-07-28 -- where nothing is POSTed for
        a cancel, also of a request whose answer came already -- False on a 2025 session."""
        key = valid_id_key(request_id)
        with self._lock:
            flight = self._flights.get(key) if key is not None else None
            if flight is None:
                return self._modern_sent and self._initialize_key is None
            assert key is not None
            self._cancelled.add(key)
            if isinstance(self._caller_reads.get(key), _CallerRead):
                # its caller has not run the read yet: it never will, nothing was posted
                del self._caller_reads[key]
                self._forget(key)
        flight.cancel()
        return True

    def _post_modern(
        self,
        data: bytes,
        meta: OutboundMeta,
        routing: dict[str, str],
        flight: Flight,
        deliver: Callable[[bytes], None],
        to_loop: bool = False,
    ) -> None:
        """POST one 2026-07-28 request and read its answer, handing each message to
        ``deliver`` (no resumption: a stream that ends without the answer fails this call
        only). Runs on a reader thread, or on the caller's (:meth:`read_on_caller`); with
        ``to_loop`` (the plain path) the answer is left to the response loop once the
        request is written."""
        request_id = meta.request_id
        key = valid_id_key(request_id)
        plain = self._plain
        handed = False
        try:
            try:
                if plain is not None:
                    response: Any = plain.request(
                        "POST",
                        {**self._plain_headers, **routing},
                        data.rstrip(b"\n"),
                        flight=flight,
                        wait_head=not to_loop,
                    )
                    if to_loop:
                        assert self._loop is not None
                        sink = _PushedAnswer(self, meta, flight, deliver)
                        if self._loop.add(response, sink):
                            handed = True  # the sink forgets the request when it is done
                            return
                        response.wait_head()  # the loop is full (or closed): read it here
                else:
                    headers = {**self._request_headers(modern=True), **routing}
                    response = self._send("POST", headers, data.rstrip(b"\n"), flight.trace())
            except AuthorizationError as exc:
                # the auth flow (mcp_sync.auth) failed a step: this call fails with it
                if not flight.cancelled:
                    self._fail_one(request_id, exc)
                return
            except self._send_errors as exc:
                if flight.cancelled:
                    return
                sent = flight.body_sent
                failure: ConnectionClosed = (
                    RequestNotSent(
                        f"HTTP POST to {self.url} failed: {exc} ({meta.method} did not reach the server)"
                    )
                    if not sent
                    else ConnectionClosed(f"HTTP POST to {self.url} failed: {exc}")
                )
                self._fail_one(request_id, failure)
                return
            if plain is not None:
                if flight.cancelled:  # shut down already: nothing more to read
                    response.close()
                    return
            elif not flight.attach_response(response):
                _abort(response)
                return
            self._answer_modern(response, meta, flight, deliver)
        except Exception as exc:
            if not flight.cancelled and not self._closed.is_set():
                self._fail_one(request_id, ConnectionClosed(f"reading the answer failed: {exc}"))
        finally:
            if not handed:
                with self._lock:
                    if key is not None:
                        self._forget(key)

    def _answer_modern(
        self, response: Any, meta: OutboundMeta, flight: Flight, deliver: Callable[[bytes], None]
    ) -> None:
        """Route a 2026-07-28 answer: an HTTP error fails the call (with the JSON-RPC error
        its body carries, if any), JSON and SSE bodies go to the inbox, anything else (an
        HTML page, say) fails the call with :class:`~mcp_sync.errors.HttpError`."""
        request_id = meta.request_id
        status = response.status_code
        if status >= 400:
            try:
                refusal = self._refusal(response)
            finally:
                response.close()
            self._refused_modern(request_id, refusal)
            return
        content_type = response.headers.get("content-type", "")
        if content_type.startswith("text/event-stream"):
            parser = SseParser(self._max_event_bytes)
            outcome = self._consume(response, parser, request_id, deliver)
            if outcome is True or flight.cancelled:
                return
            if isinstance(outcome, Oversize):
                self._fail_oversize(request_id)
                return
            self._fail_one(
                request_id,
                ConnectionClosed(f"the answer stream of {meta.method} ended without its answer"),
            )
        elif content_type.startswith("application/json") or (status == 200 and not content_type):
            self._read_json(response, request_id, deliver)
        else:
            response.close()
            self._not_an_answer(request_id, status, content_type)

    def _refused_modern(self, request_id: Any, refusal: ConnectionClosed | McpError) -> None:
        """A 2026-07-28 request got an HTTP error: it fails that call."""
        if _concerns_this_request(refusal) or isinstance(refusal, HttpError):
            self._fail_one(request_id, refusal)
        else:  # pragma: no cover - _refusal returns one of those
            self._fail(refusal)

    def _not_an_answer(self, request_id: Any, status: int, content_type: str) -> None:
        self._fail_one(
            request_id,
            HttpError(
                status,
                f"HTTP {status} from {self.url} is not an MCP answer (Content-Type {content_type!r})",
            ),
        )

    def _send(
        self,
        method: str,
        headers: dict[str, str],
        content: bytes | None = None,
        trace: _SendTrace | None = None,
        read_timeout: float | None = None,
    ) -> Any:
        """Send one HTTP request with the auth and per-request timeouts (reads wait without
        limit unless ``read_timeout``); the streaming response (raises httpx errors)."""
        extensions = {"trace": trace} if trace is not None else None
        client = self._client  # made first, with the timeout it sets up
        base = self._timeout
        timeout = (
            base
            if read_timeout is None
            else _httpx().Timeout(
                connect=base.connect, read=read_timeout, write=base.write, pool=base.pool
            )
        )
        request = client.build_request(
            method,
            self.url,
            content=content,
            headers={**self._headers, **headers},
            timeout=timeout,
            extensions=extensions,
        )
        return client.send(request, stream=True, auth=self._auth)

    def _post(
        self,
        data: bytes,
        meta: OutboundMeta,
        *,
        stream_inline: bool,
        written: threading.Event | None = None,
        read_timeout: float | None = None,
        flight: Flight | None = None,
    ) -> None:
        """POST one message and route its answer (JSON body or SSE stream) to the inbox;
        ``flight`` notes the request's stream (so :meth:`close` can shut it down while the
        POST still waits for its response headers)."""
        httpx = _httpx()
        is_request = meta.kind == "request"
        request_id = meta.request_id if is_request else None
        trace = _SendTrace(written, flight.trace() if flight is not None else None)
        try:
            try:
                response = self._send(
                    "POST", self._request_headers(), data.rstrip(b"\n"), trace, read_timeout
                )
            except AuthorizationError as exc:
                # the auth flow (mcp_sync.auth) failed a step: this call fails with it
                if is_request:
                    self._fail_one(request_id, exc)
                    return
                raise ConnectionClosed(f"authorization for {self.url} failed: {exc}") from exc
            except httpx.HTTPError as exc:
                if is_request and read_timeout is not None and isinstance(exc, httpx.ReadTimeout):
                    self._fail_one(
                        request_id,
                        RequestTimeout(
                            f"{meta.method}: no answer from {self.url} within {read_timeout:g} s"
                        ),
                    )
                    return
                if (
                    is_request
                    and not trace.body_sent
                    and (trace.traced or isinstance(exc, httpx.ConnectError))
                ):
                    # the server cannot have read it: fail this call only
                    failure = RequestNotSent(
                        f"HTTP POST to {self.url} failed: {exc} ({meta.method} did not reach the server)"
                    )
                    self._fail_one(request_id, failure)
                    return
                raise ConnectionClosed(f"HTTP POST to {self.url} failed: {exc}") from exc
        finally:
            if written is not None:
                written.set()
        if response.status_code >= 400:
            try:
                refusal = self._refusal(response)
            finally:
                response.close()
            if is_request and _concerns_this_request(refusal):
                self._fail_one(request_id, refusal)
                return
            if isinstance(refusal, McpError):
                _log.warning(
                    "the server refused a %s: %s (HTTP %s)",
                    meta.method or meta.kind,
                    refusal,
                    refusal.http_status,
                )
                return
            raise refusal
        if is_request and meta.method == "initialize":
            session_id = response.headers.get("mcp-session-id")
            if session_id:
                self.session_id = session_id
        content_type = response.headers.get("content-type", "")
        if response.status_code == 202 or not is_request:
            response.close()
        elif content_type.startswith("text/event-stream"):
            if stream_inline:
                self._read_stream(response, request_id)
            else:
                self._start(
                    self._read_stream, response, request_id, f"mcp_sync-http-stream-{request_id}"
                )
        else:
            self._read_json(response, request_id)

    def _read_json(
        self,
        response: Any,
        request_id: Any,
        deliver: Callable[[bytes], None] | None = None,
    ) -> None:
        """Read a JSON answer of at most ``max_response_bytes`` into the inbox; a larger one
        fails its call (the rest is not read)."""
        limit = self._max_response_bytes
        chunks: list[bytes] = []
        size = 0
        try:
            length = response.headers.get("content-length", "")
            declared = header_int(length)
            if declared is not None and declared > limit:
                size = declared
            else:
                for chunk in response.iter_bytes():
                    size += len(chunk)
                    if size > limit:
                        break
                    chunks.append(chunk)
        finally:
            response.close()
        self._json_answer(request_id, b"".join(chunks), size, deliver)

    def _json_answer(
        self,
        request_id: Any,
        body: bytes,
        size: int,
        deliver: Callable[[bytes], None] | None = None,
    ) -> None:
        """Deliver a JSON answer read (``size`` bytes, or its declared length), or fail its
        call when that is over ``max_response_bytes``."""
        limit = self._max_response_bytes
        if size > limit:
            _log.warning("dropped a JSON answer over max_response_bytes (%d)", limit)
            self._fail_one(
                request_id,
                ResponseTooLarge(
                    f"the answer is larger than max_response_bytes ({limit} bytes)", limit
                ),
            )
            return
        if body.strip():
            (deliver or self._deliver)(body)

    def _post_request(self, data: bytes, meta: OutboundMeta, written: threading.Event) -> None:
        """Thread body: POST a request and read its answer."""
        flight = Flight()  # only for close(): a 2025-11-25 request is cancelled by a POST
        with self._lock:
            self._legacy_flights.add(flight)
        try:
            if not self._closed.is_set():
                self._post(data, meta, stream_inline=True, written=written, flight=flight)
        except ConnectionClosed as exc:
            self._fail(exc)
        finally:
            written.set()
            key = valid_id_key(meta.request_id)
            with self._lock:
                self._legacy_flights.discard(flight)
                if key is not None and self._posted.get(key) is written:
                    del self._posted[key]

    def _send_loop(self) -> None:
        """Thread body: POST notifications and responses, in order."""
        while True:
            item = self._outgoing.get()
            if item is None:
                return
            data, meta = item
            if meta.method == "notifications/cancelled":
                key = valid_id_key(meta.cancelled_request_id)
                with self._lock:
                    written = self._posted.get(key) if key is not None else None
                while written is not None and not written.wait(
                    0.1
                ):  # after its request, never before
                    if self._closed.is_set():
                        return
            try:
                self._post(data, meta, stream_inline=False)
            except ConnectionClosed as exc:
                self._fail(exc)
                return
            except Exception as exc:  # pragma: no cover - unexpected
                self._fail(ConnectionClosed(f"HTTP POST to {self.url} failed: {exc}"))
                return

    def close(self) -> None:
        """End the session (``DELETE``), close every stream, join the reader threads. A
        user-supplied ``http_client`` stays open."""
        if self._closed.is_set():
            return
        with self._lock:
            sender = self._sender
        if sender is not None:  # let queued notifications (cancellations) go out first
            self._outgoing.put(None)
            sender.join(2.0)
        if self.session_id is not None:
            try:
                headers = self._request_headers()
                headers.pop("Content-Type", None)
                request = self._client.build_request(
                    "DELETE", self.url, headers={**self._headers, **headers}, timeout=5.0
                )
                self._client.send(request, auth=self._auth).close()
            except Exception:
                _log.debug("DELETE of the session failed", exc_info=True)
        self._closed.set()
        with self._lock:
            responses = list(self._responses)
            threads = list(self._threads)
            flights = [*self._flights.values(), *self._legacy_flights]
            unread = [
                entry for entry in self._caller_reads.values() if isinstance(entry, _CallerRead)
            ]
            self._caller_reads.clear()
        for entry in unread:  # left to callers that never ran them: nothing was posted
            self._fail_one(
                entry.request_id,
                ConnectionClosed("the HTTP transport closed before the request was sent"),
            )
        for flight in flights:  # requests in flight: close their streams
            flight.cancel()
        for response in responses:
            _abort(response)
        self._readers.close()
        if self._loop is not None:
            self._loop.close()
        self._inbox.put(None)
        current = threading.current_thread()
        for thread in threads:
            if thread is not current:
                thread.join(5.0)
        if self._owns_client and self._httpx_client is not None:
            self._httpx_client.close()
        if self._plain is not None:
            self._plain.close()

    # -- helpers ------------------------------------------------------------------------------
    def _request_headers(
        self, *, accept: str = "application/json, text/event-stream", modern: bool = False
    ) -> dict[str, str]:
        headers = {"Accept": accept, "Content-Type": "application/json"}
        if modern:
            return headers
        if self.session_id is not None:
            headers["Mcp-Session-Id"] = self.session_id
        if self.protocol_version is not None:
            headers["MCP-Protocol-Version"] = self.protocol_version
        return headers

    def _refusal(self, response: Any) -> ConnectionClosed | McpError:
        """What an HTTP error answer means: a JSON-RPC error for one call
        (:class:`~mcp_sync.errors.McpError`), or the end of the connection."""
        return self._refusal_of(response.status_code, _read_some(response, _ERROR_DETAIL_BYTES))

    def _refusal_of(self, status: int, body: bytes) -> ConnectionClosed | McpError:
        """What an HTTP error ``status`` with (the start of) ``body`` means."""
        if status == 404 and self.session_id is not None:
            return SessionEnded(404, _detail("the server ended the MCP session (HTTP 404)", body))
        if status == 401:
            return HttpError(401, _detail("the server requires authentication (HTTP 401)", body))
        if status == 403:
            return HttpError(403, _detail("the server refused access (HTTP 403)", body))
        error = _jsonrpc_error(body)
        if error is not None:
            error.http_status = status
            return error
        return HttpError(status, _detail(f"HTTP {status} from {self.url}", body))

    def _fail_one(self, request_id: Any, failure: BaseException, *, cancel: bool = False) -> None:
        """Fail the call ``request_id`` only; without an endpoint to do that, the connection."""
        if self._fail_call is not None and is_valid_id(request_id):
            self._fail_call(request_id, failure, cancel=cancel)
            return
        self._fail(ConnectionClosed(str(failure)))

    def _fail(self, failure: BaseException) -> None:
        """End the connection: the endpoint's reader gets ``failure`` from :meth:`read_line`."""
        with self._lock:
            if self._failure is not None or self._closed.is_set():
                return
            self._failure = failure
        self._inbox.put(None)

    def _deliver(self, data: bytes) -> None:
        if self.protocol_version is None and self._initialize_key is not None:
            message = decode(data)
            version = (
                message.result.get("protocolVersion")
                if isinstance(message, Response)
                and isinstance(message.result, dict)
                and valid_id_key(message.id) == self._initialize_key
                else None
            )
            if isinstance(version, str):
                self.protocol_version = version
        if self._tool_lists:
            data = self._learn_tools(data)
        self._inbox.put(data.replace(b"\n", b" "))

    def bind_receiver(self, receive: Callable[[bytes], None]) -> None:
        """Hand 2026-07-28 answers to ``receive`` (the endpoint's ``receive_line``) on the
        reader thread that read them, instead of through :meth:`read_line`: one thread
        hand-off less per call. Each call's messages still arrive in order (one reader
        reads one call's stream)."""
        self._receive = receive

    def _deliver_modern(self, data: bytes) -> None:
        if self._tool_lists:
            data = self._learn_tools(data)
        receive = self._receive
        if receive is None:
            self._inbox.put(data.replace(b"\n", b" "))
            return
        try:
            receive(data)
        except BaseException:  # one bad message must not end the reader (as in the endpoint)
            _log.exception("failed to process a message from %s", self.url)

    def _learn_tools(self, data: bytes) -> bytes:
        """A ``tools/list`` answer at 2026-07-28: learn its ``x-mcp-header`` maps, and drop
        the tools whose annotations are invalid."""
        message = decode(data)
        if not isinstance(message, Response):
            return data
        key = valid_id_key(message.id)
        with self._lock:
            if key not in self._tool_lists:
                return data
        learnt = self.tool_headers.learn(message.result)
        if learnt is message.result:
            return data
        return json.dumps(
            {"jsonrpc": "2.0", "id": message.id, "result": learnt}, separators=(",", ":")
        ).encode()

    def _start(self, target: Any, *args: Any) -> None:
        name = args[-1]
        thread = threading.Thread(
            target=self._run_thread, args=(target, *args[:-1]), name=name, daemon=True
        )
        with self._lock:
            if self._closed.is_set():
                for arg in args[:-1]:
                    if hasattr(arg, "close"):
                        arg.close()
                return
            self._threads.add(thread)
            # started under the lock: close() joins only threads that have started
            thread.start()

    def _run_thread(self, target: Any, *args: Any) -> None:
        try:
            target(*args)
        except Exception:
            if not self._closed.is_set():
                _log.debug("HTTP stream reader failed", exc_info=True)
        finally:
            with self._lock:
                self._threads.discard(threading.current_thread())

    def _consume(
        self,
        response: Any,
        parser: SseParser,
        answer_to: Any = None,
        deliver: Callable[[bytes], None] | None = None,
    ) -> bool | Oversize:
        """Feed one SSE response into the inbox. True if it ended normally and, when
        ``answer_to`` is a request id, carried the answer to that request (or broke after
        it); the
        :class:`~mcp_sync.http.sse.Oversize` marker when an event passed
        ``max_event_bytes`` on a request's stream, or on the GET stream when the event's id
        is known (the stream is then abandoned; otherwise the event is skipped)."""
        with self._lock:
            self._responses.add(response)
        parser.new_stream()
        answered = answer_to is None
        try:
            for chunk in response.iter_bytes():
                outcome = self._sse_chunk(parser, chunk, answer_to, answered, deliver)
                if isinstance(outcome, Oversize):
                    return outcome
                answered = outcome
            return answered
        except Exception:
            # a request's stream that broke after its answer lost nothing (the initialize
            # POST's stream can end so, by its read timeout); the GET stream is reopened
            return answer_to is not None and answered
        finally:
            with self._lock:
                self._responses.discard(response)
            response.close()  # unread body left: httpx closes that connection

    def _sse_chunk(
        self,
        parser: SseParser,
        chunk: bytes,
        answer_to: Any,
        answered: bool,
        deliver: Callable[[bytes], None] | None,
    ) -> bool | Oversize:
        """Deliver the messages of one chunk of an SSE stream: whether the answer to
        ``answer_to`` came (so far), or the :class:`~mcp_sync.http.sse.Oversize` that ends
        the stream (see :meth:`_consume`)."""
        for event in parser.feed_bytes(chunk):
            if isinstance(event, Oversize):
                _log.warning(
                    "dropped an SSE event over max_event_bytes (%d)", self._max_event_bytes
                )
                if answer_to is not None or event.id_known:
                    return event
                continue
            if event[1] == "message" and event[2].strip():
                data = event[2].encode()
                if not answered and _answers(data, answer_to):
                    answered = True
                (deliver or self._deliver)(data)
        return answered

    def _read_stream(self, response: Any, request_id: Any) -> None:
        parser = SseParser(self._max_event_bytes)
        try:
            outcome = self._consume(response, parser, request_id)
            if outcome is True or self._was_cancelled(request_id):
                return
            if isinstance(outcome, Oversize):
                self._fail_oversize(request_id)
                return
            # the stream ended without the answer: resume it with Last-Event-ID
            if not self._resume(parser, request_id) and not self._closed.is_set():
                # the answer is lost for good: fail the connection rather than leave the
                # call waiting for ever -- with SessionEnded if that is why (a GET says)
                probe, _, _ = self._get(None)
                if probe is not None:
                    _abort(probe)
                self._fail(
                    ConnectionClosed(
                        f"the answer stream of request {request_id!r} broke and could not be resumed"
                    )
                )
        finally:
            with self._lock:
                self._cancelled.discard(valid_id_key(request_id))

    def _fail_oversize(self, request_id: Any) -> None:
        """An event on this request's stream is over the limit: fail the call, and cancel
        the request on the server (the event may have been a notification, the work goes on)."""
        limit = self._max_event_bytes
        failure = ResponseTooLarge(
            f"an SSE event of this call is larger than max_event_bytes ({limit} bytes)", limit
        )
        self._fail_one(request_id, failure, cancel=True)

    def _was_cancelled(self, request_id: Any) -> bool:
        """True if we cancelled ``request_id``: its stream ends with no answer, by design."""
        with self._lock:
            return valid_id_key(request_id) in self._cancelled

    def _resume(self, parser: SseParser, request_id: Any) -> bool:
        """Resume a request's stream with ``Last-Event-ID``; True once the answer came (or
        the request was cancelled by us, or failed for an oversize event)."""
        failures = 0
        while (
            not self._closed.is_set()
            and parser.last_event_id
            and failures < self._reconnect.attempts
        ):
            failures += 1
            delay = (
                (parser.retry_ms / 1000)
                if parser.retry_ms is not None
                else self._reconnect.wait(failures)
            )
            if self._closed.wait(delay):
                return False
            response, _, _ = self._get(parser.last_event_id)
            if response is None:
                if self._failure is not None:
                    return False
                continue
            outcome = self._consume(response, parser, request_id)
            if isinstance(outcome, Oversize):
                self._fail_oversize(request_id)
                return True
            if outcome or self._was_cancelled(request_id):
                return True
        return self._was_cancelled(request_id)

    def _get(self, last_event_id: str | None) -> tuple[Any, Any, float | None]:
        """Open a GET stream: ``(response, None, None)``, or ``(None, why, retry_after)``
        with an HTTP status or an httpx error. A 404 means the server ended the session:
        the connection fails with :class:`~mcp_sync.errors.SessionEnded`."""
        headers = self._request_headers(accept="text/event-stream")
        headers.pop("Content-Type", None)
        if last_event_id:
            headers["Last-Event-ID"] = last_event_id
        httpx = _httpx()
        try:
            response = self._send("GET", headers)
        except httpx.HTTPError as exc:
            return None, exc, None
        status = response.status_code
        if status == 404 and self.session_id is not None:
            try:
                refusal = self._refusal(response)
            finally:
                response.close()
            if isinstance(refusal, SessionEnded):
                self._fail(refusal)
            return None, status, None
        if status != 200 or not response.headers.get("content-type", "").startswith(
            "text/event-stream"
        ):
            retry_after = response.headers.get("retry-after", "")
            response.close()
            delay = header_int(retry_after)
            return None, status, float(delay) if delay is not None else None
        return response, None, None

    def _start_get_stream(self) -> bool:
        """Start the GET stream's thread; True if this call started it."""
        if not self._open_get or self._get_started:
            return False
        self._get_started = True
        self._start(self._hold_get_stream, "mcp_sync-http-get-stream")
        return True

    def _hold_get_stream(self) -> None:
        """Thread body: keep the GET stream open, reopening it (with ``Last-Event-ID``) when
        the server closes it, after its ``retry:`` hint."""
        try:
            self._reopen_get_stream(SseParser(self._max_event_bytes))
        finally:
            self._get_answered.set()  # never leave the handshake waiting on a dead thread

    def _reopen_get_stream(self, parser: SseParser) -> None:
        httpx = _httpx()
        policy = self._reconnect
        failures = 0
        while not self._closed.is_set() and self._failure is None:
            response, error, retry_after = self._get(parser.last_event_id)
            self._get_answered.set()
            if response is None:
                if error == 405 or self._failure is not None:
                    return  # the server offers no GET stream, or the session ended
                if error in (429, 503):  # busy (too many streams): try again later
                    wait = min(
                        policy.max_delay,
                        retry_after if retry_after is not None else policy.wait(failures + 1),
                    )
                    if self._closed.wait(wait):
                        return
                    continue
                if isinstance(error, int) and 400 <= error < 500:
                    _log.warning(
                        "the server refused the GET stream (HTTP %d): no server-initiated messages",
                        error,
                    )
                    return
                failures += 1
                if failures > policy.attempts:
                    if isinstance(error, httpx.TransportError):
                        # the server is gone: fail the pending calls rather than leave them hanging
                        self._fail(ConnectionClosed(f"lost the connection to {self.url}: {error}"))
                    return
                if self._closed.wait(policy.wait(failures)):
                    return
                continue
            failures = 0
            outcome = self._consume(response, parser)
            if isinstance(outcome, Oversize):
                continue  # reopen at once, after the oversize event
            wait = parser.retry_ms / 1000 if parser.retry_ms is not None else policy.delay
            if self._closed.wait(wait):
                return


class _PushedAnswer:
    """The answer to one 2026-07-28 request, read on the response loop
    (:mod:`~mcp_sync.http.plain_response_loop`): routed as
    :meth:`HttpClientTransport._answer_modern` routes a response it reads itself, event by
    event. What it comes to (an answer delivered, a call failed) is done once the loop
    closed the response -- its connection is back in the pool by then -- and the request
    is forgotten."""

    def __init__(
        self,
        transport: HttpClientTransport,
        meta: OutboundMeta,
        flight: Flight,
        deliver: Callable[[bytes], None],
    ) -> None:
        self._transport = transport
        self._meta = meta
        self._flight = flight
        self._deliver = deliver
        self._mode = ""  # "error", "json" or "sse", once the head came
        self._status = 0
        self._chunks: list[bytes] = []
        self._size = 0
        self._sse = SseParser(transport._max_event_bytes)
        self._answered = False
        self._done = False
        self._outcome: Callable[[], None] | None = None

    def on_events(self, events: list[ResponseHead | bytes | ResponseEnd]) -> bool:
        for event in events:
            if isinstance(event, ResponseHead):
                if not self._begin(event):
                    return False
            elif isinstance(event, bytes):
                if not self._data(event):
                    return False
            else:
                self._end()
        return True

    def _begin(self, head: ResponseHead) -> bool:
        transport, request_id = self._transport, self._meta.request_id
        status = self._status = head.status
        if status >= 400:
            self._mode = "error"
            return True
        content_type = head.headers.get("content-type") or ""
        if content_type.startswith("text/event-stream"):
            self._mode = "sse"
            return True
        if content_type.startswith("application/json") or (status == 200 and not content_type):
            self._mode = "json"
            declared = header_int(head.headers.get("content-length") or "")
            if declared is not None and declared > transport._max_response_bytes:
                self._finish(lambda: transport._json_answer(request_id, b"", declared))
                return False
            return True
        self._finish(lambda: transport._not_an_answer(request_id, status, content_type))
        return False

    def _data(self, chunk: bytes) -> bool:
        transport, request_id = self._transport, self._meta.request_id
        if self._mode == "sse":
            outcome = transport._sse_chunk(
                self._sse, chunk, request_id, self._answered, self._deliver
            )
            if isinstance(outcome, Oversize):
                self._finish(lambda: transport._fail_oversize(request_id))
                return False
            self._answered = outcome
            return True
        self._chunks.append(chunk)
        self._size += len(chunk)
        if self._mode == "error" and self._size >= _ERROR_DETAIL_BYTES:
            self._end()  # enough of an error page
            return False
        if self._mode == "json" and self._size > transport._max_response_bytes:
            size = self._size
            self._finish(lambda: transport._json_answer(request_id, b"", size))
            return False
        return True

    def _end(self) -> None:
        transport, request_id = self._transport, self._meta.request_id
        body = b"".join(self._chunks)
        if self._mode == "error":
            refusal = transport._refusal_of(self._status, body[:_ERROR_DETAIL_BYTES])
            self._finish(lambda: transport._refused_modern(request_id, refusal))
        elif self._mode == "json":
            size = self._size
            self._finish(lambda: transport._json_answer(request_id, body, size, self._deliver))
        elif self._answered or self._flight.cancelled:
            self._finish(None)
        else:
            failure = ConnectionClosed(
                f"the answer stream of {self._meta.method} ended without its answer"
            )
            self._finish(lambda: transport._fail_one(request_id, failure))

    def on_failure(self, failure: BaseException) -> None:
        transport = self._transport
        if (
            self._flight.cancelled
            or transport._closed.is_set()
            or (self._mode == "sse" and self._answered)
        ):
            self._finish(None)
            return
        message = (
            f"reading the answer failed: {failure}"
            if self._mode
            else f"HTTP POST to {transport.url} failed: {failure}"
        )
        request_id = self._meta.request_id
        self._finish(lambda: transport._fail_one(request_id, ConnectionClosed(message)))
        self.on_closed()

    def _finish(self, outcome: Callable[[], None] | None) -> None:
        """Note what the answer comes to (done by :meth:`on_closed`)."""
        if not self._done:
            self._done = True
            self._outcome = outcome

    def on_closed(self) -> None:
        outcome, self._outcome = self._outcome, None
        transport = self._transport
        try:
            if outcome is not None:
                outcome()
        except Exception:  # pragma: no cover - the outcomes fail calls, they do not raise
            _log.exception("routing the answer from %s failed", transport.url)
        finally:
            key = valid_id_key(self._meta.request_id)
            with transport._lock:
                if key is not None:
                    transport._forget(key)


_MODERN_MARK = PROTOCOL_VERSION_KEY.encode()

_POOL = "pool"
"""The mark of a caller that came to read before its request was sent: the send hands the
read to a reader thread."""

_ELSEWHERE = "elsewhere"
"""The note of a request sent with the caller-reads hint that its caller does not read."""


class _CallerRead:
    """The read of one 2026-07-28 request, kept for the caller that waits for it."""

    __slots__ = ("request_id", "flight", "read")

    def __init__(
        self,
        request_id: Any,
        flight: Flight,
        read: Callable[[Callable[[bytes], None]], None],
    ) -> None:
        self.request_id = request_id
        self.flight = flight
        self.read = read
        """``read(deliver)``: POST the request and hand every message of its answer to
        ``deliver``."""


def _params_of(data: bytes) -> Any:
    """The ``params`` of one encoded request (``None`` if it has none)."""
    try:
        message = json.loads(data)
    except ValueError:
        return None
    return message.get("params") if isinstance(message, dict) else None


def _concerns_this_request(refusal: BaseException) -> bool:
    """True for an HTTP error that refuses one request, not the session: a JSON-RPC error,
    or a 4xx other than 401/403 (authentication) and 404 (the session ended)."""
    if isinstance(refusal, McpError):
        return True
    return (
        isinstance(refusal, HttpError)
        and not isinstance(refusal, SessionEnded)
        and 400 <= refusal.status < 500
        and refusal.status not in (401, 403)
    )


def _read_some(response: Any, limit: int) -> bytes:
    """Up to ``limit`` bytes of a response's body ('' if it cannot be read)."""
    chunks: list[bytes] = []
    size = 0
    try:
        for chunk in response.iter_bytes():
            chunks.append(chunk)
            size += len(chunk)
            if size >= limit:
                break
    except Exception:
        pass
    return b"".join(chunks)[:limit]


def _detail(prefix: str, body: bytes) -> str:
    # one line: an error page (HTML from a web server at the wrong URL) is many
    detail = " ".join(body.decode("utf-8", "replace")[:200].split())
    return f"{prefix}: {detail}" if detail else prefix


def _jsonrpc_error(body: bytes) -> McpError | None:
    """The :class:`~mcp_sync.errors.McpError` an HTTP error body carries, if it is a
    JSON-RPC error response."""
    message = decode(body.strip())  # depth-limited, like every message the endpoint reads
    if not isinstance(message, ErrorResponse):
        return None
    return McpError(message.code, message.message, message.data)


def _abort(response: Any) -> None:
    """Close a streaming response from another thread. Closing alone does not wake a thread
    blocked reading it; shutting the socket down does."""
    if isinstance(response, PlainResponse):
        response.abort()  # its reader closes it (a socket is closed by one thread only)
        return
    try:
        stream = response.extensions.get("network_stream")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if sock is not None:
            sock.shutdown(socket.SHUT_RDWR)
    except Exception:
        pass
    try:
        response.close()
    except Exception:
        pass


def _answers(data: bytes, request_id: Any) -> bool:
    """True if ``data`` is the answer to ``request_id``: a response, or an invalid one
    (both ``result`` and ``error``, nested too deep, ...) whose id can be read -- the
    endpoint fails the call with it, so the stream must not be resumed for it."""
    message = decode(data)  # depth-limited: json.loads would raise on a deep answer
    if isinstance(message, InvalidMessage):
        return message.response_id is not None and message.response_id == request_id
    return isinstance(message, (Response, ErrorResponse)) and message.id == request_id
