"""The foreground loop behind :meth:`Server.run <mcp_sync.server.Server.run>`: serve until
the work ends, ``SIGTERM`` or Ctrl-C, then shut down -- written once for every transport."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable

from .._waiting import wait_sliced

__all__ = ["run_until_stopped"]


def run_until_stopped(
    shutdown: Callable[[], None],
    *,
    start: Callable[[], object] | None = None,
    wait_finished: Callable[[float], bool] | None = None,
) -> None:
    """Call ``start()``, then block until ``wait_finished(timeout)`` returns True (it waits up
    to ``timeout`` seconds), ``SIGTERM`` arrives or Ctrl-C is pressed; ``shutdown()`` always
    runs at the end. Without ``wait_finished`` only a signal ends the loop.

    In the main thread, ``SIGTERM`` is handled for the duration of the call (the previous
    handler is restored afterwards); elsewhere signals are left alone. ``start`` runs inside
    the guarded region, so a Ctrl-C while it runs still ends in ``shutdown()``.
    """
    stop = threading.Event()
    finished = wait_finished if wait_finished is not None else stop.wait
    previous = None
    in_main = threading.current_thread() is threading.main_thread()
    if in_main:
        previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        if start is not None:
            start()
        wait_sliced(stop.is_set, finished, None)  # sliced: a Ctrl-C is seen at once
    except KeyboardInterrupt:
        pass
    finally:
        shutdown()
        if in_main and previous is not None:
            signal.signal(signal.SIGTERM, previous)
