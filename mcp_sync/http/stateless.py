"""Serving one 2026-07-28 Streamable HTTP request statelessly.

At 2026-07-28 each POST is self-contained: version, client capabilities and client identity
travel in the request's envelope, so no ``Mcp-Session-Id`` is issued and nothing is kept
between requests. :class:`StatelessRequest` serves one request on a short-lived
:class:`~mcp_sync.server.ServerSession` of its own (over a one-shot
:class:`~mcp_sync.http.session_transport.HttpSessionTransport`), so that it is admitted
and dispatched exactly as on any other connection (envelope checks, capability checks,
result stamping), while its handler runs on the app's shared pool. The session ends with
the request: answered, refused, or cancelled.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import McpError
from ..jsonrpc import INVALID_PARAMS, UNSUPPORTED_PROTOCOL_VERSION, ErrorResponse, Request, encode
from ..lifecycle import MODERN_VERSIONS, PROTOCOL_VERSION_KEY, Era, Lifecycle
from ..principal import Principal
from ..workers import WorkerPool
from .disconnect import poll_slices
from .routing_headers import http_status_for
from .session_transport import HttpSessionTransport
from .sse import EventStream

if TYPE_CHECKING:  # pragma: no cover
    from ..server import Server, ServerSession

__all__ = [
    "KEEPALIVE_COMMENT",
    "Answer",
    "StatelessRequest",
    "handshake_refusal",
    "is_modern_post",
    "refuse",
]

KEEPALIVE_COMMENT = b": ping\n\n"
"""The SSE comment a long 2026-07-28 answer sends while its handler runs: writing it is how
the app notices that the client closed the stream."""

_STOP_SLICE = 0.1
"""Longest wait of an SSE answer between two looks at the app's stop flag (seconds)."""

_UNRELATED_KEPT = 8
"""Messages of a one-shot session that belong to no request (dropped: nobody reads them)."""


@dataclass(frozen=True)
class Answer:
    """What a 2026-07-28 POST is answered with: an HTTP status and a JSON body."""

    status: str
    body: bytes


def is_modern_post(environ: Mapping[str, Any], params: Any, method: str | None) -> bool:
    """True when a POSTed message is 2026-07-28 traffic: its ``MCP-Protocol-Version`` header
    names a 2026-07-28 revision, or (for a request, ``method`` given) its body carries an
    envelope (or it is ``server/discover``)."""
    if environ.get("HTTP_MCP_PROTOCOL_VERSION") in MODERN_VERSIONS:
        return True
    if method is not None:
        return Lifecycle.classify(method, params) is Era.MODERN
    meta = params.get("_meta") if isinstance(params, Mapping) else None
    return isinstance(meta, Mapping) and PROTOCOL_VERSION_KEY in meta


def refuse(request: Request, error: McpError) -> Answer:
    """The answer that refuses ``request`` with ``error``, with the status its code calls for."""
    return Answer(
        http_status_for(error.code),
        encode(ErrorResponse(request.id, error.code, error.message, error.data)),
    )


def handshake_refusal(request: Request) -> McpError | None:
    """The error owed to a request without an envelope on a 2026-07-28 path: ``initialize``
    gets -32022 naming the served versions; any other request the -32602 of its missing
    envelope. ``None`` for an enveloped request (admission judges it)."""
    if Lifecycle.classify(request.method, request.params) is Era.MODERN:
        return None
    if request.method == "initialize":
        requested = request.params.get("protocolVersion") if request.params else None
        return McpError(
            UNSUPPORTED_PROTOCOL_VERSION,
            "this endpoint serves protocol 2026-07-28 only: send requests with params._meta instead of initialize",
            {"supported": list(MODERN_VERSIONS), "requested": requested},
        )
    try:
        Lifecycle.read_envelope(request.params)
    except McpError as exc:
        return exc
    return McpError(
        INVALID_PARAMS, "the request carries no 2026-07-28 envelope"
    )  # pragma: no cover


class StatelessRequest:
    """One 2026-07-28 request being served on a one-shot session.

    Create it, then :meth:`first_event`; :meth:`end` (always, in a ``finally``) ends the
    session and cancels the handler if it is still running.

    With ``sse=True`` the notifications the handler sends about the request (progress, log
    messages, a listen stream's frames) go on the request's stream, before its response;
    with ``sse=False`` (an answer in plain JSON, which has room for the response only) they
    are dropped, never sent after the answer on another stream.

    ``decoded=True`` says that ``request`` is what the endpoint would decode ``line`` to
    (see :func:`~mcp_sync.jsonrpc.parse_first`): it is handed on, not parsed again.
    """

    def __init__(
        self,
        server: Server,
        pool: WorkerPool,
        request: Request,
        line: bytes,
        principal: Principal | None = None,
        *,
        sse: bool = False,
        decoded: bool = False,
    ) -> None:
        self.request = request
        self._transport = HttpSessionTransport("stateless", replay=_UNRELATED_KEPT)
        self._session: ServerSession = server.connect(
            self._transport, read=False, pool=pool, batches=False
        )
        stream = self._transport.open_request_stream(
            request.id, json_mode=not sse, principal=principal
        )
        assert stream is not None  # a fresh transport knows no id yet
        self.stream: EventStream = stream
        self.client_gone = False
        """True once :meth:`first_event` or :meth:`sse_events` saw that the client closed its
        connection."""
        # last: the request goes to a worker now, and this thread should wait for its answer
        # at once (work done here meanwhile holds the GIL the worker needs to start). No
        # request_received(): nothing but this request ever reaches a one-shot session, so
        # no cancellation can come before it.
        if decoded:
            self._session.endpoint.receive_decoded(line, request)
        else:
            self._session.endpoint.receive_line(line)

    def first_event(
        self, timeout: float, disconnected: Callable[[], bool] | None = None
    ) -> bytes | None:
        """The stream's first message (within ``timeout`` seconds): the response, or a
        notification sent before it; ``None`` when none came or the request was cancelled.

        ``disconnected`` (a :func:`~mcp_sync.http.disconnect.disconnect_probe`) is asked
        meanwhile, after each wait of :func:`~mcp_sync.http.disconnect.poll_slices` (1 ms at
        first, doubling, then every :data:`~mcp_sync.http.disconnect.DISCONNECT_POLL`
        seconds): once it says the client went away, :attr:`client_gone` is set and ``None``
        returned at once (the caller's :meth:`end` then cancels the handler)."""
        if disconnected is None:
            return self.stream.wait_for_event(timeout)
        end = time.monotonic() + timeout
        for poll in poll_slices():
            remaining = end - time.monotonic()
            data = self.stream.wait_for_event(max(0.0, min(poll, remaining)))
            if data is not None or self.stream.exhausted:
                return data
            if disconnected():
                self.client_gone = True
                return None
            if remaining <= 0:
                return None
        return None  # pragma: no cover - poll_slices never ends

    @staticmethod
    def answer_of(data: bytes) -> Answer | None:
        """The JSON answer when ``data`` is the response; ``None`` for a notification."""
        try:
            message = json.loads(data)
        except ValueError:  # pragma: no cover - the endpoint writes JSON objects
            return None
        if not isinstance(message, dict) or "method" in message:
            return None
        error = message.get("error")
        code = error.get("code") if isinstance(error, dict) else None
        return Answer(http_status_for(code if isinstance(code, int) else None), data)

    def answer_to(self, data: bytes) -> Answer | None:
        """:meth:`answer_of` the event the stream has just handed out (``data``), without
        parsing a result: the stream knows whether it was the response (the transport
        pushes a response as its last event), and only an error response has a status of
        its own, read from its code (a result that mentions ``"error"`` is read too)."""
        if not self.stream.final_delivered:
            return None
        if b'"error"' not in data:
            return Answer(http_status_for(None), data)
        return self.answer_of(data)

    def sse_events(
        self,
        first: bytes | None,
        keepalive: float,
        timeout: float | None,
        stop: threading.Event,
        disconnected: Callable[[], bool] | None = None,
    ) -> Iterator[bytes]:
        """The body of an SSE answer: ``first`` (or, without one, a keep-alive comment, which
        sends the headers at once), every message the stream gets, in order, and a
        keep-alive comment after each ``keepalive`` idle seconds; it ends with the response.
        Ends without a response when the request is cancelled, the app stops (``stop``: a
        listen stream gets its closing result first), or ``timeout`` seconds pass (``None``: never; the caller's :meth:`end` cancels the
        handler then). A client that closes the stream makes a write fail, or the WSGI
        server close this iterator: either way :meth:`end` runs and cancels the handler.
        Where the WSGI server lets the app look (``disconnected``, as for
        :meth:`first_event`), the connection is also looked at between events, so a client
        that left is noticed without waiting for the next keep-alive comment: the body
        ends then (:attr:`client_gone` set) and its close cancels the handler."""
        end = None if timeout is None else time.monotonic() + timeout
        polls = poll_slices()
        if first is None:
            yield KEEPALIVE_COMMENT
        else:
            yield _frame(first)
            if self.answer_to(first) is not None:
                return
        ping_at = time.monotonic() + keepalive
        # the next look at the connection (never, where the WSGI server allows none)
        look_at = math.inf if disconnected is None else time.monotonic() + next(polls)
        while not stop.is_set():
            now = time.monotonic()
            if end is not None and now >= end:
                return
            # short slices, so that the app's close() (``stop``) is seen at once
            wait = min(ping_at, end if end is not None else ping_at, look_at) - now
            data = self.stream.wait_for_event(max(0.0, min(wait, _STOP_SLICE)))
            if data is not None:
                yield _frame(data)
                if self.answer_to(data) is not None:
                    return
                ping_at = time.monotonic() + keepalive
                continue
            if self.stream.exhausted:
                return  # cancelled: no response, ever
            if disconnected is not None and time.monotonic() >= look_at:
                if disconnected():
                    self.client_gone = True
                    return  # the body's close() cancels the handler
                look_at = time.monotonic() + next(polls)
            if time.monotonic() >= ping_at:
                yield KEEPALIVE_COMMENT
                ping_at = time.monotonic() + keepalive
        # the app is closing: a listen stream gets its graceful end (the closing result)
        self._session.server.listens.end_session(self._session)
        data = self.stream.wait_for_event(0)
        while data is not None:
            yield _frame(data)
            data = self.stream.wait_for_event(0)

    def end(self) -> None:
        """End the one-shot session: a handler still running is cancelled (not waited for)."""
        self._session.endpoint.close(0.0, join=False)


def _frame(data: bytes) -> bytes:
    return b"event: message\ndata: " + data.rstrip(b"\n") + b"\n\n"
