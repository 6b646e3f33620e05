"""The one blocking wait of the library that stays responsive to Ctrl-C.

A long :meth:`threading.Event.wait` or :meth:`threading.Lock.acquire` in the main thread may
delay ``KeyboardInterrupt`` until it returns; :func:`wait_sliced` waits in slices of at most
:data:`WAIT_SLICE` seconds instead, so a signal is seen promptly whatever the timeout.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["WAIT_SLICE", "wait_sliced", "wait_for_condition"]

WAIT_SLICE = 0.1
"""Longest single blocking wait, in seconds, so that signals (Ctrl-C) are seen promptly."""


def wait_sliced(
    done: Callable[[], bool], wait: Callable[[float], bool], timeout: float | None
) -> bool:
    """Block until ``done()`` is true or ``timeout`` seconds pass; return ``done()``.

    ``wait(seconds)`` blocks for at most ``seconds`` and returns True when the awaited thing
    happened (as :meth:`threading.Event.wait` does); ``done()`` is checked before every slice.
    ``timeout=None`` waits for ever; zero or a negative value does not wait at all.
    """
    end = None if timeout is None else time.monotonic() + timeout
    while not done():
        slice_ = WAIT_SLICE if end is None else min(WAIT_SLICE, end - time.monotonic())
        if slice_ <= 0:
            return done()
        if wait(slice_):
            return True
    return True


def wait_for_condition(
    cond: threading.Condition, predicate: Callable[[], bool], timeout: float | None
) -> bool:
    """:func:`wait_sliced` on a condition variable: block until ``predicate()`` (read under
    ``cond``'s lock by :meth:`~threading.Condition.wait_for`) is true or ``timeout`` passes;
    return ``predicate()``. The caller must not hold ``cond``'s lock."""

    def wait(seconds: float) -> bool:
        with cond:
            return cond.wait_for(predicate, seconds)

    return wait_sliced(predicate, wait, timeout)
