"""Noticing, while a request runs, that its client went away.

A WSGI application learns of a disconnect only when a write fails or the server calls the
response's ``close()``; a request answered with plain JSON writes nothing until its answer is
ready, and an SSE answer writes only its events and a keep-alive comment now and then, so
neither needs to happen soon after the client left. Some WSGI servers let the application
look:

* **gunicorn** (any worker type) puts the client socket in ``environ["gunicorn.socket"]``;
* **the built-in server** (:func:`~mcp_sync.http.embedded_server.serve_http`) puts it in
  ``environ["mcp_sync.socket"]``;
* **waitress** gives ``environ["waitress.client_disconnected"]``, a callable that reports a
  closed connection -- but only when waitress keeps reading while a request runs, that is
  when it serves with ``channel_request_lookahead`` of 1 or more (the default, 0, reports
  nothing).

:func:`disconnect_probe` turns what the environ offers into one check, which a 2026-07-28
request asks while it waits for its handler (:func:`poll_slices`: soon at first, then every
:data:`DISCONNECT_POLL`), both before its answer and between the events of an SSE answer.
On a socket, the connection is closed when the socket is readable and a peek reads nothing
(end of stream); a readable socket with bytes waiting is a pipelined next request, not a
disconnect. A socket wrapped in TLS by the WSGI server cannot be peeked: no probe then, as
for any other server (``wsgiref``, mod_wsgi, uWSGI...), and behind a proxy that keeps its
upstream connection open when its client goes away. Without a probe a JSON-answered request runs to its end (or to
``request_timeout``); a client that accepts SSE is answered as SSE after the JSON window,
where a disconnect is noticed at the latest when the next keep-alive comment's write fails.
"""

from __future__ import annotations

import select
import socket
import ssl
from collections.abc import Callable, Iterator, Mapping
from typing import Any

__all__ = [
    "DISCONNECT_FIRST_POLL",
    "DISCONNECT_POLL",
    "SOCKET_ENVIRON_KEY",
    "disconnect_probe",
    "poll_slices",
]

SOCKET_ENVIRON_KEY = "mcp_sync.socket"
"""Where the built-in server puts the client socket in the WSGI environ."""

DISCONNECT_POLL = 0.05
"""Longest time (seconds) between two looks at the connection of a request in flight."""

DISCONNECT_FIRST_POLL = 0.001
"""The first look at a request's connection comes this many seconds after the request is
handed to its handler; each later wait is twice the one before, up to
:data:`DISCONNECT_POLL` (:func:`poll_slices`). A client that gives up on a quick call is seen
within a millisecond or two, and a long call costs no more looks than with a fixed slice."""

_SOCKET_KEYS = ("gunicorn.socket", SOCKET_ENVIRON_KEY)


def poll_slices() -> Iterator[float]:
    """The waits between looks at a connection: :data:`DISCONNECT_FIRST_POLL`, doubling, up
    to :data:`DISCONNECT_POLL`, then that for ever."""
    wait = DISCONNECT_FIRST_POLL
    while True:
        yield wait
        wait = min(wait * 2, DISCONNECT_POLL)


def disconnect_probe(environ: Mapping[str, Any]) -> Callable[[], bool] | None:
    """A check that returns True once the client of this request closed its connection, or
    ``None`` when the WSGI server gives no way to tell (see the module)."""
    waitress_check = environ.get("waitress.client_disconnected")
    if callable(waitress_check):  # always False without channel_request_lookahead
        return lambda: bool(waitress_check())
    for key in _SOCKET_KEYS:
        sock = environ.get(key)
        if isinstance(sock, socket.socket) and not isinstance(sock, ssl.SSLSocket):
            return _SocketProbe(sock)
    return None


class _SocketProbe:
    """True once the peer closed ``sock``: readable, and a peek reads nothing."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock

    def __call__(self) -> bool:
        try:
            readable, _, _ = select.select([self._sock], [], [], 0)
            if not readable:
                return False
            return self._sock.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):  # closed under us (ValueError: fd -1): gone either way
            return True
