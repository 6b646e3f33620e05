"""A stdio server for the subscriptions/listen process tests.

Signals raise changes from inside the process (no request is needed): SIGUSR1 registers a
new tool (``notifications/tools/list_changed``), SIGUSR2 updates ``file:///a``
(``notifications/resources/updated``). After each, one line goes to stderr:
``CHANGED <n> threads=<threads other than handler workers> workers=<handler workers>
listens=<open subscriptions>``. One handler worker serves every request. SIGTERM shuts the
server down in order (open subscriptions get the closing result). With ``PEER_EVENTS_FILE``
set, ``READY <pid>`` is appended to that file at start.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Any

from mcp_sync import Server

server = Server("listen-stdio", version="1.0.0", max_workers=1)
changes = 0


@server.tool()
def echo(text: str) -> str:
    """Return the text."""
    return text


@server.resource("file:///a")
def a() -> str:
    """A resource that changes on SIGUSR2."""
    return f"version {changes}"


def report() -> None:
    names = [t.name for t in threading.enumerate()]
    workers = sum(1 for name in names if "-worker-" in name)
    print(
        f"CHANGED {changes} threads={len(names) - workers} workers={workers} listens={len(server.listens.streams())}",
        file=sys.stderr,
        flush=True,
    )


def add_tool(_signum: int, _frame: Any) -> None:
    global changes
    changes += 1
    server.add_tool(lambda: "new", name=f"tool{changes}")
    report()


def update_resource(_signum: int, _frame: Any) -> None:
    global changes
    changes += 1
    server.notify_resource_updated("file:///a")
    report()


if __name__ == "__main__":
    signal.signal(signal.SIGUSR1, add_tool)
    signal.signal(signal.SIGUSR2, update_resource)
    print("READY", file=sys.stderr, flush=True)
    events = os.environ.get("PEER_EVENTS_FILE")
    if events:  # for a client that spawns this server itself
        with open(events, "a", encoding="utf-8") as f:
            f.write(f"READY {os.getpid()}\n")
    server.run()
