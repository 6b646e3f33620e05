"""The test harness's waitress server stops cleanly however its loop is woken.

``stop()`` queues the closing of the connections on waitress's trigger. A worker thread
pulls the same trigger as it finishes a response, so the loop can be awake already and run
the queued call before ``stop()``'s own write to the trigger's pipe. That write must still
find the pipe open (it once found it closed: EBADF, and the waitress threads left behind).
"""

from __future__ import annotations

import os
import threading
from typing import Any

import httpx
import pytest
from support.http import run_waitress
from support.waiting import WAIT


def _hello(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"hello"]


def test_stop_survives_the_loop_running_its_call_before_its_own_pull(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from waitress import trigger

    original = trigger.trigger._physical_pull
    raced = threading.Event()

    def pull_after_the_loop_ran_the_thunks(self: Any) -> None:
        if threading.current_thread() is threading.main_thread() and self.thunks:
            ran = threading.Event()
            with self.lock:
                queued = list(self.thunks)

                def run_then_signal() -> None:
                    for thunk in queued:
                        thunk()
                    ran.set()

                self.thunks[:] = [run_then_signal]
            os.write(self.trigger, b"x")  # another thread's pull wakes the loop first
            assert ran.wait(WAIT), "the loop did not run the queued call"
            raced.set()
        original(self)  # stop()'s own write, after the loop ran its call

    monkeypatch.setattr(trigger.trigger, "_physical_pull", pull_after_the_loop_ran_the_thunks)
    base, stop = run_waitress(_hello)
    assert httpx.get(base + "/", timeout=WAIT).text == "hello"
    stop()
    assert raced.is_set()
    assert not [t.name for t in threading.enumerate() if t.name.startswith("waitress")]
