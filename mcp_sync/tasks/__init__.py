"""Tasks: tool calls that outlive their request, in both protocol eras.

The store interface is :class:`TaskStore`; ``MemoryTaskStore`` (the default),
``SqliteTaskStore`` (survives restarts) and ``RedisTaskStore`` (shared by several worker
processes) implement it.
"""

from __future__ import annotations

from .memory import MemoryTaskStore, TaskStoreFull
from .redis_store import RedisTaskStore
from .sqlite import SqliteTaskStore
from .store import (
    TERMINAL_STATUSES,
    TaskAlreadyTerminal,
    TaskNotFound,
    TaskRecord,
    TaskStatus,
    TaskStore,
)

__all__ = [
    "MemoryTaskStore",
    "SqliteTaskStore",
    "RedisTaskStore",
    "TaskStoreFull",
    "TERMINAL_STATUSES",
    "TaskAlreadyTerminal",
    "TaskNotFound",
    "TaskRecord",
    "TaskStatus",
    "TaskStore",
]
