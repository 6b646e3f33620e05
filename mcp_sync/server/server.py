"""The :class:`~mcp_sync.server.Server`: its identity, the registration decorators, its connections and how
it runs (the foreground loop, a background thread, HTTP through the delegate)."""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from ..endpoint import CancelObserver
from ..request_state import KeyRing, StateSealer
from ..tasks.store import TaskStore
from ..transports.base import Transport
from ..transports.batching import BATCH_REVISIONS, BatchingTransport
from ..workers import MAX_QUEUED_CALLBACKS, PoolStats, WorkerPool
from . import http_delegate
from .bus import InProcessBus, MessageBus
from .dispatch import ServerSession
from .input_rounds import InputRounds
from .logging_bridge import McpLogHandler
from .modern_result import CacheHints, CacheScope
from .records import RegisteredPrompt, RegisteredResource, RegisteredTool
from .registry import ListKind, MethodHandler, Registry
from .runner import run_until_stopped
from .schemas import declare_schema
from .signatures import inspect_handler, json_schema_of
from .subscriptions import (
    DEFAULT_MAX_PER_CONNECTION,
    DEFAULT_MAX_TOTAL,
    ListenHub,
    list_changed_event,
    resource_updated_event,
)
from .tasks import DEFAULT_MAX_TASKS, TASK_MODES, TaskMode, TaskService
from .tool_results import output_schema_for
from .uri_template import UriTemplate

if TYPE_CHECKING:  # pragma: no cover
    from .http_delegate import HttpServerHandle, McpWsgiApp

__all__ = ["Server", "ServerStats", "ServerHandle"]

_ALWAYS_DECLARED = frozenset({"tools", "logging"})
"""The capabilities :meth:`Server.capabilities` declares whatever is registered."""

_log = logging.getLogger("mcp_sync.server")

F = TypeVar("F", bound=Callable[..., Any])


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

    Every connection serves both protocol eras: a client that opens with ``initialize`` is
    served at 2025-11-25 (or the older revision it asks for), one whose requests carry the
    2026-07-28 envelope is served statelessly, each request from its own ``_meta``; the first
    exchange fixes the connection's era (``server/discover`` does not). The same handlers
    serve both.

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
        bus: the :class:`~mcp_sync.server.bus.MessageBus` that carries changes (list changed,
            resource updated) to the ``subscriptions/listen`` streams of every process of a
            deployment; an :class:`~mcp_sync.server.bus.InProcessBus` by default (one
            process). See :doc:`/subscriptions`.
        max_subscriptions_per_connection: bound of open ``subscriptions/listen`` streams on
            one connection.
        max_subscriptions: bound of open ``subscriptions/listen`` streams of this server.
        page_size: items per page of every list (at least 1: ``ValueError`` otherwise).
        declare: capabilities to declare even with nothing registered yet
            (``"resources"``, ``"prompts"``, ``"completions"``), for servers that register
            handlers at run time. A capability is otherwise declared when something of that
            kind is registered when a client connects.
        extensions: (2026-07-28) the extensions this server supports, by identifier, with
            their settings (``{"io.example/widgets": {}}``): declared in the capabilities
            2026-07-28 requests see (``server/discover``).
        ttl_ms: (2026-07-28) the ``ttlMs`` caching hint of ``server/discover``, list and
            ``resources/read`` results: how long (ms, ``>= 0``) a client may consider them
            fresh (default ``0``: stale at once).
        cache_scope: (2026-07-28) their ``cacheScope``: ``"private"`` (default; the results
            may hold user-specific data) or ``"public"``.
        request_state_keys: (2026-07-28) the :class:`~mcp_sync.request_state.KeyRing` that
            seals the ``requestState`` of input rounds (see :doc:`/input-rounds`). The
            default is an ephemeral ring: a retry that reaches another process -- another
            worker, or this server restarted -- is refused (-32602). Give every process of a
            deployment the same ring, for example ``KeyRing.from_env()``.
        request_state_sealer: (2026-07-28) a :class:`~mcp_sync.request_state.StateSealer` to
            use instead (its own TTL, encryption or replay guard); excludes
            ``request_state_keys``.
        task_store: where tasks live (see :doc:`/tasks`): a
            :class:`~mcp_sync.tasks.MemoryTaskStore` by default (one process);
            ``SqliteTaskStore`` survives restarts, ``RedisTaskStore`` serves several
            processes.
        max_tasks: the most tool calls running as tasks at once in this process; a call
            beyond it is refused (-32603, see :doc:`/limits`).
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
        bus: MessageBus | None = None,
        max_subscriptions_per_connection: int = DEFAULT_MAX_PER_CONNECTION,
        max_subscriptions: int = DEFAULT_MAX_TOTAL,
        extensions: Mapping[str, Mapping[str, Any]] | None = None,
        ttl_ms: int = 0,
        cache_scope: CacheScope = "private",
        request_state_keys: KeyRing | None = None,
        request_state_sealer: StateSealer | None = None,
        task_store: TaskStore | None = None,
        max_tasks: int = DEFAULT_MAX_TASKS,
    ) -> None:
        if page_size < 1:
            raise ValueError(
                f"page_size must be at least 1, not {page_size!r} (a page could never advance)"
            )
        if request_state_keys is not None and request_state_sealer is not None:
            raise ValueError("give request_state_keys or request_state_sealer, not both")
        self.name = name
        self.extensions: dict[str, dict[str, Any]] = {
            key: dict(value) for key, value in (extensions or {}).items()
        }
        self.cache_hints = CacheHints(ttl_ms, cache_scope)
        """The caching hints of cacheable 2026-07-28 results (from ``ttl_ms``/``cache_scope``)."""
        self.declare = frozenset(declare)
        self.version = version
        self.instructions = instructions
        self.max_workers = max_workers
        self.page_size = page_size
        self.max_queued_callbacks = max_queued_callbacks
        self.on_cancelled = on_cancelled
        sealer = request_state_sealer or StateSealer(request_state_keys or KeyRing.ephemeral())
        self.input_rounds = InputRounds(sealer)
        """How 2026-07-28 requests get the input their handlers ask for (its sealer, its bounds)."""
        self.registry = Registry()
        """What this server serves (read by its sessions; change it through the methods below)."""
        self._lock = threading.Lock()
        self._sessions: set[ServerSession] = set()
        self._served = False  # set by the first connect()
        self.listens = ListenHub(
            bus if bus is not None else InProcessBus(),
            f"mcp_sync/{name}/changes",
            max_per_connection=max_subscriptions_per_connection,
            max_total=max_subscriptions,
        )
        """The open ``subscriptions/listen`` streams and their feed from the bus."""
        self.tasks = TaskService(self, task_store, max_tasks=max_tasks)
        """The tool calls running as tasks, and their store (see :doc:`/tasks`)."""

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
        task: TaskMode = "forbidden",
        scopes: Iterable[str] = (),
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

        ``task=`` lets the tool run as a task (see :doc:`/tasks`): ``"optional"`` (the
        caller chooses at 2025-11-25; at 2026-07-28 a request declaring the tasks extension
        gets a task), ``"required"`` (only as a task), ``"forbidden"`` (the default). The
        same ``Context`` serves: ``ctx.cancelled`` and ``ctx.wait()`` fire on ``tasks/cancel``.

        ``scopes=`` names OAuth scopes the caller's access token must grant: an app guarded
        by :class:`~mcp_sync.http.bearer.BearerAuth` answers a call without them ``403``
        ``insufficient_scope`` before the tool runs (see :doc:`/howto/protect-flask`).
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
                task=task,
                scopes=scopes,
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
        task: TaskMode = "forbidden",
        scopes: Iterable[str] = (),
    ) -> RegisteredTool:
        """Register ``fn`` as a tool (see :meth:`tool`); notifies connected clients."""
        tool_name = name or fn.__name__
        if timeout is not None and timeout <= 0:
            raise ValueError("timeout must be positive")
        if task not in TASK_MODES:
            raise ValueError(f"task must be one of {sorted(TASK_MODES)}, not {task!r}")
        if output_schema is not None and structured_output is False:
            raise ValueError(
                "output_schema= declares structured output; structured_output=False forbids it"
            )
        declared_input = (
            None
            if input_schema is None
            else declare_schema(input_schema, f"{tool_name}: input_schema")
        )
        declared_output = (
            None
            if output_schema is None
            else declare_schema(output_schema, f"{tool_name}: output_schema")
        )
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
            task_support=task,
            scopes=_scope_set(scopes),
        )
        self._register("tools", tool_name, tool)
        return tool

    def remove_tool(self, name: str) -> None:
        """Unregister a tool; notifies connected clients. KeyError if unknown."""
        self._register("tools", name, None)

    def _register(
        self,
        kind: ListKind,
        key: str,
        item: RegisteredTool | RegisteredResource | RegisteredPrompt | None,
    ) -> None:
        """Add (or, with ``item=None``, remove: KeyError if unknown) a handler and tell the
        connected clients that the ``kind`` list changed.

        Before the server served its first connection a registration is part of its
        definition, not a change: nothing is published on the bus then (every process of a
        deployment registers the same handlers as it starts, and a broker that is down must
        not slow an import)."""
        if item is None:
            self.registry.remove(kind, key)
        else:
            self.registry.put(kind, key, item)
        if self._served:
            self.notify_list_changed(kind)

    def tools(self) -> list[RegisteredTool]:
        """The registered tools, in registration order."""
        return self.registry.tools()

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
            self.add_resource(
                fn, uri, name=name, description=description, title=title, mime_type=mime_type
            )
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
        self._register("resources", uri, resource)
        return resource

    def remove_resource(self, uri: str) -> None:
        """Unregister a resource or template; notifies connected clients."""
        self._register("resources", uri, None)

    def prompt(
        self, name: str | None = None, *, description: str | None = None, title: str | None = None
    ) -> Callable[[F], F]:
        """Register a prompt (a decorator). Its arguments come from the type hints; it
        returns a string, a message, or a list of messages."""

        def decorator(fn: F) -> F:
            self.add_prompt(fn, name=name, description=description, title=title)
            return fn

        return decorator

    def add_prompt(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        title: str | None = None,
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
        self._register("prompts", prompt_name, prompt)
        return prompt

    def remove_prompt(self, name: str) -> None:
        """Unregister a prompt; notifies connected clients."""
        self._register("prompts", name, None)

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
            self.registry.add_completer((kind, name, argument), fn)
            return fn

        return decorator

    def resources(self) -> list[RegisteredResource]:
        """Registered resources and templates."""
        return self.registry.resources()

    def prompts(self) -> list[RegisteredPrompt]:
        """Registered prompts."""
        return self.registry.prompts()

    def notify_resource_updated(self, uri: str) -> None:
        """Send ``notifications/resources/updated`` to every 2025 session subscribed to
        ``uri`` (``resources/subscribe``), and publish the change on the bus for the
        ``subscriptions/listen`` streams that asked for ``uri`` (in every process)."""
        self.listens.publish(resource_updated_event(uri))
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
        self.registry.add_method(method, handler)

    # -- capabilities -------------------------------------------------------------------------
    def declares(self, capability: str) -> bool:
        """True if :meth:`capabilities` names ``capability`` now, without building them for
        the capabilities it always declares (``tools`` and ``logging``): a 2026-07-28
        request asks before its handler runs."""
        return capability in _ALWAYS_DECLARED or capability in self.capabilities()

    def capabilities(self) -> dict[str, Any]:
        """The ``capabilities`` this server declares in ``initialize``."""
        # every one of _ALWAYS_DECLARED, whatever is registered (declares() relies on it)
        caps: dict[str, Any] = {"tools": {"listChanged": True}, "logging": {}}
        present = self.registry.kinds() | self.declare
        if "resources" in present:
            caps["resources"] = {"subscribe": True, "listChanged": True}
        if "prompts" in present:
            caps["prompts"] = {"listChanged": True}
        if present & {"completions", "prompts", "resources"}:
            caps["completions"] = {}
        if self.tasks.enabled():
            caps["tasks"] = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
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
            transport = BatchingTransport(
                transport, lambda: session.protocol_version in BATCH_REVISIONS
            )
        session = ServerSession(
            self, transport, max_workers=max_workers or self.max_workers, pool=pool
        )
        with self._lock:
            self._sessions.add(session)
            self._served = True
        session.add_close_callback(lambda: self._forget(session))
        if read:
            session.endpoint.start()
        return session

    def _forget(self, session: ServerSession) -> None:
        with self._lock:
            self._sessions.discard(session)
        self.tasks.end_session(session)

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

    def serve_in_thread(
        self, transport: Transport, *, max_workers: int | None = None
    ) -> ServerHandle:
        """Serve ``transport`` in the background; returns a handle with ``stop()``.

        For embedding a server in an existing threaded service.
        """
        return ServerHandle(self.connect(transport, max_workers=max_workers))

    def wsgi_app(self, **options: Any) -> McpWsgiApp:
        """A WSGI application serving this server over Streamable HTTP, to mount in Flask
        or run under any threaded WSGI server. Options: see :class:`~mcp_sync.http.wsgi_app.McpWsgiApp`."""
        return http_delegate.wsgi_app(self, **options)

    def serve_http(
        self, host: str = "127.0.0.1", port: int = 0, *, path: str = "/mcp", **options: Any
    ) -> HttpServerHandle:
        """Serve Streamable HTTP in a background thread (standard-library threaded WSGI
        server); returns a handle with ``url`` and ``stop()``. ``port=0`` picks a free port.
        The options of :func:`~mcp_sync.http.embedded_server.serve_http` (``backlog``,
        ``read_timeout``, ``max_connections``) go to the server, the others to the app."""
        return http_delegate.serve_http(self, host, port, path, options)

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
            from ..transports.stdio import StdioTransport, claim_stdout

            with claim_stdout() as out:  # print() in a handler must not corrupt the protocol
                self._serve(StdioTransport(stdout=out), grace)
            return
        self._serve(transport, grace)

    def _serve(self, transport: Transport, grace: float) -> None:
        # the reader starts inside the guarded region: it may serve requests before start()
        # returns, and a Ctrl-C in that window must still close the session cleanly
        session = self.connect(transport, read=False)
        try:
            run_until_stopped(
                lambda: session.close(grace),
                start=session.endpoint.start,
                wait_finished=session.endpoint.wait_closed,
            )
        finally:
            self.tasks.shutdown(grace)  # a task still running ends failed, not working

    def _run_http(self, host: str, port: int, path: str, grace: float) -> None:
        handle = self.serve_http(host, port, path=path, shutdown_grace=grace)
        print(f"mcp_sync: serving {self.name} at {handle.url}", file=sys.stderr, flush=True)
        try:
            run_until_stopped(handle.stop)
        finally:
            self.tasks.shutdown(grace)

    def notify_list_changed(self, kind: str) -> None:
        """Send ``notifications/<kind>/list_changed`` to every initialized (2025) session,
        and publish the change on the bus for the ``subscriptions/listen`` streams that
        asked for it (in every process)."""
        self.listens.publish(list_changed_event(kind))
        for session in self.sessions():
            if session.initialized and not session.closed:
                try:
                    session.send_notification(f"notifications/{kind}/list_changed")
                except Exception:
                    _log.debug("list_changed not delivered", exc_info=True)


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


def _scope_set(scopes: Iterable[str]) -> frozenset[str]:
    """A tool's ``scopes=`` as a set, each a non-empty scope token (RFC 6749, section 3.3)."""
    if isinstance(scopes, str):
        raise TypeError("scopes= takes a list of scope names, not one string")
    chosen = frozenset(scopes)
    for scope in chosen:
        if not scope or any(c in scope for c in ' "\\') or not scope.isprintable():
            raise ValueError(f"not a valid OAuth scope: {scope!r}")
    return chosen
