"""The loopback redirect listener (RFC 8252 section 7.3): a small HTTP server on
``127.0.0.1`` that takes exactly one redirect to its path and then stops.

One thread serves it, started by :meth:`LoopbackListener.start` and joined by
:meth:`LoopbackListener.close` (a ``with`` block closes it, also on Ctrl-C). It answers at
most :data:`MAX_LOOPBACK_REQUESTS` requests (a browser may ask for ``/favicon.ico``; those
get 404), each connection with a :data:`LOOPBACK_SOCKET_TIMEOUT` socket timeout; the first
request on the redirect path is the answer, whatever it holds (the caller checks ``state``).
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from .._waiting import wait_sliced
from ..errors import AuthorizationCancelled, AuthorizationError, AuthorizationTimeout

__all__ = [
    "LoopbackListener",
    "MAX_LOOPBACK_REQUESTS",
    "LOOPBACK_SOCKET_TIMEOUT",
    "AUTHORIZE_TIMEOUT",
]

MAX_LOOPBACK_REQUESTS = 16
"""Requests the listener answers before it gives up on the redirect."""
LOOPBACK_SOCKET_TIMEOUT = 10.0
"""Seconds one connection to the listener may take to send its request."""
AUTHORIZE_TIMEOUT = 300.0
"""Default seconds to wait for the redirect (the user signing in)."""

_PAGE = (
    b"<!doctype html><meta charset=utf-8><title>Authorization</title>"
    b"<p>Authorization finished: you can close this window and return to the program.</p>"
)


class _Handler(http.server.BaseHTTPRequestHandler):
    timeout = LOOPBACK_SOCKET_TIMEOUT
    server: _Server

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        if parts.path != self.server.expected_path or self.server.result is not None:
            self.send_error(404)
            return
        self.server.result = dict(parse_qsl(parts.query, keep_blank_values=True))
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(_PAGE)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(_PAGE)

    def handle(self) -> None:
        self.server.answered += 1
        super().handle()

    def log_message(self, format: str, *args: Any) -> None:
        """The query holds the authorization code: never logged."""


class _Server(http.server.HTTPServer):
    result: dict[str, str] | None = None
    answered = 0
    expected_path = "/callback"


class LoopbackListener:
    """Listen on ``host:port`` (``port=0``: a free one) for the redirect to ``path``.

    :attr:`redirect_uri` is the URI to send as ``redirect_uri`` (``http://127.0.0.1:PORT/path``,
    or with ``localhost`` when ``host_name`` says so)."""

    def __init__(
        self, host: str = "127.0.0.1", port: int = 0, path: str = "/callback", host_name: str = ""
    ) -> None:
        try:
            self._server = _Server((host, port), _Handler)
        except OSError as exc:
            raise AuthorizationError(
                f"cannot listen for the redirect on {host}:{port}: {exc}"
            ) from None
        self._server.expected_path = path
        self._server.timeout = 0.1
        self._closed = threading.Event()
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        bound = self._server.server_address[1]
        self.redirect_uri = f"http://{host_name or host}:{bound}{path}"

    def start(self) -> None:
        """Start serving (one thread)."""
        self._thread = threading.Thread(
            target=self._serve, name="mcp_sync-oauth-loopback", daemon=True
        )
        self._thread.start()

    def _serve(self) -> None:
        server = self._server
        try:
            while (
                not self._closed.is_set()
                and server.result is None
                and server.answered < MAX_LOOPBACK_REQUESTS
            ):
                server.handle_request()
        finally:
            self._done.set()

    def wait(
        self, timeout: float | None, cancelled: Callable[[], bool] = lambda: False
    ) -> dict[str, str]:
        """The redirect's query parameters; raises :class:`AuthorizationTimeout` after
        ``timeout`` seconds and :class:`AuthorizationCancelled` when ``cancelled()``
        turns true (checked every slice; Ctrl-C is seen too)."""

        def done() -> bool:
            return self._done.is_set() or cancelled()

        wait_sliced(done, self._done.wait, timeout)
        if cancelled():
            raise AuthorizationCancelled("the authorization was cancelled")
        result = self._server.result
        if result is None:
            if self._done.is_set():
                raise AuthorizationError("the loopback listener got no redirect")
            raise AuthorizationTimeout(
                f"no redirect reached {self.redirect_uri} within {timeout:g} s"
                if timeout is not None
                else f"no redirect reached {self.redirect_uri}"
            )
        return result

    def close(self) -> None:
        """Stop serving, close the socket and join the thread."""
        self._closed.set()
        if self._thread is not None:
            self._thread.join()
        self._server.server_close()

    def __enter__(self) -> LoopbackListener:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
