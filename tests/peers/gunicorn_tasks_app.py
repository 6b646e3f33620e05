"""A WSGI module for the multi-process tasks test (``gunicorn_tasks_app:app`` under gunicorn
with several workers), on a ``RedisTaskStore`` shared by the workers.

Environment: ``MCP_TASKS_REDIS`` (the Redis URL), ``MCP_TASKS_MARKERS`` (a folder where the
handler writes ``started-<taskId>`` and ``stopped-<taskId>``, each holding the worker's pid).
"""

from __future__ import annotations

import os
from pathlib import Path

from mcp_sync import Context, Server
from mcp_sync.tasks import RedisTaskStore  # type: ignore[attr-defined,unused-ignore]

MARKERS = Path(os.environ["MCP_TASKS_MARKERS"])

server = Server("gunicorn-tasks", task_store=RedisTaskStore(os.environ["MCP_TASKS_REDIS"]))
server.tasks.lease_seconds = 1.5  # a killed worker's task is marked failed soon after


def _mark(name: str) -> None:
    path = MARKERS / name
    path.with_suffix(".tmp").write_text(str(os.getpid()))
    path.with_suffix(".tmp").replace(path)


@server.tool()
def whoami() -> str:
    """The pid of the worker that answers."""
    return str(os.getpid())


@server.tool(task="required")
def long_job(seconds: float, ctx: Context) -> str:
    """Work ``seconds`` seconds, stopping when the task is cancelled."""
    task_id = ctx.session.task_id
    _mark(f"started-{task_id}")
    if ctx.wait(seconds):
        _mark(f"stopped-{task_id}")
        return "stopped"
    return "done"


app = server.wsgi_app(path="/mcp")
