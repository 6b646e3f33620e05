"""The bound of the memory and SQLite stores: how many tasks they hold."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.task_stores import FakeClock, StoreMaker

from mcp_sync.tasks import MemoryTaskStore, SqliteTaskStore, TaskNotFound, TaskStoreFull


@pytest.fixture(params=["memory", "sqlite"])
def make(request: pytest.FixtureRequest, tmp_path: Path) -> StoreMaker:
    maker = StoreMaker(request.param, tmp_path)
    request.addfinalizer(maker.close_all)
    return maker


def test_a_full_store_drops_its_oldest_ended_task_first(make: StoreMaker) -> None:
    store = make(max_tasks=3)
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
    store.cancel(running[0].task_id, owner="a")  # an ended task makes room again
    assert store.create(owner="b", ttl_ms=60_000).status == "working"


def test_expired_tasks_make_room_before_ended_ones(tmp_path: Path) -> None:
    clock = FakeClock()
    for store in (
        MemoryTaskStore(max_tasks=2, clock=clock),
        SqliteTaskStore(tmp_path / "t.db", max_tasks=2, clock=clock),
    ):
        with store:
            short = store.create(owner="a", ttl_ms=1_000)
            ended = store.create(owner="a", ttl_ms=60_000)
            store.finish(ended.task_id, "completed", {"result": {}})
            clock.advance(2)
            store.create(owner="a", ttl_ms=60_000)
            assert store.get(ended.task_id, owner="a").status == "completed"  # kept
            with pytest.raises(TaskNotFound):
                store.get(short.task_id, owner="a")


def test_the_bound_counts_every_connection_to_the_sqlite_file(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    with SqliteTaskStore(path, max_tasks=2) as one, SqliteTaskStore(path, max_tasks=2) as two:
        one.create(owner="a", ttl_ms=60_000)
        two.create(owner="b", ttl_ms=60_000)
        with pytest.raises(TaskStoreFull):
            one.create(owner="a", ttl_ms=60_000)


@pytest.mark.parametrize("kind", [MemoryTaskStore, SqliteTaskStore])
def test_max_tasks_must_be_positive(kind: type, tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        kind(max_tasks=0) if kind is MemoryTaskStore else kind(tmp_path / "t.db", max_tasks=0)
