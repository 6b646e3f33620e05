"""The bounded worker pool: threads only while there is work, first in first started, a
warning when a task waits too long for a worker, and its stats."""

from __future__ import annotations

import logging
import threading

import pytest

from endpoint_support import WAIT, wait_until

from mcp_sync.workers import PoolStats, WorkerPool



@pytest.fixture
def pools():
    made: list[WorkerPool] = []

    def make(*args, **kwargs) -> WorkerPool:
        pool = WorkerPool(*args, **kwargs)
        made.append(pool)
        return pool

    yield make
    for pool in made:
        assert pool.shutdown(WAIT) == []


def test_workers_exit_when_idle_so_an_idle_pool_holds_no_thread(pools):
    pool = pools(4, "idle", idle_timeout=0.05)
    done = threading.Event()
    pool.submit(done.set)
    assert done.wait(WAIT)
    wait_until(lambda: pool.stats().threads == 0, message="an idle worker did not exit")
    assert not [t for t in threading.enumerate() if t.name.startswith("idle-worker-")]
    # and it starts again on demand
    again = threading.Event()
    pool.submit(again.set)
    assert again.wait(WAIT)


def test_the_pool_never_exceeds_max_workers_and_queues_in_order(pools):
    pool = pools(2, "bounded", wait_warning=None)
    release = threading.Event()
    started = threading.Barrier(3)
    order: list[int] = []

    def blocker() -> None:
        started.wait(WAIT)
        release.wait(WAIT)

    for _ in range(2):
        pool.submit(blocker)
    started.wait(WAIT)  # both workers are busy
    for n in range(5):
        pool.submit(order.append, n)
    stats = pool.stats()
    assert isinstance(stats, PoolStats)
    assert (stats.max_workers, stats.threads, stats.busy, stats.idle, stats.queued) == (2, 2, 2, 0, 5)
    assert stats.longest_wait >= 0.0
    release.set()
    wait_until(lambda: len(order) == 5)
    assert order == [0, 1, 2, 3, 4]
    final = pool.stats()
    assert final.queued == 0 and final.busy == 0 and final.longest_wait == 0.0


def test_stats_are_frozen(pools):
    stats = pools(1, "frozen").stats()
    with pytest.raises(AttributeError):
        stats.queued = 3  # type: ignore[misc]


class Flag(logging.Handler):
    """Sets an event on the first warning it receives."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen = threading.Event()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())
        self.seen.set()


@pytest.fixture
def warnings_of_workers():
    flag = Flag()
    logger = logging.getLogger("mcp_sync.workers")
    logger.addHandler(flag)
    try:
        yield flag
    finally:
        logger.removeHandler(flag)


def test_a_task_waiting_longer_than_the_threshold_is_logged_once(pools, warnings_of_workers):
    pool = pools(1, "stuck-pool", wait_warning=0.05)
    release = threading.Event()
    running = threading.Event()
    ran = threading.Event()

    def ignores_cancellation() -> None:
        running.set()
        release.wait(WAIT)

    pool.submit(ignores_cancellation)
    assert running.wait(WAIT)
    pool.submit(ran.set)
    assert warnings_of_workers.seen.wait(WAIT), "no warning for a task stuck in the queue"
    [message] = warnings_of_workers.messages
    assert "stuck-pool" in message and "1 task(s)" in message and "1 of 1 workers busy" in message
    assert pool.stats().longest_wait >= 0.05
    release.set()
    assert ran.wait(WAIT)
    assert warnings_of_workers.messages == [message]  # once per waiting task


def test_a_task_that_raises_does_not_kill_its_worker(pools):
    pool = pools(1, "raising", wait_warning=None)
    done = threading.Event()

    def boom() -> None:
        raise RuntimeError("boom")

    pool.submit(boom)
    pool.submit(done.set)
    assert done.wait(WAIT)


def test_shutdown_refuses_new_work_and_reports_stuck_threads(pools):
    pool = WorkerPool(1, "stuck", wait_warning=None)
    release = threading.Event()
    running = threading.Event()

    def stuck() -> None:
        running.set()
        release.wait(WAIT)

    pool.submit(stuck)
    assert running.wait(WAIT)
    leftover = pool.shutdown(0.05)
    assert [t.name for t in leftover] == ["stuck-worker-1"]
    with pytest.raises(RuntimeError):
        pool.submit(print)
    release.set()
    assert pool.shutdown(WAIT) == []


def test_a_refused_thread_start_queues_the_task_for_the_running_workers(pools, monkeypatch):
    pool = pools(2, "refused", wait_warning=None)
    release = threading.Event()
    running = threading.Event()
    ran = threading.Event()

    def blocker() -> None:
        running.set()
        release.wait(WAIT)

    pool.submit(blocker)
    assert running.wait(WAIT)

    def refuse(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", refuse)
    pool.submit(ran.set)  # queued for the worker that runs already
    assert pool.stats().threads == 1 and pool.stats().queued == 1
    monkeypatch.undo()
    release.set()
    assert ran.wait(WAIT)


def test_a_refused_first_thread_raises_and_queues_nothing(pools, monkeypatch):
    pool = pools(2, "refused-first", wait_warning=None)

    def refuse(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", refuse)
    with pytest.raises(RuntimeError):
        pool.submit(print)
    monkeypatch.undo()
    assert pool.stats().queued == 0 and pool.stats().threads == 0
