"""One client connection to a :class:`~mcp_sync.server.Server`, in either protocol era: the
admission of each request (through the :class:`~mcp_sync.lifecycle.Lifecycle`), the handshake,
and the routing of each request to its feature's handler.

Dual-era serving on one connection: a request carrying the 2026-07-28 envelope is served
statelessly from its own ``_meta``; ``initialize`` selects the 2025 path, as before. The first
exchange pins the connection's era (``server/discover`` does not). Requests are admitted in
arrival order on the thread that read them, so that pin follows the wire's order; a request
the lifecycle refuses is answered with the error at once and its handler never runs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from typing_extensions import Unpack

from ..call_options import CallOptions
from ..cancel import CancelToken
from ..endpoint import Endpoint
from ..errors import CapabilityError, McpError
from ..jsonrpc import INVALID_PARAMS, METHOD_NOT_FOUND, RESOURCE_NOT_FOUND, Notification, RequestId
from ..lifecycle import LISTEN_METHOD, LOG_LEVEL_KEY, Admission, Era, Lifecycle, Role
from ..principal import Principal
from ..protocol import InboundRequest
from ..results import SERVER_REQUEST_RESULTS, parser_for
from ..session import LOG_LEVELS, Session
from ..transports.base import Transport
from ..workers import WorkerPool
from . import completion, discover, input_rounds, logging_bridge, prompts, resources, tools
from .client_requests import create_message_params, elicit_params
from .modern_result import stamp_modern_result
from .registry import MethodHandler
from .scope import NO_REQUESTS_AT_MODERN, RequestScope
from .tasks_methods import TASK_HANDLERS
from .tasks_modern import screen_listen

if TYPE_CHECKING:  # pragma: no cover
    import mcp_types

    from .server import Server

__all__ = ["ServerSession", "FEATURE_HANDLERS", "INPUT_METHODS", "run_feature"]

FEATURE_HANDLERS: dict[str, MethodHandler] = {
    "server/discover": discover.discover,
    "tools/list": tools.list_tools,
    "tools/call": tools.call_tool,
    "logging/setLevel": logging_bridge.set_level,
    "resources/list": resources.list_resources,
    "resources/templates/list": resources.list_templates,
    "resources/read": resources.read_resource,
    "resources/subscribe": resources.subscribe,
    "resources/unsubscribe": resources.unsubscribe,
    "prompts/list": prompts.list_prompts,
    "prompts/get": prompts.get_prompt,
    "completion/complete": completion.complete,
    **TASK_HANDLERS,
}
"""The built-in request methods (besides ``initialize``), and the function serving each."""

INPUT_METHODS = input_rounds.INPUT_METHODS
"""The requests whose handlers may need input from the client while they run (elicitation,
sampling, roots): the only ones that may answer ``input_required`` at 2026-07-28."""


_INLINE_HANDLERS: dict[str, Callable[[InboundRequest], Any]] = {"ping": lambda _request: {}}
"""Answered on the thread that reads them (the endpoint copies the mapping)."""


def run_feature(scope: RequestScope, call: Callable[[], Any]) -> Any:
    """Run the handler of a request in :data:`INPUT_METHODS` (``call()``) for the request of
    ``scope``, and return its result.

    Every ``tools/call``, ``prompts/get`` and ``resources/read`` goes through here, in both
    eras; this is where the input a handler asks for is gathered
    (:func:`~mcp_sync.server.input_rounds.serve`).
    """
    return input_rounds.serve(scope, call)


class ServerSession(Session):
    """One client connection to a :class:`Server`."""

    def __init__(
        self,
        server: Server,
        transport: Transport,
        *,
        max_workers: int,
        pool: WorkerPool | None = None,
    ) -> None:
        endpoint = Endpoint(
            transport,
            request_handler=self._handle_request,
            notification_handler=self._handle_notification,
            max_workers=max_workers,
            max_queued_callbacks=server.max_queued_callbacks,
            on_cancelled=server.on_cancelled,
            pool=pool,
            inline_handlers=_INLINE_HANDLERS,
            name=f"mcp_sync-server-{server.name}",
            admit=self._admit,
            shape_result=self._shape_result,
        )
        super().__init__(endpoint, Role.SERVER)
        self.lifecycle.serve_modern = True
        self.server = server
        self.log_level: str = "debug"
        self.on_roots_changed: Callable[[], Any] | None = None
        self.subscriptions: set[str] = set()
        self.declared_capabilities: dict[str, Any] = {}
        """What this server declared in its ``initialize`` answer."""
        self._server_info = {"name": server.name, "version": server.version}
        self._initialize_version: str | None = None
        # a transport that authenticates requests (HTTP with BearerAuth) says who sent each
        self._principal_for: Callable[[RequestId], Principal | None] | None = getattr(
            transport, "principal_for", None
        )

    def close(self, grace: float = 5.0) -> None:
        """Close the connection (cancels running handlers, joins threads).

        Open ``subscriptions/listen`` streams end gracefully first: each listen request is
        answered with the closing result before the connection closes.
        """
        self.server.listens.end_session(self)
        self.endpoint.close(grace)

    # -- dispatch -----------------------------------------------------------------------------
    def _sender(self, request: InboundRequest) -> Principal | None:
        """Who sent ``request``, as its transport authenticated it (``None``: nobody)."""
        return None if self._principal_for is None else self._principal_for(request.id)

    def _admit(self, request: InboundRequest) -> None:
        """Admit a new request (the endpoint calls this in arrival order, before scheduling
        it): make its :class:`RequestScope` and ask the lifecycle how to serve it. Raises
        the error owed to the client; an ``initialize`` is taken here, so that it pins the
        handshake era before any later request is admitted."""
        scope = RequestScope(
            self,
            request.token,
            request=request,
            principal=self._sender(request),
            kept_by_request=True,
        )
        request.context = scope
        method, params = request.method, request.params
        if method == "ping":
            if (
                self.lifecycle.era is not Era.MODERN
                and Lifecycle.classify(method, params) is Era.HANDSHAKE
            ):
                scope.admission = Admission(Era.HANDSHAKE)  # answered in any state, as always
                return
        elif not self._builtin(method) and self.server.registry.method(method) is None:
            return  # answered -32601 by its handler; an unknown method decides nothing
        with self.lifecycle_lock:
            admission = self.lifecycle.admit(method, params)
            if method == "initialize":
                self._initialize_version = self.lifecycle.receive_initialize(params)
                # a request admitted once initialized sees what we declared
                self.declared_capabilities = self.server.capabilities()
        envelope = admission.envelope
        if (
            envelope is not None
            and envelope.log_level is not None
            and envelope.log_level not in LOG_LEVELS
        ):
            raise McpError(
                INVALID_PARAMS,
                f"params._meta {LOG_LEVEL_KEY} must be one of {', '.join(LOG_LEVELS)}",
            )
        scope.admission = admission

    def _handle_request(self, request: InboundRequest) -> Any:
        scope = request.context
        assert isinstance(scope, RequestScope)
        handler = self._handler(request.method)
        if handler is None:
            custom = self.server.registry.method(request.method)
            if custom is None:
                raise McpError(METHOD_NOT_FOUND, f"Method not found: {request.method}")
            return custom(self, request, request.token)
        if request.method not in ("initialize", "server/discover"):
            if scope.modern:  # what it declares now (the features modern_capabilities() names)
                Lifecycle.check_served(request.method, self.server.declares)
            else:
                Lifecycle.check_served(request.method, self.declared_capabilities)
        if request.method not in INPUT_METHODS:
            return handler(request, request.token)
        try:
            return run_feature(scope, lambda: handler(request, request.token))
        except McpError as exc:
            if scope.modern and exc.code == RESOURCE_NOT_FOUND:  # renumbered in 2026-07-28
                raise McpError(INVALID_PARAMS, exc.message, exc.data) from exc
            raise

    def _shape_result(self, request: InboundRequest, result: Any) -> Any:
        """What every result carries at 2026-07-28 (``resultType``, ``serverInfo``, the
        caching hints), for a request served there; a 2025 result is left as it is."""
        scope = request.context
        if not (isinstance(scope, RequestScope) and scope.modern):
            return result
        return stamp_modern_result(
            request.method, result, server_info=self._server_info, cache=self.server.cache_hints
        )

    def modern_capabilities(self) -> dict[str, Any]:
        """The capabilities a 2026-07-28 request sees (see
        :func:`~mcp_sync.server.discover.modern_capabilities`), as of now."""
        return discover.modern_capabilities(self.server, self._serves)

    def _serves(self, method: str) -> bool:
        return self._builtin(method) or self.server.registry.method(method) is not None

    @staticmethod
    def _builtin(method: str) -> bool:
        """True for a method the session serves itself (not a custom one)."""
        return method in FEATURE_HANDLERS or method in ("initialize", LISTEN_METHOD)

    def _handler(self, method: str) -> Callable[[InboundRequest, CancelToken], Any] | None:
        """The built-in handler of ``method`` (``None``: a custom or unknown method). Looked
        up per request, not kept per session: a 2026-07-28 request over HTTP has a session
        of its own, made for it alone."""
        if method == "initialize":
            return self._on_initialize
        if method == LISTEN_METHOD:
            return self._on_listen
        feature = FEATURE_HANDLERS.get(method)
        return None if feature is None else functools.partial(feature, self)

    def _on_listen(self, request: InboundRequest, token: CancelToken) -> Any:
        """``subscriptions/listen``: a 2026-07-28 request only (a 2025 session has
        ``resources/subscribe`` and unsolicited ``list_changed`` notifications instead)."""
        scope = request.context
        if not (isinstance(scope, RequestScope) and scope.modern):
            spoken = self.protocol_version or "no protocol version"
            raise McpError(
                METHOD_NOT_FOUND,
                f"subscriptions/listen exists from protocol 2026-07-28 on; this request speaks {spoken} "
                "(use resources/subscribe and the list_changed notifications)",
            )
        screen_listen(request)
        return self.server.listens.open(self, request, self.modern_capabilities())

    def _handle_notification(self, notification: Notification) -> None:
        with self.lifecycle_lock:
            if not self.lifecycle.receive_notification(notification.method):
                return
        if notification.method == "notifications/roots/list_changed":
            if self.on_roots_changed is not None:
                self.on_roots_changed()

    # -- lifecycle ----------------------------------------------------------------------------
    def _on_initialize(self, request: InboundRequest, token: CancelToken) -> dict[str, Any]:
        # the lifecycle took the initialize when it was admitted (see _admit)
        result: dict[str, Any] = {
            "protocolVersion": self._initialize_version,
            "capabilities": self.declared_capabilities,
            "serverInfo": {"name": self.server.name, "version": self.server.version},
        }
        if self.server.instructions:
            result["instructions"] = self.server.instructions
        return result

    def send_log(
        self,
        level: str,
        data: Any,
        logger: str | None = None,
        *,
        related_request: RequestId | None = None,
        about: InboundRequest | None = None,
        min_level: str | None = None,
    ) -> bool:
        """Send ``notifications/message`` unless ``level`` is below ``min_level`` (by default
        the level the client set with ``logging/setLevel``).

        ``about``: the inbound request whose handler logs (``related_request``: its id); a
        message about a request is sent only while it runs (False once it was cancelled or
        answered).
        """
        floor = self.log_level if min_level is None else min_level
        if LOG_LEVELS.index(level) < LOG_LEVELS.index(floor):
            return False
        params: dict[str, Any] = {"level": level, "data": data}
        if logger is not None:
            params["logger"] = logger
        if about is not None:
            return self.endpoint.notify_about(about, "notifications/message", params)
        self.send_notification("notifications/message", params, related_request=related_request)
        return True

    # -- requests to the client -----------------------------------------------------------------
    def _check_request(self, method: str) -> None:
        """A connection that speaks 2026-07-28 carries no request of ours: a
        :class:`RuntimeError`, and nothing written."""
        if self.lifecycle.era is Era.MODERN:
            raise RuntimeError(NO_REQUESTS_AT_MODERN.format(method=method))

    def scoped(self, token: CancelToken, request_id: RequestId | None = None) -> RequestScope:
        """A view whose requests are cancelled when ``token`` fires (and relate to the
        inbound request ``request_id``)."""
        return RequestScope(self, token, request_id)

    def list_roots(
        self, *, related_request: RequestId | None = None, **options: Unpack[CallOptions]
    ) -> list[mcp_types.Root]:
        """Ask the client for its roots (needs the client's ``roots`` capability).

        ``options``: the :class:`~mcp_sync.call_options.CallOptions` (a server session has
        no default timeout: without ``timeout`` the request waits for ever, like
        ``timeout=None``); ``related_request``: the inbound request it is made for.
        """
        self.require_capability("roots", "roots/list")
        result = self._typed_request("roots/list", None, related_request, options)
        return list(result.roots)

    def _typed_request(
        self,
        method: str,
        params: dict[str, Any] | None,
        related_request: RequestId | None,
        options: CallOptions,
    ) -> Any:
        """Send a request to the client; block for its result as an ``mcp_types`` model."""
        call = self.submit(method, params, related_request=related_request, **options)
        return call.decode_result_with(parser_for(SERVER_REQUEST_RESULTS[method])).result()

    def create_message(
        self,
        messages: Iterable[dict[str, Any]],
        *,
        max_tokens: int,
        system_prompt: str | None = None,
        extra_params: Mapping[str, Any] | None = None,
        related_request: RequestId | None = None,
        **options: Unpack[CallOptions],
    ) -> mcp_types.CreateMessageResult | mcp_types.CreateMessageResultWithTools:
        """Ask the client to sample from its model (``sampling/createMessage``); a
        ``CreateMessageResultWithTools`` when the client answered with a list of content
        blocks (tool use).

        ``extra_params``: further members of the request's params, by their wire names
        (``{"temperature": 0.2, "stopSequences": [...]}``); ``options``: the
        :class:`~mcp_sync.call_options.CallOptions` (see :meth:`list_roots`).
        """
        self.require_capability("sampling", "sampling/createMessage")
        params = create_message_params(
            messages, max_tokens=max_tokens, system_prompt=system_prompt, extra_params=extra_params
        )
        return self._typed_request("sampling/createMessage", params, related_request, options)  # type: ignore[no-any-return]

    def elicit(
        self,
        message: str,
        requested_schema: dict[str, Any] | None = None,
        *,
        url: str | None = None,
        elicitation_id: str | None = None,
        related_request: RequestId | None = None,
        **options: Unpack[CallOptions],
    ) -> mcp_types.ElicitResult:
        """Ask the user for input through the client (``elicitation/create``).

        Form mode with ``requested_schema``; URL mode with ``url`` (and ``elicitation_id``).
        ``options``: the :class:`~mcp_sync.call_options.CallOptions` (see :meth:`list_roots`).
        """
        self.require_capability("elicitation", "elicitation/create")
        if url is not None and not self.peer_supports("elicitation", "url"):
            raise CapabilityError(
                "elicitation/create in URL mode needs the client's 'elicitation.url' capability"
            )
        params = elicit_params(message, requested_schema, url=url, elicitation_id=elicitation_id)
        return self._typed_request("elicitation/create", params, related_request, options)  # type: ignore[no-any-return]
