"""MemoryTaskStore's own bound: how many tasks it holds."""

from __future__ import annotations

import pytest

from mcp_sync.tasks import MemoryTaskStore, TaskNotFound, TaskStoreFull


def test_a_full_store_drops_its_oldest_ended_task_first() -> None:
    with MemoryTaskStore(max_tasks=3) as store:
        ended = store.create(owner="a", ttl_ms=60_000)
        store.finish(ended.task_id, "completed", {"result": {}})
        running = [store.create(owner="a", ttl_ms=60_000) for _ in range(2)]
        newest = store.create(owner="a", ttl_ms=60_000)
        with pytest.raises(TaskNotFound):
            store.get(ended.task_id, owner="a")
        assert [r.task_id for r in store.list(owner="a")[0]] == [
            newest.task_id,
            *[r.task_id for r in running[::-1]],
        ]
        with pytest.raises(TaskStoreFull):
            store.create(owner="a", ttl_ms=60_000)


def test_max_tasks_must_be_positive() -> None:
    with pytest.raises(ValueError):
        MemoryTaskStore(max_tasks=0)
