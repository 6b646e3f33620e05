"""Streamable HTTP (revision 2025-11-25) as a WSGI application, and a threaded server for it.

:class:`McpWsgiApp` is a plain WSGI application: mount it in Flask (or any WSGI framework)
at a path, or run it with any threaded WSGI server (gunicorn with threads, waitress, or
:func:`~mcp_sync.http.embedded_server.serve_http`, the standard library's ``wsgiref`` with one
thread per connection, which this module re-exports).

* ``POST`` carries one JSON-RPC message. A request is answered with an SSE stream (or with
  JSON when the client accepts only JSON) that ends with the response; notifications and
  responses get ``202 Accepted``. A stream that ends within :data:`QUICK_ANSWER_WINDOW` (a
  quick call) is sent whole with a ``Content-Length``, so that the WSGI server keeps the
  connection open for the next request.
* ``GET`` opens the session's standalone SSE stream (server-to-client messages that belong
  to no request); ``Last-Event-ID`` resumes any stream from a bounded replay buffer. A
  request stream that ended with nothing left to replay (answered, or cancelled: it never
  gets an answer) is answered ``204`` (SSE's "stop reconnecting"); an unknown event id gets
  ``400``, never ``404``, which would tell the client that its session is gone.
* ``DELETE`` ends the session at once: its running handlers are cancelled and finish on
  their own (on the app's shared pool), whether or not they watch their token.
* Handlers of every session run on **one bounded pool shared by the app**
  (``max_workers``); an idle session owns no thread. At most ``max_sessions`` sessions
  live at once: beyond that ``initialize`` gets ``503``.
* At revision 2025-03-26 a POST may carry a JSON-RPC batch (an array): its requests are
  answered with one JSON array, a batch of notifications and responses with ``202``.
  Later revisions do not allow batches: they get ``400`` and -32600.
* ``Mcp-Session-Id`` is issued at ``initialize`` (cryptographically random); an unknown or
  ended session gets 404, a missing one 400. ``MCP-Protocol-Version`` must be one we speak.
* ``cors=True`` lets browser-based clients of the allowed origins read the answers
  (:mod:`mcp_sync.http.cors`); a CORS preflight is answered before any authentication.
* ``Origin`` is validated (403): localhost origins are allowed by default. ``Host`` is
  checked (421) when ``allowed_hosts`` is given, and by
  :func:`~mcp_sync.http.embedded_server.serve_http` bound to loopback.
* A POSTed ``notifications/cancelled`` cancels the request in *that session only*: the
  handler's token fires and the request's stream ends with no response. A client that
  disconnects does not cancel anything (2025-11-25), and leaks nothing.
* A POST carrying a 2026-07-28 request (its body's envelope, or an ``MCP-Protocol-Version``
  of 2026-07-28) is served statelessly (:mod:`mcp_sync.http.stateless`): no session, its
  routing headers checked against the body (:mod:`mcp_sync.http.routing_headers`, and
  ``Mcp-Param-*``: :mod:`mcp_sync.http.param_headers`); its progress and log messages go on
  its SSE stream before its answer; ``subscriptions/listen`` is an SSE stream held open (at
  most ``max_listen_streams``); a JSON-answered call notices a disconnect where the WSGI
  server allows (:mod:`mcp_sync.http.disconnect`). ``modern_only=True`` serves nothing else
  (``GET``/``DELETE``: ``405``).
"""

from __future__ import annotations

import json
import logging
import math
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ..jsonrpc import (
    INVALID_REQUEST,
    PARSE_ERROR,
    ErrorResponse,
    InvalidMessage,
    Message,
    Notification,
    Request,
    RequestId,
    decode,
    decode_object,
    encode,
    id_key,
    parse_first,
)
from ..lifecycle import HANDSHAKE_VERSIONS
from ..protocol import CANCELLED_METHOD as CANCELLED
from ..transports.batching import BATCH_REVISIONS, EMPTY_BATCH, split_batch
from ..workers import DEFAULT_WAIT_WARNING, PoolStats, WorkerPool
from .bearer import AuthRefusal, BearerAuth, owner_of, principal_of
from .checks import HostAllowList, Refusal, check_content_type, read_body
from .cors import exposing, is_preflight, preflight_headers
from .listen_slots import DEFAULT_MAX_LISTEN_STREAMS, ListenSlots
from .modern_post import ModernAnswers
from .param_headers import check_param_headers
from .responses import SERVER_BUSY, StartResponse
from .responses import SSE_HEADERS as _SSE_HEADERS
from .responses import StandaloneBody as _StandaloneBody
from .responses import json_answer as _json
from .responses import jsonrpc_error as _jsonrpc_error
from .responses import plain as _plain
from .responses import refusal_answer as _refuse
from .routing_headers import check_routing_headers
from .session_transport import HttpSessionTransport
from .sse import EventStream, parse_event_id
from .stateless import handshake_refusal, is_modern_post, refuse

if TYPE_CHECKING:  # pragma: no cover
    from ..server import Server, ServerSession

__all__ = [
    "McpWsgiApp",
    "AppStats",
    "AuthHook",
    "DEFAULT_MAX_SESSIONS",
    "DEFAULT_MAX_WORKERS",
    "DEFAULT_MAX_QUEUED",
    "DEFAULT_MAX_SESSION_REQUESTS",
]

_log = logging.getLogger("mcp_sync.http")

AuthHook = Callable[[dict[str, Any]], Any]
"""Called as ``auth(environ)``. Return ``None``/``True`` to allow, ``False`` for 401, or an
HTTP status (401 or 403) to refuse; it may also raise :class:`PermissionError` (403)."""

QUICK_ANSWER_WINDOW = 0.005
"""Seconds a request's SSE answer is held back; a stream that ends within it (a quick
call) is sent whole, with a ``Content-Length``, which keeps the connection reusable."""

_LOCAL_HOSTS = {"localhost", "127.0.0.1", "[::1]", "::1"}

STREAM_LIFETIME = 300.0
"""Default seconds a standalone (GET) stream stays open before the server closes it."""

MAX_STANDALONE_STREAMS = 8
"""Default cap on standalone (GET) streams open at once, per app."""

STREAM_RETRY = 2.0
"""Default seconds in the SSE ``retry:`` hint sent on closing a standalone stream."""

DEFAULT_MAX_SESSIONS = 4096
"""Sessions one :class:`McpWsgiApp` keeps at once (``max_sessions``)."""

DEFAULT_MAX_WORKERS = 64
"""Threads of the handler pool one :class:`McpWsgiApp` shares between its sessions."""

DEFAULT_MAX_QUEUED = 1024
"""Requests that may wait for a worker of the shared pool before more are refused."""

DEFAULT_MAX_SESSION_REQUESTS = 128
"""Requests one session may have in flight (queued or running) before more are refused."""


@dataclass(frozen=True)
class AppStats:
    """A snapshot of an :class:`McpWsgiApp` (see :meth:`McpWsgiApp.stats`).

    Attributes:
        sessions: live sessions.
        max_sessions: the session cap.
        inbound_in_flight: client requests queued or running, summed over the sessions.
        outbound_in_flight: server-to-client requests awaiting an answer, summed.
        open_streams: SSE responses being sent right now (request streams and ``GET``
            streams): each holds a thread of the WSGI server.
        dropped: messages from clients ignored on purpose (a cancellation of an unknown
            or finished request, a late response, ...), summed over the live sessions
            (see :attr:`Endpoint.dropped <mcp_sync.endpoint.Endpoint.dropped>`).
        pool: the shared handler pool (its ``queued`` tasks wait for a worker, its ``busy``
            workers run handlers -- including cancelled ones of ended sessions that have
            not noticed their cancellation yet).
    """

    sessions: int
    max_sessions: int
    inbound_in_flight: int
    outbound_in_flight: int
    open_streams: int
    dropped: int
    pool: PoolStats


class _HttpSession:
    def __init__(self, session: ServerSession, transport: HttpSessionTransport, now: float) -> None:
        self.session = session
        self.transport = transport
        self.get_lock = threading.Lock()
        self.get_active = 0  # GET responses iterating the standalone stream
        self.last_seen = now
        self.owner: str | None = None  # the principal key it is bound to (BearerAuth)

    def busy(self) -> bool:
        """True while a request runs or a client reads one of the session's streams."""
        return self.session.endpoint.in_flight()[0] > 0 or self.transport.has_consumers()


class McpWsgiApp:
    """A WSGI application serving one :class:`~mcp_sync.server.Server` over Streamable HTTP.

    Args:
        server: the server definition.
        path: serve only this path (``None``: any path, as when mounted under a prefix).
        allowed_origins: ``Origin`` values allowed besides localhost ones; ``["*"]`` allows
            any origin. Requests without ``Origin`` (non-browser clients) are allowed.
        allowed_hosts: check ``Host`` (421 when it is not allowed; a defence against DNS
            rebinding): loopback names and these (``"name"``, ``"name:port"``; ``["*"]``:
            any). ``None`` (the default): the app does not check ``Host`` itself -- it
            cannot know where its server is bound, and behind a proxy ``Host`` is a public
            name; :func:`~mcp_sync.http.embedded_server.serve_http` bound to loopback checks it for
            the app. Pass ``[]`` under another server bound to loopback to allow loopback
            names only.
        auth: a :class:`~mcp_sync.http.bearer.BearerAuth` (OAuth bearer tokens, as the MCP
            authorization spec has them: see :doc:`/howto/protect-flask`), or a raw
            :data:`AuthHook` run before anything else. Neither sees a CORS preflight
            (a browser sends it without credentials): it is answered as ``cors`` says.
        cors: answer CORS for browser-based clients of the origins the ``Origin`` check
            allows (localhost ones and ``allowed_origins``): a preflight gets ``204`` with
            ``Access-Control-Allow-*`` headers, every other answer (a ``401`` included)
            ``Access-Control-Allow-Origin`` and ``Access-Control-Expose-Headers`` naming
            ``Mcp-Session-Id``, ``MCP-Protocol-Version``, ``WWW-Authenticate`` and
            ``Retry-After`` (:mod:`mcp_sync.http.cors`). ``False`` (the default): no CORS
            headers, and a preflight gets ``405`` like any ``OPTIONS``.
        max_body_bytes: larger POST bodies get 413 (with ``Content-Length`` or, under a
            server that decodes chunked bodies, as soon as more arrived).
        json_response: answer requests with JSON instead of SSE.
        keepalive: seconds between keep-alive comments on idle SSE streams.
        replay: events kept per stream for ``Last-Event-ID`` resumption.
        request_timeout: longest wait for a JSON answer, in seconds.
        session_timeout: a session that has seen no request for this many seconds, runs no
            request and has no stream open is closed (``None``: sessions live until
            ``DELETE`` or :meth:`close`). Clients that vanish without ``DELETE`` would
            otherwise keep their sessions for ever.
        stream_lifetime: seconds a standalone (GET) stream stays open; then the server
            sends an SSE ``retry:`` hint and closes it, and the client reconnects with
            ``Last-Event-ID`` (nothing is lost: the replay buffer keeps what comes
            meanwhile). Frees the WSGI thread an idle stream holds. ``None``: no limit.
        max_standalone_streams: standalone streams open at once, over all sessions; a GET
            beyond it gets ``503`` with ``Retry-After`` (the server is busy, not the client
            misbehaving). Keep it below the WSGI server's thread count.
        stream_retry: seconds in the ``retry:`` hint and the 503's ``Retry-After``.
        modern_json_window: seconds a 2026-07-28 request's answer is awaited as plain JSON;
            a call that runs longer (and whose client accepts SSE) is answered as SSE with
            keep-alive comments every ``keepalive`` seconds, so that a client closing the
            stream cancels the handler.
        modern_only: serve protocol 2026-07-28 only: every POST is served statelessly,
            ``initialize`` is refused (-32022), and ``GET``/``DELETE`` get ``405``.
        max_listen_streams: 2026-07-28 ``subscriptions/listen`` streams open at once (each
            holds a thread of the WSGI server for its lifetime); one more gets ``503`` with
            ``Retry-After`` and a -32000 error. Keep it below the WSGI server's thread count.
        max_sessions: live sessions at most; one more ``initialize`` gets ``503`` (after
            idle sessions have been expired to make room).
        max_workers: threads of the one handler pool that every session shares. Threads
            start on demand and exit when idle.
        worker_wait_warning: a request that waits longer than this many seconds for a free
            worker is logged as a warning (``None``: never).
        max_queued: requests that may wait for a free worker, over all sessions. A request
            that finds this many waiting is not started: it is answered at once with
            JSON-RPC error -32000 (``initialize`` with ``503``), and its session goes on.
        max_session_requests: requests one session may have in flight (queued or
            running); one more is refused the same way. It keeps one session from taking
            the whole queue.
        shutdown_grace: seconds :meth:`close` gives running handlers to notice their
            cancellation -- in total, however many sessions there are.
    """

    def __init__(
        self,
        server: Server,
        *,
        path: str | None = None,
        allowed_origins: Sequence[str] | None = None,
        allowed_hosts: Sequence[str] | None = None,
        auth: BearerAuth | AuthHook | None = None,
        cors: bool = False,
        max_body_bytes: int = 4 * 1024 * 1024,
        json_response: bool = False,
        keepalive: float = 15.0,
        replay: int = 256,
        request_timeout: float = 300.0,
        session_timeout: float | None = 3600.0,
        max_sessions: int = DEFAULT_MAX_SESSIONS,
        max_workers: int = DEFAULT_MAX_WORKERS,
        max_queued: int = DEFAULT_MAX_QUEUED,
        max_session_requests: int = DEFAULT_MAX_SESSION_REQUESTS,
        worker_wait_warning: float | None = DEFAULT_WAIT_WARNING,
        shutdown_grace: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
        stream_lifetime: float | None = STREAM_LIFETIME,
        max_standalone_streams: int = MAX_STANDALONE_STREAMS,
        stream_retry: float = STREAM_RETRY,
        modern_json_window: float = 1.0,
        modern_only: bool = False,
        max_listen_streams: int = DEFAULT_MAX_LISTEN_STREAMS,
    ) -> None:
        self.server = server
        self.path = path
        self.allowed_origins = set(allowed_origins or ())
        self.allowed_hosts = None if allowed_hosts is None else list(allowed_hosts)
        self._hosts = None if allowed_hosts is None else HostAllowList(allowed_hosts)
        self.auth = auth
        self.cors = cors
        """Whether browsers of the allowed origins may read the answers (CORS)."""
        self.bearer = auth if isinstance(auth, BearerAuth) else None
        """The OAuth resource-server guard (``None``: no bearer tokens checked)."""
        self.max_body_bytes = max_body_bytes
        self.json_response = json_response
        self.keepalive = keepalive
        self.replay = replay
        self.request_timeout = request_timeout
        self.session_timeout = session_timeout
        if max_sessions < 1:
            raise ValueError("max_sessions must be at least 1")
        self.max_sessions = max_sessions
        self.shutdown_grace = shutdown_grace
        self.max_queued = max_queued
        self.max_session_requests = max_session_requests
        self.pool = WorkerPool(max_workers, "mcp_sync-http", wait_warning=worker_wait_warning)
        """The handler pool shared by every session."""
        self._clock = clock
        self._next_sweep = clock()
        self._next_reclaim = clock()
        self._lock = threading.Lock()
        self._sessions: dict[str, _HttpSession] = {}
        self._stopping = threading.Event()
        self.stream_lifetime = stream_lifetime
        self.max_standalone_streams = max_standalone_streams
        self.stream_retry = stream_retry
        self._streams_lock = threading.Lock()
        self._standalone_open = 0
        self.modern_only = modern_only
        self.modern_json_window = modern_json_window
        self.listen_slots = ListenSlots(max_listen_streams)
        """The bound on open 2026-07-28 ``subscriptions/listen`` streams (each holds a thread
        of the WSGI server)."""
        self._modern = ModernAnswers(self, self._stopping)

    # -- sessions -----------------------------------------------------------------------------
    @property
    def standalone_streams(self) -> int:
        """How many standalone (GET) streams are open now."""
        with self._streams_lock:
            return self._standalone_open

    def sessions(self) -> list[ServerSession]:
        """The live sessions."""
        with self._lock:
            return [s.session for s in self._sessions.values()]

    def stats(self) -> AppStats:
        """Counts for monitoring: sessions, requests in flight, streams, the shared pool."""
        with self._lock:
            entries = list(self._sessions.values())
        inbound = outbound = streams = dropped = 0
        for entry in entries:
            endpoint = entry.session.endpoint
            ins, outs = endpoint.in_flight()
            inbound += ins
            outbound += outs
            dropped += sum(dict(endpoint.dropped).values())  # dict(): one atomic copy
            streams += entry.transport.open_streams()
        return AppStats(
            sessions=len(entries),
            max_sessions=self.max_sessions,
            inbound_in_flight=inbound,
            outbound_in_flight=outbound,
            open_streams=streams,
            dropped=dropped,
            pool=self.pool.stats(),
        )

    def close(self, grace: float | None = None) -> list[threading.Thread]:
        """End every session and every open stream, and stop the handler pool.

        Every running handler is cancelled; together they get ``grace`` seconds
        (``shutdown_grace`` by default) to finish -- one grace period in all, not one per
        session. Returns the worker threads still running after that (handlers that ignore
        their cancellation; they are logged, and finish on their own). Later requests get
        ``503`` (``initialize``) or ``404`` (the sessions are gone).
        """
        end = time.monotonic() + (self.shutdown_grace if grace is None else grace)
        self._stopping.set()
        with self._lock:
            sessions, self._sessions = list(self._sessions.values()), {}
        for entry in sessions:  # cancel everything first, waiting for nothing
            entry.session.endpoint.close(join=False)
        stuck = self.pool.shutdown(max(0.0, end - time.monotonic()))
        for entry in sessions:  # then join what each session started (callback threads)
            entry.session.close(max(0.0, end - time.monotonic()))
        if stuck:
            _log.warning("handlers still running after close: %s", [t.name for t in stuck])
        return stuck

    def _new_session(self) -> _HttpSession | None:
        """A new session, or ``None`` when ``max_sessions`` are live (or the app closed)."""
        if len(self._sessions) >= self.max_sessions and self._clock() >= self._next_reclaim:
            # make room if some have expired; at most once a second, so that a flood of
            # refused initialize requests does not scan every session each time
            self._next_reclaim = self._clock() + 1.0
            self.expire_idle_sessions()
        session_id = secrets.token_urlsafe(32)
        transport = HttpSessionTransport(session_id, replay=self.replay)
        with self._lock:
            if len(self._sessions) >= self.max_sessions or self._stopping.is_set():
                return None
            session = self.server.connect(transport, read=False, pool=self.pool, batches=False)
            entry = _HttpSession(session, transport, self._clock())
            self._sessions[session_id] = entry
        session.add_close_callback(lambda: self._forget(session_id))
        return entry

    @staticmethod
    def _end_session(entry: _HttpSession) -> None:
        """Close a session without waiting: its handlers are cancelled and finish on their own."""
        entry.session.endpoint.close(join=False)

    def _forget(self, session_id: str) -> None:
        with self._lock:
            self._sessions.pop(session_id, None)

    def expire_idle_sessions(self) -> int:
        """Close the sessions idle for longer than ``session_timeout``; returns how many.

        Runs by itself as requests arrive (at most every few seconds); call it from a timer
        to reclaim sessions on a server that gets no traffic at all.
        """
        if self.session_timeout is None:
            return 0
        now = self._clock()
        idle: list[tuple[str, _HttpSession]] = []
        with self._lock:
            for sid, entry in self._sessions.items():
                if entry.busy():
                    entry.last_seen = now  # idle time counts from the end of the last activity
                elif now - entry.last_seen > self.session_timeout:
                    idle.append((sid, entry))
            for sid, _ in idle:
                del self._sessions[sid]
        for _, entry in idle:
            _log.info("closing MCP session idle for more than %g s", self.session_timeout)
            self._end_session(entry)
        return len(idle)

    def _sweep(self) -> None:
        if self.session_timeout is None:
            return
        now = self._clock()
        with self._lock:
            if now < self._next_sweep:
                return
            self._next_sweep = now + min(10.0, self.session_timeout / 4)
        self.expire_idle_sessions()

    # -- WSGI ---------------------------------------------------------------------------------
    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        if self.bearer is not None and self.bearer.is_metadata_path(environ):
            method = environ.get("REQUEST_METHOD", "GET")
            return self.bearer.serve_metadata(start_response, self.server, method, environ)
        if self.path is not None and environ.get("PATH_INFO", "") not in (
            self.path,
            self.path.rstrip("/") + "/",
        ):
            return _plain(start_response, "404 Not Found", "not found")
        refusal = self._check_host(environ) or self._check_origin(environ)
        if refusal is not None:
            return refusal(start_response)
        if is_preflight(environ):  # never authenticated: a browser sends it without credentials
            return self._preflight(environ, start_response)
        origin = environ.get("HTTP_ORIGIN")
        if self.cors and origin is not None:
            start_response = exposing(start_response, origin)
        refusal = self._check_auth(environ)
        if refusal is not None:
            return refusal(start_response)
        self._sweep()
        method = environ.get("REQUEST_METHOD", "GET")
        if method == "POST":
            return self._post(environ, start_response)
        if method == "GET" and not self.modern_only:
            return self._get(environ, start_response)
        if method == "DELETE" and not self.modern_only:
            return self._delete(environ, start_response)
        return self._method_not_allowed(start_response)

    def _allowed_methods(self) -> str:
        return "POST" if self.modern_only else "GET, POST, DELETE"

    def _method_not_allowed(self, start_response: StartResponse) -> Iterable[bytes]:
        text = (
            "protocol 2026-07-28 is served by POST only"
            if self.modern_only
            else "use POST, GET or DELETE"
        )
        allow = [("Allow", self._allowed_methods())]
        return _plain(start_response, "405 Method Not Allowed", text, allow)

    def _preflight(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        """A CORS preflight (from an origin the ``Origin`` check allowed): ``204`` with the
        CORS headers under ``cors=True``, else the ``405`` of any ``OPTIONS``."""
        if not self.cors:
            return self._method_not_allowed(start_response)
        headers = preflight_headers(environ, environ["HTTP_ORIGIN"], self._allowed_methods())
        start_response("204 No Content", [*headers, ("Content-Length", "0")])
        return [b""]

    def _check_host(
        self, environ: dict[str, Any]
    ) -> Callable[[StartResponse], Iterable[bytes]] | None:
        refusal = None if self._hosts is None else self._hosts.check(environ.get("HTTP_HOST"))
        return None if refusal is None else _refuse(refusal)

    def _check_origin(
        self, environ: dict[str, Any]
    ) -> Callable[[StartResponse], Iterable[bytes]] | None:
        origin = environ.get("HTTP_ORIGIN")
        if origin is None or "*" in self.allowed_origins or origin in self.allowed_origins:
            return None
        host = urlsplit(origin).hostname
        if host is not None and (host in _LOCAL_HOSTS or f"[{host}]" in _LOCAL_HOSTS):
            return None
        return lambda sr: _plain(sr, "403 Forbidden", f"origin {origin} is not allowed")

    def _check_auth(
        self, environ: dict[str, Any]
    ) -> Callable[[StartResponse], Iterable[bytes]] | None:
        if self.bearer is not None:
            verdict = self.bearer.authenticate(environ)
            return verdict.respond if isinstance(verdict, AuthRefusal) else None
        hook = self.auth
        if hook is None or isinstance(hook, BearerAuth):
            return None
        try:
            verdict = hook(environ)
        except PermissionError as exc:
            detail = str(exc) or "forbidden"  # `exc` is unbound once the except block ends
            return lambda sr: _plain(sr, "403 Forbidden", detail)
        if verdict is None or verdict is True:
            return None
        if verdict is False or verdict == 401:
            return lambda sr: _plain(
                sr, "401 Unauthorized", "authentication required", [("WWW-Authenticate", "Bearer")]
            )
        if verdict == 403:
            return lambda sr: _plain(sr, "403 Forbidden", "forbidden")
        return lambda sr: _plain(sr, f"{int(verdict)} Refused", "refused")

    def _check_scopes(self, environ: dict[str, Any], message: Any) -> AuthRefusal | None:
        """The ``403 insufficient_scope`` of a request whose token lacks what its target
        needs (see :meth:`BearerAuth.check_request`); ``None`` without ``BearerAuth``."""
        return (
            None
            if self.bearer is None
            else self.bearer.check_request(environ, message, self.server)
        )

    def _session_for(
        self,
        environ: dict[str, Any],
        start_response: StartResponse,
        request_id: RequestId | None = None,
    ) -> tuple[_HttpSession | None, Iterable[bytes] | None]:
        """The session a request names, or the refusal to send (echoing ``request_id``,
        the id of the POSTed request, when there is one)."""
        session_id = environ.get("HTTP_MCP_SESSION_ID")
        if not session_id:
            return None, _jsonrpc_error(
                start_response,
                "400 Bad Request",
                INVALID_REQUEST,
                "Missing Mcp-Session-Id header",
                request_id,
            )
        with self._lock:
            entry = self._sessions.get(session_id)
        if entry is None or entry.session.closed or entry.owner != owner_of(environ):
            # another principal's session does not exist for this one (keyed by both)
            return None, _jsonrpc_error(
                start_response, "404 Not Found", INVALID_REQUEST, "Session not found", request_id
            )
        entry.last_seen = self._clock()
        version = environ.get("HTTP_MCP_PROTOCOL_VERSION")
        if version is not None and version not in HANDSHAKE_VERSIONS:
            return None, _jsonrpc_error(
                start_response,
                "400 Bad Request",
                INVALID_REQUEST,
                f"Unsupported MCP-Protocol-Version: {version}",
                request_id,
            )
        return entry, None

    def _post(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        unsupported = check_content_type(environ.get("CONTENT_TYPE"))
        if unsupported is not None:
            return _refuse(unsupported)(start_response)
        accept = environ.get("HTTP_ACCEPT", "*/*").lower()
        wants_sse = "text/event-stream" in accept or "*/*" in accept
        wants_json = "application/json" in accept or "*/*" in accept
        if not wants_sse and not wants_json:
            return _plain(
                start_response,
                "406 Not Acceptable",
                "Accept must list application/json and text/event-stream",
            )
        body = read_body(environ, self.max_body_bytes)
        if isinstance(body, Refusal):
            return _refuse(body)(start_response)
        try:
            # the endpoint's own parser first: a message it parses is decoded exactly as the
            # endpoint would decode it, and handed on (``decoded``) instead of parsed again
            parsed = parse_first(body)
            decoded = True
        except ValueError:  # anything else is judged as it always was, and parsed again
            decoded = False
        try:
            if not decoded:
                parsed = json.loads(body)
            message = None if type(parsed) is list else decode_object(parsed)
        except RecursionError:  # nested deeper than MAX_NESTING_DEPTH: refused with its id
            message = decode(body)
        except (ValueError, UnicodeDecodeError):
            return _jsonrpc_error(start_response, "400 Bad Request", PARSE_ERROR, "Parse error")
        if message is None:
            return self._post_batch(parsed, environ, start_response)
        if isinstance(message, InvalidMessage):
            reply = message.reply or ErrorResponse(None, INVALID_REQUEST, message.detail)
            return _json(start_response, "400 Bad Request", encode(reply))
        forbidden = self._check_scopes(environ, message)
        if forbidden is not None:
            return forbidden.respond(start_response)
        method = message.method if isinstance(message, Request) else None
        if isinstance(message, (Request, Notification)) and (
            self.modern_only or is_modern_post(environ, message.params, method)
        ):
            return self._post_modern(environ, message, body, start_response, wants_sse, decoded)
        is_initialize = isinstance(message, Request) and message.method == "initialize"
        entry: _HttpSession | None
        if is_initialize:
            assert isinstance(message, Request)
            busy = self._busy_reply(message)
            if busy is not None:
                return _json(
                    start_response, "503 Service Unavailable", busy, [("Retry-After", "5")]
                )
            entry = self._new_session()
            if entry is None:
                return self._refuse_session(start_response, message.id)
            entry.owner = owner_of(environ)
        else:
            entry, refusal = self._session_for(
                environ, start_response, message.id if isinstance(message, Request) else None
            )
            if refusal is not None:
                return refusal
            busy = self._busy_reply(message, entry) if isinstance(message, Request) else None
            if busy is not None:  # an answer, not an HTTP error: the session goes on
                return _json(start_response, "200 OK", busy)
        assert entry is not None
        line = body.replace(b"\n", b" ")
        if not isinstance(message, Request):
            self._deliver(entry, message, line, decoded)
            return _plain(start_response, "202 Accepted", "")
        json_mode = self.json_response or not wants_sse
        stream = entry.transport.open_request_stream(
            message.id, json_mode=json_mode, principal=principal_of(environ)
        )
        if stream is None:
            return _jsonrpc_error(
                start_response,
                "409 Conflict",
                INVALID_REQUEST,
                "request id is already in use",
                message.id,
            )
        self._deliver(entry, message, line, decoded)
        headers = [("Mcp-Session-Id", entry.transport.session_id)] if is_initialize else []
        if json_mode:
            data = self._json_answer(entry, message.id, stream, self.request_timeout)
            if data is None:
                return _plain(start_response, "204 No Content", "", headers)  # cancelled: no answer
            return _json(start_response, "200 OK", data, headers)
        if stream.wait_ended(QUICK_ANSWER_WINDOW):
            # answered at once: the same events, sent with a length, so that the connection
            # stays open for the next request (a WSGI server closes it after a body of
            # unknown length)
            body = b"".join(stream.events(0, keepalive=self.keepalive))
            start_response("200 OK", [*_SSE_HEADERS, ("Content-Length", str(len(body))), *headers])
            return [body]
        start_response(
            "200 OK",
            [*_SSE_HEADERS, *headers],
        )
        return stream.events(
            0, keepalive=self.keepalive, stop=self._stopping
        )  # first: a priming event, which sends the headers at once

    def _post_modern(
        self,
        environ: dict[str, Any],
        message: Request | Notification,
        body: bytes,
        start_response: StartResponse,
        wants_sse: bool,
        decoded: bool = False,
    ) -> Iterable[bytes]:
        """A 2026-07-28 message, served statelessly: no session, no ``Mcp-Session-Id``,
        ``Last-Event-ID`` ignored. A notification is accepted (``202``) and dropped: at
        2026-07-28 none of them asks anything of a server over HTTP. A request answered
        within ``modern_json_window`` gets JSON; a longer one SSE, where closing the stream
        cancels it."""
        if not isinstance(message, Request):
            return _plain(start_response, "202 Accepted", "")
        error = (
            handshake_refusal(message)
            or check_routing_headers(environ, message.method, message.params)
            or check_param_headers(environ, self.server, message.method, message.params)
        )
        if error is not None:
            answer = refuse(message, error)
            return _json(start_response, answer.status, answer.body)
        busy = self._busy_reply(message)
        if busy is not None:
            return _json(start_response, "503 Service Unavailable", busy, [("Retry-After", "5")])
        if self._stopping.is_set():
            return _jsonrpc_error(
                start_response,
                "503 Service Unavailable",
                SERVER_BUSY,
                "the server is shutting down",
                message.id,
            )
        return self._modern.serve(environ, message, body, start_response, wants_sse, decoded)

    @staticmethod
    def _deliver(entry: _HttpSession, message: Message, line: bytes, decoded: bool = False) -> None:
        """Hand one message to the session. A cancellation whose request has not arrived
        yet (it overtook it on another connection) is kept until it does; a request is
        followed by such a cancellation, if one came first. ``decoded``: ``message`` is
        what the endpoint would decode ``line`` to (see :func:`~mcp_sync.jsonrpc.parse_first`),
        so it is handed on as it is."""
        if (
            isinstance(message, Notification)
            and message.method == CANCELLED
            and isinstance(message.params, dict)
        ):
            if not entry.transport.cancel_arrived(message.params.get("requestId"), line):
                return  # kept until its request arrives
        if decoded:
            entry.session.endpoint.receive_decoded(line, message)
        else:
            entry.session.endpoint.receive_line(line)
        if isinstance(message, Request):
            early_cancel = entry.transport.request_received(message.id)
            if early_cancel is not None:
                entry.session.endpoint.receive_line(early_cancel)

    def _json_answer(
        self, entry: _HttpSession, request_id: RequestId, stream: EventStream, timeout: float
    ) -> bytes | None:
        """Wait for the response to a JSON-mode request; ``None`` when it was cancelled.

        When ``timeout`` passes first, the POST can carry no answer any more, so the
        request is cancelled exactly as if the client had asked."""
        data = stream.wait_for_event(timeout)
        if data is None and not stream.ended:
            reason = f"no answer within the server's request_timeout of {self.request_timeout:g} s"
            entry.session.endpoint.receive_line(
                encode(Notification(CANCELLED, {"requestId": request_id, "reason": reason}))
            )
        return data

    def _busy_reply(
        self, message: Request, entry: _HttpSession | None = None, ahead: int = 0
    ) -> bytes | None:
        """The error that refuses ``message`` when ``max_queued`` requests wait for a worker
        already, or its session has ``max_session_requests`` in flight; ``None`` when it may
        go on. ``ahead``: requests admitted just before it and not counted yet (earlier
        elements of its batch). ``ping`` never waits for a worker."""
        if message.method == "ping":
            return None
        detail = None
        if (
            entry is not None
            and entry.session.endpoint.in_flight()[0] + ahead >= self.max_session_requests
        ):
            detail = f"too many requests in flight in this session (max_session_requests={self.max_session_requests})"
        else:
            queued = self.pool.queued() + ahead
            if queued >= self.max_queued:
                detail = f"server busy: {queued} requests wait for a worker (max_queued={self.max_queued}); try again later"
        if detail is None:
            return None
        _log.debug("refused %s: %s", message.method, detail)
        return encode(ErrorResponse(message.id, SERVER_BUSY, detail))

    def _refuse_session(
        self, start_response: StartResponse, request_id: RequestId
    ) -> Iterable[bytes]:
        if self._stopping.is_set():
            detail = "the server is shutting down"
        else:
            detail = f"too many MCP sessions (max_sessions={self.max_sessions}); try again later"
        return _json(
            start_response,
            "503 Service Unavailable",
            encode(ErrorResponse(request_id, SERVER_BUSY, detail)),
            [("Retry-After", "5")],
        )

    def _post_batch(
        self, items: list[Any], environ: dict[str, Any], start_response: StartResponse
    ) -> Iterable[bytes]:
        """A JSON-RPC batch: allowed in sessions at revision 2025-03-26 only.

        Every element goes to the session in array order. The requests are answered
        together with one JSON array once each has been answered or cancelled (a cancelled
        one is left out; JSON-RPC lets the responses come in any order), always as JSON
        (revision 2025-03-26 lets the server choose JSON or SSE); a batch of notifications
        and responses gets ``202``.
        """
        entry, refusal = self._session_for(environ, start_response)
        if refusal is not None:
            return refusal
        assert entry is not None
        version = entry.session.protocol_version
        if version not in BATCH_REVISIONS:
            detail = f"JSON-RPC batches are not supported at protocol revision {version} (only at 2025-03-26)"
            return _jsonrpc_error(start_response, "400 Bad Request", INVALID_REQUEST, detail)
        if not items:
            return _jsonrpc_error(start_response, "400 Bad Request", INVALID_REQUEST, EMPTY_BATCH)
        for item in items if self.bearer is not None else ():
            forbidden = self._check_scopes(environ, decode_object(item))
            if forbidden is not None:
                return forbidden.respond(start_response)
        streams: dict[tuple[type, RequestId], EventStream] = {}

        def admit(request: Request) -> bytes | None:
            busy = self._busy_reply(request, entry, ahead=len(streams))
            if busy is not None:
                return busy
            stream = entry.transport.open_request_stream(
                request.id, json_mode=True, principal=principal_of(environ)
            )
            if stream is None:
                return encode(
                    ErrorResponse(request.id, INVALID_REQUEST, "request id is already in use")
                )
            streams[id_key(request.id)] = stream
            return None

        split = split_batch(items, admit)
        replies = split.replies  # in the order they are known; JSON-RPC allows any order
        waiting = [(request.id, streams[id_key(request.id)]) for request in split.requests]
        for message, line in zip(split.messages, split.lines, strict=True):
            self._deliver(entry, message, line)
        if not waiting and not replies:
            return _plain(start_response, "202 Accepted", "")
        end = time.monotonic() + self.request_timeout
        for request_id, stream in waiting:
            data = self._json_answer(entry, request_id, stream, max(0.0, end - time.monotonic()))
            if data is not None:
                replies.append(data)
        if not replies:
            return _plain(start_response, "204 No Content", "")  # every request was cancelled
        return _json(
            start_response, "200 OK", b"[" + b",".join(r.rstrip(b"\n") for r in replies) + b"]"
        )

    def _get(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        if "text/event-stream" not in environ.get("HTTP_ACCEPT", "").lower():
            return _plain(
                start_response, "406 Not Acceptable", "Accept must list text/event-stream"
            )
        entry, refusal = self._session_for(environ, start_response)
        if refusal is not None:
            return refusal
        assert entry is not None
        last = environ.get("HTTP_LAST_EVENT_ID")
        after: int | None = None
        if last:
            parsed = parse_event_id(last)
            stream = entry.transport.stream(parsed[0]) if parsed else None
            if stream is None or parsed is None:
                # not 404: to a client, 404 means "your session is gone"
                return _plain(start_response, "400 Bad Request", "unknown Last-Event-ID")
            if stream is not entry.transport.standalone:
                if stream.drained(parsed[1]):
                    # a request stream that ended (answered, or cancelled: no answer ever) and
                    # has nothing left to replay; 204 tells an SSE client to stop reconnecting
                    return _plain(start_response, "204 No Content", "")
                start_response("200 OK", list(_SSE_HEADERS))
                return stream.events(parsed[1], keepalive=self.keepalive, stop=self._stopping)
            after = parsed[1]
        with entry.get_lock:
            if not last and entry.get_active:  # a resumption may replace a stream still open
                return _plain(
                    start_response, "409 Conflict", "a GET stream is already open for this session"
                )
            entry.get_active += 1
        with self._streams_lock:
            full = self._standalone_open >= self.max_standalone_streams
            if not full:
                self._standalone_open += 1
        if full:
            with entry.get_lock:
                entry.get_active -= 1
            retry_after = str(max(1, math.ceil(self.stream_retry)))
            return _plain(
                start_response,
                "503 Service Unavailable",
                "too many open streams; try again later",
                [("Retry-After", retry_after)],
            )
        start_response("200 OK", list(_SSE_HEADERS))
        return _StandaloneBody(
            self._standalone_events(entry, after), lambda: self._release_stream(entry)
        )

    def _standalone_events(self, entry: _HttpSession, after: int | None) -> Iterator[bytes]:
        stream = entry.transport.standalone
        until = None if self.stream_lifetime is None else time.monotonic() + self.stream_lifetime
        yield from stream.events(after, keepalive=self.keepalive, stop=self._stopping, until=until)
        if not stream.ended and not self._stopping.is_set():
            # the lifetime is over, not the session: tell the client when to reconnect (with
            # Last-Event-ID, to miss nothing). A stream that ended with its session gets no
            # hint: there is nothing to come back to.
            yield b"retry: " + str(int(self.stream_retry * 1000)).encode() + b"\n\n"

    def _release_stream(self, entry: _HttpSession) -> None:
        with entry.get_lock:
            entry.get_active -= 1
        with self._streams_lock:
            self._standalone_open -= 1

    def _delete(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        entry, refusal = self._session_for(environ, start_response)
        if refusal is not None:
            return refusal
        assert entry is not None
        self._forget(entry.transport.session_id)
        self._end_session(entry)  # answers at once, even if a handler ignores its token
        return _plain(start_response, "200 OK", "")
