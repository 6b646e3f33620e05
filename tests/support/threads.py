"""Threads seen from the outside: what a thread is blocked in, and joining those a test started."""

from __future__ import annotations

import linecache
import sys
import threading
import time

from mcp_sync import deadlines
from support.waiting import WAIT, wait_until


def frames_of(thread: threading.Thread) -> list[str]:
    """Function names on ``thread``'s stack, innermost first."""
    frame = sys._current_frames().get(thread.ident)  # type: ignore[arg-type]
    names = []
    while frame is not None:
        names.append(frame.f_code.co_name)
        frame = frame.f_back
    return names


def blocked_in(thread: threading.Thread, function: str) -> bool:
    """True while ``thread`` is blocked in a wait or lock acquire called (maybe indirectly)
    from ``function``: the innermost frame is executing an ``.acquire(`` or ``.wait(`` call."""
    frame = sys._current_frames().get(thread.ident)  # type: ignore[arg-type]
    if frame is None or function not in frames_of(thread):
        return False
    line = linecache.getline(frame.f_code.co_filename, frame.f_lineno)
    return ".acquire(" in line or ".wait(" in line


def wait_until_blocked_in(thread: threading.Thread, function: str, timeout: float = WAIT) -> None:
    """Wait until ``thread`` is blocked (waiting) inside ``function``."""
    wait_until(
        lambda: blocked_in(thread, function),
        f"{thread.name} to block inside {function}()",
        timeout=timeout,
    )


def new_threads(before: set[threading.Thread]) -> list[threading.Thread]:
    """The threads alive now that were not in ``before``."""
    return [t for t in threading.enumerate() if t not in before and t.is_alive()]


def join_new_threads(before: set[threading.Thread], limit: float = WAIT) -> list[threading.Thread]:
    """Join every thread started since ``before`` (bounded); returns those still alive."""
    end = time.monotonic() + limit
    deadlines.stop_idle_scheduler(0)  # idle, it only lingers; with a deadline pending it stays
    for thread in new_threads(before):
        thread.join(max(0.0, end - time.monotonic()))
    return new_threads(before)
