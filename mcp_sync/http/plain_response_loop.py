"""One thread that reads every open response of the plain ``http://`` path at once.

A blocking HTTP/1.1 reader holds a thread per open response. Responses written by
:class:`~mcp_sync.http.plain_http.PlainHttpClient` can instead be handed to a
:class:`ResponseLoop`: one thread waits on all their sockets with a selector, and when one
is readable it receives once, parses (:meth:`PlainResponse.events
<mcp_sync.http.plain_http.PlainResponse.events>`) and hands the events to that response's
:class:`ResponseSink`. At most :data:`MAX_OPEN_RESPONSES` are open at once (:meth:`add`
says no beyond, and the caller reads the response itself).

Cancelling a response's request shuts its socket down (its
:class:`~mcp_sync.http.client_flight.Flight`): the socket becomes readable, the receive
ends it, and its sink is told the failure. :meth:`ResponseLoop.close` ends every response
still open (its sink is told) and joins the thread.
"""

from __future__ import annotations

import logging
import selectors
import socket
import threading
from typing import Protocol

from .http11_parser import ResponseEnd, ResponseHead
from .plain_http import ConnectionLost, PlainResponse

__all__ = ["MAX_OPEN_RESPONSES", "ResponseLoop", "ResponseSink"]

_log = logging.getLogger("mcp_sync.http_client")

MAX_OPEN_RESPONSES = 1024
"""Most responses one :class:`ResponseLoop` reads at once."""


class ResponseSink(Protocol):
    """Where a response's events go (called on the loop's thread)."""

    def on_events(self, events: list[ResponseHead | bytes | ResponseEnd]) -> bool:
        """Take the head, body pieces and end that arrived; False to stop reading (the
        response is then closed, its connection not reused)."""

    def on_closed(self) -> None:
        """The response was read to its end (or :meth:`on_events` stopped it) and is closed
        now: its connection is back in the pool before an answer is handed on, so the next
        request finds it there."""

    def on_failure(self, failure: BaseException) -> None:
        """The response broke (or the loop closed) before its end; it is closed."""


class ResponseLoop:
    """Reads many :class:`~mcp_sync.http.plain_http.PlainResponse` at once on one thread
    (started with the first response, joined by :meth:`close`)."""

    def __init__(
        self, name: str = "mcp_sync-http-responses", *, max_open: int = MAX_OPEN_RESPONSES
    ) -> None:
        self._name = name
        self._max_open = max_open
        self._lock = threading.Lock()
        self._added: list[tuple[PlainResponse, ResponseSink]] = []
        self._open = 0
        self._closed = False
        self._thread: threading.Thread | None = None
        self._selector: selectors.BaseSelector | None = None
        self._wake_in: socket.socket | None = None
        self._wake_out: socket.socket | None = None

    @property
    def open_responses(self) -> int:
        """Responses being read now."""
        with self._lock:
            return self._open

    def add(self, response: PlainResponse, sink: ResponseSink) -> bool:
        """Read ``response`` on the loop from now on; False (nothing done) when the loop is
        closed or has :data:`MAX_OPEN_RESPONSES` open already."""
        with self._lock:
            if self._closed or self._open >= self._max_open:
                return False
            if self._thread is None:
                self._selector = selectors.DefaultSelector()
                self._wake_in, self._wake_out = socket.socketpair()
                self._wake_in.setblocking(False)
                self._wake_out.setblocking(False)
                self._selector.register(self._wake_in, selectors.EVENT_READ, None)
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            self._open += 1
            self._added.append((response, sink))
        self._wake()
        return True

    def _wake(self) -> None:
        try:
            assert self._wake_out is not None
            self._wake_out.send(b"\0")
        except (BlockingIOError, OSError):
            pass  # already woken (its buffer is full), or closing

    def _run(self) -> None:
        selector = self._selector
        assert selector is not None and self._wake_in is not None
        reading: dict[int, tuple[PlainResponse, ResponseSink]] = {}
        try:
            while True:
                for key, _ in selector.select():
                    if key.data is None:
                        try:
                            self._wake_in.recv(4096)
                        except OSError:
                            pass
                        continue
                    response, sink = key.data
                    self._step(selector, reading, response, sink, receive=True)
                with self._lock:
                    added, self._added = self._added, []
                    closed = self._closed
                for response, sink in added:
                    sock = response.socket
                    reading[sock.fileno()] = (response, sink)
                    selector.register(sock, selectors.EVENT_READ, (response, sink))
                    self._step(selector, reading, response, sink, receive=False)
                if closed:
                    for response, sink in list(reading.values()):
                        self._finish(selector, reading, response)
                        sink.on_failure(ConnectionLost("the client is closed"))
                    return
        finally:
            selector.close()
            self._wake_in.close()
            assert self._wake_out is not None
            self._wake_out.close()

    def _step(
        self,
        selector: selectors.BaseSelector,
        reading: dict[int, tuple[PlainResponse, ResponseSink]],
        response: PlainResponse,
        sink: ResponseSink,
        *,
        receive: bool,
    ) -> None:
        try:
            events = response.events(receive=receive)
            go_on = sink.on_events(events) if events else True
        except Exception as exc:
            self._finish(selector, reading, response)
            try:
                sink.on_failure(exc)
            except Exception:  # pragma: no cover - sinks handle their own failures
                _log.exception("a response sink failed")
            return
        if response.end is not None or not go_on:
            self._finish(selector, reading, response)
            try:
                sink.on_closed()
            except Exception:  # pragma: no cover - sinks handle their own failures
                _log.exception("a response sink failed")

    def _finish(
        self,
        selector: selectors.BaseSelector,
        reading: dict[int, tuple[PlainResponse, ResponseSink]],
        response: PlainResponse,
    ) -> None:
        sock = response.socket
        if reading.pop(sock.fileno(), None) is not None:
            selector.unregister(sock)
        response.close()
        with self._lock:
            self._open -= 1

    def close(self, timeout: float = 5.0) -> None:
        """End every response still open (each sink is told) and join the thread."""
        with self._lock:
            self._closed = True
            thread = self._thread
        if thread is None:
            return
        self._wake()
        if thread is not threading.current_thread():
            thread.join(timeout)
