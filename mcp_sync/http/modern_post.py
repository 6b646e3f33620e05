"""Answering one admitted 2026-07-28 request of the WSGI app: JSON or SSE, listen streams.

:class:`ModernAnswers` takes a request whose headers were checked and that the app has room
for, serves it on a one-shot session (:class:`~mcp_sync.http.stateless.StatelessRequest`)
and writes its answer:

* **JSON** when its response is the first message ready within ``modern_json_window`` (or
  whenever the client or the app wants no SSE);
* **SSE** from its first message on otherwise -- a long call (``: ping`` keep-alives until
  the response), a call that sends progress or log messages before its response, and every
  ``subscriptions/listen`` (held open; at most ``max_listen_streams`` at once, one more gets
  ``503``). Closing the stream cancels the handler (a failed write or the WSGI server's
  ``close()``);
* while it waits for a JSON answer, a client seen closing its connection cancels the
  handler too, where the WSGI server lets the app look (:mod:`mcp_sync.http.disconnect`).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

from ..jsonrpc import ErrorResponse, Request, encode
from ..lifecycle import LISTEN_METHOD
from ..workers import WorkerPool
from .bearer import principal_of
from .disconnect import disconnect_probe
from .listen_slots import ListenSlots
from .responses import (
    SERVER_BUSY,
    SSE_HEADERS,
    StandaloneBody,
    StartResponse,
    json_answer,
    jsonrpc_error,
    plain,
)
from .stateless import StatelessRequest

if TYPE_CHECKING:  # pragma: no cover
    from ..server import Server

__all__ = ["ModernAnswers", "ModernSettings"]


class ModernSettings(Protocol):
    """What :class:`ModernAnswers` reads from the app, at each request (the app's options)."""

    server: Server
    pool: WorkerPool
    listen_slots: ListenSlots
    json_response: bool
    modern_json_window: float
    request_timeout: float
    keepalive: float
    stream_retry: float


class ModernAnswers:
    """Serves admitted 2026-07-28 requests for an app (``settings``), until ``stopping``."""

    def __init__(self, settings: ModernSettings, stopping: threading.Event) -> None:
        self._app = settings
        self._stopping = stopping

    def serve(
        self,
        environ: dict[str, Any],
        request: Request,
        body: bytes,
        start_response: StartResponse,
        wants_sse: bool,
        decoded: bool = False,
    ) -> Iterable[bytes]:
        """Serve ``request`` (its POST ``body``) and write its answer (see the module).
        ``decoded``: ``request`` is what the endpoint would decode ``body`` to (see
        :func:`~mcp_sync.jsonrpc.parse_first`): it is handed on, not parsed again."""
        app = self._app
        listen = request.method == LISTEN_METHOD
        if listen and not wants_sse:
            return plain(
                start_response, "406 Not Acceptable", "subscriptions/listen is answered with SSE"
            )
        slot = app.listen_slots.acquire() if listen else None
        if listen and slot is None:
            detail = f"too many open listen streams (max_listen_streams={app.listen_slots.limit}); try again later"
            return json_answer(
                start_response,
                "503 Service Unavailable",
                encode(ErrorResponse(request.id, SERVER_BUSY, detail)),
                [("Retry-After", str(max(1, math.ceil(app.stream_retry))))],
            )
        sse = listen or (wants_sse and not app.json_response)
        disconnected = disconnect_probe(environ)  # now: once the handler runs, wait at once
        try:
            served = StatelessRequest(
                app.server,
                app.pool,
                request,
                body.replace(b"\n", b" "),
                principal_of(environ),
                sse=sse,
                decoded=decoded,
            )
        except BaseException:
            if slot is not None:
                slot()
            raise
        return self._answer(served, sse, slot, disconnected, start_response)

    def _answer(
        self,
        served: StatelessRequest,
        sse: bool,
        slot: Callable[[], None] | None,
        disconnected: Callable[[], bool] | None,
        start_response: StartResponse,
    ) -> Iterable[bytes]:
        app = self._app

        def finish() -> None:
            served.end()
            if slot is not None:
                slot()

        try:
            first = served.first_event(
                app.modern_json_window if sse else app.request_timeout, disconnected
            )
        except BaseException:
            finish()
            raise
        answer = None if first is None else served.answer_to(first)
        if answer is None and sse and (first is not None or not served.stream.exhausted):
            start_response("200 OK", list(SSE_HEADERS))
            timeout = None if slot is not None else app.request_timeout
            # the body's close() (after the answer, or when the client went away) ends it
            events = served.sse_events(first, app.keepalive, timeout, self._stopping, disconnected)
            return StandaloneBody(events, finish)
        finish()
        if served.client_gone:
            return plain(start_response, "204 No Content", "")  # nobody is left to read it
        if answer is None:
            detail = f"no answer within the server's request_timeout of {app.request_timeout:g} s"
            return jsonrpc_error(
                start_response, "503 Service Unavailable", SERVER_BUSY, detail, served.request.id
            )
        return json_answer(start_response, answer.status, answer.body)
