"""Suite-wide fixtures: every test must leave no thread behind."""

from __future__ import annotations

import signal
import sys
import threading
import time

import pytest

from mcp_sync import deadlines

# A shell starts background jobs with SIGINT ignored, and children inherit that: a Python
# child whose SIGINT is ignored at start never raises KeyboardInterrupt, so the tests that
# press Ctrl-C on a child would hang. Handling SIGINT here gives every child the default
# disposition back (a handled signal is reset to its default by exec).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _wait_for_threads(before: set[threading.Thread], limit: float) -> list[threading.Thread]:
    end = time.monotonic() + limit
    while True:
        # the deadline thread lingers a while when idle: end it now if (and only if) no
        # deadline is pending; a pending one keeps it alive, and that is reported as a leak
        deadlines.stop_idle_scheduler(0)
        extra = [t for t in threading.enumerate() if t not in before and t.is_alive()]
        if not extra or time.monotonic() >= end:
            return extra
        extra[0].join(max(0.0, min(0.05, end - time.monotonic())))


@pytest.fixture(autouse=True)
def no_thread_leaks():
    """Fail a test that leaves a new thread running (after a bounded moment to finish)."""
    before = set(threading.enumerate())
    yield
    leaked = _wait_for_threads(before, 5.0)
    assert not leaked, f"threads left behind: {[t.name for t in leaked]}"


@pytest.fixture
def fast_switching():
    """Force very frequent thread switches to shake out races."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(old)
