"""The public names of mcp_sync.tasks, pinned: adding or dropping one is a deliberate change."""

from __future__ import annotations

import mcp_sync.tasks

TASKS_NAMES = {
    "MemoryTaskStore",
    "RedisTaskStore",
    "SqliteTaskStore",
    "TERMINAL_STATUSES",
    "TaskAlreadyTerminal",
    "TaskNotFound",
    "TaskRecord",
    "TaskStatus",
    "TaskStore",
    "TaskStoreFull",
}


def test_the_task_names_are_pinned() -> None:
    assert set(mcp_sync.tasks.__all__) == TASKS_NAMES
    for name in TASKS_NAMES:
        assert getattr(mcp_sync.tasks, name) is not None


def test_every_store_is_a_task_store() -> None:
    for store in (
        mcp_sync.tasks.MemoryTaskStore,
        mcp_sync.tasks.SqliteTaskStore,
        mcp_sync.tasks.RedisTaskStore,
    ):
        assert issubclass(store, mcp_sync.tasks.TaskStore)
        assert store.__doc__
