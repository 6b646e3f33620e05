"""The bounds of every wait in the tests, and the two bounded waits.

A wait that expires is a failure with a message, never a silent pass; nothing here sleeps to
synchronise (state without an event is polled with short :class:`threading.Event` waits).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

WAIT = 5.0
"""Default bound of every wait in the tests."""

PEER_WAIT = 10.0
"""Bound of a wait on a peer process of the official SDK (it takes a second or more to start)."""


def wait_event(event: threading.Event, what: str, timeout: float = WAIT) -> None:
    """Wait for ``event``; fail with a message if it is not set within ``timeout``."""
    assert event.wait(timeout), f"timed out after {timeout} s waiting for {what}"


def wait_until(predicate: Callable[[], object], what: str, *, timeout: float = WAIT) -> None:
    """Poll ``predicate`` (for state that has no event) until it is truthy; fail with a message
    naming ``what`` was awaited when ``timeout`` passes."""
    end = time.monotonic() + timeout
    pause = threading.Event()
    while not predicate():
        if time.monotonic() >= end:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        pause.wait(0.002)
