"""The deadline scheduler's thread lifetime: it lingers when idle, exits after the linger,
restarts on demand, and can be stopped at once when (and only when) it is idle.

Each test drives a private scheduler instance with a fake clock and a linger of 1000 fake
seconds, so no real wait ever times out: the thread moves only when a test wakes it, and
"the thread has looked at the clock again" is the synchronisation point.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator

import pytest

from mcp_sync import deadlines
from mcp_sync.deadlines import _Scheduler

WAIT = 10.0
LINGER = 1000.0
NAME = "test-deadlines"


class FakeClock:
    """A settable clock that counts the reads made by the scheduler thread."""

    def __init__(self) -> None:
        self.now = 5000.0
        self.thread_reads = 0
        self._cond = threading.Condition()

    def __call__(self) -> float:
        with self._cond:
            if threading.current_thread().name == NAME:
                self.thread_reads += 1
                self._cond.notify_all()
            return self.now

    def wait_thread_reads(self, count: int) -> None:
        with self._cond:
            assert self._cond.wait_for(lambda: self.thread_reads >= count, WAIT), (
                f"the scheduler thread read the clock {self.thread_reads} times, expected {count}"
            )


class CountingCondition(threading.Condition):
    """A condition that counts how often the scheduler wakes its thread."""

    def __init__(self) -> None:
        super().__init__(threading.Lock())
        self.notifies = 0

    def notify_all(self) -> None:
        self.notifies += 1
        super().notify_all()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def sched(clock: FakeClock) -> Iterator[_Scheduler]:
    scheduler = _Scheduler(linger=LINGER, clock=clock, thread_name=NAME)
    scheduler._cond = CountingCondition()
    yield scheduler
    assert scheduler.stop_idle(WAIT), "a test left a deadline pending"


def advance(sched: _Scheduler, clock: FakeClock, seconds: float) -> int:
    """Move the clock, wake the thread, and wait until it has seen the new time.

    Returns the thread's read count afterwards. When this returns, the thread holds the
    lock until it waits again or exits, so the next locked call observes that outcome.
    """
    # the thread reads the clock under this lock: each later read sees the new time
    with sched._cond:
        reads = clock.thread_reads
        clock.now += seconds
        sched._cond.notify_all()
    clock.wait_thread_reads(reads + 1)
    return clock.thread_reads


def assert_lingers_then_exits(
    sched: _Scheduler, clock: FakeClock, thread: threading.Thread
) -> None:
    """The idle ``thread`` is still there a second before its linger ends, and gone after."""
    advance(sched, clock, LINGER - 1.0)
    assert sched.alive() and thread.is_alive(), "the thread left before its linger was over"
    advance(sched, clock, 1.0)
    thread.join(WAIT)
    assert not thread.is_alive(), "the thread did not exit after its linger"
    assert not sched.alive()


def run_one_deadline(sched: _Scheduler, clock: FakeClock, delay: float) -> threading.Thread:
    """Schedule one deadline, let the clock reach it, wait for it to run; the thread."""
    fired = threading.Event()
    sched.schedule(delay, fired.set)
    thread = thread_of(sched)
    advance(sched, clock, delay)
    assert fired.wait(WAIT), "the deadline did not run"
    return thread


def thread_of(sched: _Scheduler) -> threading.Thread:
    thread = sched._thread
    assert thread is not None, "no scheduler thread"
    return thread


def test_the_thread_lingers_after_the_last_deadline_then_exits(sched, clock):
    thread = run_one_deadline(sched, clock, 10.0)
    assert sched.pending() == 0
    assert_lingers_then_exits(sched, clock, thread)


def test_a_deadline_scheduled_during_the_linger_reuses_the_thread(sched, clock):
    thread = run_one_deadline(sched, clock, 1.0)
    advance(sched, clock, LINGER - 1.0)  # almost gone
    second = threading.Event()
    sched.schedule(5.0, second.set)
    assert thread_of(sched) is thread, "a lingering thread was replaced"
    advance(sched, clock, 5.0)
    assert second.wait(WAIT)
    assert_lingers_then_exits(sched, clock, thread)  # counted from the last deadline


def test_after_the_linger_a_new_deadline_starts_a_new_thread(sched, clock):
    ran = threading.Event()
    sched.schedule(0.0, ran.set)
    old = thread_of(sched)
    assert ran.wait(WAIT)
    advance(sched, clock, LINGER)
    old.join(WAIT)
    assert not old.is_alive() and not sched.alive()
    fired = threading.Event()
    sched.schedule(0.0, fired.set)
    new = thread_of(sched)
    assert new is not old
    assert fired.wait(WAIT)


def test_sequential_timeouts_cost_no_wake_up_and_the_linger_counts_from_the_cancel(sched, clock):
    entry = sched.schedule(10 * LINGER, lambda: None)
    thread = thread_of(sched)
    clock.wait_thread_reads(1)  # it waits for the entry now
    entry.cancel()  # its wait would overrun the linger: this cancel wakes it
    clock.wait_thread_reads(2)  # lingering now
    notifies = sched._cond.notifies
    # sequential calls whose timeouts are scheduled and removed before they expire: not one
    # wake-up of the thread
    for _ in range(100):
        sched.schedule(2 * LINGER, lambda: None).cancel()
    assert sched._cond.notifies == notifies, (
        "scheduling or cancelling a later deadline woke the thread"
    )
    assert sched.pending() == 0
    assert len(sched._heap) < 100, "cancelled entries were never purged from the heap"
    assert_lingers_then_exits(sched, clock, thread)


def test_an_earlier_deadline_wakes_the_thread(sched, clock):
    sched.schedule(LINGER, lambda: None).cancel()
    clock.wait_thread_reads(1)
    notifies = sched._cond.notifies
    fired = threading.Event()
    sched.schedule(1.0, fired.set)  # due before the thread's current wait ends
    assert sched._cond.notifies == notifies + 1
    advance(sched, clock, 1.0)
    assert fired.wait(WAIT)


def test_stop_idle_refuses_while_a_deadline_is_pending(sched, clock):
    entry = sched.schedule(50.0, lambda: None)
    thread = thread_of(sched)
    assert sched.stop_idle(0) is False
    assert sched.alive() and thread.is_alive()
    entry.cancel()
    assert sched.stop_idle(WAIT) is True
    assert not thread.is_alive() and not sched.alive()
    assert sched.stop_idle(0) is True  # nothing to stop


def test_a_deadline_right_after_stop_idle_runs_once_on_a_new_thread(sched, clock):
    sched.schedule(0.0, lambda: None)
    old = thread_of(sched)
    clock.wait_thread_reads(2)  # it ran the entry and is lingering
    calls: list[str] = []
    fired = threading.Event()

    def record() -> None:
        calls.append(threading.current_thread().name)
        fired.set()

    with sched._cond:  # stop and reschedule before the old thread can even wake up
        sched._thread = None
        sched._cond.notify_all()
    sched.schedule(0.0, record)
    new = thread_of(sched)
    assert new is not old
    assert fired.wait(WAIT)
    old.join(WAIT)
    assert not old.is_alive()
    assert sched.stop_idle(WAIT)
    assert calls == [NAME]


def test_after_fork_the_child_drops_the_parents_deadlines(sched, clock):
    entry = sched.schedule(100.0, lambda: None)
    old_thread, old_cond = thread_of(sched), sched._cond
    sched._after_fork_in_child()  # what the child runs: the parent's thread does not exist there
    assert not entry.active and entry.cancel() is False
    assert sched.pending() == 0 and not sched.alive()
    with old_cond:  # here the parent's thread does exist: let it see it was let go
        old_cond.notify_all()
    old_thread.join(WAIT)
    assert not old_thread.is_alive()
    sched._cond = CountingCondition()
    fired = threading.Event()
    sched.schedule(0.0, fired.set)
    assert fired.wait(WAIT), "a deadline scheduled after the reset did not run"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_deadlines_fire_in_a_forked_child_of_a_process_with_a_lingering_thread():
    lingering = threading.Event()
    deadlines.schedule(0.0, lingering.set)
    assert lingering.wait(WAIT)
    assert deadlines.scheduler_thread_alive()  # idle, lingering: the state a fork copies
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        fired = threading.Event()
        deadlines.schedule(0.0, fired.set)
        os.write(write, b"1" if fired.wait(WAIT) else b"0")
        os._exit(0)
    os.close(write)
    try:
        answer = os.read(read, 1)
    finally:
        os.close(read)
        os.waitpid(pid, 0)
    assert answer == b"1", "a deadline never fired in the forked child"


def test_the_process_scheduler_stops_when_idle_and_only_then():
    token_fired = threading.Event()
    entry = deadlines.schedule(60.0, token_fired.set)
    assert deadlines.pending_deadlines() == 1
    assert deadlines.stop_idle_scheduler(0) is False and deadlines.scheduler_thread_alive()
    entry.cancel()
    assert deadlines.pending_deadlines() == 0
    assert deadlines.scheduler_thread_alive(), "the thread should linger after the last deadline"
    assert deadlines.stop_idle_scheduler(WAIT) is True
    assert not deadlines.scheduler_thread_alive()
