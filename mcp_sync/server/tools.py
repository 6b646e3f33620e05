"""The tools feature: ``tools/list`` and ``tools/call``, with the server-side ``timeout=``."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .. import deadlines
from ..cancel import CancelToken
from ..context import Context
from ..errors import ArgumentError, Cancelled, InputNeeded, McpError, describe_base_exception
from ..jsonrpc import INVALID_PARAMS
from ..protocol import InboundRequest
from . import input_rounds, tasks_call
from .pagination import paginate
from .records import RegisteredTool
from .tool_results import to_call_tool_result, tool_error

if TYPE_CHECKING:  # pragma: no cover
    from .dispatch import ServerSession

__all__ = ["list_tools", "call_tool", "run_tool"]

_log = logging.getLogger("mcp_sync.server")


def list_tools(
    session: ServerSession, request: InboundRequest, token: CancelToken
) -> dict[str, Any]:
    """``tools/list``: one page of the registered tools."""
    modern = getattr(request.context, "modern", False)
    tools = [tool.to_wire(modern=modern) for tool in session.server.registry.tools()]
    return paginate(tools, request.params, session.server.page_size, "tools")


def call_tool(
    session: ServerSession, request: InboundRequest, token: CancelToken
) -> dict[str, Any] | input_rounds.InputRequired:
    """``tools/call``: run the tool; its failures, a timeout and bad arguments are tool errors.

    The input rounds' signal (:class:`~mcp_sync.errors.InputNeeded`) and an
    :class:`~mcp_sync.server.InputRequired` the tool returns are not results:
    they go up to the input rounds as they are."""
    params = request.params
    name = params.get("name")
    if not isinstance(name, str):
        raise McpError(INVALID_PARAMS, "tools/call needs a tool name")
    tool = session.server.registry.tool(name)
    if tool is None:
        raise McpError(INVALID_PARAMS, f"Unknown tool: {name}")
    arguments = params.get("arguments")
    if arguments is not None and not isinstance(arguments, dict):
        raise McpError(INVALID_PARAMS, "Invalid arguments: must be an object")
    as_task = tasks_call.as_task(session, request, tool, arguments, run_tool)
    if as_task is not None:  # the call runs as a task: its CreateTaskResult
        return as_task
    handler_token = token
    deadline: deadlines.Deadline | None = None
    if tool.timeout is not None:
        handler_token = token.child()
        message = f"Tool {name!r} timed out after {tool.timeout:g} s"

        def expire() -> None:
            # answer first, then stop the handler: a handler that returns as soon as its
            # token fires must not beat the timeout error to the response
            if session.endpoint.respond(request, tool_error(message)):
                handler_token.cancel(message)

        deadline = deadlines.schedule(tool.timeout, expire)
    ctx = Context(session, request, handler_token)
    try:
        return run_tool(
            tool,
            arguments,
            ctx,
            timed_out=lambda: handler_token.cancelled and not token.cancelled,
        )
    finally:
        if deadline is not None:
            deadline.cancel()


def run_tool(
    tool: RegisteredTool,
    arguments: dict[str, Any] | None,
    ctx: Context,
    *,
    timed_out: Callable[[], bool] = lambda: False,
) -> dict[str, Any] | input_rounds.InputRequired:
    """Run ``tool`` with ``arguments`` and ``ctx``; its failures and bad arguments are tool
    errors (``timed_out()`` tells a server-side timeout from a cancellation). Used by
    ``tools/call`` and by a call running as a task."""
    name = tool.name
    try:
        kwargs = tool.signature.bind(arguments, ctx)
        value = tool.signature.fn(**kwargs)
    except InputNeeded:
        raise
    except ArgumentError as exc:  # the model can correct its call: a tool error (SEP-1303)
        return tool_error(f"Invalid arguments for tool {name!r}: " + "; ".join(exc.problems))
    except McpError:
        raise
    except Cancelled as exc:
        if tool.timeout is not None and timed_out():
            return tool_error(f"Tool {name!r} timed out after {tool.timeout:g} s")
        return tool_error(f"Tool {name!r} was cancelled: {exc}")
    except Exception as exc:
        _log.debug("tool %s failed", name, exc_info=True)
        return tool_error(str(exc) or type(exc).__name__)
    except (
        BaseException
    ) as exc:  # SystemExit, KeyboardInterrupt, ...: a tool error; the server lives on
        _log.error("tool %s raised %s", name, type(exc).__name__, exc_info=True)
        return tool_error(describe_base_exception(exc))
    if isinstance(value, input_rounds.InputRequired):
        return value
    return tool.check_output(to_call_tool_result(value, tool.wrap_output))
