"""The bounded worker pool: threads only while there is work, first in first started, a
warning when a task waits too long for a worker, and its stats."""

from __future__ import annotations

import logging
import threading

import pytest
from support.waiting import WAIT, wait_until

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
    wait_until(lambda: pool.stats().threads == 0, "the idle worker to exit")
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
    assert (stats.max_workers, stats.threads, stats.busy, stats.idle, stats.queued) == (
        2,
        2,
        2,
        0,
        5,
    )
    assert stats.longest_wait >= 0.0
    release.set()
    wait_until(lambda: len(order) == 5, "the five queued tasks to run")
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


def test_every_task_runs_once_while_workers_come_and_go(pools, fast_switching):
    # an idle_timeout this short makes workers exit between bursts, so submissions race
    # with workers timing out: no task may be lost, run twice, or exceed max_workers
    pool = pools(3, "churn", idle_timeout=0.0005, wait_warning=None)
    lock = threading.Lock()
    ran: list[int] = []
    active = [0, 0]  # now, most ever
    names: set[str] = set()

    def task(n: int) -> None:
        with lock:
            active[0] += 1
            active[1] = max(active[1], active[0])
        with lock:
            ran.append(n)
            names.add(threading.current_thread().name)
            active[0] -= 1

    def submitter(first: int) -> None:
        pause = threading.Event()
        for n in range(first, first + 300):
            pool.submit(task, n)
            if n % 25 == 0:
                pause.wait(0.002)  # let the workers go idle and time out

    submitters = [
        threading.Thread(target=submitter, args=(k * 1000,), name=f"submit-{k}") for k in range(4)
    ]
    for thread in submitters:
        thread.start()
    for thread in submitters:
        thread.join(WAIT * 4)
    wait_until(lambda: len(ran) >= 1200, "every task to run")
    assert sorted(ran) == [k * 1000 + i for k in range(4) for i in range(300)]
    assert active[1] <= 3
    assert len(names) > 3, "no worker ever exited and was replaced"
    wait_until(lambda: pool.stats().threads == 0, "the workers to exit after the bursts")


class TimesOutWhileNotified(threading.Condition):
    """A condition whose next ``wait`` (once armed) lets the test run in the gap between a
    timed-out wait and the re-acquired lock -- the moment a submission can slip in -- and
    then reports a timeout, as a real wait that expired just then does."""

    def __init__(self) -> None:
        super().__init__(threading.Lock())
        self.armed = False
        self.in_gap = threading.Event()
        self.go_on = threading.Event()

    def wait(self, timeout: float | None = None) -> bool:
        if not self.armed:
            return super().wait(timeout)
        self.armed = False
        self.release()
        self.in_gap.set()
        self.go_on.wait(WAIT)
        self.acquire()
        return False


def test_a_task_submitted_as_an_idle_worker_times_out_is_not_lost(pools):
    pool = pools(1, "gap", idle_timeout=WAIT, wait_warning=None)
    cond = TimesOutWhileNotified()
    pool._cond = cond  # white-box: force the interleaving instead of hoping for it
    cond.armed = True
    first = threading.Event()
    pool.submit(first.set)  # starts the one worker, which then goes idle
    assert first.wait(WAIT)
    assert cond.in_gap.wait(WAIT)
    second = threading.Event()
    pool.submit(second.set)  # sees an idle worker: starts none, just notifies
    cond.go_on.set()  # the worker's wait "times out" with the task queued
    assert second.wait(WAIT), "the task was left in the queue with no worker"


def test_max_workers_must_be_positive():
    with pytest.raises(ValueError):
        WorkerPool(0, "none")


def test_an_idle_worker_takes_the_next_task_instead_of_a_new_thread(pools):
    pool = pools(4, "reuse", idle_timeout=WAIT, wait_warning=None)
    names: list[str] = []
    for n in range(5):
        done = threading.Event()
        pool.submit(lambda done=done: (names.append(threading.current_thread().name), done.set()))
        assert done.wait(WAIT)
        wait_until(lambda: pool.stats().idle == 1, f"the worker to be idle after task {n}")
    assert names == ["reuse-worker-1"] * 5
    assert pool.stats().threads == 1


def test_shutdown_runs_the_queued_tasks_before_the_workers_exit():
    pool = WorkerPool(1, "drain", wait_warning=None)
    running = threading.Event()
    ran: list[int] = []

    def refuses_work() -> bool:
        try:
            pool.submit(lambda: None)
        except RuntimeError:
            return True
        return False

    def first() -> None:
        running.set()
        wait_until(refuses_work, "shutdown to begin")  # the tasks below are still queued then

    pool.submit(first)
    assert running.wait(WAIT)
    for n in range(3):
        pool.submit(ran.append, n)
    leftover: list[list[threading.Thread]] = []
    closer = threading.Thread(target=lambda: leftover.append(pool.shutdown(WAIT)))
    closer.start()
    closer.join(WAIT * 2)
    assert leftover == [[]]
    assert ran == [0, 1, 2]
    assert pool.stats().threads == 0
