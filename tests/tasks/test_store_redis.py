"""RedisTaskStore beyond the contract: pub/sub between stores, Redis TTLs, a Redis that is
down or restarted, and the one listener thread."""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from support.redis_server import RedisServer, free_port, running_redis
from support.task_stores import NEEDS_REDIS, FakeClock, StoreMaker
from support.waiting import WAIT, wait_event, wait_until

from mcp_sync.errors import BusUnavailable
from mcp_sync.tasks import RedisTaskStore, TaskRecord, TaskStoreFull, redis_store

pytestmark = NEEDS_REDIS


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    with running_redis() as server:
        yield server


@pytest.fixture
def make(redis_server: RedisServer, tmp_path: Path) -> Iterator[StoreMaker]:
    maker = StoreMaker("redis", tmp_path, redis_server.url)
    yield maker
    maker.close_all()


class Seen:
    def __init__(self) -> None:
        self.records: list[TaskRecord] = []
        self.event = threading.Event()

    def __call__(self, record: TaskRecord) -> None:
        self.records.append(record)
        self.event.set()


def test_a_cancel_through_one_store_reaches_a_watch_on_another(make: StoreMaker) -> None:
    worker, other = make(), make()
    task = worker.create(owner="a", ttl_ms=60_000, worker="w1", lease_seconds=30)
    seen = Seen()
    stop = worker.watch(task.task_id, seen)
    assert other.cancel(task.task_id, owner="a", message="stop").status == "cancelled"
    wait_event(seen.event, "the cancel made through the other store")
    assert [(r.status, r.status_message) for r in seen.records] == [("cancelled", "stop")]
    assert worker.finish(task.task_id, "completed", {"result": {}}) is False
    stop()


def test_wait_changed_on_one_store_wakes_on_a_change_through_another(make: StoreMaker) -> None:
    one, other = make(), make()
    task = one.create(owner="a", ttl_ms=60_000)
    got: list[TaskRecord] = []
    waiter = threading.Thread(
        target=lambda: got.append(
            one.wait_changed(task.task_id, owner="a", after_version=1, timeout=WAIT)
        )
    )
    waiter.start()
    other.set_status(task.task_id, "input_required", input_requests={"q": {}})
    waiter.join(WAIT + 1)
    assert got and got[0].status == "input_required"


def test_records_carry_a_redis_ttl(make: StoreMaker, redis_server: RedisServer) -> None:
    store = make()
    task = store.create(owner="a", ttl_ms=60_000)
    raw = redis.Redis.from_url(redis_server.url)
    try:
        ttl = raw.pttl(f"{make.prefix}task:{task.task_id}")
        assert 0 < ttl <= 60_000
        store.cancel(task.task_id, owner="a")  # a change keeps the TTL
        assert 0 < raw.pttl(f"{make.prefix}task:{task.task_id}") <= ttl
    finally:
        raw.close()


def test_a_redis_that_is_down_is_bus_unavailable(
    make: StoreMaker, redis_server: RedisServer
) -> None:
    store = make(socket_timeout=0.5, subscribe_timeout=0.5)
    task = store.create(owner="a", ttl_ms=60_000)
    redis_server.kill()
    with pytest.raises(BusUnavailable):
        store.get(task.task_id, owner="a")
    with pytest.raises(BusUnavailable):
        store.create(owner="a", ttl_ms=60_000)
    with pytest.raises(BusUnavailable):
        store.watch(task.task_id, lambda _r: None)


def test_the_listener_reconnects_and_catches_up(
    make: StoreMaker, redis_server: RedisServer
) -> None:
    store = make(backoff_max=0.1, socket_timeout=1.0)
    task = store.create(owner="a", ttl_ms=60_000)
    seen = Seen()
    stop = store.watch(task.task_id, seen)
    redis_server.kill()
    redis_server.start()  # empty: a restarted Redis without persistence
    # the record is written again by a client the store's listener never heard publish
    writer = make()
    assert isinstance(writer, RedisTaskStore)
    writer._insert(task)  # restored as a backup would be (no PUBLISH)
    writer.cancel(task.task_id, owner="a")
    wait_until(
        lambda: any(r.status == "cancelled" for r in seen.records), "the cancel after a restart"
    )
    stop()


def test_one_listener_thread_for_many_watches_and_close_stops_it(make: StoreMaker) -> None:
    store = make()
    tasks = [store.create(owner="a", ttl_ms=60_000) for _ in range(20)]
    before = set(threading.enumerate())
    stops = [store.watch(t.task_id, lambda _r: None) for t in tasks]
    extra = [t for t in threading.enumerate() if t not in before]
    assert len(extra) == 1
    for stop in stops[:-1]:
        stop()
    assert extra[0].is_alive()  # one watch is left
    store.close()
    assert not extra[0].is_alive()


def test_the_listener_ends_after_the_last_watch(make: StoreMaker) -> None:
    store = make()
    task = store.create(owner="a", ttl_ms=60_000)
    before = set(threading.enumerate())
    stop = store.watch(task.task_id, lambda _r: None)
    (listener,) = [t for t in threading.enumerate() if t not in before]
    stop()
    wait_until(lambda: not listener.is_alive(), "the listener to end")


def test_a_store_url_without_a_server_fails_clearly(tmp_path: Path) -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"
    with (
        RedisTaskStore(url, socket_timeout=0.5) as store,
        pytest.raises(BusUnavailable, match="could not use Redis"),
    ):
        store.create(owner="a", ttl_ms=1000)


def test_close_joins_a_listener_still_ending_after_its_last_watch(make: StoreMaker) -> None:
    store = make()
    task = store.create(owner="a", ttl_ms=60_000)
    before = set(threading.enumerate())
    store.watch(task.task_id, lambda _r: None)()  # its listener is told to end, not awaited
    store.watch(task.task_id, lambda _r: None)  # and a second listener starts at once
    listeners = [t for t in threading.enumerate() if t not in before]
    assert 1 <= len(listeners) <= 2
    store.close()
    assert [t for t in listeners if t.is_alive()] == []  # none outlives close()


def test_purge_deletes_a_bounded_batch_per_call(
    make: StoreMaker, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock()
    store = make(clock=clock)
    for _ in range(5):
        store.create(owner="a", ttl_ms=1_000)
    clock.advance(2)
    monkeypatch.setattr(redis_store, "PURGE_BATCH", 2)
    assert [store.purge_expired() for _ in range(4)] == [2, 2, 1, 0]


def test_an_outage_is_one_warning_not_one_per_retry(
    make: StoreMaker, redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    store = make(backoff_initial=0.01, backoff_max=0.01, socket_timeout=0.5)
    task = store.create(owner="a", ttl_ms=60_000)
    stop = store.watch(task.task_id, lambda _r: None)
    with caplog.at_level(logging.DEBUG, logger="mcp_sync.tasks"):
        redis_server.kill()
        wait_until(
            lambda: sum("lost the Redis connection" in r.message for r in caplog.records) >= 5,
            "several attempts to reconnect",
        )
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "lost the Redis connection" in warnings[0].message
    stop()


def test_the_bound_keeps_every_index_within_max_tasks(
    make: StoreMaker, redis_server: RedisServer
) -> None:
    """A dropped task leaves every key it had: the owner's list (``tasks/list`` pages walk
    it), the expiry order, the ended set and the record."""
    clock = FakeClock()
    store = make(max_tasks=3, clock=clock)
    for n in range(10):
        task = store.create(owner=f"o{n % 2}", ttl_ms=60_000)
        if n % 3 == 0:
            store.cancel(task.task_id, owner=task.owner)
        else:
            store.finish(task.task_id, "completed", {"result": {}})
    clock.advance(61)  # the three left have expired: the next creations drop them
    for _ in range(2):
        store.create(owner="o2", ttl_ms=60_000)
    raw = redis.Redis.from_url(redis_server.url)
    try:
        owners = [raw.zcard(f"{make.prefix}owner:o{n}") for n in range(3)]
        tasks = list(raw.scan_iter(f"{make.prefix}task:*"))
        assert (owners, raw.zcard(f"{make.prefix}expiry")) == ([0, 0, 2], 2)
        assert (len(tasks), raw.zcard(f"{make.prefix}ended")) == (2, 0)
    finally:
        raw.close()
    assert len(store.list(owner="o2")[0]) == 2


def test_a_task_without_a_ttl_counts_too(make: StoreMaker) -> None:
    store = make(max_tasks=1)
    assert isinstance(store, RedisTaskStore)
    task = store.create(owner="a", ttl_ms=60_000)
    store.finish(task.task_id, "completed", {"result": {}})
    forever = dataclasses.replace(task, task_id="forever", ttl_ms=None, status="working")
    store._insert(forever)  # as a record written by hand or restored would be
    with pytest.raises(TaskStoreFull):
        store.create(owner="a", ttl_ms=60_000)
    assert store.get("forever", owner="a").ttl_ms is None
