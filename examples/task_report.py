"""Run a long report as a task: start it, look at it, stop waiting, cancel it.

Run it::

    python examples/task_report.py                  # the demo: spawns itself as the server
    python examples/task_report.py --protocol legacy  # the same at 2025-11-25
    python examples/task_report.py --serve          # only the server, over stdio
    python examples/task_report.py --serve --db tasks.db  # tasks kept in SQLite

The server's ``build_report`` tool is declared ``@server.tool(task="optional")``: a client
that asks for a task (``client.call_tool_as_task``) gets a handle back at once while the
report is built on the server's task pool. The demo:

1. starts a report that would take ``--minutes`` minutes, and prints its task id;
2. waits for it with ``task.result(timeout=...)``, which gives up (``TimeoutError``) while
   the task goes on -- as Ctrl-C in ``result()`` would;
3. cancels it with ``task.cancel()`` (``tasks/cancel``, never ``notifications/cancelled``),
   which returns once the server acknowledged it, with the state it reports;
4. asks the server how the report ended: its handler saw ``ctx.cancelled`` and stopped.

See the how-to "Run a ten-minute job as a task and cancel it from a cron script" in the docs
for the same against a long-running HTTP server, from another process.
"""

from __future__ import annotations

import argparse
import sys
import threading
from pathlib import Path

from mcp_sync import Client, Context, Server
from mcp_sync.tasks import SqliteTaskStore, TaskStore

_lock = threading.Lock()
_last: dict[str, object] = {}
_ended = threading.Event()


def build_report(month: str, minutes: float, ctx: Context) -> str:
    """Build the report of ``month`` (it takes ``minutes`` minutes; it stops when cancelled)."""
    with _lock:
        _ended.clear()
        _last.update(month=month, state="working", steps=0)
    steps = 0
    stopped = False
    for _ in range(int(minutes * 60 * 10)):  # one step every 0.1 s
        if ctx.wait(0.1):
            stopped = True
            break
        steps += 1
    with _lock:
        _last.update(state="cancelled" if stopped else "completed", steps=steps)
    _ended.set()
    return f"report {month}: {steps} steps"


def last_report(wait_seconds: float = 5.0) -> dict[str, object]:
    """How the latest report ended (waits up to ``wait_seconds`` for its handler to end)."""
    _ended.wait(wait_seconds)
    with _lock:
        return dict(_last)


def say(text: str) -> None:
    print(text, flush=True)


def demo(protocol: str, minutes: float) -> int:
    command = [sys.executable, str(Path(__file__).resolve()), "--serve"]
    with Client.stdio(command, protocol=protocol) as client:
        say(f"connected at {client.protocol_version}")
        task = client.call_tool_as_task(
            "build_report", {"month": "2026-11", "minutes": minutes}, ttl=3600, timeout=10
        )
        say(f"task {task.task_id}: {task.status().status}")
        try:
            task.result(timeout=0.5)
        except TimeoutError:
            say("still running after 0.5 s: stopped waiting, the task goes on")
        say(f"status now: {task.status().status}")
        state = task.cancel("no longer needed")
        say(f"cancel acknowledged: the task is {state.status}")
        report = client.call_tool("last_report", {"wait_seconds": 5}, timeout=10)
        say(f"server confirms: report {report.structured_content}")
    return 0


def build_server(task_store: TaskStore | None = None) -> Server:
    """The reports server: ``build_report`` may run as a task (``task="optional"``)."""
    server = Server("reports", task_store=task_store)  # default: a MemoryTaskStore
    server.tool(task="optional")(build_report)
    server.tool()(last_report)
    return server


def serve(db: str | None, lease: float | None) -> None:
    """Serve over stdio; with ``db`` the tasks live in that SQLite file, so that a server
    started again on it finds them (and marks failed the ones a dead server was running)."""
    server = build_server(SqliteTaskStore(db) if db is not None else None)
    if lease is not None:
        server.tasks.lease_seconds = lease
    server.run()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--serve", action="store_true", help="serve over stdio only")
    parser.add_argument("--protocol", default="modern", help="modern (default) or legacy")
    parser.add_argument("--minutes", type=float, default=10.0, help="how long the report takes")
    parser.add_argument("--db", help="(--serve) keep the tasks in this SQLite file")
    parser.add_argument(
        "--lease", type=float, help="(--serve) seconds before a dead server's task is failed"
    )
    options = parser.parse_args(argv)
    if options.serve:
        serve(options.db, options.lease)
        return 0
    return demo(options.protocol, options.minutes)


if __name__ == "__main__":
    sys.exit(main())
