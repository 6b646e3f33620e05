"""The MCP client: blocking, typed calls that can be timed out and cancelled from any thread.

Example::

    from mcp_sync import Client

    with Client.stdio(["python", "server.py"]) as client:
        print([tool.name for tool in client.list_tools()])
        result = client.call_tool("slow", {"seconds": 10}, timeout=2)   # raises RequestTimeout

One client may be shared by many threads. Every call takes the
:class:`~mcp_sync.call_options.CallOptions`: ``timeout=`` (the call is then cancelled on the
wire and :class:`~mcp_sync.errors.RequestTimeout` raised; ``None`` waits for ever; left out,
``default_timeout`` applies) and ``cancel_token=`` (cancelling it cancels the call:
:class:`~mcp_sync.errors.Cancelled`).
Ctrl-C during a call cancels it on the wire, then propagates.

Protocol eras
-------------

A client speaks MCP 2026-07-28 with a server that does and 2025-11-25 (or older) with one
that does not; ``protocol=`` chooses (see :mod:`mcp_sync.negotiation`)::

    Client.stdio(cmd)                         # "auto": probe server/discover, else initialize
    Client.stdio(cmd, protocol="2026-07-28")  # 2026-07-28 only (no fallback)
    Client.stdio(cmd, protocol="legacy")      # initialize at once, no probe

:attr:`Client.protocol_version` and :attr:`Client.era` say what was chosen. The typed methods
are the same in both eras. At 2026-07-28:

* every request carries the envelope in ``params._meta``: the version, the client's
  capabilities (derived from ``roots``, ``sampling_handler`` and ``elicitation_handler``) and
  ``clientInfo`` (and ``logLevel`` with ``log_level=``);
* when ``tools/call``, ``prompts/get`` or ``resources/read`` answer ``input_required``, the
  same handlers that serve a 2025 server's requests answer the input requests and the call
  is retried with a new id, until its final result (:mod:`mcp_sync.input_driver`; at most
  ``max_input_rounds`` rounds). A handler's ``ctx.request_id`` is then the key of the input
  request, and its ``ctx.cancel_token`` fires when the call is cancelled or times out;
* the call's ``timeout`` bounds all its rounds; cancelling cancels the round in flight on the
  wire, or, between rounds, sends nothing;
* ``ping``, :meth:`~Client.set_logging_level`, :meth:`~Client.subscribe`,
  :meth:`~Client.unsubscribe` and the ``notifications/roots/list_changed`` notification are
  gone: they raise :class:`~mcp_sync.errors.FeatureRemoved` (:meth:`~Client.set_roots` only
  replaces the roots);
* a request from the server (there should be none) is dropped unanswered.

:meth:`Client.http` negotiates the same way: ``server/discover`` POSTed with the 2026-07-28
headers first; a 400 whose body is a 2026-07-28 error keeps 2026-07-28, anything else (a
404, a 405, an HTML page, a 400 of an older server) falls back to ``initialize``.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import pathlib
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel
from typing_extensions import Unpack

from . import deadlines
from ._caller_waits import send_and_wait
from .call_options import CallOptions
from .cancel import CancelToken
from .context import Context
from .endpoint import CancelObserver, Endpoint, EndpointStats, PendingCall
from .errors import (
    CapabilityError,
    ConnectionClosed,
    FeatureRemoved,
    HttpError,
    McpError,
    PeerMisbehaved,
    ServerExited,
    WaitTimeout,
)
from .input_driver import MAX_INPUT_ROUNDS, InputRoundsCall
from .jsonrpc import (
    METHOD_NOT_FOUND,
    UNSUPPORTED_PROTOCOL_VERSION,
    Notification,
    Request,
    RequestId,
)
from .lifecycle import (
    DISCOVER_METHOD,
    LATEST_HANDSHAKE_VERSION,
    LATEST_MODERN_VERSION,
    REMOVED_AT_MODERN,
    TASKS_EXTENSION,
    Era,
    RequestEnvelope,
    Role,
    State,
)
from .listen import DEFAULT_MAX_PENDING, ListenEvent, ListenRouter, Subscription, listen_params
from .negotiation import DISCOVER_TIMEOUT, ProtocolChoice, discovered_server, parse_protocol
from .protocol import InboundRequest
from .result_kinds import InputRequest
from .results import CLIENT_REQUEST_RESULTS, mcp_models, parser_for
from .session import LOG_LEVELS, Session
from .task_call import TaskCall, TaskState, list_all_tasks, start_task
from .transports.base import HandshakeOnlyTransport, Transport
from .transports.subprocess import StderrMode, SubprocessTransport
from .wire import model_to_wire
from .workers import MAX_QUEUED_CALLBACKS

if TYPE_CHECKING:  # pragma: no cover
    import httpx
    import mcp_types

    from .http.client_transport import ReconnectPolicy

__all__ = ["Client", "RequestHandlerFn", "INIT_TIMEOUT"]

INIT_TIMEOUT = 30.0
"""Default longest wait, in seconds, for the ``initialize`` handshake (``init_timeout``)."""

_log = logging.getLogger("mcp_sync.client")

RequestHandlerFn = Callable[[dict[str, Any], Context], Any]
"""A handler for a server-to-client request: ``handler(params, ctx) -> result``."""

Roots = Sequence[str | Mapping[str, Any]] | Callable[[], Sequence[str | Mapping[str, Any]]]


def _version() -> str:
    from ._version import __version__

    return __version__


def _dump(value: Any) -> Any:
    return model_to_wire(value, result=True) if isinstance(value, BaseModel) else value


def _root(value: str | os.PathLike[str] | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if isinstance(value, str):
        uri = (
            value if "://" in value else pathlib.Path(os.path.abspath(value)).as_uri()
        )  # percent-encoded
        return {"uri": uri}
    return dict(value)


class Client(Session):
    """A connection to an MCP server.

    Use :meth:`stdio` or :meth:`connect` to get one that is connected and initialized.

    Args:
        transport: the connection to the server.
        name: ``clientInfo.name``; ``version``: ``clientInfo.version``.
        roots: a list of roots (paths or ``{"uri", "name"}`` dicts), or a callable returning
            one; declares the ``roots`` capability.
        sampling_handler: ``handler(params, ctx) -> CreateMessageResult`` for
            ``sampling/createMessage``; declares ``sampling``.
        elicitation_handler: ``handler(params, ctx) -> ElicitResult`` for
            ``elicitation/create``; declares ``elicitation`` (form and URL modes).
        on_log: called with the params of each ``notifications/message``.
        on_notification: called with ``(method, params)`` for every notification from the
            server (list changes, resource updates, log messages, ...).
        max_workers: threads for server-to-client requests and callbacks.
        max_queued_callbacks: bound of the queue of notifications and progress callbacks
            waiting for the callback thread; when it is full the client stops reading, so
            a flooding server is slowed down (see :doc:`/limits`).
        on_cancelled: ``on_cancelled(request_id, reason)`` for every
            ``notifications/cancelled`` the server sends (for logs and UIs); runs on the
            callback thread.
        default_timeout: the ``timeout`` of calls that give none (``None``: no timeout); see
            :mod:`mcp_sync.call_options`. Settable later as :attr:`default_timeout`.
        protocol: which protocol era to speak: ``"auto"`` (the default: probe with
            ``server/discover``, speak 2026-07-28 with a server that does, else
            ``initialize``), ``"modern"`` or ``"2026-07-28"`` (2026-07-28 only),
            ``"legacy"`` or a handshake version such as ``"2025-11-25"`` (``initialize``
            only, no probe); see :mod:`mcp_sync.negotiation`.
        protocol_version: the version to ask for in ``initialize``.
        discover_timeout: the longest wait, in seconds, for the answer to the
            ``server/discover`` probe; past it the server is taken for an older one.
        max_input_rounds: (2026-07-28) the most ``input_required`` rounds one call may take.
        log_level: (2026-07-28) the least severe log level every request asks for (its
            ``_meta`` ``logLevel``); ``None`` asks for no log messages. At 2025-11-25 use
            :meth:`set_logging_level`.

    Handlers for server-to-client requests run on the client's worker pool with a
    :class:`~mcp_sync.context.Context`: the server can cancel them, their token fires,
    and no response is sent.
    """

    def __init__(
        self,
        transport: Transport,
        *,
        name: str = "mcp_sync",
        version: str | None = None,
        roots: Roots | None = None,
        sampling_handler: RequestHandlerFn | None = None,
        elicitation_handler: RequestHandlerFn | None = None,
        on_log: Callable[[dict[str, Any]], Any] | None = None,
        on_notification: Callable[[str, dict[str, Any]], Any] | None = None,
        max_workers: int = 4,
        max_queued_callbacks: int = MAX_QUEUED_CALLBACKS,
        on_cancelled: CancelObserver | None = None,
        default_timeout: float | None = None,
        protocol: str = "auto",
        protocol_version: str = LATEST_HANDSHAKE_VERSION,
        discover_timeout: float | None = DISCOVER_TIMEOUT,
        max_input_rounds: int = MAX_INPUT_ROUNDS,
        log_level: str | None = None,
    ) -> None:
        endpoint = Endpoint(
            transport,
            request_handler=self._handle_request,
            notification_handler=self._handle_notification,
            max_workers=max_workers,
            max_queued_callbacks=max_queued_callbacks,
            on_cancelled=on_cancelled,
            inline_handlers={"ping": lambda _request: {}},
            name="mcp_sync-client",
            default_timeout=default_timeout,
        )
        super().__init__(endpoint, Role.CLIENT)
        self.transport = transport
        self.client_info = {"name": name, "version": version or _version()}
        self._roots = roots
        self.sampling_handler = sampling_handler
        self.elicitation_handler = elicitation_handler
        self.on_log = on_log
        self.on_notification = on_notification
        choice = parse_protocol(protocol, protocol_version)
        if (
            isinstance(transport, HandshakeOnlyTransport)
            and transport.handshake_only
            and choice.modern is not None
        ):
            if choice.handshake is None:
                raise ValueError(
                    f"protocol={protocol!r}: this transport carries the 2025 revisions only"
                )
            choice = ProtocolChoice(None, choice.handshake)  # "auto" on it: no probe
        self.protocol = choice
        """What this client may speak (from ``protocol=`` and the transport): a
        :class:`~mcp_sync.negotiation.ProtocolChoice`."""
        self.requested_version = self.protocol.handshake or protocol_version
        self.discover_timeout = deadlines.check_timeout(discover_timeout, "discover_timeout")
        if max_input_rounds < 0:
            raise ValueError(f"max_input_rounds must be >= 0, not {max_input_rounds}")
        self.max_input_rounds = max_input_rounds
        if log_level is not None and log_level not in LOG_LEVELS:
            raise ValueError(f"unknown log level {log_level!r}; use one of {LOG_LEVELS}")
        self.log_level = log_level
        self.server_instructions: str | None = None
        self._probe_lost = False  # the connection ended on the server/discover probe
        self._server_info: mcp_types.Implementation | None = None
        self._listens = ListenRouter(endpoint)

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def connect(
        cls, transport: Transport, *, init_timeout: float | None = INIT_TIMEOUT, **options: Any
    ) -> Client:
        """Start a client on ``transport`` and agree on the protocol: the ``server/discover``
        probe and 2026-07-28, or the ``initialize`` handshake (see ``protocol=``)."""
        return cls(transport, **options)._start(init_timeout)

    def _start(
        self, init_timeout: float | None, on_failure: Callable[[], object] | None = None
    ) -> Client:
        """Start reading and agree on the protocol; closed again if that fails (after
        ``on_failure()``, which stops what the close would otherwise wait for)."""
        self.endpoint.start()
        try:
            self._negotiate(init_timeout)
        except BaseException:
            if on_failure is not None:
                on_failure()
            self.close()
            raise
        return self

    @classmethod
    def stdio(
        cls,
        command: Sequence[str],
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        *,
        stderr: StderrMode = "inherit",
        close_grace: float = 2.0,
        terminate_grace: float = 2.0,
        **options: Any,
    ) -> Client:
        """Spawn a server process and connect to it over its stdin/stdout (agreeing on the
        protocol as :meth:`connect` does: ``protocol=``, ``discover_timeout=``).

        A server that exits cleanly (status 0) on the probe -- some older servers end on any
        request before ``initialize`` -- is started again and sent ``initialize`` at once,
        unless ``protocol=`` allows 2026-07-28 only. A server that fails (another status)
        raises :class:`~mcp_sync.errors.ServerExited` as it is, and is not started again.

        On close: stdin is closed, then SIGTERM, then SIGKILL after the grace periods.
        """

        def spawn() -> SubprocessTransport:
            return SubprocessTransport(
                command,
                env=env,
                cwd=cwd,
                stderr=stderr,
                close_grace=close_grace,
                terminate_grace=terminate_grace,
            )

        init_timeout = options.pop("init_timeout", INIT_TIMEOUT)
        client = cls(spawn(), **options)
        try:
            return client._start(init_timeout)
        except ServerExited as exc:
            handshake = client.protocol.handshake
            if not (client._probe_lost and exc.returncode == 0 and handshake is not None):
                raise
        _log.info(
            "the server exited on the server/discover probe; starting it again for initialize"
        )
        return cls(spawn(), **{**options, "protocol": handshake})._start(init_timeout)

    @classmethod
    def http(
        cls,
        url: str,
        headers: Mapping[str, str] | None = None,
        *,
        auth: httpx.Auth | None = None,
        http_client: httpx.Client | None = None,
        connect_timeout: float = 10.0,
        open_get_stream: bool | None = None,
        reconnect: ReconnectPolicy | None = None,
        max_event_bytes: int | None = None,
        max_response_bytes: int | None = None,
        **options: Any,
    ) -> Client:
        """Connect to a Streamable HTTP server at ``url`` (needs the ``http`` extra).

        Args:
            headers: sent with every request.
            auth: any ``httpx.Auth``, e.g. one that adds a bearer token and refreshes it
                on 401 (it runs for every POST, GET and DELETE), such as
                :class:`mcp_sync.auth.OAuth`. One with an ``authorize_timeout`` (a user
                signs in during the first POST, ``initialize``) adds it to the default
                ``init_timeout``.
            http_client: an ``httpx.Client`` of your own (TLS certificates, proxies,
                limits); closing the MCP client leaves it open. Its read timeout is not
                used (streams idle); ``connect_timeout`` then does not apply either.
            open_get_stream: hold the GET stream for server-initiated messages. ``None``
                (default): only if this client has something to receive there -- an
                ``on_notification``/``on_log`` callback, or handlers for server requests
                (``roots``, ``sampling_handler``, ``elicitation_handler``).
            reconnect: how streams are reopened (a
                :class:`~mcp_sync.http.client_transport.ReconnectPolicy`).
            max_event_bytes: the largest SSE event read (default
                :data:`~mcp_sync.http.client_transport.MAX_EVENT_BYTES`).
            max_response_bytes: the largest JSON answer read (default
                :data:`~mcp_sync.http.client_transport.MAX_RESPONSE_BYTES`).
            options: for :class:`Client` (and ``init_timeout``), ``protocol=`` included:
                ``"auto"`` (the default) POSTs ``server/discover`` first and falls back to
                ``initialize`` (see :mod:`mcp_sync.negotiation`); ``discover_timeout``
                defaults to ``init_timeout`` when that is shorter.

        At 2026-07-28 every POST carries ``MCP-Protocol-Version``, ``Mcp-Method``,
        ``Mcp-Name`` and the ``Mcp-Param-*`` headers of the tool's ``x-mcp-header``
        annotations (learnt from ``tools/list``; a tool with invalid ones is left out of
        it), and cancelling a call (or its timeout) closes its response stream at once --
        no ``notifications/cancelled`` is POSTed. At 2025-11-25 closing the client ends the
        session with ``DELETE``. A 404 (session ended), 401 or
        403 fails the pending calls with a :class:`~mcp_sync.errors.ConnectionClosed`
        subclass that says so; an HTTP error carrying a JSON-RPC error fails its call with
        :class:`~mcp_sync.errors.McpError` (``http_status`` set).
        """
        from .http import client_transport as http

        authorize_timeout = getattr(auth, "authorize_timeout", None)
        if isinstance(authorize_timeout, (int, float)) and "init_timeout" not in options:
            # an interactive auth (mcp_sync.auth.OAuth) signs the user in inside initialize
            options["init_timeout"] = INIT_TIMEOUT + authorize_timeout
        if open_get_stream is None:
            receivers = (
                "on_notification",
                "on_log",
                "roots",
                "sampling_handler",
                "elicitation_handler",
            )
            open_get_stream = any(options.get(name) is not None for name in receivers)
        limits = {"max_event_bytes": max_event_bytes, "max_response_bytes": max_response_bytes}
        transport = http.HttpClientTransport(
            url,
            headers,
            auth=auth,
            http_client=http_client,
            connect_timeout=connect_timeout,
            handshake_timeout=options.get(
                "init_timeout", INIT_TIMEOUT
            ),  # initialize is POSTed in this thread
            reconnect=reconnect,
            open_get_stream=open_get_stream,
            **{name: value for name, value in limits.items() if value is not None},
        )
        init_timeout = options.pop("init_timeout", INIT_TIMEOUT)
        if "discover_timeout" not in options and init_timeout is not None:
            # a server that never answers: the probe waits no longer than initialize would
            options["discover_timeout"] = min(DISCOVER_TIMEOUT, init_timeout)
        client = cls(transport, **options)
        transport.bind_receiver(client.endpoint.receive_line)  # answers go straight in
        # an interactive auth waiting for the user (mcp_sync.auth) is cancelled first, so
        # that closing does not wait for a sign-in nobody will finish
        cancel = getattr(auth, "cancel", None)
        return client._start(init_timeout, on_failure=cancel if callable(cancel) else None)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self, grace: float = 5.0) -> None:
        """Fail pending calls with ConnectionClosed, close the transport, join threads."""
        self.endpoint.close(grace)

    def stats(self) -> EndpointStats:
        """A snapshot of the connection: calls in flight, server-to-client requests queued
        and running, the callback queue, dropped messages (see
        :class:`~mcp_sync.endpoint.EndpointStats`)."""
        return self.endpoint.stats()

    # -- lifecycle ----------------------------------------------------------------------------
    @property
    def era(self) -> Era | None:
        """The protocol era this client speaks: :attr:`Era.MODERN <mcp_sync.lifecycle.Era.MODERN>`
        (2026-07-28: no handshake, an envelope on every request),
        :attr:`Era.HANDSHAKE <mcp_sync.lifecycle.Era.HANDSHAKE>` (``initialize``, 2025-11-25
        and before), ``None`` before either was chosen. :attr:`protocol_version` names the
        version."""
        return self.lifecycle.era

    @property
    def initialized(self) -> bool:
        """True once connected: the ``initialize`` handshake completed, or 2026-07-28 was
        chosen (which has no handshake)."""
        return self.lifecycle.initialized or self.lifecycle.era is Era.MODERN

    def capabilities(self) -> dict[str, Any]:
        """The capabilities this client declares, derived from what it was given: ``roots``,
        ``sampling_handler``, ``elicitation_handler``. At 2026-07-28 they travel in every
        request's envelope (``roots`` without ``listChanged``: that notification is gone)."""
        return self._declared(modern=self.lifecycle.era is Era.MODERN)

    def _declared(self, *, modern: bool) -> dict[str, Any]:
        caps: dict[str, Any] = {}
        if self._roots is not None:
            caps["roots"] = {} if modern else {"listChanged": True}
        if self.sampling_handler is not None:
            caps["sampling"] = {}
        if self.elicitation_handler is not None:
            caps["elicitation"] = {"form": {}, "url": {}}
        return caps

    def initialize(self, *, timeout: float | None = INIT_TIMEOUT) -> mcp_types.InitializeResult:
        """Run the handshake (done for you by :meth:`connect` and :meth:`stdio`).

        ``initialize`` is never cancelled on the wire: a timeout only stops waiting.
        Returns the server's ``InitializeResult``.
        """
        return parser_for(CLIENT_REQUEST_RESULTS["initialize"])(self._handshake(timeout))  # type: ignore[no-any-return]

    def _negotiate(self, init_timeout: float | None) -> None:
        """The probe, then 2026-07-28 or ``initialize``, as ``protocol=`` allows."""
        choice = self.protocol
        if choice.modern is not None:
            if self._probe(choice.modern):
                return
            if choice.handshake is None:
                raise ConnectionClosed(
                    f"the server does not speak {choice.modern}: its answer to server/discover"
                    " was not a 2026-07-28 server's, and this client speaks nothing else"
                )
        try:
            self._handshake(init_timeout)
        except McpError as exc:
            if choice.modern is None or exc.code != UNSUPPORTED_PROTOCOL_VERSION:
                raise
            # a modern server whose answer to the probe came too late refused initialize
            with self.lifecycle_lock:
                self.lifecycle.discover_refused(exc)  # re-raises without a version we speak
            self._enter_modern(None)

    def _probe(self, version: str) -> bool:
        """Send ``server/discover``; True if the server speaks the modern era (then chosen).

        Never cancelled on the wire: past ``discover_timeout`` the call is dropped quietly
        (a late answer is ignored). An error that proves a modern server without a version
        we speak is raised: there is no fallback from it.
        """
        envelope = RequestEnvelope(version, self._declared(modern=True), self.client_info)
        call = self.endpoint.submit(DISCOVER_METHOD, {"_meta": envelope.to_meta()}, timeout=None)
        try:
            result = call.result(self.discover_timeout)
        except WaitTimeout:
            if call.request_id is not None:
                self.endpoint.fail_call(call.request_id, WaitTimeout("server/discover: no answer"))
            return False
        except McpError as exc:
            with self.lifecycle_lock:
                era = self.lifecycle.discover_refused(exc)
            if era is Era.MODERN:
                self._enter_modern(None)
            return era is Era.MODERN
        except PeerMisbehaved:  # an answer that is not JSON-RPC: not a modern server
            return False
        except HttpError:  # HTTP: a 404, a 405, an HTML page... -- not a modern server
            return False
        except ConnectionClosed:
            self._probe_lost = True
            raise
        with self.lifecycle_lock:
            era = self.lifecycle.discover_answered(result)
        if era is Era.MODERN:
            self._enter_modern(result)
        return era is Era.MODERN

    def _enter_modern(self, discovered: Any) -> None:
        """The modern era was chosen: record what the server serves (asking with a second
        ``server/discover`` when the era was chosen from an error), and answer no request
        from the server from now on (a 2026-07-28 server sends none)."""
        if discovered is None:
            try:
                discovered = self.endpoint.submit(
                    DISCOVER_METHOD,
                    self.lifecycle.stamp(None, self._envelope()),
                    timeout=self.discover_timeout,
                ).result()
            except McpError:
                discovered = {}
        server = discovered_server(discovered)
        with self.lifecycle_lock:
            self.lifecycle.peer_capabilities = server.capabilities
            self.lifecycle.peer_info = server.info
        self.server_instructions = server.instructions
        self.endpoint.drop_requests = "a request from a server at 2026-07-28 (servers send none)"

    _last_envelope: tuple[tuple[Any, ...], RequestEnvelope] | None = None
    """The latest envelope made, with what it was made of (most calls stamp the same)."""

    def _envelope(self) -> RequestEnvelope:
        version = self.lifecycle.protocol_version or LATEST_MODERN_VERSION
        info = self.client_info  # kept by the envelope: its id names no other dict meanwhile
        key = (
            version,
            self._roots is not None,
            self.sampling_handler is not None,
            self.elicitation_handler is not None,
            id(info),
            self.log_level,
        )
        last = self._last_envelope
        if last is not None and last[0] == key:
            return last[1]
        envelope = RequestEnvelope(version, self._declared(modern=True), info, self.log_level)
        self._last_envelope = (key, envelope)
        return envelope

    def _handshake(self, timeout: float | None) -> dict[str, Any]:
        """``initialize`` and ``notifications/initialized``; the raw result (parsing it
        would import ``mcp_types``, which connecting does not need)."""
        params = {
            "protocolVersion": self.requested_version,
            "capabilities": self.capabilities(),
            "clientInfo": self.client_info,
        }
        with self.lifecycle_lock:
            self.lifecycle.send_initialize()
        try:
            result = self.endpoint.submit("initialize", params, timeout=timeout).result()
        except BaseException:
            with self.lifecycle_lock:
                self.lifecycle.initialize_failed()
            raise
        with self.lifecycle_lock:
            if self.lifecycle.state is State.CLOSED:
                raise ConnectionClosed("the connection closed during the handshake")
            try:
                self.lifecycle.initialize_answered(result)
            except PeerMisbehaved as exc:
                raise ConnectionClosed(str(exc)) from None
        self.server_instructions = result.get("instructions")
        self.endpoint.notify("notifications/initialized")
        with self.lifecycle_lock:  # only now: no request may overtake notifications/initialized
            if self.lifecycle.state is State.INITIALIZED:
                self.lifecycle.send_initialized()
        return dict(result)

    @property
    def server_info(self) -> mcp_types.Implementation:
        """The server's ``serverInfo`` (``name``, ``version``, ``title`` ...); the raw dict
        is :attr:`peer_info`."""
        if self._server_info is None:
            self._server_info = mcp_models().Implementation.model_validate(self.peer_info)
        return self._server_info

    @property
    def default_timeout(self) -> float | None:
        """The ``timeout`` of calls that give none (``None``: no timeout)."""
        return self.endpoint.default_timeout

    @default_timeout.setter
    def default_timeout(self, seconds: float | None) -> None:
        self.endpoint.default_timeout = deadlines.check_timeout(seconds, "default_timeout")

    @property
    def server_capabilities(self) -> dict[str, Any]:
        """The server's declared capabilities."""
        return self.peer_capabilities

    # -- generic calls ------------------------------------------------------------------------
    def submit(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        raw: bool = False,
        related_request: RequestId | None = None,
        **options: Unpack[CallOptions],
    ) -> PendingCall:
        """Send any request; returns a :class:`~mcp_sync.endpoint.PendingCall` (a
        :class:`concurrent.futures.Future`) at once.

        For a method of the protocol (``tools/call``, ``resources/read`` ... see
        :data:`~mcp_sync.results.CLIENT_REQUEST_RESULTS`) the future resolves to the same
        ``mcp_types`` model as the blocking method (``EmptyResult`` for the methods whose
        blocking call returns ``None``); for any other method, or with ``raw=True``, to the
        raw result dict. ``options``: the :class:`~mcp_sync.call_options.CallOptions`;
        ``related_request``: see :meth:`Endpoint.submit <mcp_sync.endpoint.Endpoint.submit>`.
        """
        self.lifecycle.check_send_request(method)
        if self.lifecycle.era is Era.MODERN:
            call = self._submit_modern(method, params, related_request, options)
        else:
            call = super().submit(method, params, related_request=related_request, **options)
        model = None if raw else CLIENT_REQUEST_RESULTS.get(method)
        return call if model is None else call.decode_result_with(parser_for(model))

    def _submit_modern(
        self,
        method: str,
        params: dict[str, Any] | None,
        related: RequestId | None,
        options: CallOptions,
    ) -> PendingCall:
        """A 2026-07-28 request: the envelope on every round, ``input_required`` answered by
        this client's handlers, -32022 retried once with another version both sides speak."""

        def send_round(round_params: dict[str, Any], round_options: CallOptions) -> PendingCall:
            stamped = self.lifecycle.stamp(round_params, self._envelope())
            return self.endpoint.submit(method, stamped, related_request=related, **round_options)

        call = InputRoundsCall(
            self.endpoint,
            method,
            params,
            submit_round=send_round,
            answer=self._answer_input,
            run=self.endpoint.pool.submit,
            options=options,
            max_rounds=self.max_input_rounds,
            resend_after=self._other_version_after,
        )
        return call.start()

    def _other_version_after(self, error: BaseException) -> bool:
        """After -32022: switch to another version both sides speak, if there is one."""
        if not isinstance(error, McpError) or error.code != UNSUPPORTED_PROTOCOL_VERSION:
            return False
        with self.lifecycle_lock:
            version = self.lifecycle.retry_version(error.data)
            if version is None:
                return False
            self.lifecycle.protocol_version = version
        return True

    def _answer_input(self, request: InputRequest, token: CancelToken) -> Any:
        """Answer one input request of an ``input_required`` round with this client's handler."""
        if not self._offers(request.method):
            raise PeerMisbehaved(
                f"the server asked for {request.method}, which this client does not offer (its capabilities say so)",
                "input request for an undeclared capability",
            )
        inbound = InboundRequest(Request(request.key, request.method, request.params), token)
        return self._serve(request.method, request.params, Context(self, inbound, token))

    def _refuse_removed(self, method: str, hint: str = "") -> None:
        if self.lifecycle.era is Era.MODERN and method in REMOVED_AT_MODERN:
            raise FeatureRemoved(method, self.protocol_version or LATEST_MODERN_VERSION, hint)

    def request(
        self, method: str, params: dict[str, Any] | None = None, **options: Unpack[CallOptions]
    ) -> Any:
        """Send any request and block for its **raw** result dict, whatever the method (see
        :meth:`submit`)."""
        return send_and_wait(lambda: self.submit(method, params, raw=True, **options))

    def ping(self, **options: Unpack[CallOptions]) -> None:
        """Ping the server and wait for the answer. 2026-07-28 has no ``ping``:
        :class:`~mcp_sync.errors.FeatureRemoved` there (any request shows the server is up)."""
        send_and_wait(lambda: self.submit("ping", None, **options, raw=True))

    def _require(self, capability: str, what: str) -> None:
        if not self.peer_supports(capability):
            raise CapabilityError(
                f"{what}: the server did not declare the {capability!r} capability"
            )

    # -- tools --------------------------------------------------------------------------------
    def list_tools_page(
        self, cursor: str | None = None, **options: Unpack[CallOptions]
    ) -> mcp_types.ListToolsResult:
        """One page of ``tools/list`` (pass the previous page's ``next_cursor``)."""
        self._require("tools", "tools/list")
        params = {"cursor": cursor} if cursor is not None else None
        return send_and_wait(lambda: self.submit("tools/list", params, **options))  # type: ignore[no-any-return]

    def list_tools(self, **options: Unpack[CallOptions]) -> list[mcp_types.Tool]:
        """Every tool, following ``nextCursor`` through all pages."""
        tools: list[mcp_types.Tool] = []
        cursor: str | None = None
        while True:
            page = self.list_tools_page(cursor, **options)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                return tools

    def call_tool(
        self, name: str, arguments: Mapping[str, Any] | None = None, **options: Unpack[CallOptions]
    ) -> mcp_types.CallToolResult:
        """Call a tool and block for its result.

        A tool that fails (including arguments the server rejected, at 2025-11-25) returns
        a result with ``is_error=True``; an unknown tool raises
        :class:`~mcp_sync.errors.McpError` (-32602).
        """
        return send_and_wait(lambda: self.call_tool_future(name, arguments, **options))  # type: ignore[no-any-return]

    def call_tool_future(
        self, name: str, arguments: Mapping[str, Any] | None = None, **options: Unpack[CallOptions]
    ) -> PendingCall:
        """Start a tool call and return its :class:`~mcp_sync.endpoint.PendingCall` at once;
        its ``result()`` is the ``CallToolResult`` that :meth:`call_tool` returns.
        ``cancel()`` it from any thread."""
        self._require("tools", "tools/call")
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = dict(arguments)
        return self.submit("tools/call", params, **options)

    # -- tasks (see mcp_sync.task_call and docs/tasks) ----------------------------------------
    def call_tool_as_task(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        ttl: float | None = None,
        **options: Unpack[CallOptions],
    ) -> TaskCall:
        """Call a tool as a task: returns a :class:`~mcp_sync.task_call.TaskCall` as soon as
        the server created it (or already done, when the server answered at once).

        ``ttl``: how long (seconds) the server should keep the task (2025-11-25
        ``params.task.ttl``; at 2026-07-28 the server decides). ``options`` apply to each
        request the handle sends. Ctrl-C in ``task.result()`` leaves the task running.
        """
        self._require("tools", "tools/call")
        return start_task(self, name, arguments, ttl, options)

    def task(self, task_id: str, **options: Unpack[CallOptions]) -> TaskCall:
        """A :class:`~mcp_sync.task_call.TaskCall` for a task created earlier (for example
        before a restart, at 2026-07-28); its state is asked for at once."""
        call = TaskCall(self, task_id, options=options)
        call.status()
        return call

    def get_task(self, task_id: str, **options: Unpack[CallOptions]) -> TaskState:
        """``tasks/get``: the task's :class:`~mcp_sync.task_call.TaskState`."""
        return TaskState.from_wire(self.task_request("tasks/get", {"taskId": task_id}, options))

    def list_tasks(self, **options: Unpack[CallOptions]) -> list[TaskState]:
        """``tasks/list`` (2025-11-25; 2026-07-28 has none): every task of this session."""
        return list_all_tasks(self, options)

    def cancel_task(self, task_id: str, **options: Unpack[CallOptions]) -> TaskState:
        """``tasks/cancel``; returns the state once acknowledged (see :meth:`TaskCall.cancel
        <mcp_sync.task_call.TaskCall.cancel>`)."""
        return TaskCall(self, task_id, options=options).cancel()

    def task_request(
        self, method: str, params: dict[str, Any], options: CallOptions
    ) -> dict[str, Any]:
        """Send a task request and block for its raw result; at 2026-07-28 the request
        declares the tasks extension (only task requests do)."""
        if self.lifecycle.era is not Era.MODERN:
            return send_and_wait(lambda: self.submit(method, params, raw=True, **options))  # type: ignore[no-any-return]
        stamped = self.lifecycle.stamp(params, self._task_envelope())
        return send_and_wait(lambda: self.endpoint.submit(method, stamped, **options))  # type: ignore[no-any-return]

    def _task_envelope(self) -> RequestEnvelope:
        """The 2026-07-28 envelope of a task request: the tasks extension declared."""
        envelope = self._envelope()
        capabilities = dict(envelope.client_capabilities)
        capabilities["extensions"] = {**capabilities.get("extensions", {}), TASKS_EXTENSION: {}}
        return dataclasses.replace(envelope, client_capabilities=capabilities)

    def listen_to_task(
        self, task_id: str, on_change: Callable[[Mapping[str, Any]], None]
    ) -> Callable[[], None] | None:
        """(2026-07-28) ``notifications/tasks`` of one task to ``on_change`` (see
        :class:`~mcp_sync.task_call.TaskHost`); ``None`` when the server does not listen."""
        if self.lifecycle.era is not Era.MODERN:
            return None
        try:
            sub = self.listen(
                tasks=[task_id],
                on_notification=lambda event: (
                    on_change(event.params) if event.method == "notifications/tasks" else None
                ),
                ack_timeout=self.discover_timeout,
            )
        except (McpError, CapabilityError, TimeoutError):
            return None
        if task_id not in (sub.acknowledged or {}).get("taskIds", []):
            sub.close()
            return None
        return sub.close

    def answer_task_input(
        self, key: str, method: str, params: dict[str, Any], token: CancelToken
    ) -> Any:
        """Answer one of a task's ``inputRequests`` with this client's handler (a JSON object)."""
        return _dump(self._answer_input(InputRequest(key, method, params), token))

    # -- resources ----------------------------------------------------------------------------
    def _typed(
        self, capability: str, method: str, params: dict[str, Any] | None, options: CallOptions
    ) -> Any:
        self._require(capability, method)
        return send_and_wait(lambda: self.submit(method, params, **options))

    def _all_pages(self, page: Callable[[str | None], Any], field: str) -> list[Any]:
        items: list[Any] = []
        cursor: str | None = None
        while True:
            result = page(cursor)
            items.extend(getattr(result, field))
            cursor = result.next_cursor
            if not cursor:
                return items

    def list_resources_page(
        self, cursor: str | None = None, **options: Unpack[CallOptions]
    ) -> mcp_types.ListResourcesResult:
        """One page of ``resources/list``."""
        params = {"cursor": cursor} if cursor is not None else None
        return self._typed("resources", "resources/list", params, options)  # type: ignore[no-any-return]

    def list_resources(self, **options: Unpack[CallOptions]) -> list[mcp_types.Resource]:
        """Every resource, through all pages."""
        return self._all_pages(lambda c: self.list_resources_page(c, **options), "resources")

    def list_resource_templates_page(
        self, cursor: str | None = None, **options: Unpack[CallOptions]
    ) -> mcp_types.ListResourceTemplatesResult:
        """One page of ``resources/templates/list``."""
        params = {"cursor": cursor} if cursor is not None else None
        return self._typed("resources", "resources/templates/list", params, options)  # type: ignore[no-any-return]

    def list_resource_templates(
        self, **options: Unpack[CallOptions]
    ) -> list[mcp_types.ResourceTemplate]:
        """Every resource template, through all pages."""
        return self._all_pages(
            lambda c: self.list_resource_templates_page(c, **options), "resource_templates"
        )

    def read_resource(
        self, uri: str, **options: Unpack[CallOptions]
    ) -> mcp_types.ReadResourceResult:
        """Read a resource; an unknown URI raises :class:`~mcp_sync.errors.McpError` (-32002)."""
        return self._typed("resources", "resources/read", {"uri": uri}, options)  # type: ignore[no-any-return]

    def subscribe(self, uri: str, **options: Unpack[CallOptions]) -> None:
        """Subscribe to ``notifications/resources/updated`` for ``uri`` (2025-11-25;
        :class:`~mcp_sync.errors.FeatureRemoved` at 2026-07-28)."""
        self._refuse_removed("resources/subscribe", "subscriptions/listen replaces it")
        self._require("resources", "resources/subscribe")
        if not self.peer_supports("resources", "subscribe"):
            raise CapabilityError("resources/subscribe: the server does not support subscriptions")
        send_and_wait(lambda: self.submit("resources/subscribe", {"uri": uri}, **options, raw=True))

    def unsubscribe(self, uri: str, **options: Unpack[CallOptions]) -> None:
        """Stop updates for ``uri`` (2025-11-25; :class:`~mcp_sync.errors.FeatureRemoved`
        at 2026-07-28)."""
        self._refuse_removed("resources/unsubscribe", "subscriptions/listen replaces it")
        self._require("resources", "resources/unsubscribe")
        send_and_wait(
            lambda: self.submit("resources/unsubscribe", {"uri": uri}, **options, raw=True)
        )

    # -- prompts ------------------------------------------------------------------------------
    def list_prompts_page(
        self, cursor: str | None = None, **options: Unpack[CallOptions]
    ) -> mcp_types.ListPromptsResult:
        """One page of ``prompts/list``."""
        params = {"cursor": cursor} if cursor is not None else None
        return self._typed("prompts", "prompts/list", params, options)  # type: ignore[no-any-return]

    def list_prompts(self, **options: Unpack[CallOptions]) -> list[mcp_types.Prompt]:
        """Every prompt, through all pages."""
        return self._all_pages(lambda c: self.list_prompts_page(c, **options), "prompts")

    def get_prompt(
        self, name: str, arguments: Mapping[str, str] | None = None, **options: Unpack[CallOptions]
    ) -> mcp_types.GetPromptResult:
        """Render a prompt with ``arguments``."""
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = dict(arguments)
        return self._typed("prompts", "prompts/get", params, options)  # type: ignore[no-any-return]

    # -- completion and logging -----------------------------------------------------------------
    def complete(
        self,
        ref: Mapping[str, Any],
        argument: str,
        value: str,
        *,
        context_arguments: Mapping[str, str] | None = None,
        **options: Unpack[CallOptions],
    ) -> mcp_types.CompleteResult:
        """Ask for completions of a prompt or resource-template argument.

        ``ref`` is ``{"type": "ref/prompt", "name": ...}`` or
        ``{"type": "ref/resource", "uri": ...}``.
        """
        params: dict[str, Any] = {"ref": dict(ref), "argument": {"name": argument, "value": value}}
        if context_arguments:
            params["context"] = {"arguments": dict(context_arguments)}
        return self._typed("completions", "completion/complete", params, options)  # type: ignore[no-any-return]

    def set_logging_level(self, level: str, **options: Unpack[CallOptions]) -> None:
        """Ask the server to send log messages at ``level`` and above (2025-11-25). At
        2026-07-28 it raises :class:`~mcp_sync.errors.FeatureRemoved`: set
        :attr:`log_level` (``Client(log_level=...)``) instead, which every request carries."""
        self._refuse_removed(
            "logging/setLevel", "set Client.log_level: every request then asks for that level"
        )
        self._require("logging", "logging/setLevel")
        send_and_wait(
            lambda: self.submit("logging/setLevel", {"level": level}, **options, raw=True)
        )

    # -- server-to-client requests --------------------------------------------------------------
    def _handle_request(self, request: InboundRequest) -> Any:
        return self._serve(request.method, request.params, Context(self, request, request.token))

    def _offers(self, method: str) -> bool:
        handlers = {
            "roots/list": self._roots,
            "sampling/createMessage": self.sampling_handler,
            "elicitation/create": self.elicitation_handler,
        }
        return handlers.get(method) is not None

    def _serve(self, method: str, params: dict[str, Any], ctx: Context) -> Any:
        """Answer a request of the server, a 2025 request or a 2026 input request alike."""
        if method == "roots/list":
            if self._roots is None:
                raise McpError(METHOD_NOT_FOUND, "this client does not offer roots")
            roots = self._roots() if callable(self._roots) else self._roots
            return {"roots": [_root(r) for r in roots]}
        if method == "sampling/createMessage":
            if self.sampling_handler is None:
                raise McpError(METHOD_NOT_FOUND, "this client does not offer sampling")
            return _dump(self.sampling_handler(params, ctx))
        if method == "elicitation/create":
            if self.elicitation_handler is None:
                raise McpError(METHOD_NOT_FOUND, "this client does not offer elicitation")
            return _dump(self.elicitation_handler(params, ctx))
        raise McpError(METHOD_NOT_FOUND, f"Method not found: {method}")

    def set_roots(self, roots: Roots) -> None:
        """Replace the roots and send ``notifications/roots/list_changed`` (at 2026-07-28,
        which removed that notification, nothing is sent: the server asks for the roots in
        an ``input_required`` round when it needs them, and gets the new ones)."""
        self._roots = roots
        if self.initialized and not self.closed and self.lifecycle.era is not Era.MODERN:
            self.send_notification("notifications/roots/list_changed")

    def send_notification(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        related_request: RequestId | None = None,
    ) -> None:
        """Send a notification; one that 2026-07-28 removed raises
        :class:`~mcp_sync.errors.FeatureRemoved` on a connection at that version."""
        self._refuse_removed(method)
        super().send_notification(method, params, related_request=related_request)

    def listen(
        self,
        *,
        tools: bool = False,
        prompts: bool = False,
        resources_list: bool = False,
        resources: Sequence[str] = (),
        tasks: Sequence[str] = (),
        on_notification: Callable[[ListenEvent], Any] | None = None,
        ack_timeout: float | None = 30.0,
        max_pending: int = DEFAULT_MAX_PENDING,
    ) -> Subscription:
        """Open a ``subscriptions/listen`` stream (protocol 2026-07-28) and block until the
        server acknowledges it; returns the :class:`~mcp_sync.listen.Subscription`.

        ``tools``/``prompts``/``resources_list`` ask for the ``list_changed`` notification
        of that list, ``resources`` for ``notifications/resources/updated`` of these URIs,
        ``tasks`` for ``notifications/tasks`` of these task ids (the request then declares
        the tasks extension).
        What the server agreed to is :attr:`Subscription.acknowledged
        <mcp_sync.listen.Subscription.acknowledged>`. Notifications go to
        ``on_notification(event)`` (on the client's callback thread, in arrival order) or,
        without it, to the subscription's iterator (at most ``max_pending`` unread, oldest
        dropped first). Several subscriptions may be open at once; ``close()`` ends one.
        They never reach the client's own ``on_notification``.

        Do not call it from a client callback: the acknowledgement is delivered on that
        thread.

        Raises:
            CapabilityError: the connection speaks a 2025 revision, which has no
                ``subscriptions/listen`` (use :meth:`subscribe` and ``on_notification``).
            McpError: the server refused the listen request.
            RequestTimeout: not acknowledged within ``ack_timeout`` (the request is cancelled).
        """
        params = self._modern_params(
            listen_params(
                tools=tools,
                prompts=prompts,
                resources_list=resources_list,
                resources=resources,
                tasks=tasks,
            ),
            self._task_envelope() if tasks else None,
        )
        return self._listens.open(
            params,
            on_notification=on_notification,
            ack_timeout=ack_timeout,
            max_pending=max_pending,
        )

    def _modern_params(
        self, params: dict[str, Any], envelope: RequestEnvelope | None = None
    ) -> dict[str, Any]:
        """``params`` with the 2026-07-28 request envelope; CapabilityError when the
        connection speaks a 2025 revision."""
        if self.lifecycle.era is not Era.MODERN:
            raise CapabilityError(
                f"subscriptions/listen exists from protocol 2026-07-28 on; this connection speaks "
                f"{self.protocol_version or 'no protocol yet'} (use subscribe() and on_notification)"
            )
        return self.lifecycle.stamp(params, envelope or self._envelope())

    def _handle_notification(self, notification: Notification) -> None:
        if self._listens.route(notification):
            return
        params = notification.params or {}
        if notification.method == "notifications/message" and self.on_log is not None:
            self.on_log(params)
        if self.on_notification is not None:
            self.on_notification(notification.method, params)
