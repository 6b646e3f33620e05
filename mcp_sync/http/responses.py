"""The WSGI answers the Streamable HTTP app writes: plain text, JSON, JSON-RPC errors, and a
streamed body that runs a release function when the WSGI server closes it."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ..jsonrpc import ErrorResponse, encode
from .checks import Refusal

__all__ = [
    "SERVER_BUSY",
    "SSE_HEADERS",
    "StandaloneBody",
    "StartResponse",
    "json_answer",
    "jsonrpc_error",
    "plain",
    "refusal_answer",
]

SERVER_BUSY = -32000
"""The JSON-RPC error code (implementation-defined range) of a refusal for want of room:
too many sessions, too many requests waiting for a worker, too many listen streams, or
shutting down."""

StartResponse = Callable[..., Any]
"""The WSGI ``start_response`` callable."""

SSE_HEADERS = (
    ("Content-Type", "text/event-stream"),
    ("Cache-Control", "no-cache, no-transform"),
    ("X-Accel-Buffering", "no"),
)
"""Headers of every SSE answer (the last one keeps proxies such as nginx from buffering)."""


class StandaloneBody:
    """A WSGI body that runs ``release`` once the server closes it (every WSGI server calls
    ``close()``, even on a body it never iterated, and after a failed write): a standalone
    stream gives its slot back, a 2026-07-28 answer cancels its handler."""

    def __init__(self, events: Iterator[bytes], release: Callable[[], None]) -> None:
        self._events = events
        self._release: Callable[[], None] | None = release
        self._lock = threading.Lock()

    def __iter__(self) -> StandaloneBody:
        return self

    def __next__(self) -> bytes:
        return next(self._events)

    def close(self) -> None:
        """End the stream and release its slot (once)."""
        try:
            close = getattr(self._events, "close", None)
            if close is not None:
                close()
        finally:
            with self._lock:
                release, self._release = self._release, None
            if release is not None:
                release()


def refusal_answer(refusal: Refusal) -> Callable[[StartResponse], Iterable[bytes]]:
    """The answer to a request refused by a check of :mod:`mcp_sync.http.checks`."""
    return lambda sr: plain(sr, refusal.status, refusal.detail)


def plain(
    start_response: StartResponse,
    status: str,
    text: str,
    headers: list[tuple[str, str]] | None = None,
) -> list[bytes]:
    """A plain-text answer with a ``Content-Length``."""
    body = text.encode()
    start_response(
        status,
        [
            ("Content-Type", "text/plain; charset=utf-8"),
            ("Content-Length", str(len(body))),
            *(headers or []),
        ],
    )
    return [body]


def json_answer(
    start_response: StartResponse,
    status: str,
    data: bytes,
    headers: list[tuple[str, str]] | None = None,
) -> list[bytes]:
    """A JSON answer (``data`` without its trailing newline) with a ``Content-Length``."""
    body = data.rstrip(b"\n")
    start_response(
        status,
        [
            ("Content-Type", "application/json"),
            ("Content-Length", str(len(body))),
            *(headers or []),
        ],
    )
    return [body]


def jsonrpc_error(
    start_response: StartResponse, status: str, code: int, message: str, request_id: Any = None
) -> list[bytes]:
    """A JSON-RPC error answer with HTTP ``status``."""
    return json_answer(start_response, status, encode(ErrorResponse(request_id, code, message)))
