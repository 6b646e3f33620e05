"""The 2025-11-25 task methods: ``tasks/get``, ``tasks/result``, ``tasks/list``, ``tasks/cancel``.

Each reads or changes the store in the name of the request's owner (its session): a task of
another session looks like an unknown one (-32602).

* ``tasks/result`` blocks until the task is terminal and answers what the call would have
  answered (its ``CallToolResult``, or its JSON-RPC error), with
  ``_meta["io.modelcontextprotocol/related-task"]``. A ``notifications/cancelled`` naming the
  ``tasks/result`` request ends that wait only (the request is not answered, as for every
  cancelled request); the task runs on. While it waits, the task's requests to the client
  travel on its stream (see :mod:`~mcp_sync.server.tasks_input`). A cancelled task has no
  result: -32602 saying so.
* ``tasks/cancel`` on a non-terminal task makes it ``cancelled`` in the store *before* the
  answer, which carries the cancelled task; the handler's token fires. On a terminal task:
  -32602.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..cancel import CancelToken
from ..errors import Cancelled, McpError
from ..jsonrpc import INVALID_PARAMS
from ..protocol import InboundRequest
from ..tasks.store import TaskAlreadyTerminal, TaskNotFound, TaskRecord
from . import tasks_wire
from .scope import RequestScope
from .tasks import owner_of

if TYPE_CHECKING:  # pragma: no cover
    from .dispatch import ServerSession

__all__ = ["get", "result", "list_tasks", "cancel"]

_WAIT_SLICE = 0.5  # seconds between two looks at the request's token while tasks/result waits


def _owner(request: InboundRequest) -> str:
    scope = request.context
    assert isinstance(scope, RequestScope)
    return owner_of(scope)


def _read(session: ServerSession, request: InboundRequest) -> tuple[str, str, TaskRecord]:
    task_id = tasks_wire.task_id_param(request.params, request.method)
    owner = _owner(request)
    try:
        return task_id, owner, session.server.tasks.store.get(task_id, owner=owner)
    except TaskNotFound:
        raise tasks_wire.not_found(request.method, task_id) from None


def get(session: ServerSession, request: InboundRequest, token: CancelToken) -> dict[str, Any]:
    """``tasks/get``: the task (``GetTaskResult``)."""
    return tasks_wire.legacy_task(_read(session, request)[2])


def result(session: ServerSession, request: InboundRequest, token: CancelToken) -> dict[str, Any]:
    """``tasks/result``: block until the task is terminal; what the call would have answered."""
    task_id, owner, record = _read(session, request)
    service = session.server.tasks
    running = service.running(task_id)
    if running is not None:
        with running.cond:
            running.result_waiters.append(request.id)
            running.cond.notify_all()
    try:
        while not record.terminal:
            if token.cancelled:
                raise Cancelled(token.reason or "tasks/result was cancelled")
            try:
                record = service.store.wait_changed(
                    task_id, owner=owner, after_version=record.version, timeout=_WAIT_SLICE
                )
            except TaskNotFound:
                raise tasks_wire.not_found(request.method, task_id) from None
    finally:
        if running is not None:
            with running.cond:
                running.result_waiters.remove(request.id)
    outcome = record.outcome or {}
    if "error" in outcome:
        error = outcome["error"]
        raise McpError(error.get("code", -32603), error.get("message", "failed"), error.get("data"))
    if record.status == "cancelled" or "result" not in outcome:
        raise McpError(
            INVALID_PARAMS,
            f"tasks/result: task {task_id} was {record.status} and has no result",
            {"status": record.status},
        )
    answer = dict(outcome["result"])
    answer["_meta"] = {**answer.get("_meta", {}), **tasks_wire.related_meta(task_id)}
    return answer


def list_tasks(
    session: ServerSession, request: InboundRequest, token: CancelToken
) -> dict[str, Any]:
    """``tasks/list``: one page of the session's tasks, newest first."""
    cursor = request.params.get("cursor")
    if cursor is not None and not isinstance(cursor, str):
        raise McpError(INVALID_PARAMS, "tasks/list: cursor must be a string")
    try:
        records, next_cursor = session.server.tasks.store.list(
            owner=_owner(request), cursor=cursor, limit=session.server.page_size
        )
    except ValueError:
        raise McpError(INVALID_PARAMS, f"tasks/list: invalid cursor {cursor!r}") from None
    answer: dict[str, Any] = {"tasks": [tasks_wire.legacy_task(r) for r in records]}
    if next_cursor is not None:
        answer["nextCursor"] = next_cursor
    return answer


def cancel(session: ServerSession, request: InboundRequest, token: CancelToken) -> dict[str, Any]:
    """``tasks/cancel``: the task, ``cancelled`` before this answer (-32602 if it had ended)."""
    task_id = tasks_wire.task_id_param(request.params, request.method)
    try:
        record = session.server.tasks.cancel(task_id, _owner(request), "cancelled by the requestor")
    except TaskNotFound:
        raise tasks_wire.not_found(request.method, task_id) from None
    except TaskAlreadyTerminal as exc:
        raise McpError(
            INVALID_PARAMS,
            f"tasks/cancel: task {task_id} is already {exc.record.status}",
            {"status": exc.record.status},
        ) from None
    return tasks_wire.legacy_task(record)
