"""The fixture server of the conformance suite's tasks scenarios (extension
``io.modelcontextprotocol/tasks``, 2026-07-28), public API only:
``python task_conformance_server.py``.

It serves Streamable HTTP on a free loopback port and announces
``mcp_sync: serving task-fixture at http://127.0.0.1:PORT/mcp`` on stderr. Its tools are the
ones the scenarios name in their descriptions: ``greet`` (never a task), ``slow_compute``,
``failing_job`` (a tool error, task-required), ``protocol_error_job`` (a JSON-RPC error),
``confirm_delete`` (one elicitation), ``multi_input`` (two at once) and ``test_tool_with_task``.
tests/tasks/test_task_conformance.py runs the scenarios against it.
"""

from __future__ import annotations

import threading
from typing import Any

from mcp_sync import Context, McpError, Server

server = Server("task-fixture", version="1.0.0")
SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "confirm": {"type": "boolean"}},
}


@server.tool()
def greet(name: str) -> str:
    """Say hello at once."""
    return f"Hello, {name}!"


@server.tool(task="optional")
def slow_compute(seconds: float, ctx: Context) -> str:
    """Work ``seconds`` seconds (stops when the task is cancelled)."""
    if ctx.wait(seconds):
        return "cancelled"
    return f"computed after {seconds:g} s"


@server.tool(task="required")
def failing_job(ctx: Context) -> str:
    """Fail with a tool error after a second."""
    ctx.wait(1.0)
    raise ValueError("the job failed")


@server.tool(task="optional")
def protocol_error_job() -> str:
    """Fail with a JSON-RPC error."""
    raise McpError(-32603, "the job broke at the protocol level")


@server.tool(task="optional")
def confirm_delete(ctx: Context, filename: str = "report.txt") -> str:
    """Ask the user to confirm, through the task's input."""
    answer = ctx.session.elicit(f"Delete {filename}?", SCHEMA)
    return f"{answer.action}: {answer.content}"


@server.tool(task="optional")
def multi_input(ctx: Context) -> str:
    """Ask two questions at once, from two threads."""
    answers: dict[str, Any] = {}

    def ask(label: str) -> None:
        try:
            answers[label] = ctx.session.elicit(f"{label}?", SCHEMA).content
        except Exception as exc:  # the task was cancelled, or the server stops
            answers[label] = repr(exc)

    threads = [threading.Thread(target=ask, args=(label,)) for label in ("first", "second")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return f"answers: {answers}"


@server.tool(task="required")
def test_tool_with_task(ctx: Context) -> str:
    """Ask for the user's name, then greet them."""
    answer = ctx.session.elicit("user_name?", SCHEMA)
    return f"Hello, {(answer.content or {}).get('name')}!"


if __name__ == "__main__":
    server.run("http", port=0, grace=2.0)
