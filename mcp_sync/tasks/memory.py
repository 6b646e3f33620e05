"""The default task store: this process's memory, one lock around everything.

Nothing survives the process, and only this process sees the tasks; for restarts use
:class:`~mcp_sync.tasks.SqliteTaskStore`, for several processes
:class:`~mcp_sync.tasks.RedisTaskStore`.
"""

from __future__ import annotations

import bisect
import heapq
import threading

from ._common import (
    DEFAULT_MAX_TASKS,
    Clock,
    StoreBase,
    TaskStoreFull,
    Transition,
    expires_at,
    is_expired,
    record_from_json,
    record_to_json,
)
from .store import TaskRecord

__all__ = ["MemoryTaskStore", "TaskStoreFull", "DEFAULT_MAX_TASKS"]


class MemoryTaskStore(StoreBase):
    """Tasks in a dictionary behind one lock: every transition is a compare-and-set under it,
    and watch callbacks run after the lock is released, on the thread that made the change.

    Each record is kept as JSON text, as the other stores keep it: a record handed out shares
    nothing with the store (changing its dictionaries changes no task), and a value JSON
    cannot hold is refused with :class:`TypeError` here as it is by the stores that persist.

    Args:
        max_tasks: the most tasks held at once; when full, expired tasks are purged and then
            the oldest terminal task is dropped, and :class:`TaskStoreFull` is raised only
            when every task is still running.
        clock: seconds since the epoch (default :func:`time.time`), for tests.
    """

    def __init__(self, *, max_tasks: int = DEFAULT_MAX_TASKS, clock: Clock | None = None) -> None:
        super().__init__(clock=clock)
        if max_tasks < 1:
            raise ValueError("max_tasks must be at least 1")
        self.max_tasks = max_tasks
        self._lock = threading.Lock()
        self._records: dict[str, str] = {}  # task id -> the record as JSON
        self._ended: set[str] = set()  # the terminal ones
        self._position: dict[str, int] = {}  # task id -> creation sequence number
        self._by_owner: dict[str, list[tuple[int, str]]] = {}  # ascending positions
        self._expiry: list[tuple[float, str]] = []  # a heap of (TTL end, task id)
        self._next_position = 0

    # -- the storage primitives (each under the lock) -----------------------------------------

    def _insert(self, record: TaskRecord) -> None:
        text = record_to_json(record)
        with self._lock:
            if len(self._records) >= self.max_tasks:
                self._make_room()
            self._next_position += 1
            position = self._next_position
            self._records[record.task_id] = text
            self._position[record.task_id] = position
            self._by_owner.setdefault(record.owner, []).append((position, record.task_id))
            end = expires_at(record)
            if end is not None:
                heapq.heappush(self._expiry, (end, record.task_id))
            if len(self._expiry) > 2 * self.max_tasks:  # entries of tasks dropped early
                self._expiry = [e for e in self._expiry if e[1] in self._records]
                heapq.heapify(self._expiry)

    def _make_room(self) -> None:
        self._purge_locked(self._clock())
        if len(self._records) < self.max_tasks:
            return
        ended = [(self._position[t], t) for t in self._ended]
        if not ended:
            raise TaskStoreFull(f"the task store holds {self.max_tasks} running tasks")
        self._remove(min(ended)[1])

    def _remove(self, task_id: str) -> None:
        record = record_from_json(self._records.pop(task_id))
        self._ended.discard(task_id)
        position = self._position.pop(task_id)
        mine = self._by_owner[record.owner]
        i = bisect.bisect_left(mine, (position, task_id))
        if i < len(mine) and mine[i] == (position, task_id):
            del mine[i]
        if not mine:
            del self._by_owner[record.owner]

    def _read(self, task_id: str) -> TaskRecord | None:
        with self._lock:
            text = self._records.get(task_id)
        return None if text is None else record_from_json(text)

    def _apply(
        self, task_id: str, transition: Transition
    ) -> tuple[TaskRecord | None, TaskRecord | None]:
        with self._lock:
            text = self._records.get(task_id)
            if text is None:
                return None, None
            record = record_from_json(text)
            now = self._clock()
            if is_expired(record, now):
                self._remove(task_id)
                return None, None
            changed = transition(record, now)
            if changed is None:
                return record, None
            stored = self._records[task_id] = record_to_json(changed)
            if changed.terminal:
                self._ended.add(task_id)
        return record_from_json(stored), record_from_json(stored)  # the caller's, the watchers'

    def _page(self, owner: str, before: int | None, limit: int) -> tuple[list[str], int | None]:
        with self._lock:
            mine = self._by_owner.get(owner, [])
            end = len(mine) if before is None else bisect.bisect_left(mine, (before, ""))
            start = max(0, end - limit)
            chosen = mine[start:end]
            ids = [task_id for _, task_id in reversed(chosen)]
            return ids, (chosen[0][0] if start > 0 and chosen else None)

    def _delete_expired(self, now: float) -> int:
        with self._lock:
            return self._purge_locked(now)

    def _purge_locked(self, now: float) -> int:
        gone = 0
        while self._expiry and self._expiry[0][0] <= now:
            _, task_id = heapq.heappop(self._expiry)
            if task_id in self._records:
                self._remove(task_id)
                gone += 1
        return gone

    def _close(self) -> None:
        with self._lock:
            self._records.clear()
            self._ended.clear()
            self._position.clear()
            self._by_owner.clear()
            self._expiry.clear()
