"""A blocking call's hint to the endpoint: the thread that sends this request waits for its
answer at once.

The blocking methods (``Client.call_tool``, ``Endpoint.request`` ...) send inside
:func:`caller_waits`; :meth:`Endpoint.submit <mcp_sync.endpoint.Endpoint.submit>` takes the
hint with :func:`take_caller_waits` (once: only the first request sent in the scope gets it)
and tells a transport that lets the caller read the answer
(:class:`~mcp_sync.transports.base.CallerReadTransport`). A thread-local, not a call option:
it is no part of the public API, and a request sent on another thread (the next round of an
``input_required`` call, from a worker) never carries it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol

__all__ = ["caller_waits", "take_caller_waits", "send_and_wait"]

_local = threading.local()


@contextmanager
def caller_waits() -> Iterator[None]:
    """The first request sent on this thread inside the block is waited for at once."""
    _local.waits = True
    try:
        yield
    finally:
        _local.waits = False


def take_caller_waits() -> bool:
    """True (once) inside :func:`caller_waits` on this thread: the hint is used up."""
    if getattr(_local, "waits", False):
        _local.waits = False
        return True
    return False


class _Call(Protocol):
    def result(self) -> Any: ...


def send_and_wait(send: Callable[[], _Call]) -> Any:
    """``send()`` a request inside :func:`caller_waits`, then block for its result: over a
    transport that allows it (Streamable HTTP at 2026-07-28) the answer is read right here,
    by the caller, with no other thread taking part."""
    local = _local
    local.waits = True  # caller_waits(), inlined: this runs for every blocking call
    try:
        call = send()
    finally:
        local.waits = False
    return call.result()
