"""Whether a ``tools/call`` runs as a task, and the answer that creates it.

2025-11-25 (requestor-driven): the call runs as a task exactly when it carries
``params.task`` (``{"ttl": ms}``, ``ttl`` optional). A tool declared ``task="forbidden"``
(the default) refuses it, and a ``task="required"`` tool refuses a call without it, both with
-32601 as the specification says. The answer is ``{"task": Task}``.

2026-07-28 (server-directed): ``params.task`` is ignored. A ``task="optional"`` or
``"required"`` tool runs as a task when the request declares the
``io.modelcontextprotocol/tasks`` extension in its client capabilities; a ``"required"``
tool called without it is refused with -32021 naming the extension in
``data.requiredCapabilities``. The answer is the task itself with ``resultType: "task"``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..context import Context
from ..errors import McpError
from ..jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
)
from ..lifecycle import TASKS_EXTENSION
from ..protocol import InboundRequest
from . import tasks_wire
from .records import RegisteredTool
from .scope import RequestScope

if TYPE_CHECKING:  # pragma: no cover
    from .dispatch import ServerSession

__all__ = ["as_task", "declares_tasks", "TASKS_REQUIRED"]

TASKS_REQUIRED: dict[str, Any] = {"extensions": {TASKS_EXTENSION: {}}}
"""``requiredCapabilities`` of the -32021 refusal (2026-07-28)."""

RunTool = Callable[[RegisteredTool, "dict[str, Any] | None", Context], Any]


def declares_tasks(scope: RequestScope) -> bool:
    """True if the (2026-07-28) request of ``scope`` declares the tasks extension."""
    extensions = scope.peer_capabilities.get("extensions") if scope.modern else None
    return isinstance(extensions, Mapping) and extensions.get(TASKS_EXTENSION) is not None


def _ttl_of(task: object) -> int | None:
    if not isinstance(task, Mapping):
        raise McpError(INVALID_PARAMS, 'params.task must be an object ({"ttl": ms})')
    ttl = task.get("ttl")
    if ttl is not None and (type(ttl) is not int or ttl < 0):
        raise McpError(INVALID_PARAMS, "params.task.ttl must be a non-negative integer (ms)")
    return ttl


def as_task(
    session: ServerSession,
    request: InboundRequest,
    tool: RegisteredTool,
    arguments: dict[str, Any] | None,
    run_tool: RunTool,
) -> dict[str, Any] | None:
    """Start the call as a task and return its ``CreateTaskResult``, or ``None`` when the call
    is to run as usual. Raises the refusal owed (see the module's description)."""
    scope = request.context
    assert isinstance(scope, RequestScope)
    mode = tool.task_support
    if scope.modern:
        if mode == "forbidden":
            return None
        if not declares_tasks(scope):
            if mode == "required":
                raise McpError(
                    MISSING_REQUIRED_CLIENT_CAPABILITY,
                    f"tool {tool.name!r} runs only as a task: the request must declare the"
                    f" {TASKS_EXTENSION} extension",
                    {"requiredCapabilities": TASKS_REQUIRED},
                )
            return None
        ttl_ms = None
    else:
        task = request.params.get("task")
        if task is None:
            if mode == "required":
                raise McpError(
                    METHOD_NOT_FOUND,
                    f"tool {tool.name!r} must be called as a task (params.task)",
                )
            return None
        if mode == "forbidden":
            raise McpError(
                METHOD_NOT_FOUND, f"tool {tool.name!r} does not support task-augmented calls"
            )
        ttl_ms = _ttl_of(task)

    def run(ctx: Context) -> dict[str, Any]:
        result = run_tool(tool, arguments, ctx)
        if not isinstance(result, dict):
            raise McpError(
                INTERNAL_ERROR,
                "a tool running as a task asks for input with ctx.session.elicit(...), not InputRequired",
            )
        return result

    record = session.server.tasks.start(scope, request, tool, arguments, ttl_ms, run)
    if scope.modern:
        return {"resultType": "task", **tasks_wire.modern_task(record)}
    return {"task": tasks_wire.legacy_task(record)}
