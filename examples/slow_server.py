"""A stdio MCP server with a slow, cancellable tool and a tool with a server-side deadline.

Run it under any MCP client, for example the ``mcp-sync`` command line::

    python examples/slow_server.py                    # serves MCP on stdin/stdout
    mcp-sync call slow '{"seconds": 5}' --timeout 1 -- python examples/slow_server.py

Tools:

* ``slow(seconds)`` works in 100 ms steps, reports progress after each, and stops at once
  when the call is cancelled (``ctx.wait`` wakes up on cancellation). A cancelled call is
  never answered; the server records how the run ended.
* ``fetch_record(key, backend_delay)`` wraps a *blocking* call that knows nothing about
  cancellation. ``@server.tool(timeout=0.5)`` gives it a server-side deadline: at 0.5 s
  the caller gets a tool error saying it timed out, even though the blocking call is still
  stuck; its late result is thrown away.
* ``last_run(wait_seconds)`` reports how the most recent ``slow`` run ended (waiting, up to
  ``wait_seconds``, for a running one to end), so a client can show what the server did.
* ``stats(wait_seconds)`` counts ``slow`` runs by outcome once none is running.

``--ignore-sigint``: a client that spawns this server as a child (see
``call_with_timeout.py``) passes this flag, so a Ctrl-C in the terminal reaches only the
client, which then cancels its call on the wire; the server shuts down when its stdin closes.
"""

from __future__ import annotations

import signal
import socket
import sys
import threading
from collections import Counter
from typing import Any

from mcp_sync import Context, Server

server = Server(
    "slow-server",
    version="1.0.0",
    instructions="A slow, cancellable tool and a deadline-bound one.",
)

_runs_changed = threading.Condition()
_runs: list[dict[str, Any]] = []  # one entry per slow() call, newest last


def _settled(run: dict[str, Any]) -> bool:
    return run["state"] != "running"


@server.tool()
def slow(seconds: float, ctx: Context) -> str:
    """Work for `seconds` in 100 ms steps, reporting progress; stop at once when cancelled.

    Args:
        seconds: how long to work.
    """
    run: dict[str, Any] = {"request_id": ctx.request_id, "state": "running", "steps_done": 0}
    with _runs_changed:
        _runs.append(run)
        _runs_changed.notify_all()
    steps = max(1, round(seconds / 0.1))
    outcome: dict[str, Any] = {"state": "completed", "steps_done": steps}
    try:
        for step in range(1, steps + 1):
            if ctx.wait(seconds / steps):  # simulated work; True at once when cancelled
                outcome = {
                    "state": "stopped by cancellation",
                    "steps_done": step - 1,
                    "reason": ctx.cancel_token.reason,
                }
                return "stopped"  # discarded: a cancelled request is never answered
            ctx.report_progress(step, steps, f"step {step} of {steps}")
        return f"done after {steps} steps"
    finally:
        with _runs_changed:
            run.update(outcome)
            _runs_changed.notify_all()


def legacy_fetch(key: str, backend_delay: float) -> str:
    """Stands in for a blocking client library (a database driver, a SOAP client) that knows
    nothing about cancellation: a socket read from a backend that is slow to answer."""
    ours, backend = socket.socketpair()
    with ours, backend:
        ours.settimeout(backend_delay)
        try:
            ours.recv(1)  # blocks; nothing can interrupt it but its own timeout
        except TimeoutError:
            pass
    return f"record {key!r}"


@server.tool(timeout=0.5)
def fetch_record(key: str, backend_delay: float = 1.0) -> str:
    """Fetch a record from the (slow, blocking) legacy backend; gives up after 0.5 s.

    Args:
        key: which record.
        backend_delay: how long the backend takes to answer, in seconds.
    """
    return legacy_fetch(key, backend_delay)


@server.tool()
def last_run(wait_seconds: float = 5.0) -> dict[str, Any]:
    """How the most recent `slow` run ended (waits up to `wait_seconds` for it to end).

    Args:
        wait_seconds: longest wait for a running call to end.
    """
    with _runs_changed:
        _runs_changed.wait_for(lambda: bool(_runs) and _settled(_runs[-1]), wait_seconds)
        return dict(_runs[-1]) if _runs else {"state": "no run yet"}


@server.tool()
def stats(wait_seconds: float = 5.0) -> dict[str, int]:
    """How many `slow` runs ended each way (waits up to `wait_seconds` for running ones).

    Args:
        wait_seconds: longest wait for running calls to end.
    """
    with _runs_changed:
        _runs_changed.wait_for(lambda: all(_settled(r) for r in _runs), wait_seconds)
        return dict(Counter(r["state"] for r in _runs))


if __name__ == "__main__":
    if "--ignore-sigint" in sys.argv[1:]:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    server.run()
