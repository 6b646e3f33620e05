"""A small threaded HTTP server for WSGI apps (the standard library's ``wsgiref``), bounded.

:func:`serve_http` runs an :class:`~mcp_sync.http.wsgi_app.McpWsgiApp` (or any WSGI app that
mounts one) for development, tests and local tools. It takes one thread per connection,
and bounds what slow or numerous clients can hold:

* a listen backlog of :data:`DEFAULT_BACKLOG` connections, so a burst of connects waits
  in the kernel instead of being dropped (socketserver's own default is 5);
* ``read_timeout``: a connection must deliver its whole request (head and body) within
  :data:`DEFAULT_READ_TIMEOUT` seconds, or it is closed -- a client trickling a byte at a
  time holds a thread no longer than that. Responses are not timed: an SSE stream may stay
  open, idle but for keep-alives, as long as its session lives;
* ``max_connections``: at most :data:`DEFAULT_MAX_CONNECTIONS` connections are served at
  once; further ones wait, unaccepted, in the listen backlog until one ends (they are not
  refused: a waiting client is served late rather than failed);
* bound to loopback, it answers only requests whose ``Host`` names this machine (421
  otherwise), a defence against DNS rebinding: see ``allowed_hosts``.

Production deployments run the app under waitress or gunicorn behind a buffering proxy
(see the how-to *Run under gunicorn or waitress*).
"""

from __future__ import annotations

import io
import ipaddress
import logging
import socket
import socketserver
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

from .checks import HostAllowList
from .disconnect import SOCKET_ENVIRON_KEY

if TYPE_CHECKING:  # pragma: no cover
    from .wsgi_app import McpWsgiApp

__all__ = [
    "CONNECTION_THREAD_NAME",
    "DEFAULT_BACKLOG",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_READ_TIMEOUT",
    "HttpServerHandle",
    "SERVER_OPTIONS",
    "serve_http",
]

_log = logging.getLogger("mcp_sync.http")

DEFAULT_BACKLOG = 1024
"""Connections the kernel queues before the server accepts them (``backlog``)."""

DEFAULT_READ_TIMEOUT = 30.0
"""Seconds a connection has to deliver its whole request, head and body (``read_timeout``)."""

DEFAULT_MAX_CONNECTIONS = 256
"""Connections served at once, one thread each (``max_connections``)."""

CONNECTION_THREAD_NAME = "mcp_sync-http-connection"
"""The name of every connection thread of the built-in server."""

SERVER_OPTIONS = ("backlog", "read_timeout", "max_connections")
"""The keyword options of :func:`serve_http` that configure the server, not the app."""

_ACCEPT_POLL = 0.1  # seconds between looks at the shutdown flag while every slot is taken

StartResponse = Callable[..., Any]
WsgiApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]
"""The type of a WSGI application (PEP 3333), ``app(environ, start_response)``, returning
the body's bytes."""


class _DeadlineReader(io.RawIOBase):
    """Reads a socket until a fixed deadline; past it, :class:`TimeoutError`. Each read
    waits at most until the deadline, so a client trickling bytes cannot extend it. Writes
    to the socket are not affected (it is blocking again between reads)."""

    def __init__(self, sock: socket.socket, timeout: float) -> None:
        self._sock = sock
        self._deadline = time.monotonic() + timeout
        self._timeout = timeout

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        remaining = self._deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(
                f"the request did not arrive within the read timeout of {self._timeout:g} s"
            )
        self._sock.settimeout(remaining)
        try:
            return self._sock.recv_into(buffer)
        except TimeoutError as exc:
            raise TimeoutError(
                f"the request did not arrive within the read timeout of {self._timeout:g} s"
            ) from exc
        finally:
            self._sock.settimeout(None)


class _ThreadingWSGIServer(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[WSGIRequestHandler],
        *,
        backlog: int = DEFAULT_BACKLOG,
        read_timeout: float = DEFAULT_READ_TIMEOUT,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
    ) -> None:
        if backlog < 1 or max_connections < 1 or read_timeout <= 0:
            raise ValueError(
                "backlog and max_connections must be at least 1, read_timeout positive"
            )
        self.request_queue_size = backlog  # listen() uses it when the base class activates
        self.read_timeout = read_timeout
        self.max_connections = max_connections
        self._slots = threading.Semaphore(max_connections)
        self._count_lock = threading.Lock()
        self.active_connections = 0
        self.peak_connections = 0
        super().__init__(address, handler)

    def get_request(self) -> tuple[socket.socket, Any]:
        # at the cap, leave the connection in the backlog; serve_forever calls again after a
        # look at its shutdown flag (socketserver ignores an OSError from get_request)
        if not self._slots.acquire(timeout=_ACCEPT_POLL):
            raise OSError("every connection slot is taken")
        try:
            request = super().get_request()
        except BaseException:
            self._slots.release()
            raise
        with self._count_lock:
            self.active_connections += 1
            self.peak_connections = max(self.peak_connections, self.active_connections)
        return request

    def process_request(self, request: Any, client_address: Any) -> None:
        thread = threading.Thread(
            target=self._serve_connection,
            args=(request, client_address),
            name=CONNECTION_THREAD_NAME,
            daemon=True,
        )
        try:
            thread.start()
        except BaseException:
            self._free_slot()  # socketserver closes the request
            raise

    def _serve_connection(self, request: Any, client_address: Any) -> None:
        try:
            self.process_request_thread(request, client_address)  # closes the request
        finally:  # the slot is free only when the thread is done with it
            self._free_slot()

    def _free_slot(self) -> None:
        with self._count_lock:
            self.active_connections -= 1
        self._slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        # a client that went away or timed out is routine; anything else is a bug to see
        if isinstance(sys.exc_info()[1], OSError):
            _log.debug("HTTP connection from %s failed", client_address, exc_info=True)
        else:
            _log.exception("HTTP connection from %s failed", client_address)


class _QuietHandler(WSGIRequestHandler):
    server: _ThreadingWSGIServer

    def setup(self) -> None:
        super().setup()
        self.rfile.close()  # the socket's own file: replaced by a reader with a deadline
        self.rfile = io.BufferedReader(_DeadlineReader(self.connection, self.server.read_timeout))

    def get_environ(self) -> dict[str, Any]:
        environ = dict(super().get_environ())
        environ[SOCKET_ENVIRON_KEY] = self.connection  # lets the app notice a disconnect
        return environ

    def handle(self) -> None:
        try:
            super().handle()
        except TimeoutError as exc:
            _log.debug("%s - closed: %s", self.address_string(), exc)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        _log.debug("%s - %s", self.address_string(), format % args)


class _HostGuard:
    """A WSGI middleware that answers 421 to a request whose ``Host`` is not allowed."""

    def __init__(self, app: WsgiApp, hosts: HostAllowList) -> None:
        self.app = app
        self.hosts = hosts

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        refusal = self.hosts.check(environ.get("HTTP_HOST"))
        if refusal is None:
            return self.app(environ, start_response)
        body = refusal.detail.encode()
        start_response(
            refusal.status,
            [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))],
        )
        return [body]


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class HttpServerHandle:
    """A running HTTP server (see :func:`serve_http`)."""

    def __init__(
        self, httpd: _ThreadingWSGIServer, app: Any, thread: threading.Thread | None
    ) -> None:
        self._httpd = httpd
        self.app = app
        self._thread = thread
        self._serving = thread is not None
        host, port = httpd.server_address[:2]
        self.host = str(host)
        self.port = int(port)
        path = getattr(app, "path", None) or "/mcp"
        self.url = f"http://{self.host if ':' not in self.host else '[' + self.host + ']'}:{self.port}{path}"

    @property
    def backlog(self) -> int:
        """The listen backlog (connections the kernel queues before they are accepted)."""
        return self._httpd.request_queue_size

    @property
    def active_connections(self) -> int:
        """Connections being served now (each holds a thread)."""
        return self._httpd.active_connections

    @property
    def peak_connections(self) -> int:
        """The most connections served at once so far (never above ``max_connections``)."""
        return self._httpd.peak_connections

    def stop(self) -> None:
        """Close every session (if the app is an :class:`~mcp_sync.http.wsgi_app.McpWsgiApp`, or has ``close()``),
        stop serving, and join the server thread. An MCP app mounted inside another WSGI
        app (Flask, say) is closed by its owner: call its ``close()`` too."""
        close = getattr(self.app, "close", None)
        if callable(close):
            close()
        if self._serving:
            self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(5)

    def serve_forever(self) -> None:
        """Serve in this thread until :meth:`stop` (from another thread) or Ctrl-C."""
        self._serving = True
        self._httpd.serve_forever(poll_interval=0.1)

    def __enter__(self) -> HttpServerHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_http(
    app: McpWsgiApp | WsgiApp,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    in_thread: bool = True,
    backlog: int = DEFAULT_BACKLOG,
    read_timeout: float = DEFAULT_READ_TIMEOUT,
    max_connections: int = DEFAULT_MAX_CONNECTIONS,
    allowed_hosts: Sequence[str] | None = None,
) -> HttpServerHandle:
    """Serve ``app`` (an :class:`~mcp_sync.http.wsgi_app.McpWsgiApp`, or any WSGI app that mounts one) with the
    standard library's threaded WSGI server (one thread per connection). ``port=0`` picks a
    free port; the handle's ``url`` says which. Binds to 127.0.0.1 unless told otherwise.

    Args:
        backlog: connections the kernel queues before they are accepted.
        read_timeout: seconds a connection has to send its whole request; then it is closed.
        max_connections: connections served at once; more wait in the backlog.
        allowed_hosts: bound to a loopback address, the server answers only requests whose
            ``Host`` is a loopback name, the bound address, one of these, or one of the
            app's own ``allowed_hosts`` (421 otherwise; ``["*"]`` turns the check off).
            Bound elsewhere, ``Host`` is left to the app.
    """
    httpd = _ThreadingWSGIServer(
        (host, port),
        _QuietHandler,
        backlog=backlog,
        read_timeout=read_timeout,
        max_connections=max_connections,
    )
    try:
        if _is_loopback(host):
            own = getattr(app, "allowed_hosts", None)
            bound = str(httpd.server_address[0])
            bound_name = f"[{bound}]" if ":" in bound else bound
            hosts = HostAllowList([bound_name, *(allowed_hosts or ()), *(own or ())])
            httpd.set_app(app if hosts.any_host else _HostGuard(app, hosts))
        else:
            httpd.set_app(app)
    except BaseException:
        httpd.server_close()
        raise
    thread = None
    if in_thread:
        thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.1},
            name="mcp_sync-http-server",
            daemon=True,
        )
        thread.start()
    return HttpServerHandle(httpd, app, thread)
