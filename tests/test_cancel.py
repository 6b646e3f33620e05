"""CancelToken, Cancelled and the shared deadline scheduler."""

from __future__ import annotations

import concurrent.futures
import logging
import math
import threading
import time

import pytest
from support.waiting import wait_until

from mcp_sync import deadlines
from mcp_sync.cancel import CancelToken
from mcp_sync.errors import Cancelled


def run_in_thread(fn, timeout: float = 5.0):
    """Run ``fn`` in a thread; fail (instead of hanging) if it does not finish in time."""
    box: dict[str, object] = {}

    def target() -> None:
        try:
            box["result"] = fn()
        except BaseException as exc:  # pragma: no cover - reported below
            box["error"] = exc

    thread = threading.Thread(target=target, name="test-helper", daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), f"{fn!r} did not finish within {timeout} s (deadlock?)"
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box.get("result")


# -- Cancelled --------------------------------------------------------------------------------
def test_cancelled_is_a_futures_cancelled_error_with_reason():
    exc = Cancelled("user pressed stop")
    assert isinstance(exc, concurrent.futures.CancelledError)
    assert exc.reason == "user pressed stop"
    assert "user pressed stop" in str(exc)
    plain = Cancelled()
    assert plain.reason is None
    assert str(plain) == "cancelled"


# -- cancel / state ---------------------------------------------------------------------------
def test_new_token_is_active():
    token = CancelToken()
    assert not token.cancelled
    assert token.reason is None
    token.raise_if_cancelled()  # does not raise
    assert "active" in repr(token)


def test_cancel_returns_true_once_and_keeps_first_reason():
    token = CancelToken()
    assert token.cancel("first") is True
    assert token.cancel("second") is False
    assert token.cancel() is False
    assert token.cancelled
    assert token.reason == "first"
    assert "first" in repr(token)


def test_cancel_without_reason():
    token = CancelToken()
    assert token.cancel() is True
    assert token.reason is None
    with pytest.raises(Cancelled) as info:
        token.raise_if_cancelled()
    assert info.value.reason is None


def test_racing_cancel_exactly_one_winner():
    for _round in range(20):
        token = CancelToken()
        n = 16
        barrier = threading.Barrier(n)
        results: list[tuple[int, bool]] = []
        lock = threading.Lock()

        def racer(i: int) -> None:
            barrier.wait(5)
            won = token.cancel(f"racer-{i}")
            with lock:
                results.append((i, won))

        threads = [threading.Thread(target=racer, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(5)
            assert not t.is_alive(), "a racer did not finish"
        winners = [i for i, won in results if won]
        assert len(results) == n
        assert len(winners) == 1, f"expected exactly one winner, got {winners}"
        assert token.reason == f"racer-{winners[0]}"


def test_raise_if_cancelled_raises_with_reason():
    token = CancelToken()
    token.cancel("stop now")
    with pytest.raises(Cancelled) as info:
        token.raise_if_cancelled()
    assert info.value.reason == "stop now"
    with pytest.raises(concurrent.futures.CancelledError):
        token.raise_if_cancelled()


# -- wait -------------------------------------------------------------------------------------
def test_wait_times_out_boundedly():
    token = CancelToken()
    start = time.monotonic()
    assert token.wait(0.05) is False
    elapsed = time.monotonic() - start
    assert 0.04 <= elapsed < 2.0, elapsed
    assert token.wait(0) is False
    assert token.wait(-1) is False


def test_wait_returns_true_at_once_when_cancelled():
    token = CancelToken()
    token.cancel()
    start = time.monotonic()
    assert token.wait(10) is True
    assert token.wait(None) is True
    assert token.wait(0) is True
    assert time.monotonic() - start < 1.0


def test_wait_wakes_when_cancelled_from_another_thread():
    token = CancelToken()
    waiting = threading.Event()
    outcome: list[bool] = []

    def waiter() -> None:
        waiting.set()
        outcome.append(token.wait(10))

    thread = threading.Thread(target=waiter)
    thread.start()
    assert waiting.wait(5), "waiter did not start"
    start = time.monotonic()
    token.cancel("go")
    thread.join(5)
    assert not thread.is_alive(), "wait() did not wake up on cancel"
    assert outcome == [True]
    assert time.monotonic() - start < 2.0


def test_first_wait_racing_cancel_is_always_woken(fast_switching):
    """The event behind wait() is made by the first waiter: a cancel that races with that
    first wait must still wake it (the flag and the event are handed over under one lock)."""
    for _ in range(200):
        token = CancelToken()
        barrier = threading.Barrier(2)
        outcome: list[bool] = []

        def waiter(
            token: CancelToken = token,
            barrier: threading.Barrier = barrier,
            outcome: list[bool] = outcome,
        ) -> None:
            barrier.wait()
            outcome.append(token.wait(30))

        thread = threading.Thread(target=waiter)
        thread.start()
        barrier.wait()
        token.cancel("race")
        thread.join(10)
        assert not thread.is_alive(), "a wait() that raced with cancel() was never woken"
        assert outcome == [True]


def test_tokens_never_waited_on_build_no_event():
    """One token per request: those nobody waits on stay a flag and a lock."""
    token = CancelToken()
    token.add_callback(lambda _t: None)
    assert token.cancel("done")
    assert token.cancelled and token.reason == "done"
    assert token._event is None
    assert token.wait(5) is True  # already cancelled: returns at once, still no event
    assert token._event is None


def test_wait_forever_is_woken():
    token = CancelToken()
    started = threading.Event()
    outcome: list[bool] = []

    def waiter() -> None:
        started.set()
        outcome.append(token.wait())  # timeout=None

    thread = threading.Thread(target=waiter)
    thread.start()
    assert started.wait(5)
    token.cancel()
    thread.join(5)
    assert not thread.is_alive(), "wait(None) did not wake up on cancel"
    assert outcome == [True]


# -- callbacks --------------------------------------------------------------------------------
def test_callback_runs_once_in_cancelling_thread():
    token = CancelToken()
    calls: list[tuple[CancelToken, str]] = []
    token.add_callback(lambda t: calls.append((t, threading.current_thread().name)))

    def cancel_twice() -> None:
        token.cancel("a")
        token.cancel("b")

    thread = threading.Thread(target=cancel_twice, name="canceller")
    thread.start()
    thread.join(5)
    assert not thread.is_alive()
    assert calls == [(token, "canceller")]
    token.cancel("c")
    assert len(calls) == 1


def test_callbacks_run_in_registration_order():
    token = CancelToken()
    order: list[int] = []
    for i in range(5):
        token.add_callback(lambda _t, i=i: order.append(i))
    token.cancel()
    assert order == [0, 1, 2, 3, 4]


def test_callback_runs_immediately_if_already_cancelled():
    token = CancelToken()
    token.cancel("done")
    seen: list[tuple[str | None, str]] = []
    token.add_callback(lambda t: seen.append((t.reason, threading.current_thread().name)))
    assert seen == [("done", threading.current_thread().name)]
    token.cancel()
    assert len(seen) == 1


def test_removed_callback_does_not_run():
    token = CancelToken()
    calls: list[int] = []

    def cb(_t: CancelToken) -> None:
        calls.append(1)

    token.add_callback(cb)
    assert token.remove_callback(cb) is True
    assert token.remove_callback(cb) is False
    token.cancel()
    assert calls == []
    assert token.remove_callback(cb) is False


def test_callback_calling_token_methods_does_not_deadlock():
    token = CancelToken()
    seen: list[object] = []

    def reentrant(t: CancelToken) -> None:
        seen.append(t.cancel("again"))  # False: already cancelled
        seen.append(t.cancelled)
        seen.append(t.reason)
        t.add_callback(lambda _t: seen.append("nested ran"))  # runs at once
        seen.append(t.remove_callback(reentrant))
        seen.append(t.wait(1))
        seen.append(t.child().cancelled)

    token.add_callback(reentrant)
    assert run_in_thread(lambda: token.cancel("first")) is True
    assert seen == [False, True, "first", "nested ran", False, True, True]


def test_callback_runs_outside_the_token_lock():
    """A callback that waits for *another* thread to use the token must not deadlock."""
    token = CancelToken()
    other_done: list[bool] = []

    def callback(t: CancelToken) -> None:
        def use_token() -> None:
            t.add_callback(lambda _t: None)
            t.remove_callback(callback)
            other_done.append(t.cancel())

        helper = threading.Thread(target=use_token)
        helper.start()
        helper.join(5)
        other_done.append(not helper.is_alive())

    token.add_callback(callback)
    assert run_in_thread(token.cancel, timeout=10) is True
    assert other_done == [False, True], "another thread could not use the token from a callback"


def test_add_callback_on_cancelled_token_runs_outside_lock():
    token = CancelToken()
    token.cancel()
    finished: list[bool] = []

    def callback(t: CancelToken) -> None:
        helper = threading.Thread(target=lambda: t.add_callback(lambda _t: None))
        helper.start()
        helper.join(5)
        finished.append(not helper.is_alive())

    run_in_thread(lambda: token.add_callback(callback))
    assert finished == [True]


def test_failing_callback_is_logged_not_raised(caplog):
    token = CancelToken()
    after: list[str] = []

    def boom(_t: CancelToken) -> None:
        raise RuntimeError("callback exploded")

    token.add_callback(boom)
    token.add_callback(lambda _t: after.append("ran"))
    with caplog.at_level(logging.ERROR, logger="mcp_sync.cancel"):
        assert token.cancel() is True
    assert after == ["ran"], "a failing callback stopped the others"
    records = [r for r in caplog.records if r.name == "mcp_sync.cancel"]
    assert len(records) == 1
    assert records[0].levelno == logging.ERROR
    assert records[0].exc_info is not None
    assert "callback exploded" in str(records[0].exc_info[1])


def test_failing_callback_on_cancelled_token_is_logged(caplog):
    token = CancelToken()
    token.cancel()
    with caplog.at_level(logging.ERROR, logger="mcp_sync.cancel"):
        token.add_callback(lambda _t: 1 / 0)  # must not raise
    assert any(
        r.name == "mcp_sync.cancel" and isinstance(r.exc_info[1], ZeroDivisionError)
        for r in caplog.records
        if r.exc_info
    )


# -- children ---------------------------------------------------------------------------------
def test_child_is_cancelled_with_parent():
    parent = CancelToken()
    child = parent.child()
    grandchild = child.child()
    assert not child.cancelled
    assert parent.cancel("parent stop") is True
    assert child.cancelled and child.reason == "parent stop"
    assert grandchild.cancelled and grandchild.reason == "parent stop"


def test_cancelling_child_leaves_parent_and_unlinks():
    parent = CancelToken()
    child = parent.child()
    sibling = parent.child()
    assert child.cancel("child only") is True
    assert not parent.cancelled
    assert not sibling.cancelled
    # the cancelled child no longer hangs on the parent's callback list
    assert len(parent._callbacks) == 1
    parent.cancel("later")
    assert sibling.reason == "later"
    assert child.reason == "child only"


def test_child_of_cancelled_parent_is_cancelled():
    parent = CancelToken()
    parent.cancel("already")
    child = parent.child()
    assert child.cancelled
    assert child.reason == "already"


def test_many_children_do_not_accumulate_on_parent():
    parent = CancelToken()
    for _ in range(100):
        parent.child().cancel()
    assert parent._callbacks == []


# -- timeouts and the deadline scheduler ------------------------------------------------------
def test_with_timeout_fires():
    token = CancelToken.with_timeout(0.05)
    assert token.wait(5), "with_timeout token did not fire within 5 s"
    assert token.reason == "timeout"
    wait_until(lambda: deadlines.pending_deadlines() == 0, "the deadline to be gone")


def test_with_timeout_child_of_parent():
    parent = CancelToken()
    token = CancelToken.with_timeout(60, parent=parent)
    assert deadlines.scheduler_thread_alive()
    parent.cancel("parent went away")
    assert token.cancelled and token.reason == "parent went away"
    wait_until(
        lambda: deadlines.pending_deadlines() == 0,
        "the deadline of a token cancelled through its parent to be removed",
    )


def test_with_timeout_child_fires_without_touching_parent():
    parent = CancelToken()
    token = CancelToken.with_timeout(0.02, parent=parent)
    assert token.wait(5), "child timeout did not fire"
    assert not parent.cancelled
    assert parent._callbacks == []


def test_deadline_removed_when_cancelled_earlier():
    token = CancelToken.with_timeout(60)
    assert deadlines.scheduler_thread_alive()
    assert token.cancel("early") is True
    wait_until(
        lambda: deadlines.pending_deadlines() == 0,
        "the only deadline to be gone once cancelled",
    )
    assert token.reason == "early"


def test_set_deadline_replaces_earlier_one():
    token = CancelToken()
    token.set_deadline(60)
    token.set_deadline(0.02, reason="second deadline")
    assert token.wait(5), "replacement deadline did not fire"
    assert token.reason == "second deadline"
    wait_until(lambda: deadlines.pending_deadlines() == 0, "the deadline to be gone")


def test_set_deadline_on_cancelled_token_is_removed():
    token = CancelToken()
    token.cancel("gone")
    token.set_deadline(60)
    wait_until(
        lambda: deadlines.pending_deadlines() == 0,
        "the deadline on a cancelled token to be gone",
    )
    assert token.reason == "gone"


def test_scheduler_runs_in_deadline_order_and_survives_failures(caplog):
    order: list[int] = []
    done = threading.Event()

    def record(i: int):
        def run() -> None:
            order.append(i)
            if len(order) == 3:
                done.set()

        return run

    def boom() -> None:
        raise RuntimeError("deadline callback exploded")

    with caplog.at_level(logging.ERROR, logger="mcp_sync.deadlines"):
        deadlines.schedule(0.06, record(3))
        deadlines.schedule(0.0, boom)
        deadlines.schedule(0.04, record(2))
        deadlines.schedule(0.02, record(1))
        assert done.wait(5), f"deadlines did not all run: {order}"
    assert order == [1, 2, 3]
    assert any("deadline callback failed" in r.getMessage() for r in caplog.records)
    wait_until(lambda: deadlines.pending_deadlines() == 0, "the deadline to be gone")


@pytest.mark.parametrize("far", [math.inf, 1e300])
def test_an_infinite_or_huge_delay_does_not_stop_the_scheduler(far):
    # before the fix the scheduler thread died of OverflowError in Condition.wait(inf), and
    # every later deadline (call timeouts too) never fired
    never = threading.Event()
    marker = threading.Event()
    entry = deadlines.schedule(far, never.set)
    deadlines.schedule(0.02, marker.set)
    assert marker.wait(5), "a deadline scheduled after an infinite one did not run"
    assert entry.active and not never.is_set()
    entry.cancel()
    wait_until(lambda: deadlines.pending_deadlines() == 0, "the deadline to be gone")
    token = CancelToken.with_timeout(math.inf)
    assert not token.wait(0.01) and not token.cancelled
    token.cancel()
    wait_until(lambda: deadlines.pending_deadlines() == 0, "the deadline to be gone")


def test_deadline_cancel_prevents_callback():
    fired = threading.Event()
    marker = threading.Event()
    entry = deadlines.schedule(0.05, fired.set)
    assert entry.active
    assert entry.cancel() is True
    assert entry.cancel() is False
    assert not entry.active
    # a later deadline runs; the cancelled earlier one must not have
    deadlines.schedule(0.1, marker.set)
    assert marker.wait(5)
    assert not fired.is_set()
    wait_until(lambda: deadlines.pending_deadlines() == 0, "the deadline to be gone")


def test_one_scheduler_thread_for_many_timeouts():
    before = set(threading.enumerate())
    tokens = [CancelToken.with_timeout(30 + i) for i in range(200)]
    new = [t for t in threading.enumerate() if t not in before]
    assert [t.name for t in new] == ["mcp_sync-deadlines"]
    for token in tokens:
        token.cancel()
    wait_until(lambda: deadlines.pending_deadlines() == 0, "the deadline to be gone")
