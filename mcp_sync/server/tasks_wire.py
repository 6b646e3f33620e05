"""How a stored task looks on the wire, in each era.

2025-11-25 (core, experimental): a ``Task`` has ``ttl`` and ``pollInterval`` (ms), ISO 8601
timestamps; ``tasks/get``, ``tasks/cancel`` and ``notifications/tasks/status`` carry it flat,
a task-augmented call answers ``{"task": Task}``.

2026-07-28 (extension ``io.modelcontextprotocol/tasks``): ``ttlMs`` and ``pollIntervalMs``;
``tasks/get`` and ``notifications/tasks`` carry the *detailed* task (``result`` when
completed, ``error`` when failed, ``inputRequests`` when input is required); the creating
call answers ``resultType: "task"`` with the task flat.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from ..errors import McpError
from ..jsonrpc import INVALID_PARAMS
from ..lifecycle import RELATED_TASK_KEY
from ..tasks.store import TaskRecord

__all__ = [
    "iso_time",
    "legacy_task",
    "modern_task",
    "detailed_task",
    "related_meta",
    "task_id_param",
    "not_found",
]


def iso_time(seconds: float) -> str:
    """An epoch time as ISO 8601 (UTC, millisecond precision, ``Z``)."""
    moment = datetime.datetime.fromtimestamp(seconds, tz=datetime.timezone.utc)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _task(record: TaskRecord, ttl_key: str, poll_key: str) -> dict[str, Any]:
    task: dict[str, Any] = {
        "taskId": record.task_id,
        "status": record.status,
        "createdAt": iso_time(record.created_at),
        "lastUpdatedAt": iso_time(record.updated_at),
        ttl_key: record.ttl_ms,
    }
    if record.status_message is not None:
        task["statusMessage"] = record.status_message
    if record.poll_interval_ms is not None:
        task[poll_key] = record.poll_interval_ms
    return task


def legacy_task(record: TaskRecord) -> dict[str, Any]:
    """The 2025-11-25 ``Task`` object (``ttl``, ``pollInterval``)."""
    return _task(record, "ttl", "pollInterval")


def modern_task(record: TaskRecord) -> dict[str, Any]:
    """The 2026-07-28 ``Task`` object (``ttlMs``, ``pollIntervalMs``; without the
    status-specific members)."""
    return _task(record, "ttlMs", "pollIntervalMs")


def detailed_task(record: TaskRecord) -> dict[str, Any]:
    """The 2026-07-28 ``DetailedTask``: ``result`` / ``error`` / ``inputRequests`` by status."""
    task = modern_task(record)
    outcome = record.outcome or {}
    if record.status == "completed" and "result" in outcome:
        task["result"] = dict(outcome["result"])
    elif record.status == "failed":
        task["error"] = dict(
            outcome.get("error") or {"code": -32603, "message": record.status_message or "failed"}
        )
    elif record.status == "input_required":
        # a key answered by tasks/update is not asked any more, even before the handler
        # has taken the answer (tasks/update is acknowledged at once)
        answered = record.input_responses or {}
        task["inputRequests"] = {
            key: dict(value)
            for key, value in (record.input_requests or {}).items()
            if key not in answered
        }
    return task


def related_meta(task_id: str) -> dict[str, Any]:
    """The ``_meta`` member that relates a message to task ``task_id`` (2025-11-25)."""
    return {RELATED_TASK_KEY: {"taskId": task_id}}


def task_id_param(params: Mapping[str, Any] | None, method: str) -> str:
    """``params.taskId`` of a ``tasks/*`` request, or the -32602 error owed for it."""
    task_id = params.get("taskId") if isinstance(params, Mapping) else None
    if not isinstance(task_id, str) or not task_id:
        raise McpError(INVALID_PARAMS, f"{method} needs params.taskId (a string)")
    return task_id


def not_found(method: str, task_id: str) -> McpError:
    """The -32602 error for a task that is unknown, expired or another requestor's (the three
    look the same)."""
    return McpError(INVALID_PARAMS, f"{method}: task not found: {task_id}")
