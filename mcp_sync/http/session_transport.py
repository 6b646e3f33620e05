"""The server side of one Streamable HTTP session, as a transport for an endpoint.

There is no reader thread for an HTTP session: each POST hands its message to the endpoint
directly. What the endpoint writes is routed by the inbound request it relates to:

* the response to request *X* ends *X*'s stream (the SSE answer of the POST that carried it);
* progress, log messages and server-to-client requests made on behalf of *X* go on *X*'s
  stream while it is open;
* everything else goes on the session's standalone stream (the one a GET opens) -- but for
  the notifications about a request answered with plain JSON (``json_response``, or a client
  that accepts only JSON): they are dropped. The JSON answer has room for the response only,
  and the standalone stream SHOULD carry only messages unrelated to a running request
  (2025-11-25), where they could arrive after the answer they belong to. Server-to-client
  requests made on behalf of such a request still go on the standalone stream (there is no
  other way to ask them).

When *X* is cancelled, its stream is ended without a response (:meth:`~HttpSessionTransport.inbound_cancelled`).

A client POSTs a request and its ``notifications/cancelled`` on different connections, so two
WSGI threads may hand them over in the wrong order. A cancel for a request this session has
not received yet is kept (at most :data:`EARLY_CANCELS` per session, each at most
:data:`EARLY_CANCEL_BYTES`) and delivered right after
that request (:meth:`HttpSessionTransport.cancel_arrived`,
:meth:`HttpSessionTransport.request_received`): request ids are never reused in a session.
"""

from __future__ import annotations

import itertools
import secrets
import threading
from collections import OrderedDict
from typing import Any

from ..jsonrpc import RequestId, id_key, is_valid_id
from ..principal import Principal
from ..transports.base import FailCall, OutboundMeta
from .sse import EventStream

__all__ = ["HttpSessionTransport", "EARLY_CANCELS", "EARLY_CANCEL_BYTES"]

_KEPT_ENDED_STREAMS = 64

_request_stream_numbers = itertools.count(1)
"""Names request streams (``r-<n>`` in hex): unique in the process, so that the
``Last-Event-ID`` of one session's stream names nothing in another. They need not be
unpredictable -- a stream is looked up only within the session whose id the client sends --
and a counter costs no system call (every 2026-07-28 request makes a stream)."""

EARLY_CANCELS = 64
"""Cancellations kept per session for requests that have not arrived yet (oldest dropped)."""

EARLY_CANCEL_BYTES = 4096
"""A cancellation longer than this (a huge id or reason) is not kept for a later request."""


class HttpSessionTransport:
    """Routes one session's outgoing messages onto SSE streams."""

    def __init__(self, session_id: str, *, replay: int = 256) -> None:
        self.session_id = session_id
        self._replay = replay
        self._lock = threading.Lock()
        self._by_request: dict[tuple[type, RequestId], EventStream] = {}
        self._json_mode: set[tuple[type, RequestId]] = set()
        # who sent each request whose stream is open (an app guarded by BearerAuth)
        self._principals: dict[tuple[type, RequestId], Principal] = {}
        # requests the endpoint has registered (a cancel for them is delivered at once)
        self._received: set[tuple[type, RequestId]] = set()
        # cancels that came before their request: key -> the notification's line
        self._early: OrderedDict[tuple[type, RequestId], bytes] = OrderedDict()
        self._streams: OrderedDict[str, EventStream] = OrderedDict()
        # made on first use: a 2026-07-28 request's one-shot session seldom needs it
        self._standalone: EventStream | None = None
        self._closed = False
        # held until close(): read_line() waits by acquiring it (a lock costs far less to
        # make than an Event, and the app makes a transport per 2026-07-28 request)
        self._open_gate = threading.Lock()
        self._open_gate.acquire()

    @property
    def standalone(self) -> EventStream:
        """The session's standalone stream (the one a GET reads): messages that belong to
        no open request stream."""
        stream = self._standalone
        if stream is not None:
            return stream
        with self._lock:
            if self._standalone is None:
                self._standalone = EventStream("s-" + secrets.token_hex(4), self._replay)
                self._streams[self._standalone.id] = self._standalone
                if self._closed:  # made after close() ended the others
                    self._standalone.end()
            return self._standalone

    # -- streams ------------------------------------------------------------------------------
    def open_request_stream(
        self,
        request_id: RequestId,
        *,
        json_mode: bool = False,
        principal: Principal | None = None,
    ) -> EventStream | None:
        """Register the stream that answers request ``request_id``; ``None`` if that id
        already has one (a duplicate id). ``principal``: who sent the request (handed to
        the session by :meth:`principal_for` when it admits the request)."""
        key = id_key(request_id)
        stream = EventStream(f"r-{next(_request_stream_numbers):x}", self._replay)
        with self._lock:
            if key in self._by_request:
                return None
            self._by_request[key] = stream
            if json_mode:
                self._json_mode.add(key)
            if principal is not None:
                self._principals[key] = principal
            self._streams[stream.id] = stream
            self._trim()
        return stream

    def principal_for(self, request_id: RequestId) -> Principal | None:
        """Who sent request ``request_id`` (``None``: nobody authenticated). The session asks
        once, as it admits the request, and keeps the answer in the request's scope."""
        with self._lock:
            return self._principals.pop(id_key(request_id), None)

    def request_received(self, request_id: RequestId) -> bytes | None:
        """The endpoint has registered request ``request_id``: from now on a cancel for it
        is delivered at once. Returns the line of a cancel that came first, to deliver now."""
        key = id_key(request_id)
        with self._lock:
            if key in self._by_request:
                self._received.add(key)
            return self._early.pop(key, None)

    def cancel_arrived(self, request_id: Any, line: bytes) -> bool:
        """A ``notifications/cancelled`` for ``request_id`` arrived. True: deliver it to the
        endpoint now. False: its request has not been received yet; ``line`` is kept and
        handed back by :meth:`request_received`."""
        if not is_valid_id(request_id) or len(line) > EARLY_CANCEL_BYTES:
            return True  # the endpoint drops it (malformed), or handles it now if it can
        key = id_key(request_id)
        with self._lock:
            if key in self._received:
                return True
            self._early[key] = line
            self._early.move_to_end(key)
            while len(self._early) > EARLY_CANCELS:
                self._early.popitem(last=False)
            return False

    def stream(self, stream_id: str) -> EventStream | None:
        """A stream by id (for ``Last-Event-ID`` resumption)."""
        with self._lock:
            return self._streams.get(stream_id)

    def _trim(self) -> None:
        ended = [sid for sid, s in self._streams.items() if s.ended and s is not self._standalone]
        for sid in ended[: max(0, len(ended) - _KEPT_ENDED_STREAMS)]:
            del self._streams[sid]

    def has_consumers(self) -> bool:
        """True while some HTTP response is iterating one of the session's streams."""
        with self._lock:
            streams = list(self._streams.values())
        return any(stream.has_consumer for stream in streams)

    def open_streams(self) -> int:
        """How many of the session's streams an HTTP response is iterating right now."""
        with self._lock:
            streams = list(self._streams.values())
        return sum(1 for stream in streams if stream.has_consumer)

    # -- the transport interface ----------------------------------------------------------------
    def read_line(self) -> bytes | None:
        """Not used: POST handlers feed the endpoint directly. Blocks until closed."""
        with self._open_gate:
            return None

    def write(self, data: bytes) -> None:
        """Send on the standalone stream."""
        self.send(data, OutboundMeta("notification"))

    def send(self, data: bytes, meta: OutboundMeta) -> None:
        """Send ``data`` on the stream of the request it relates to, or the standalone one."""
        if self._closed:
            raise BrokenPipeError("the HTTP session is closed")
        related = meta.related_request_id
        if related is not None:
            key = id_key(related)
            response = meta.kind == "response"
            with self._lock:
                if response:  # it ends the request: forgotten in the same step
                    stream, json_mode = self._forget_request(key), False
                else:
                    stream, json_mode = self._by_request.get(key), key in self._json_mode
            if stream is not None:
                if response:
                    stream.push(data, last=True)
                    return
                if json_mode and meta.kind == "notification":
                    return  # a JSON answer has room for the response only (see the module)
                if not json_mode and stream.push(data):
                    return
        self.standalone.push(data)

    def inbound_cancelled(self, request_id: RequestId) -> None:
        """The request was cancelled: end its stream, which will carry no response."""
        key = id_key(request_id)
        with self._lock:
            stream = self._forget_request(key)
        if stream is not None:
            stream.end()

    def bind_call_failure(self, fail_call: FailCall) -> None:
        """Nothing to bind: a server session's outbound calls fail only when it ends."""

    def _forget_request(self, key: tuple[type, RequestId]) -> EventStream | None:
        """The request ended (answered or cancelled): drop what routes to it. Lock held."""
        self._json_mode.discard(key)
        self._received.discard(key)
        self._principals.pop(key, None)
        return self._by_request.pop(key, None)

    def close(self) -> None:
        """End every stream."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._open_gate.release()
            streams = list(self._streams.values())
            self._by_request.clear()
            self._received.clear()
            self._principals.clear()
            self._early.clear()
        for stream in streams:
            if not stream.ended:  # an answered request's stream ended with its response
                stream.end()

    @property
    def closed(self) -> bool:
        """True after :meth:`close`."""
        return self._closed
