"""The ``tasks/*`` request methods, routed by the era of each request: the 2025-11-25 ones
(:mod:`~mcp_sync.server.tasks_legacy`) or the 2026-07-28 extension's
(:mod:`~mcp_sync.server.tasks_modern`). A server with no tool that may run as a task
serves none of them (-32601)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..cancel import CancelToken
from ..errors import McpError
from ..jsonrpc import METHOD_NOT_FOUND
from ..protocol import InboundRequest
from . import tasks_legacy, tasks_modern
from .registry import MethodHandler
from .scope import RequestScope

if TYPE_CHECKING:  # pragma: no cover
    from .dispatch import ServerSession

__all__ = ["TASK_HANDLERS"]


def _by_era(legacy: MethodHandler | None, modern: MethodHandler) -> MethodHandler:
    def handle(session: ServerSession, request: InboundRequest, token: CancelToken) -> Any:
        if not session.server.tasks.enabled():
            raise McpError(
                METHOD_NOT_FOUND, f"Method not found: {request.method} (this server runs no tasks)"
            )
        scope = request.context
        handler = modern if isinstance(scope, RequestScope) and scope.modern else legacy
        if handler is None:
            raise McpError(
                METHOD_NOT_FOUND,
                f"Method not found: {request.method} (it exists from protocol 2026-07-28 on)",
            )
        return handler(session, request, token)

    return handle


TASK_HANDLERS: dict[str, MethodHandler] = {
    "tasks/get": _by_era(tasks_legacy.get, tasks_modern.get),
    "tasks/result": _by_era(tasks_legacy.result, tasks_modern.removed),
    "tasks/list": _by_era(tasks_legacy.list_tasks, tasks_modern.removed),
    "tasks/cancel": _by_era(tasks_legacy.cancel, tasks_modern.cancel),
    "tasks/update": _by_era(None, tasks_modern.update),
}
"""The ``tasks/*`` methods and the function serving each."""
