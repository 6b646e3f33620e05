"""The bound of every store: how many tasks it holds (``max_tasks``), the same rule for the
memory, SQLite and Redis stores, and for the shared ones counted over every handle."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.redis_server import RedisServer, running_redis
from support.task_stores import NEEDS_REDIS, FakeClock, StoreMaker
from support.waiting import WAIT

from mcp_sync.tasks import (
    MemoryTaskStore,
    RedisTaskStore,
    SqliteTaskStore,
    TaskNotFound,
    TaskStore,
    TaskStoreFull,
)

KINDS = ["memory", "sqlite", pytest.param("redis", marks=NEEDS_REDIS)]
SHARED_KINDS = ["sqlite", pytest.param("redis", marks=NEEDS_REDIS)]


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    with running_redis() as server:
        yield server


def _maker(request: pytest.FixtureRequest, tmp_path: Path) -> StoreMaker:
    url = request.getfixturevalue("redis_server").url if request.param == "redis" else None
    maker = StoreMaker(request.param, tmp_path, url)
    request.addfinalizer(maker.close_all)
    return maker


@pytest.fixture(params=KINDS)
def make(request: pytest.FixtureRequest, tmp_path: Path) -> StoreMaker:
    return _maker(request, tmp_path)


@pytest.fixture(params=SHARED_KINDS)
def make_shared(request: pytest.FixtureRequest, tmp_path: Path) -> StoreMaker:
    """Stores of one backing that several handles (processes) share."""
    return _maker(request, tmp_path)


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
    with pytest.raises(TaskNotFound):
        store.get(running[0].task_id, owner="a")


def test_expired_tasks_make_room_before_ended_ones(make: StoreMaker) -> None:
    # TTLs of a minute and more on the injected clock: Redis also expires keys in real time
    clock = FakeClock()
    store = make(max_tasks=2, clock=clock)
    short = store.create(owner="a", ttl_ms=60_000)
    ended = store.create(owner="a", ttl_ms=600_000)
    store.finish(ended.task_id, "completed", {"result": {}})
    clock.advance(61)
    store.create(owner="a", ttl_ms=600_000)
    assert store.get(ended.task_id, owner="a").status == "completed"  # kept
    with pytest.raises(TaskNotFound):
        store.get(short.task_id, owner="a")


def test_an_expired_task_leaves_the_count_even_while_running(make: StoreMaker) -> None:
    clock = FakeClock()
    store = make(max_tasks=2, clock=clock)
    for _ in range(2):
        store.create(owner="a", ttl_ms=60_000)
    with pytest.raises(TaskStoreFull):
        store.create(owner="a", ttl_ms=60_000)
    clock.advance(61)  # both still "working", but past their TTL: they no longer count
    fresh = [store.create(owner="b", ttl_ms=60_000) for _ in range(2)]
    assert [r.task_id for r in store.list(owner="b")[0]] == [r.task_id for r in fresh[::-1]]
    assert store.list(owner="a") == ([], None)


def test_the_bound_counts_every_handle_on_the_backing(make_shared: StoreMaker) -> None:
    one, two = make_shared(max_tasks=2), make_shared(max_tasks=2)
    one.create(owner="a", ttl_ms=60_000)
    two.create(owner="b", ttl_ms=60_000)
    with pytest.raises(TaskStoreFull):
        one.create(owner="a", ttl_ms=60_000)
    with pytest.raises(TaskStoreFull):
        two.create(owner="c", ttl_ms=60_000)


HANDLES = 16
BOUND = 5


def test_handles_creating_at_once_never_pass_the_bound(make_shared: StoreMaker) -> None:
    """Each thread has its own store (a process of its own, as far as the backing can tell),
    and all create at the same moment: the bound is checked in the creation's own atomic
    step, so exactly BOUND of them succeed."""
    stores = [make_shared(max_tasks=BOUND) for _ in range(HANDLES)]
    for store in stores:  # connected before the race
        store.list(owner="warm-up")
    barrier = threading.Barrier(HANDLES)
    made: list[str] = []
    refused: list[TaskStoreFull] = []
    lock = threading.Lock()

    def create(store: TaskStore, n: int) -> None:
        barrier.wait(WAIT)
        try:
            task_id = store.create(owner=f"o{n % 3}", ttl_ms=60_000).task_id
        except TaskStoreFull as exc:
            with lock:
                refused.append(exc)
        else:
            with lock:
                made.append(task_id)

    threads = [threading.Thread(target=create, args=(s, n)) for n, s in enumerate(stores)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
        assert not thread.is_alive()
    assert (len(made), len(refused)) == (BOUND, HANDLES - BOUND)
    listed = [r.task_id for n in range(3) for r in stores[0].list(owner=f"o{n}")[0]]
    assert sorted(listed) == sorted(made)


@pytest.mark.parametrize("kind", [MemoryTaskStore, SqliteTaskStore, RedisTaskStore])
def test_max_tasks_must_be_positive(kind: type, tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        if kind is SqliteTaskStore:
            kind(tmp_path / "t.db", max_tasks=0)
        else:
            kind(max_tasks=0)
