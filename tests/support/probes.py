"""What handlers and callbacks record for a test to wait on.

* :class:`HandlerProbe` -- one gated handler: ``started``/``finished``/``release`` events and
  the ``values`` it saw.
* :class:`GateProbe` -- named events for many gated tools (``<tag>.started``, ...).
* :class:`Collector` -- a callback recording its arguments, with a bounded wait for a match.
* :class:`ObservedCancels` -- an ``on_cancelled`` observer recording what it saw, and where.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from mcp_sync import Context
from support.waiting import WAIT


class HandlerProbe:
    """What a gated handler saw, with events to synchronise on."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.finished = threading.Event()
        self.release = threading.Event()
        self.values: dict[str, Any] = {}


class GateProbe:
    """Named :class:`threading.Event` objects shared by test tools and the test: a gated tool
    signals ``<tag>.started``, then blocks until the test releases it (:meth:`release`) or its
    request is cancelled, and records which of the two happened."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: dict[str, threading.Event] = defaultdict(threading.Event)
        self.reasons: dict[str, str | None] = {}

    def event(self, name: str) -> threading.Event:
        with self._lock:
            return self._events[name]

    def started(self, tag: str) -> threading.Event:
        return self.event(f"{tag}.started")

    def cancelled(self, tag: str) -> threading.Event:
        return self.event(f"{tag}.cancelled")

    def completed(self, tag: str) -> threading.Event:
        return self.event(f"{tag}.completed")

    def wake(self, tag: str) -> threading.Event:
        return self.event(f"{tag}.wake")

    def release(self, tag: str) -> None:
        self.wake(tag).set()

    def gate(self, tag: str, ctx: Context) -> bool:
        """Signal ``started``, block until released or cancelled; True if cancelled."""
        wake = self.wake(tag)
        ctx.cancel_token.add_callback(lambda _token: wake.set())
        self.started(tag).set()
        if not wake.wait(WAIT * 2):
            self.event(f"{tag}.stuck").set()
        if ctx.cancelled:
            self.reasons[tag] = ctx.cancel_token.reason
            self.cancelled(tag).set()
            return True
        self.completed(tag).set()
        return False


class Collector:
    """Thread-safe list of callback arguments with a bounded wait for a matching item."""

    def __init__(self) -> None:
        self.items: list[Any] = []
        self._cond = threading.Condition()

    def __call__(self, *args: Any) -> None:
        with self._cond:
            self.items.append(args if len(args) != 1 else args[0])
            self._cond.notify_all()

    def wait_for(self, predicate: Callable[[Any], bool], what: str, timeout: float = WAIT) -> Any:
        found: list[Any] = []

        def check() -> bool:
            found[:] = [item for item in self.items if predicate(item)]
            return bool(found)

        with self._cond:
            ok = self._cond.wait_for(check, timeout)
        assert ok, f"timed out after {timeout} s waiting for {what}; got {self.items!r}"
        return found[0]

    def snapshot(self) -> list[Any]:
        with self._cond:
            return list(self.items)


class ObservedCancels:
    """An ``on_cancelled`` observer: records ``(request id, reason, thread name)`` per call."""

    def __init__(self) -> None:
        self.seen: list[tuple[Any, Any, str]] = []
        self.changed = threading.Condition()

    def __call__(self, request_id: Any, reason: Any) -> None:
        with self.changed:
            self.seen.append((request_id, reason, threading.current_thread().name))
            self.changed.notify_all()

    def wait_for(self, count: int) -> list[tuple[Any, Any, str]]:
        """Wait (bounded) until ``count`` cancellations were seen; all of them so far."""
        with self.changed:
            assert self.changed.wait_for(lambda: len(self.seen) >= count, WAIT), (
                f"saw only {self.seen}"
            )
            return list(self.seen)
