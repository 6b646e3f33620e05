"""The 2026-07-28 task methods (extension ``io.modelcontextprotocol/tasks``): ``tasks/get``,
``tasks/update``, ``tasks/cancel``, and task notifications on ``subscriptions/listen``.

Every one needs the extension declared in the request's own client capabilities (-32021
otherwise, naming it in ``data.requiredCapabilities``) and reads the store in the name of
the request's principal (the anonymous owner on a server that authenticates nobody).

* ``tasks/get`` answers the detailed task: ``result`` once completed, ``error`` once failed,
  ``inputRequests`` while input is required. Unknown, expired or another principal's: -32602.
* ``tasks/update`` hands ``inputResponses`` to the task (keys not outstanding are ignored)
  and answers an empty acknowledgement.
* ``tasks/cancel`` answers an empty acknowledgement; the cancel is cooperative (the task is
  ``cancelled`` in the store and its handler's token fires; a task already ended is left
  as it is).
* ``tasks/result`` and ``tasks/list`` do not exist at 2026-07-28: -32601.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..cancel import CancelToken
from ..errors import McpError
from ..jsonrpc import INVALID_PARAMS, METHOD_NOT_FOUND, MISSING_REQUIRED_CLIENT_CAPABILITY
from ..lifecycle import TASKS_EXTENSION
from ..protocol import InboundRequest
from ..tasks.store import TaskAlreadyTerminal, TaskNotFound
from . import tasks_wire
from .scope import RequestScope
from .tasks import owner_of
from .tasks_call import TASKS_REQUIRED, declares_tasks

if TYPE_CHECKING:  # pragma: no cover
    from .dispatch import ServerSession

__all__ = ["get", "update", "cancel", "removed", "screen_listen"]


def _owner(request: InboundRequest, what: str) -> str:
    scope = request.context
    assert isinstance(scope, RequestScope)
    if not declares_tasks(scope):
        raise McpError(
            MISSING_REQUIRED_CLIENT_CAPABILITY,
            f"{what} needs the {TASKS_EXTENSION} extension in the request's client capabilities",
            {"requiredCapabilities": TASKS_REQUIRED},
        )
    return owner_of(scope)


def get(session: ServerSession, request: InboundRequest, token: CancelToken) -> dict[str, Any]:
    """``tasks/get``: the detailed task."""
    task_id = tasks_wire.task_id_param(request.params, request.method)
    owner = _owner(request, request.method)
    try:
        record = session.server.tasks.store.get(task_id, owner=owner)
    except TaskNotFound:
        raise tasks_wire.not_found(request.method, task_id) from None
    return tasks_wire.detailed_task(record)


def update(session: ServerSession, request: InboundRequest, token: CancelToken) -> dict[str, Any]:
    """``tasks/update``: answers to the task's ``inputRequests``; an empty acknowledgement."""
    task_id = tasks_wire.task_id_param(request.params, request.method)
    owner = _owner(request, request.method)
    responses = request.params.get("inputResponses")
    if not isinstance(responses, Mapping):
        raise McpError(INVALID_PARAMS, "tasks/update needs params.inputResponses (an object)")
    try:
        session.server.tasks.store.answer_input(task_id, owner=owner, responses=dict(responses))
    except TaskNotFound:
        raise tasks_wire.not_found(request.method, task_id) from None
    return {}


def cancel(session: ServerSession, request: InboundRequest, token: CancelToken) -> dict[str, Any]:
    """``tasks/cancel``: an empty acknowledgement; the handler's token fires."""
    task_id = tasks_wire.task_id_param(request.params, request.method)
    owner = _owner(request, request.method)
    try:
        session.server.tasks.cancel(task_id, owner, "cancelled by the requestor")
    except TaskNotFound:
        raise tasks_wire.not_found(request.method, task_id) from None
    except TaskAlreadyTerminal:
        pass  # cooperative: it ended first, and stays as it ended
    return {}


def removed(session: ServerSession, request: InboundRequest, token: CancelToken) -> dict[str, Any]:
    """``tasks/result`` and ``tasks/list`` at 2026-07-28: -32601."""
    raise McpError(
        METHOD_NOT_FOUND,
        f"Method not found: {request.method} (the 2026-07-28 tasks extension has tasks/get instead)",
    )


def screen_listen(request: InboundRequest) -> None:
    """Before a ``subscriptions/listen`` opens: a request for ``taskIds`` needs the extension
    (-32021), and only the requestor's own tasks stay in the filter (the others are dropped
    from it, so the acknowledgement does not name them)."""
    params = request.params
    wanted = params.get("notifications")
    if not isinstance(wanted, Mapping) or wanted.get("taskIds") is None:
        return
    ids = wanted["taskIds"]
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise McpError(
            INVALID_PARAMS,
            "subscriptions/listen: notifications.taskIds must be an array of strings",
        )
    owner = _owner(request, "task notifications on subscriptions/listen")
    scope = request.context
    assert isinstance(scope, RequestScope)
    store = scope.session.server.tasks.store
    visible = []
    for task_id in dict.fromkeys(ids):
        try:
            store.get(task_id, owner=owner)
        except TaskNotFound:
            continue
        visible.append(task_id)
    params["notifications"] = {**wanted, "taskIds": visible}
