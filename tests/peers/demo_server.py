"""A small stdio MCP server for the process-level tests (spawned by tests/test_server_process.py).

Set ``MCP_SYNC_TEST_MARKERS`` to a file path: the script appends one line per event there
(``serving``, ``started <id>``, ``cancelled <reason>``, ``finished``, ``exited``), so the test
can tell what happened inside the process.
"""

from __future__ import annotations

import os
import signal

from mcp_sync import Context, Server

MARKERS = os.environ.get("MCP_SYNC_TEST_MARKERS")


def mark(text: str) -> None:
    if MARKERS:
        with open(MARKERS, "a", encoding="utf-8") as f:
            f.write(text + "\n")


server = Server("demo-stdio", version="1.2.3")


@server.tool()
def echo(text: str) -> str:
    """Return the text."""
    return text


@server.tool()
def pid() -> int:
    """This process's id."""
    return os.getpid()


@server.tool()
def slow(seconds: float, ctx: Context) -> str:
    """Wait up to `seconds`, stopping early when cancelled.

    Reports progress once it has started, so a caller can tell.
    """
    mark(f"started {ctx.request_id}")
    ctx.report_progress(1, message="started")
    if ctx.wait(seconds):
        mark(f"cancelled {ctx.cancel_token.reason}")
        return "stopped"
    mark("finished")
    return "done"


if __name__ == "__main__":
    # a runner started in the background hands its children SIGINT ignored; restore Ctrl-C
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    mark("serving")
    server.run()
    mark("exited")
