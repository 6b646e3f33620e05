"""``CallbackThread`` without a connection: one callback at a time in submission order, a
thread only while callbacks are queued, and the bounded queue (a full queue makes a waiting
submitter wait, or refuses it while the running callback waits for a reply)."""

from __future__ import annotations

import logging
import threading

import pytest
from support.threads import wait_until_blocked_in
from support.waiting import WAIT, wait_event, wait_until

from mcp_sync.workers import MAX_QUEUED_CALLBACKS, CallbackThread


class Held:
    """A callback that signals it runs, then blocks until released."""

    def __init__(self) -> None:
        self.running = threading.Event()
        self.release = threading.Event()

    def __call__(self) -> None:
        self.running.set()
        assert self.release.wait(WAIT), "the test never released the callback"


def runner_threads(name: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == f"{name}-callbacks"]


def test_max_queued_must_be_positive():
    with pytest.raises(ValueError):
        CallbackThread("bad", max_queued=0)
    assert CallbackThread("default").max_queued == MAX_QUEUED_CALLBACKS


def test_callbacks_run_one_at_a_time_in_submission_order():
    runner = CallbackThread("ordered")
    seen: list[int] = []
    overlap = []
    active = [0]
    lock = threading.Lock()

    def record(n: int) -> None:
        with lock:
            active[0] += 1
            overlap.append(active[0])
        seen.append(n)
        with lock:
            active[0] -= 1

    for n in range(200):
        assert runner.submit(record, n) is True
    assert runner.join(WAIT) is None
    assert seen == list(range(200))
    assert max(overlap) == 1


def test_the_thread_exists_only_while_callbacks_are_queued():
    runner = CallbackThread("transient")
    assert runner_threads("transient") == []
    held = Held()
    runner.submit(held)
    wait_event(held.running, "the callback to run")
    assert len(runner_threads("transient")) == 1
    held.release.set()
    assert runner.join(WAIT) is None
    wait_until(lambda: not runner_threads("transient"), "the callback thread to exit")
    done = threading.Event()
    runner.submit(done.set)  # and a new one starts on demand
    wait_event(done, "a callback after the thread exited")
    assert runner.join(WAIT) is None


def test_is_current_inside_a_callback_only():
    runner = CallbackThread("current")
    inside: list[bool] = []
    runner.submit(lambda: inside.append(runner.is_current()))
    assert runner.join(WAIT) is None
    assert inside == [True]
    assert runner.is_current() is False


def test_a_failing_callback_is_logged_and_the_next_one_runs(caplog):
    runner = CallbackThread("failing")
    done = threading.Event()

    def boom() -> None:
        raise SystemExit(3)  # even a BaseException must not stop the draining

    with caplog.at_level(logging.ERROR, logger="mcp_sync.workers"):
        runner.submit(boom)
        runner.submit(done.set)
        wait_event(done, "the callback after the failing one")
        assert runner.join(WAIT) is None
    assert any("failed" in r.getMessage() for r in caplog.records)


def test_a_waiting_submit_blocks_while_the_queue_is_full():
    runner = CallbackThread("full", max_queued=2)
    held = Held()
    runner.submit(held)
    wait_event(held.running, "the first callback to run")  # it left the queue
    ran: list[str] = []
    assert runner.submit(ran.append, "q1", wait=True)
    assert runner.submit(ran.append, "q2", wait=True)
    assert len(runner) == 2
    result: list[bool] = []
    submitter = threading.Thread(
        target=lambda: result.append(runner.submit(ran.append, "q3", wait=True))
    )
    submitter.start()
    wait_until_blocked_in(submitter, "submit")  # waiting for room
    assert result == [] and len(runner) == 2
    held.release.set()
    submitter.join(WAIT)
    assert result == [True]
    assert runner.join(WAIT) is None
    assert ran == ["q1", "q2", "q3"]


def test_a_submit_without_wait_ignores_the_bound():
    runner = CallbackThread("unbounded", max_queued=1)
    held = Held()
    runner.submit(held)
    wait_event(held.running, "the first callback to run")
    for _ in range(5):
        assert runner.submit(lambda: None)
    assert len(runner) == 5
    held.release.set()
    assert runner.join(WAIT) is None


def test_a_full_queue_refuses_while_the_running_callback_waits_for_a_reply():
    runner = CallbackThread("reply", max_queued=1)
    in_reply = threading.Event()
    release = threading.Event()

    def awaiting_reply() -> None:
        with runner.waiting_for_reply():
            in_reply.set()
            assert release.wait(WAIT)

    runner.submit(awaiting_reply)
    wait_event(in_reply, "the callback to wait for its reply")
    assert runner.submit(lambda: None, wait=True) is True  # room for one
    assert runner.submit(lambda: None, wait=True) is False  # full: refused at once, not blocked
    assert len(runner) == 1
    release.set()
    assert runner.join(WAIT) is None


def test_a_blocked_submitter_is_refused_when_the_callback_starts_waiting_for_a_reply():
    runner = CallbackThread("late-reply", max_queued=1)
    running = threading.Event()
    enter_reply = threading.Event()
    release = threading.Event()

    def callback() -> None:
        running.set()
        assert enter_reply.wait(WAIT)
        with runner.waiting_for_reply():
            assert release.wait(WAIT)

    runner.submit(callback)
    wait_event(running, "the callback to run")
    runner.submit(lambda: None)  # the queue is full now
    result: list[bool] = []
    submitter = threading.Thread(
        target=lambda: result.append(runner.submit(lambda: None, wait=True))
    )
    submitter.start()
    wait_until_blocked_in(submitter, "submit")  # a submitter to a full queue waits
    enter_reply.set()  # now waiting would deadlock: the submitter is refused
    submitter.join(WAIT)
    assert result == [False]
    release.set()
    assert runner.join(WAIT) is None


def test_stop_waiting_lets_every_blocked_submitter_through():
    runner = CallbackThread("stopped", max_queued=1)
    held = Held()
    runner.submit(held)
    wait_event(held.running, "the first callback to run")
    runner.submit(lambda: None)
    results: list[bool] = []
    submitters = [
        threading.Thread(target=lambda: results.append(runner.submit(lambda: None, wait=True)))
        for _ in range(3)
    ]
    for s in submitters:
        s.start()
    for s in submitters:
        wait_until_blocked_in(s, "submit")
    runner.stop_waiting()
    for s in submitters:
        s.join(WAIT)
    assert results == [True, True, True]
    assert len(runner) == 4  # queued past the bound: the connection is ending anyway
    assert runner.submit(lambda: None, wait=True) is True  # and later ones do not wait either
    held.release.set()
    assert runner.join(WAIT) is None


def test_join_from_the_callback_thread_does_not_deadlock():
    runner = CallbackThread("self-join")
    joined: list[object] = []
    runner.submit(lambda: joined.append(runner.join(WAIT)))
    assert runner.join(WAIT) is None
    assert joined == [None]


def test_join_reports_a_callback_still_running():
    runner = CallbackThread("slow-join")
    held = Held()
    runner.submit(held)
    wait_event(held.running, "the callback to run")
    thread = runner.join(0.01)
    assert thread is not None and thread.name == "slow-join-callbacks"
    held.release.set()
    assert runner.join(WAIT) is None
