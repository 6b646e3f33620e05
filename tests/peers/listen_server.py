"""A stdio server for the subscriptions/listen process tests.

Signals raise changes from inside the process (no request is needed): SIGUSR1 registers a
new tool (``notifications/tools/list_changed``), SIGUSR2 updates ``file:///a``
(``notifications/resources/updated``). After each, one line goes to stderr:
``CHANGED <n> threads=<threads other than handler workers and the timer thread>
workers=<handler workers> listens=<open subscriptions> names=<those threads>``. One handler
worker serves every request. SIGTERM shuts the server down in order (open subscriptions get
the closing result). With ``PEER_EVENTS_FILE``
set, ``READY <pid>`` is appended to that file at start.
"""

from __future__ import annotations

import os
import queue
import signal
import sys
import threading
from collections.abc import Callable

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
    # handler workers and the process's one timer thread come and go with the load
    names = [t.name for t in threading.enumerate()]
    workers = sum(1 for name in names if "-worker-" in name)
    steady = sorted(
        name for name in names if "-worker-" not in name and name != "mcp_sync-deadlines"
    )
    print(
        f"CHANGED {changes} threads={len(steady)} workers={workers} listens={len(server.listens.streams())}"
        f" names={','.join(steady)}",
        file=sys.stderr,
        flush=True,
    )


def add_tool() -> None:
    server.add_tool(lambda: "new", name=f"tool{changes + 1}")


def update_resource() -> None:
    server.notify_resource_updated("file:///a")


requests: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()


def make_changes() -> None:
    """Raise the changes the signals asked for, in order (a signal handler only queues: it may
    interrupt the main thread anywhere, even inside a lock or a print)."""
    global changes
    while (change := requests.get()) is not None:
        change()
        changes += 1
        report()


if __name__ == "__main__":
    changer = threading.Thread(target=make_changes, name="changes")
    changer.start()
    signal.signal(signal.SIGUSR1, lambda *_: requests.put(add_tool))
    signal.signal(signal.SIGUSR2, lambda *_: requests.put(update_resource))
    print("READY", file=sys.stderr, flush=True)
    events = os.environ.get("PEER_EVENTS_FILE")
    if events:  # for a client that spawns this server itself
        with open(events, "a", encoding="utf-8") as f:
            f.write(f"READY {os.getpid()}\n")
    try:
        server.run()
    finally:
        requests.put(None)
        changer.join()
