"""The MCP server: register handlers with decorators, serve them over any transport.

Example::

    from mcp_sync import Server, Context

    server = Server("demo", version="1.0.0")

    @server.tool(timeout=30)
    def slow(seconds: float, ctx: Context) -> str:
        \"\"\"Work for `seconds`, stopping early when cancelled.\"\"\"
        if ctx.wait(seconds):
            return "stopped"
        return "done"

    if __name__ == "__main__":
        server.run()

Each connection gets a :class:`ServerSession`. Plain ``def`` handlers run on the session's
bounded worker pool (over HTTP, the app's pool shared by every session) with a
:class:`~mcp_sync.context.Context` injected by annotation.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import signal
import sys
import threading
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping, TypeVar

from . import deadlines
from .cancel import Cancelled, CancelToken
from .context import Context
from .endpoint import CancelObserver, Endpoint
from .errors import CapabilityError, McpError, describe_base_exception
from .handlers import ArgumentError, Signature, inspect_handler, json_schema_of
from .jsonrpc import INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, RESOURCE_NOT_FOUND, Notification, RequestId
from .prompts import RegisteredPrompt, to_prompt_result
from .protocol import InboundRequest
from .resources import RegisteredResource, to_resource_contents
from .results import SERVER_REQUEST_RESULTS, parser_for
from .schemas import DeclaredSchema, declare_schema
from .session import LOG_LEVELS, Session, negotiate_version
from .tool_results import output_schema_for, to_call_tool_result, tool_error
from .transports.base import Transport
from .transports.batching import BATCH_REVISIONS, BatchingTransport
from .uri_template import UriTemplate
from .workers import MAX_QUEUED_CALLBACKS, PoolStats, WorkerPool

if TYPE_CHECKING:  # pragma: no cover
    import mcp_types

    from .http_app import HttpServerHandle, McpWsgiApp

__all__ = ["Server", "ServerStats", "ServerSession", "ServerHandle", "RegisteredTool", "RequestScope", "McpLogHandler"]

_log = logging.getLogger("mcp_sync.server")

F = TypeVar("F", bound=Callable[..., Any])
MethodHandler = Callable[["ServerSession", InboundRequest, CancelToken], Any]
Completer = Callable[..., Any]


@dataclass
class RegisteredTool:
    """A tool as the server knows it."""

    name: str
    signature: Signature
    description: str | None
    title: str | None = None
    timeout: float | None = None
    annotations: dict[str, Any] | None = None
    output_schema: dict[str, Any] | None = None
    wrap_output: bool = False
    meta: dict[str, Any] | None = field(default=None)
    declared_output: DeclaredSchema | None = None
    """A hand-written ``output_schema``: structured results are validated against it."""

    def check_output(self, result: dict[str, Any]) -> dict[str, Any]:
        """``result`` if it honours a declared output schema, else a tool error saying how
        it does not (a result that is itself an error is not checked)."""
        if self.declared_output is None or result.get("isError"):
            return result
        structured = result.get("structuredContent")
        if structured is None:
            problems = ["no structuredContent (return a dict or a pydantic model)"]
        else:
            problems = self.declared_output.problems(structured)
        if not problems:
            return result
        _log.warning("tool %s broke its output schema: %s", self.name, "; ".join(problems))
        return tool_error(
            f"Tool {self.name!r} returned a result that does not match its output schema: " + "; ".join(problems)
        )

    def to_wire(self) -> dict[str, Any]:
        """The ``Tool`` object listed by ``tools/list``."""
        tool: dict[str, Any] = {"name": self.name, "inputSchema": self.signature.input_schema()}
        if self.title:
            tool["title"] = self.title
        if self.description:
            tool["description"] = self.description
        if self.output_schema is not None:
            tool["outputSchema"] = self.output_schema
        if self.annotations:
            tool["annotations"] = self.annotations
        if self.meta:
            tool["_meta"] = self.meta
        return tool


def encode_cursor(offset: int) -> str:
    """An opaque pagination cursor."""
    return base64.urlsafe_b64encode(json.dumps({"o": offset}).encode()).decode()


def decode_cursor(cursor: Any) -> int:
    """The offset inside a cursor made by :func:`encode_cursor`; -32602 for a bad one."""
    if cursor is None:
        return 0
    try:
        offset = json.loads(base64.urlsafe_b64decode(str(cursor).encode()))["o"]
        if type(offset) is not int or offset < 0:
            raise ValueError(offset)
        return offset
    except Exception:
        raise McpError(INVALID_PARAMS, "Invalid cursor") from None


def paginate(items: list[Any], params: dict[str, Any], page_size: int, key: str) -> dict[str, Any]:
    """One page of ``items`` for a list request, with ``nextCursor`` when more remain."""
    offset = decode_cursor(params.get("cursor"))
    page = items[offset : offset + page_size]
    result: dict[str, Any] = {key: page}
    if offset + page_size < len(items):
        result["nextCursor"] = encode_cursor(offset + page_size)
    return result


@dataclass(frozen=True)
class ServerStats:
    """A snapshot of a :class:`Server`'s live sessions (see :meth:`Server.stats`).

    Attributes:
        sessions: live sessions, over every transport.
        inbound_in_flight: client requests queued or running, summed over the sessions.
        outbound_in_flight: requests to clients (roots, sampling, elicitation) awaiting an
            answer, summed over the sessions.
        handlers_queued: handler tasks waiting for a free worker, summed over the distinct
            pools of the sessions (a pool shared by many sessions counts once).
        handlers_running: workers running a handler, summed likewise (handlers of sessions
            that already ended included, until they return).
        dropped: messages from clients ignored on purpose, summed over the live sessions
            (see :attr:`Endpoint.dropped <mcp_sync.endpoint.Endpoint.dropped>`).
    """

    sessions: int
    inbound_in_flight: int
    outbound_in_flight: int
    handlers_queued: int
    handlers_running: int
    dropped: int


class Server:
    """An MCP server definition: its identity and its handlers.

    Args:
        name: ``serverInfo.name``.
        version: ``serverInfo.version``.
        instructions: optional ``instructions`` for the client.
        max_workers: size of each connection's handler pool (sessions of an HTTP app share
            the app's pool instead: ``wsgi_app(max_workers=...)``).
        max_queued_callbacks: bound of each connection's callback queue (see
            :doc:`/limits`).
        on_cancelled: ``on_cancelled(request_id, reason)`` for every
            ``notifications/cancelled`` a client sends (for logs and UIs); runs on the
            connection's callback thread.
        page_size: items per page of every list.
        declare: capabilities to declare even with nothing registered yet
            (``"resources"``, ``"prompts"``, ``"completions"``), for servers that register
            handlers at run time. A capability is otherwise declared when something of that
            kind is registered when a client connects.
    """

    def __init__(
        self,
        name: str,
        version: str = "0.0.0",
        *,
        instructions: str | None = None,
        max_workers: int = 8,
        page_size: int = 100,
        declare: Iterable[str] = (),
        max_queued_callbacks: int = MAX_QUEUED_CALLBACKS,
        on_cancelled: CancelObserver | None = None,
    ) -> None:
        self.name = name
        self.declare = frozenset(declare)
        self.version = version
        self.instructions = instructions
        self.max_workers = max_workers
        self.page_size = page_size
        self.max_queued_callbacks = max_queued_callbacks
        self.on_cancelled = on_cancelled
        self._lock = threading.Lock()
        self._tools: dict[str, RegisteredTool] = {}
        self._resources: dict[str, RegisteredResource] = {}
        self._prompts: dict[str, RegisteredPrompt] = {}
        self._completers: dict[tuple[str, str, str], Completer] = {}
        self._sessions: set[ServerSession] = set()
        self._methods: dict[str, MethodHandler] = {}
        self._extensions: list[Callable[[ServerSession], None]] = []

    # -- registration -------------------------------------------------------------------------
    def tool(
        self,
        name: str | None = None,
        *,
        description: str | None = None,
        title: str | None = None,
        timeout: float | None = None,
        annotations: dict[str, Any] | None = None,
        structured_output: bool | None = None,
        input_schema: Mapping[str, Any] | None = None,
        output_schema: Mapping[str, Any] | None = None,
    ) -> Callable[[F], F]:
        """Register a function as a tool (a decorator).

        The input schema comes from the type hints; descriptions from the docstring and
        ``Annotated`` metadata. A parameter annotated :class:`~mcp_sync.context.Context` is
        injected. ``timeout=`` gives the tool a server-side deadline: its token fires after
        that many seconds and the caller gets a tool error saying it timed out.
        ``structured_output=False`` suppresses the output schema.

        Arguments that do not match the input schema are answered with a tool error
        (``isError: true``) naming each wrong argument and what was expected, so that the
        model can correct its call; an unknown tool, or a request whose ``name`` is missing
        or whose ``arguments`` is not an object, is a JSON-RPC error (-32602).

        ``input_schema=`` and ``output_schema=`` declare hand-written JSON Schemas (object
        schemas; ``$schema`` picks the dialect, JSON Schema 2020-12 without one), published
        verbatim and validated with the ``jsonschema`` package (the ``jsonschema`` extra).
        With ``input_schema`` the type hints are not used for the arguments: each argument
        is passed as a keyword argument of the same name, with the value decoded from JSON;
        a ``**kwargs`` parameter receives every argument. Each property of the schema needs a
        parameter (or ``**kwargs``), and each parameter without a default must be
        ``required``. With ``output_schema`` the tool returns a dict (or a pydantic model),
        sent as ``structuredContent`` and its JSON text; a result that does not match is
        replaced by a tool error saying how (a server MUST return conforming results).
        """

        def decorator(fn: F) -> F:
            self.add_tool(
                fn,
                name=name,
                description=description,
                title=title,
                timeout=timeout,
                annotations=annotations,
                structured_output=structured_output,
                input_schema=input_schema,
                output_schema=output_schema,
            )
            return fn

        return decorator

    def add_tool(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        title: str | None = None,
        timeout: float | None = None,
        annotations: dict[str, Any] | None = None,
        structured_output: bool | None = None,
        input_schema: Mapping[str, Any] | None = None,
        output_schema: Mapping[str, Any] | None = None,
    ) -> RegisteredTool:
        """Register ``fn`` as a tool (see :meth:`tool`); notifies connected clients."""
        tool_name = name or fn.__name__
        if timeout is not None and timeout <= 0:
            raise ValueError("timeout must be positive")
        if output_schema is not None and structured_output is False:
            raise ValueError("output_schema= declares structured output; structured_output=False forbids it")
        declared_input = None if input_schema is None else declare_schema(input_schema, f"{tool_name}: input_schema")
        declared_output = None if output_schema is None else declare_schema(output_schema, f"{tool_name}: output_schema")
        signature = inspect_handler(fn, tool_name, declared_input)
        schema, wrap = (None, False)
        if declared_output is not None:
            schema = declared_output.schema
        elif structured_output is not False:
            schema, wrap = output_schema_for(signature.return_annotation, json_schema_of)
        tool = RegisteredTool(
            name=tool_name,
            signature=signature,
            description=description if description is not None else signature.description,
            title=title,
            timeout=timeout,
            annotations=annotations,
            output_schema=schema,
            wrap_output=wrap,
            declared_output=declared_output,
        )
        self._register(self._tools, tool_name, tool, "tools")
        return tool

    def remove_tool(self, name: str) -> None:
        """Unregister a tool; notifies connected clients. KeyError if unknown."""
        self._register(self._tools, name, None, "tools")

    def _register(self, registry: dict[str, Any], key: str, item: Any, kind: str) -> None:
        """Add (or, with ``item=None``, remove: KeyError if unknown) a handler and tell the
        connected clients that the ``kind`` list changed."""
        with self._lock:
            if item is None:
                del registry[key]
            else:
                registry[key] = item
        self.notify_list_changed(kind)

    def tools(self) -> list[RegisteredTool]:
        """The registered tools, in registration order."""
        with self._lock:
            return list(self._tools.values())

    def resource(
        self,
        uri: str,
        *,
        name: str | None = None,
        description: str | None = None,
        title: str | None = None,
        mime_type: str | None = None,
    ) -> Callable[[F], F]:
        """Register a resource (a decorator).

        ``uri`` is a fixed URI, or an RFC 6570 template such as ``"weather://{city}/now"``
        whose variables are passed to the function as arguments. The function returns
        ``str`` (text), ``bytes`` (blob), JSON-able data, or content objects.
        """

        def decorator(fn: F) -> F:
            self.add_resource(fn, uri, name=name, description=description, title=title, mime_type=mime_type)
            return fn

        return decorator

    def add_resource(
        self,
        fn: Callable[..., Any],
        uri: str,
        *,
        name: str | None = None,
        description: str | None = None,
        title: str | None = None,
        mime_type: str | None = None,
    ) -> RegisteredResource:
        """Register ``fn`` as a resource or template (see :meth:`resource`)."""
        template = UriTemplate(uri)
        signature = inspect_handler(fn, name or fn.__name__)
        missing = set(template.variables) - set(signature.param_names)
        if missing:
            raise TypeError(f"{fn.__name__}: no parameter for template variables {sorted(missing)}")
        resource = RegisteredResource(
            uri=uri,
            name=name or fn.__name__,
            signature=signature,
            template=template,
            description=description if description is not None else signature.description,
            title=title,
            mime_type=mime_type,
        )
        self._register(self._resources, uri, resource, "resources")
        return resource

    def remove_resource(self, uri: str) -> None:
        """Unregister a resource or template; notifies connected clients."""
        self._register(self._resources, uri, None, "resources")

    def prompt(self, name: str | None = None, *, description: str | None = None, title: str | None = None) -> Callable[[F], F]:
        """Register a prompt (a decorator). Its arguments come from the type hints; it
        returns a string, a message, or a list of messages."""

        def decorator(fn: F) -> F:
            self.add_prompt(fn, name=name, description=description, title=title)
            return fn

        return decorator

    def add_prompt(
        self, fn: Callable[..., Any], *, name: str | None = None, description: str | None = None, title: str | None = None
    ) -> RegisteredPrompt:
        """Register ``fn`` as a prompt (see :meth:`prompt`)."""
        prompt_name = name or fn.__name__
        signature = inspect_handler(fn, prompt_name)
        prompt = RegisteredPrompt(
            name=prompt_name,
            signature=signature,
            description=description if description is not None else signature.description,
            title=title,
        )
        self._register(self._prompts, prompt_name, prompt, "prompts")
        return prompt

    def remove_prompt(self, name: str) -> None:
        """Unregister a prompt; notifies connected clients."""
        self._register(self._prompts, name, None, "prompts")

    def completion(self, ref: str, argument: str) -> Callable[[F], F]:
        """Register a completer for a prompt or resource-template argument (a decorator).

        ``ref`` is ``"prompt:<name>"`` or ``"resource:<uri template>"``. The function is
        called as ``fn(value, context_arguments)`` and returns a list of strings (at most
        100 are sent) or a dict ``{"values", "total", "hasMore"}``.
        """
        kind, _, name = ref.partition(":")
        if kind not in ("prompt", "resource") or not name:
            raise ValueError('ref must be "prompt:<name>" or "resource:<uri template>"')

        def decorator(fn: F) -> F:
            with self._lock:
                self._completers[(kind, name, argument)] = fn
            return fn

        return decorator

    def resources(self) -> list[RegisteredResource]:
        """Registered resources and templates."""
        with self._lock:
            return list(self._resources.values())

    def prompts(self) -> list[RegisteredPrompt]:
        """Registered prompts."""
        with self._lock:
            return list(self._prompts.values())

    def notify_resource_updated(self, uri: str) -> None:
        """Send ``notifications/resources/updated`` to every session subscribed to ``uri``."""
        for session in self.sessions():
            if uri in session.subscriptions and not session.closed:
                try:
                    session.send_notification("notifications/resources/updated", {"uri": uri})
                except Exception:
                    _log.debug("resource update not delivered", exc_info=True)

    def logging_handler(self, level: int = logging.NOTSET) -> McpLogHandler:
        """A :class:`logging.Handler` that forwards records to every connected client as
        ``notifications/message`` (each client's ``logging/setLevel`` still applies)."""
        return McpLogHandler(self, level)

    def add_method(self, method: str, handler: MethodHandler) -> None:
        """Serve a custom request method: ``handler(session, request, token) -> result``."""
        self._methods[method] = handler

    # -- capabilities -------------------------------------------------------------------------
    def capabilities(self) -> dict[str, Any]:
        """The ``capabilities`` this server declares in ``initialize``."""
        caps: dict[str, Any] = {"tools": {"listChanged": True}, "logging": {}}
        with self._lock:
            has_resources, has_prompts = bool(self._resources), bool(self._prompts)
            has_completers = bool(self._completers)
        if has_resources or "resources" in self.declare:
            caps["resources"] = {"subscribe": True, "listChanged": True}
        if has_prompts or "prompts" in self.declare:
            caps["prompts"] = {"listChanged": True}
        if has_completers or has_prompts or has_resources or self.declare & {"completions", "prompts", "resources"}:
            caps["completions"] = {}
        return caps

    # -- connections --------------------------------------------------------------------------
    def connect(
        self,
        transport: Transport,
        *,
        max_workers: int | None = None,
        read: bool = True,
        pool: WorkerPool | None = None,
        batches: bool = True,
    ) -> ServerSession:
        """Serve one connection over ``transport`` (starts its reader thread).

        ``read=False`` starts no reader: the caller feeds messages to
        ``session.endpoint.receive_line`` itself (as the HTTP app does). ``pool``: run the
        session's handlers on this shared pool (the HTTP app's) instead of a pool of the
        session's own with ``max_workers`` threads. ``batches``: answer JSON-RPC batch
        lines in a session at revision 2025-03-26 (a
        :class:`~mcp_sync.transports.batching.BatchingTransport` around ``transport``);
        the HTTP app, which answers batches itself, passes False.
        """
        if batches:
            transport = BatchingTransport(transport, lambda: session.protocol_version in BATCH_REVISIONS)
        session = ServerSession(self, transport, max_workers=max_workers or self.max_workers, pool=pool)
        with self._lock:
            self._sessions.add(session)
        session.add_close_callback(lambda: self._forget(session))
        if read:
            session.endpoint.start()
        return session

    def _forget(self, session: ServerSession) -> None:
        with self._lock:
            self._sessions.discard(session)

    def sessions(self) -> list[ServerSession]:
        """The live sessions."""
        with self._lock:
            return list(self._sessions)

    def stats(self) -> ServerStats:
        """Counts for monitoring, over every live session (see :class:`ServerStats`)."""
        sessions = self.sessions()
        inbound = outbound = dropped = 0
        pools: dict[int, PoolStats] = {}
        for session in sessions:
            ins, outs = session.endpoint.in_flight()
            inbound += ins
            outbound += outs
            dropped += sum(dict(session.endpoint.dropped).values())  # dict(): one atomic copy
            pool = session.endpoint.pool
            if id(pool) not in pools:
                pools[id(pool)] = pool.stats()
        return ServerStats(
            sessions=len(sessions),
            inbound_in_flight=inbound,
            outbound_in_flight=outbound,
            handlers_queued=sum(p.queued for p in pools.values()),
            handlers_running=sum(p.busy for p in pools.values()),
            dropped=dropped,
        )

    def serve_in_thread(self, transport: Transport, *, max_workers: int | None = None) -> ServerHandle:
        """Serve ``transport`` in the background; returns a handle with ``stop()``.

        For embedding a server in an existing threaded service.
        """
        return ServerHandle(self.connect(transport, max_workers=max_workers))

    def wsgi_app(self, **options: Any) -> McpWsgiApp:
        """A WSGI application serving this server over Streamable HTTP, to mount in Flask
        or run under any threaded WSGI server. Options: see :class:`~mcp_sync.http_app.McpWsgiApp`."""
        from .http_app import McpWsgiApp

        return McpWsgiApp(self, **options)

    def serve_http(self, host: str = "127.0.0.1", port: int = 0, *, path: str = "/mcp", **options: Any) -> HttpServerHandle:
        """Serve Streamable HTTP in a background thread (standard-library threaded WSGI
        server); returns a handle with ``url`` and ``stop()``. ``port=0`` picks a free port.
        The options of :func:`~mcp_sync.http_server.serve_http` (``backlog``,
        ``read_timeout``, ``max_connections``) go to the server, the others to the app."""
        from .http_server import SERVER_OPTIONS, serve_http

        server_options = {name: options.pop(name) for name in SERVER_OPTIONS if name in options}
        return serve_http(self.wsgi_app(path=path, **options), host, port, **server_options)

    def run(
        self,
        transport: str | Transport = "stdio",
        *,
        grace: float = 5.0,
        host: str = "127.0.0.1",
        port: int = 8000,
        path: str = "/mcp",
    ) -> None:
        """Serve until the connection ends (stdin EOF), SIGTERM or Ctrl-C.

        ``transport`` is ``"stdio"`` (default), ``"http"`` (Streamable HTTP on
        ``host:port`` at ``path``, 127.0.0.1 by default) or a transport object. Running
        handlers are cancelled and get ``grace`` seconds to finish (over HTTP, all sessions
        together: the app's ``shutdown_grace``).

        Logging is left to the program: ``run()`` configures no logger (see
        :doc:`/logging` for the ``mcp_sync.*`` logger names and how to see them).
        """
        if transport == "http":
            self._run_http(host, port, path, grace)
            return
        if isinstance(transport, str):
            if transport != "stdio":
                raise ValueError(f"unknown transport {transport!r}")
            from .transports.stdio import StdioTransport, claim_stdout

            with claim_stdout() as out:  # print() in a handler must not corrupt the protocol
                self._serve(StdioTransport(stdout=out), grace)
            return
        self._serve(transport, grace)

    def _serve(self, transport: Transport, grace: float) -> None:
        stop = threading.Event()
        previous = None
        in_main = threading.current_thread() is threading.main_thread()
        if in_main:
            previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
        # the reader starts inside the try: it may serve requests before start() returns,
        # and a Ctrl-C in that window must still close the session cleanly
        session = self.connect(transport, read=False)
        try:
            session.endpoint.start()
            while not stop.is_set() and not session.endpoint.wait_closed(0.1):
                pass
        except KeyboardInterrupt:
            pass
        finally:
            session.close(grace)
            if in_main and previous is not None:
                signal.signal(signal.SIGTERM, previous)

    def _run_http(self, host: str, port: int, path: str, grace: float) -> None:
        handle = self.serve_http(host, port, path=path, shutdown_grace=grace)
        print(f"mcp_sync: serving {self.name} at {handle.url}", file=sys.stderr, flush=True)
        stop = threading.Event()
        previous = None
        in_main = threading.current_thread() is threading.main_thread()
        if in_main:
            previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
        try:
            while not stop.wait(0.1):
                pass
        except KeyboardInterrupt:
            pass
        finally:
            handle.stop()
            if in_main and previous is not None:
                signal.signal(signal.SIGTERM, previous)

    def notify_list_changed(self, kind: str) -> None:
        """Send ``notifications/<kind>/list_changed`` to every initialized session."""
        for session in self.sessions():
            if session.initialized and not session.closed:
                try:
                    session.send_notification(f"notifications/{kind}/list_changed")
                except Exception:
                    _log.debug("list_changed not delivered", exc_info=True)


_CAPABILITY_OF = {
    "tools": "tools",
    "resources": "resources",
    "prompts": "prompts",
    "completion": "completions",
    "logging": "logging",
}
"""Method prefix -> the server capability it needs."""


class ServerHandle:
    """A server connection running in the background (see :meth:`Server.serve_in_thread`)."""

    def __init__(self, session: ServerSession) -> None:
        self.session = session

    def stop(self, grace: float = 5.0) -> None:
        """Close the connection, cancel running handlers, join the threads."""
        self.session.close(grace)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the connection ends; True if it has."""
        return self.session.endpoint.wait_closed(timeout)

    def __enter__(self) -> ServerHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


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
        super().__init__(endpoint)
        self.server = server
        self.log_level: str = "debug"
        self.client_initialized = threading.Event()
        self.on_roots_changed: Callable[[], Any] | None = None
        self._handlers: dict[str, Callable[[InboundRequest, CancelToken], Any]] = {
            "initialize": self._on_initialize,
            "tools/list": self._on_list_tools,
            "tools/call": self._on_call_tool,
            "logging/setLevel": self._on_set_level,
            "resources/list": self._on_list_resources,
            "resources/templates/list": self._on_list_templates,
            "resources/read": self._on_read_resource,
            "resources/subscribe": self._on_subscribe,
            "resources/unsubscribe": self._on_unsubscribe,
            "prompts/list": self._on_list_prompts,
            "prompts/get": self._on_get_prompt,
            "completion/complete": self._on_complete,
        }
        self.subscriptions: set[str] = set()
        self.declared_capabilities: dict[str, Any] = {}
        """What this server declared in its ``initialize`` answer."""

    def close(self, grace: float = 5.0) -> None:
        """Close the connection (cancels running handlers, joins threads)."""
        self.endpoint.close(grace)

    # -- dispatch -----------------------------------------------------------------------------
    def _handle_request(self, request: InboundRequest) -> Any:
        handler = self._handlers.get(request.method)
        if handler is None:
            custom = self.server._methods.get(request.method)
            if custom is None:
                raise McpError(METHOD_NOT_FOUND, f"Method not found: {request.method}")
            self._require_initialized(request)
            return custom(self, request, request.token)
        if request.method != "initialize":
            self._require_initialized(request)
            capability = _CAPABILITY_OF.get(request.method.partition("/")[0])
            if capability is not None and capability not in self.declared_capabilities:
                raise McpError(
                    METHOD_NOT_FOUND,
                    f"{request.method}: this server did not declare the {capability!r} capability",
                )
        return handler(request, request.token)

    def _require_initialized(self, request: InboundRequest) -> None:
        if not self.initialized:
            raise McpError(INVALID_REQUEST, f"{request.method} received before initialization completed")

    def _handle_notification(self, notification: Notification) -> None:
        if notification.method == "notifications/initialized":
            self.client_initialized.set()
        elif notification.method == "notifications/roots/list_changed":
            if self.on_roots_changed is not None:
                self.on_roots_changed()

    # -- lifecycle ----------------------------------------------------------------------------
    def _on_initialize(self, request: InboundRequest, token: CancelToken) -> dict[str, Any]:
        params = request.params
        if self.initialized:
            raise McpError(INVALID_REQUEST, "initialize was already received")
        capabilities = params.get("capabilities")
        info = params.get("clientInfo")
        self.protocol_version = negotiate_version(params.get("protocolVersion"))
        self.peer_capabilities = capabilities if isinstance(capabilities, dict) else {}
        self.peer_info = info if isinstance(info, dict) else {}
        self.declared_capabilities = self.server.capabilities()
        result: dict[str, Any] = {
            "protocolVersion": self.protocol_version,
            "capabilities": self.declared_capabilities,
            "serverInfo": {"name": self.server.name, "version": self.server.version},
        }
        if self.server.instructions:
            result["instructions"] = self.server.instructions
        self._initialized.set()
        return result

    def _on_set_level(self, request: InboundRequest, token: CancelToken) -> dict[str, Any]:
        level = request.params.get("level")
        if level not in LOG_LEVELS:
            raise McpError(INVALID_PARAMS, f"Invalid log level: {level!r}")
        self.log_level = level
        return {}

    def send_log(
        self, level: str, data: Any, logger: str | None = None, *, related_request: RequestId | None = None
    ) -> bool:
        """Send ``notifications/message`` unless ``level`` is below the client's level."""
        if LOG_LEVELS.index(level) < LOG_LEVELS.index(self.log_level):
            return False
        params: dict[str, Any] = {"level": level, "data": data}
        if logger is not None:
            params["logger"] = logger
        self.send_notification("notifications/message", params, related_request=related_request)
        return True

    # -- tools --------------------------------------------------------------------------------
    def _on_list_tools(self, request: InboundRequest, token: CancelToken) -> dict[str, Any]:
        tools = [tool.to_wire() for tool in self.server.tools()]
        return paginate(tools, request.params, self.server.page_size, "tools")

    def _on_call_tool(self, request: InboundRequest, token: CancelToken) -> dict[str, Any]:
        params = request.params
        name = params.get("name")
        if not isinstance(name, str):
            raise McpError(INVALID_PARAMS, "tools/call needs a tool name")
        with self.server._lock:
            tool = self.server._tools.get(name)
        if tool is None:
            raise McpError(INVALID_PARAMS, f"Unknown tool: {name}")
        arguments = params.get("arguments")
        if arguments is not None and not isinstance(arguments, dict):
            raise McpError(INVALID_PARAMS, "Invalid arguments: must be an object")
        handler_token = token
        deadline: deadlines.Deadline | None = None
        if tool.timeout is not None:
            handler_token = token.child()
            message = f"Tool {name!r} timed out after {tool.timeout:g} s"

            def expire() -> None:
                # answer first, then stop the handler: a handler that returns as soon as its
                # token fires must not beat the timeout error to the response
                if self.endpoint.respond(request, tool_error(message)):
                    handler_token.cancel(message)

            deadline = deadlines.schedule(tool.timeout, expire)
        ctx = Context(self, request, handler_token)
        try:
            kwargs = tool.signature.bind(arguments, ctx)
            value = tool.signature.fn(**kwargs)
        except ArgumentError as exc:  # the model can correct its call: a tool error (SEP-1303)
            return tool_error(f"Invalid arguments for tool {name!r}: " + "; ".join(exc.problems))
        except McpError:
            raise
        except Cancelled as exc:
            if handler_token.cancelled and not token.cancelled and tool.timeout is not None:
                return tool_error(f"Tool {name!r} timed out after {tool.timeout:g} s")
            return tool_error(f"Tool {name!r} was cancelled: {exc}")
        except Exception as exc:
            _log.debug("tool %s failed", name, exc_info=True)
            return tool_error(str(exc) or type(exc).__name__)
        except BaseException as exc:  # SystemExit, KeyboardInterrupt, ...: a tool error; the server lives on
            _log.error("tool %s raised %s", name, type(exc).__name__, exc_info=True)
            return tool_error(describe_base_exception(exc))
        finally:
            if deadline is not None:
                deadline.cancel()
        return tool.check_output(to_call_tool_result(value, tool.wrap_output))

    # -- resources ----------------------------------------------------------------------------
    def _on_list_resources(self, request: InboundRequest, token: CancelToken) -> dict[str, Any]:
        items = [r.to_wire() for r in self.server.resources() if not r.is_template]
        return paginate(items, request.params, self.server.page_size, "resources")

    def _on_list_templates(self, request: InboundRequest, token: CancelToken) -> dict[str, Any]:
        items = [r.to_wire() for r in self.server.resources() if r.is_template]
        return paginate(items, request.params, self.server.page_size, "resourceTemplates")

    def _find_resource(self, uri: Any) -> tuple[RegisteredResource, dict[str, str]]:
        if not isinstance(uri, str):
            raise McpError(INVALID_PARAMS, "a resource request needs a uri")
        resources = self.server.resources()
        for resource in resources:
            if not resource.is_template and resource.uri == uri:
                return resource, {}
        for resource in resources:
            if resource.is_template:
                values = resource.template.match(uri)
                if values is not None:
                    return resource, values
        raise McpError(RESOURCE_NOT_FOUND, f"Resource not found: {uri}", {"uri": uri})

    def _on_read_resource(self, request: InboundRequest, token: CancelToken) -> dict[str, Any]:
        uri = request.params.get("uri")
        resource, values = self._find_resource(uri)
        ctx = Context(self, request, token)
        kwargs = resource.signature.bind(values, ctx)
        value = resource.signature.fn(**kwargs)
        return to_resource_contents(value, str(uri), resource.mime_type)

    def _on_subscribe(self, request: InboundRequest, token: CancelToken) -> dict[str, Any]:
        uri = request.params.get("uri")
        self._find_resource(uri)
        self.subscriptions.add(str(uri))
        return {}

    def _on_unsubscribe(self, request: InboundRequest, token: CancelToken) -> dict[str, Any]:
        uri = request.params.get("uri")
        if not isinstance(uri, str):
            raise McpError(INVALID_PARAMS, "resources/unsubscribe needs a uri")
        self.subscriptions.discard(uri)
        return {}

    # -- prompts ------------------------------------------------------------------------------
    def _on_list_prompts(self, request: InboundRequest, token: CancelToken) -> dict[str, Any]:
        items = [p.to_wire() for p in self.server.prompts()]
        return paginate(items, request.params, self.server.page_size, "prompts")

    def _on_get_prompt(self, request: InboundRequest, token: CancelToken) -> dict[str, Any]:
        name = request.params.get("name")
        with self.server._lock:
            prompt = self.server._prompts.get(name) if isinstance(name, str) else None
        if prompt is None:
            raise McpError(INVALID_PARAMS, f"Unknown prompt: {name}")
        arguments = request.params.get("arguments")
        if arguments is not None and not isinstance(arguments, dict):
            raise McpError(INVALID_PARAMS, "Invalid arguments: must be an object")
        ctx = Context(self, request, token)
        kwargs = prompt.signature.bind(arguments, ctx)
        return to_prompt_result(prompt.signature.fn(**kwargs), prompt.description)

    # -- completion ---------------------------------------------------------------------------
    def _on_complete(self, request: InboundRequest, token: CancelToken) -> dict[str, Any]:
        params = request.params
        ref = params.get("ref")
        argument = params.get("argument")
        if not isinstance(ref, dict) or not isinstance(argument, dict) or not isinstance(argument.get("name"), str):
            raise McpError(INVALID_PARAMS, "completion/complete needs ref and argument")
        if ref.get("type") == "ref/prompt":
            key = ("prompt", str(ref.get("name")), argument["name"])
            if key[1] not in {p.name for p in self.server.prompts()}:
                raise McpError(INVALID_PARAMS, f"Unknown prompt: {key[1]}")
        elif ref.get("type") == "ref/resource":
            key = ("resource", str(ref.get("uri")), argument["name"])
        else:
            raise McpError(INVALID_PARAMS, f"Unknown reference type: {ref.get('type')!r}")
        with self.server._lock:
            completer = self.server._completers.get(key)
        if completer is None:
            return {"completion": {"values": [], "hasMore": False}}
        context = params.get("context")
        context_args = context.get("arguments", {}) if isinstance(context, dict) else {}
        found = completer(str(argument.get("value", "")), dict(context_args or {}))
        if isinstance(found, dict):
            values = [str(v) for v in found.get("values", [])]
            completion: dict[str, Any] = {"values": values[:100]}
            if "total" in found:
                completion["total"] = found["total"]
            completion["hasMore"] = bool(found.get("hasMore", len(values) > 100))
        else:
            values = [str(v) for v in found]
            completion = {"values": values[:100], "total": len(values), "hasMore": len(values) > 100}
        return {"completion": completion}

    # -- requests to the client -----------------------------------------------------------------
    def scoped(self, token: CancelToken, request_id: RequestId | None = None) -> RequestScope:
        """A view whose requests are cancelled when ``token`` fires (and relate to the
        inbound request ``request_id``)."""
        return RequestScope(self, token, request_id)

    def list_roots(
        self,
        *,
        timeout: float | None = None,
        cancel_token: CancelToken | None = None,
        related_request: RequestId | None = None,
    ) -> list[mcp_types.Root]:
        """Ask the client for its roots (needs the client's ``roots`` capability)."""
        self.require_capability("roots", "roots/list")
        result = self._typed_request(
            "roots/list", None, timeout=timeout, cancel_token=cancel_token, related_request=related_request
        )
        return list(result.roots)

    def _typed_request(self, method: str, params: dict[str, Any] | None, **options: Any) -> Any:
        """Send a request to the client; block for its result as an ``mcp_types`` model."""
        call = self.send_request(method, params, **options)
        return call.decode_result_with(parser_for(SERVER_REQUEST_RESULTS[method])).result()

    def create_message(
        self,
        messages: Iterable[dict[str, Any]],
        *,
        max_tokens: int,
        system_prompt: str | None = None,
        timeout: float | None = None,
        cancel_token: CancelToken | None = None,
        related_request: RequestId | None = None,
        **extra: Any,
    ) -> mcp_types.CreateMessageResult | mcp_types.CreateMessageResultWithTools:
        """Ask the client to sample from its model (``sampling/createMessage``); a
        ``CreateMessageResultWithTools`` when the client answered with a list of content
        blocks (tool use)."""
        self.require_capability("sampling", "sampling/createMessage")
        params: dict[str, Any] = {"messages": list(messages), "maxTokens": max_tokens, **extra}
        if system_prompt is not None:
            params["systemPrompt"] = system_prompt
        return self._typed_request(  # type: ignore[no-any-return]
            "sampling/createMessage", params, timeout=timeout, cancel_token=cancel_token, related_request=related_request
        )

    def elicit(
        self,
        message: str,
        requested_schema: dict[str, Any] | None = None,
        *,
        url: str | None = None,
        elicitation_id: str | None = None,
        timeout: float | None = None,
        cancel_token: CancelToken | None = None,
        related_request: RequestId | None = None,
    ) -> mcp_types.ElicitResult:
        """Ask the user for input through the client (``elicitation/create``).

        Form mode with ``requested_schema``; URL mode with ``url`` (and ``elicitation_id``).
        """
        self.require_capability("elicitation", "elicitation/create")
        params: dict[str, Any] = {"message": message}
        if url is not None:
            if not self.peer_supports("elicitation", "url"):
                raise CapabilityError("elicitation/create in URL mode needs the client's 'elicitation.url' capability")
            params.update({"mode": "url", "url": url, "elicitationId": elicitation_id or uuid.uuid4().hex})
        else:
            params["requestedSchema"] = requested_schema or {"type": "object", "properties": {}}
        return self._typed_request(  # type: ignore[no-any-return]
            "elicitation/create", params, timeout=timeout, cancel_token=cancel_token, related_request=related_request
        )


class RequestScope:
    """A :class:`ServerSession` seen from inside one handler: every request made through it
    is a child of the handler's token, so it is cancelled on the wire when the handler's own
    request is cancelled (or times out)."""

    def __init__(self, session: ServerSession, token: CancelToken, request_id: RequestId | None = None) -> None:
        self._session = session
        self._token = token
        self._request_id = request_id

    @property
    def session(self) -> ServerSession:
        """The underlying session."""
        return self._session

    @contextlib.contextmanager
    def _linked(self, cancel_token: CancelToken | None) -> Iterator[CancelToken]:
        """The handler's token, or a child of it that ``cancel_token`` also cancels (the
        link is removed afterwards, so a long-lived token does not collect callbacks)."""
        if cancel_token is None:
            yield self._token
            return
        linked = self._token.child()

        def forward(token: CancelToken) -> None:
            linked.cancel(token.reason)

        cancel_token.add_callback(forward)
        try:
            yield linked
        finally:
            cancel_token.remove_callback(forward)

    def list_roots(self, *, timeout: float | None = None, cancel_token: CancelToken | None = None) -> list[mcp_types.Root]:
        """See :meth:`ServerSession.list_roots`."""
        with self._linked(cancel_token) as token:
            return self._session.list_roots(timeout=timeout, cancel_token=token, related_request=self._request_id)

    def create_message(
        self, messages: Iterable[dict[str, Any]], *, max_tokens: int, cancel_token: CancelToken | None = None, **kwargs: Any
    ) -> mcp_types.CreateMessageResult | mcp_types.CreateMessageResultWithTools:
        """See :meth:`ServerSession.create_message`."""
        with self._linked(cancel_token) as token:
            return self._session.create_message(
                messages, max_tokens=max_tokens, cancel_token=token, related_request=self._request_id, **kwargs
            )

    def elicit(
        self, message: str, requested_schema: dict[str, Any] | None = None, *, cancel_token: CancelToken | None = None, **kwargs: Any
    ) -> mcp_types.ElicitResult:
        """See :meth:`ServerSession.elicit`."""
        with self._linked(cancel_token) as token:
            return self._session.elicit(
                message, requested_schema, cancel_token=token, related_request=self._request_id, **kwargs
            )

    def ping(self, *, timeout: float | None = None) -> None:
        """Ping the client."""
        self._session.send_request(
            "ping", None, timeout=timeout, cancel_token=self._token, related_request=self._request_id
        ).result()

    def send_log(self, level: str, data: Any, logger: str | None = None) -> bool:
        """See :meth:`ServerSession.send_log`."""
        return self._session.send_log(level, data, logger, related_request=self._request_id)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)


_LEVELS = ((logging.CRITICAL, "critical"), (logging.ERROR, "error"), (logging.WARNING, "warning"), (logging.INFO, "info"))


class McpLogHandler(logging.Handler):
    """Forwards :mod:`logging` records to connected clients as ``notifications/message``.

    Records of mcp_sync's own loggers are not forwarded (no feedback loops).
    """

    def __init__(self, server: Server, level: int = logging.NOTSET) -> None:
        super().__init__(level)
        self.server = server

    def emit(self, record: logging.LogRecord) -> None:
        if record.name == "mcp_sync" or record.name.startswith("mcp_sync."):
            return
        level = next((name for number, name in _LEVELS if record.levelno >= number), "debug")
        try:
            message = self.format(record)
        except Exception:
            self.handleError(record)
            return
        for session in self.server.sessions():
            if session.initialized and not session.closed:
                try:
                    session.send_log(level, message, record.name)
                except Exception:
                    pass
