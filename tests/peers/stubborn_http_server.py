"""An HTTP MCP server whose ``stubborn`` tool ignores its cancellation, for the shutdown test
in tests/http/test_http_shutdown.py: ``python stubborn_http_server.py GRACE``.

``server.run("http", port=0, grace=GRACE)`` prints the URL it serves on stderr. The tool
reports progress once it runs, then blocks on an event nothing sets, whatever its token says.
"""

from __future__ import annotations

import sys
import threading

from mcp_sync import Context, Server

server = Server("stubborn-http")
never = threading.Event()


@server.tool()
def stubborn(ctx: Context) -> str:
    """Block for a minute, ignoring cancellation."""
    ctx.report_progress(1, 1, "running")
    never.wait(60)
    return "done"


if __name__ == "__main__":
    server.run("http", port=0, grace=float(sys.argv[1]))
    print("mcp_sync-test: run returned", file=sys.stderr, flush=True)
