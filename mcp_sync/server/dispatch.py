"""One client connection to a :class:`~mcp_sync.server.Server`: the handshake, and the routing
of each request to its feature's handler (after the initialization and capability checks)."""

from __future__ import annotations

import functools
import uuid
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from typing_extensions import Unpack

from ..call_options import CallOptions
from ..cancel import CancelToken
from ..endpoint import Endpoint
from ..errors import CapabilityError, McpError
from ..jsonrpc import METHOD_NOT_FOUND, Notification, RequestId
from ..lifecycle import Lifecycle, Role
from ..protocol import InboundRequest
from ..results import SERVER_REQUEST_RESULTS, parser_for
from ..session import LOG_LEVELS, Session
from ..transports.base import Transport
from ..workers import WorkerPool
from . import completion, logging_bridge, prompts, resources, tools
from .registry import MethodHandler
from .scope import RequestScope

if TYPE_CHECKING:  # pragma: no cover
    import mcp_types

    from .server import Server

__all__ = ["ServerSession", "FEATURE_HANDLERS", "INPUT_METHODS", "run_feature"]

FEATURE_HANDLERS: dict[str, MethodHandler] = {
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
}
"""The built-in request methods after the handshake, and the function serving each."""

INPUT_METHODS = frozenset({"tools/call", "prompts/get", "resources/read"})
"""The requests whose handlers may need input from the client while they run (elicitation,
sampling, roots): the only ones that may answer ``input_required`` at 2026-07-28."""


def run_feature(scope: RequestScope, call: Callable[[], Any]) -> Any:
    """Run the handler of a request in :data:`INPUT_METHODS` (``call()``) for the request of
    ``scope``, and return its result.

    Every ``tools/call``, ``prompts/get`` and ``resources/read`` goes through here, in both
    eras; this is where the input a handler asks for is gathered.
    """
    return call()


class ServerSession(Session):
    """One client connection to a :class:`Server`."""

    def __init__(self, server: Server, transport: Transport, *, max_workers: int, pool: WorkerPool | None = None) -> None:
        endpoint = Endpoint(
            transport,
            request_handler=self._handle_request,
            notification_handler=self._handle_notification,
            max_workers=max_workers,
            max_queued_callbacks=server.max_queued_callbacks,
            on_cancelled=server.on_cancelled,
            pool=pool,
            inline_handlers={"ping": lambda _request: {}},
            name=f"mcp_sync-server-{server.name}",
        )
        super().__init__(endpoint, Role.SERVER)
        self.server = server
        self.log_level: str = "debug"
        self.on_roots_changed: Callable[[], Any] | None = None
        self._handlers: dict[str, Callable[[InboundRequest, CancelToken], Any]] = {
            "initialize": self._on_initialize,
            **{method: functools.partial(handler, self) for method, handler in FEATURE_HANDLERS.items()},
        }
        self.subscriptions: set[str] = set()
        self.declared_capabilities: dict[str, Any] = {}
        """What this server declared in its ``initialize`` answer."""

    def close(self, grace: float = 5.0) -> None:
        """Close the connection (cancels running handlers, joins threads)."""
        self.endpoint.close(grace)

    # -- dispatch -----------------------------------------------------------------------------
    def _handle_request(self, request: InboundRequest) -> Any:
        scope = RequestScope(self, request.token, request=request)
        request.context = scope
        handler = self._handlers.get(request.method)
        if handler is None:
            custom = self.server.registry.method(request.method)
            if custom is None:
                raise McpError(METHOD_NOT_FOUND, f"Method not found: {request.method}")
            self._admit(request)
            return custom(self, request, request.token)
        self._admit(request)
        if request.method != "initialize":
            Lifecycle.check_served(request.method, self.declared_capabilities)
        if request.method in INPUT_METHODS:
            return run_feature(scope, lambda: handler(request, request.token))
        return handler(request, request.token)

    def _admit(self, request: InboundRequest) -> None:
        """Raise the error owed if the lifecycle does not allow ``request`` now."""
        with self.lifecycle_lock:
            self.lifecycle.admit(request.method, request.params)

    def _handle_notification(self, notification: Notification) -> None:
        with self.lifecycle_lock:
            if not self.lifecycle.receive_notification(notification.method):
                return
        if notification.method == "notifications/roots/list_changed":
            if self.on_roots_changed is not None:
                self.on_roots_changed()

    # -- lifecycle ----------------------------------------------------------------------------
    def _on_initialize(self, request: InboundRequest, token: CancelToken) -> dict[str, Any]:
        declared = self.server.capabilities()
        with self.lifecycle_lock:  # a request admitted once initialized sees what we declared
            version = self.lifecycle.receive_initialize(request.params)
            self.declared_capabilities = declared
        result: dict[str, Any] = {
            "protocolVersion": version,
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
    ) -> bool:
        """Send ``notifications/message`` unless ``level`` is below the client's level.

        ``about``: the inbound request whose handler logs (``related_request``: its id); a
        message about a request is sent only while it runs (False once it was cancelled or
        answered).
        """
        if LOG_LEVELS.index(level) < LOG_LEVELS.index(self.log_level):
            return False
        params: dict[str, Any] = {"level": level, "data": data}
        if logger is not None:
            params["logger"] = logger
        if about is not None:
            return self.endpoint.notify_about(about, "notifications/message", params)
        self.send_notification("notifications/message", params, related_request=related_request)
        return True

    # -- requests to the client -----------------------------------------------------------------
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
        self, method: str, params: dict[str, Any] | None, related_request: RequestId | None, options: CallOptions
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
        params: dict[str, Any] = {"messages": list(messages), "maxTokens": max_tokens, **(extra_params or {})}
        if system_prompt is not None:
            params["systemPrompt"] = system_prompt
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
        params: dict[str, Any] = {"message": message}
        if url is not None:
            if not self.peer_supports("elicitation", "url"):
                raise CapabilityError("elicitation/create in URL mode needs the client's 'elicitation.url' capability")
            params.update({"mode": "url", "url": url, "elicitationId": elicitation_id or uuid.uuid4().hex})
        else:
            params["requestedSchema"] = requested_schema or {"type": "object", "properties": {}}
        return self._typed_request("elicitation/create", params, related_request, options)  # type: ignore[no-any-return]
