"""A legacy daemon that offers its functions to MCP clients on the network (Streamable HTTP).

Run it::

    python examples/legacy_http_server.py                 # serve on 127.0.0.1:8765 until SIGTERM or Ctrl-C
    python examples/legacy_http_server.py --port 0        # any free port (printed)
    python examples/legacy_http_server.py --self-test     # serve, call itself, shut down

The daemon has its own main loop (here: a housekeeping tick) and keeps it. At start-up it
exposes an MCP server with ``server.serve_http(host, port)``, which serves from a background
thread and returns a handle with ``url`` and ``stop()``. Tools run on the server's bounded
handler pool (``max_workers``), never on the daemon's main thread, and read the daemon's
state under its own lock. On SIGTERM or Ctrl-C the main loop ends and ``stop()`` closes every
session: running handlers are cancelled (their tokens fire), clients get their connections
closed, and every server thread is joined.

Any MCP client can connect, for example::

    mcp-sync tools --url http://127.0.0.1:8765/mcp
    mcp-sync call reindex --timeout 1 --url http://127.0.0.1:8765/mcp
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from typing import Any

from mcp_sync import Context, RequestTimeout, Server

server = Server("inventory-daemon", version="1.0.0", max_workers=4)

_stock = {"apple": 12, "pear": 3}
_stock_lock = threading.Lock()
_ticks = [0]
reindex_outcome: list[str] = []
reindex_ended = threading.Event()


@server.tool(timeout=10)
def stock(item: str) -> dict[str, Any]:
    """How many of `item` are in stock.

    Args:
        item: the item's name.
    """
    with _stock_lock:
        return {"item": item, "count": _stock.get(item, 0), "ticks": _ticks[0]}


@server.tool()
def reindex(ctx: Context) -> str:
    """Rebuild the index: long work in steps that stops when cancelled."""
    try:
        for step in range(600):
            if ctx.wait(0.05):  # True as soon as the call is cancelled
                reindex_outcome.append(f"stopped by cancellation after {step} steps")
                return "stopped"  # never sent: a cancelled request gets no answer
            ctx.report_progress(step + 1, 600)
        reindex_outcome.append("completed")
        return "reindexed"
    finally:
        reindex_ended.set()


def self_test(url: str) -> None:
    """What an MCP client on the network would do, run from another thread."""
    from mcp_sync import Client

    with Client.http(url) as client:
        print("tools:", ", ".join(tool.name for tool in client.list_tools()))
        print("stock:", client.call_tool("stock", {"item": "apple"}).structured_content)
        try:
            client.call_tool("reindex", timeout=0.5)
        except RequestTimeout as exc:
            print("reindex:", exc)
    reindex_ended.wait(5)
    print("server side: reindex", reindex_outcome[-1] if reindex_outcome else "still running")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument(
        "--self-test", action="store_true", help="serve on a free port, call it, shut down"
    )
    options = parser.parse_args()

    stop = threading.Event()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
    http = server.serve_http(options.host, 0 if options.self_test else options.port)
    print(f"serving MCP at {http.url}", file=sys.stderr, flush=True)
    tester = None
    if options.self_test:
        tester = threading.Thread(
            target=lambda: (self_test(http.url), stop.set()), name="self-test"
        )
        tester.start()
    try:
        while not stop.wait(0.2):  # the daemon's own main loop
            with _stock_lock:
                _ticks[0] += 1
    except KeyboardInterrupt:
        pass
    finally:
        http.stop()  # closes sessions, cancels running handlers, joins the server's threads
        if tester is not None:
            tester.join(10)
    # the process-wide deadline scheduler ends by itself once no timeout is pending
    left = [
        t.name
        for t in threading.enumerate()
        if t.name.startswith("mcp_sync") and t.name != "mcp_sync-deadlines"
    ]
    print("stopped; server threads left:", ", ".join(left) or "none")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
