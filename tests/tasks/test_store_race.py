"""A completion racing a cancel, hundreds of times per store: the store's compare-and-set
decides each race once.

For every task a handler thread (one status change, then ``finish``) and a canceller thread
start together at a barrier, each after a random spin, with the interpreter switching
threads every microsecond. Where the store has a backing shared by several store objects
(SQLite, Redis), the canceller goes through a second store, as a ``tasks/cancel`` received by
another process would: the backing's transaction decides, not one store's lock. A watch on
the task in each store records what it is told (the other store's change arrives through
the poll or pub/sub).
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from support.redis_server import RedisServer, running_redis
from support.task_stores import NEEDS_REDIS, StoreMaker
from support.waiting import WAIT, wait_until

from mcp_sync.tasks import TaskAlreadyTerminal, TaskRecord, TaskStore

TASKS = 300
AT_ONCE = 15  # tasks racing at the same time (two threads each)


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    with running_redis() as server:
        yield server


@pytest.fixture(params=["memory", "sqlite", pytest.param("redis", marks=NEEDS_REDIS)])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[TaskStore, TaskStore]]:
    url = request.getfixturevalue("redis_server").url if request.param == "redis" else None
    make = StoreMaker(request.param, tmp_path, url)
    options = {"poll_interval": 0.01} if request.param == "sqlite" else {}
    store = make(**options)
    other = store if request.param == "memory" else make(**options)
    yield store, other
    make.close_all()


@dataclass
class Race:
    task_id: str
    finished: bool | None = None  # what finish() returned
    cancelled: bool | None = None  # cancel() returned (True) or raised TaskAlreadyTerminal
    seen: dict[int, list[TaskRecord]] = field(default_factory=dict)  # per watch
    lock: threading.Lock = field(default_factory=threading.Lock)

    def watcher(self, n: int) -> Callable[[TaskRecord], None]:
        self.seen[n] = []

        def saw(record: TaskRecord) -> None:
            with self.lock:
                self.seen[n].append(record)

        return saw


def _spin(rng: random.Random) -> None:
    for _ in range(rng.randrange(0, 400)):
        pass


def _run(store: TaskStore, other: TaskStore, race: Race, seed: int) -> list[threading.Thread]:
    barrier = threading.Barrier(2)

    def handler() -> None:
        rng = random.Random(seed)
        barrier.wait(WAIT)
        _spin(rng)
        store.set_status(race.task_id, "working", message="almost done")
        _spin(rng)
        race.finished = store.finish(race.task_id, "completed", {"result": {"content": []}})

    def canceller() -> None:
        rng = random.Random(seed + 1)
        barrier.wait(WAIT)
        _spin(rng)
        try:
            other.cancel(race.task_id, owner="o", message="racing")
            race.cancelled = True
        except TaskAlreadyTerminal:
            race.cancelled = False

    threads = [threading.Thread(target=handler), threading.Thread(target=canceller)]
    for thread in threads:
        thread.start()
    return threads


@pytest.mark.usefixtures("fast_switching")
def test_completion_racing_cancel_ends_one_way_only(stores: tuple[TaskStore, TaskStore]) -> None:
    store, other = stores
    races: list[Race] = []
    stops = []
    for batch in range(0, TASKS, AT_ONCE):
        threads: list[threading.Thread] = []
        for n in range(batch, min(TASKS, batch + AT_ONCE)):
            race = Race(
                store.create(owner="o", ttl_ms=600_000, worker="w", lease_seconds=600).task_id
            )
            stops += [
                watching.watch(race.task_id, race.watcher(i))
                for i, watching in enumerate({id(s): s for s in (store, other)}.values())
            ]
            races.append(race)
            threads += _run(store, other, race, seed=n * 2)
        for thread in threads:
            thread.join(WAIT)
            assert not thread.is_alive()

    for race in races:
        final = store.get(race.task_id, owner="o")
        assert race.finished is not None and race.cancelled is not None
        assert race.finished is (not race.cancelled), race  # finish won iff the cancel lost
        assert final.status == ("cancelled" if race.cancelled else "completed"), race
    for race in races:
        winner = "cancelled" if race.cancelled else "completed"
        loser = "completed" if race.cancelled else "cancelled"
        for n, seen in race.seen.items():

            def told(seen: list[TaskRecord] = seen, winner: str = winner) -> bool:
                return any(r.status == winner for r in list(seen))

            wait_until(told, f"watch {n} of {race.task_id} to see it {winner}")
            with race.lock:
                assert all(r.status != loser for r in seen), race
                assert sum(r.terminal for r in seen) == 1, race  # one terminal record, told once
    for stop in stops:
        stop()
    outcomes = {race.cancelled for race in races}
    assert outcomes == {True, False}, "the jitter should let both sides win sometimes"
