"""A legacy threaded service that embeds an MCP server and talks to it in-process.

Run it::

    python examples/legacy_service.py                 # serve, handle a few requests, shut down
    python examples/legacy_service.py --requests 5

The "legacy service" is a plain ``http.server.ThreadingHTTPServer`` (one thread per HTTP
request, no asyncio anywhere). At start-up it embeds an MCP server with
``server.serve_in_thread(transport)`` over an in-memory pair and connects one shared
``Client`` to the other end. Its HTTP handlers call MCP tools with ``timeout=``, like any
other blocking library call.

On shutdown the service stops taking HTTP requests, then calls ``handle.stop()``: the MCP
connection closes, a tool still running is cancelled (its handler sees ``ctx.wait()``
return True and stops), the waiting caller gets ``ConnectionClosed``, and every thread the
server started is joined.
"""

from __future__ import annotations

import argparse
import http.server
import json
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from mcp_sync import Client, ConnectionClosed, Context, Server, deadlines, memory_pair

mcp = Server("inventory", version="1.0.0")
_stock = {"apple": 12, "pear": 3, "plum": 0}
_stock_lock = threading.Lock()


@mcp.tool()
def stock(item: str) -> dict[str, Any]:
    """How many of `item` are in stock.

    Args:
        item: the item's name.
    """
    with _stock_lock:
        if item not in _stock:
            raise ValueError(f"unknown item {item!r}")
        return {"item": item, "count": _stock[item]}


reindex_started = threading.Event()
reindex_outcome: list[str] = []


@mcp.tool()
def reindex(ctx: Context) -> str:
    """Rebuild the search index: long work, in steps, that stops when cancelled."""
    reindex_started.set()
    for step in range(600):
        if ctx.wait(0.05):  # simulated work; True at once when the call is cancelled
            reindex_outcome.append(
                f"stopped by cancellation after {step} steps ({ctx.cancel_token.reason})"
            )
            return "stopped"
    reindex_outcome.append("completed")
    return "reindexed"


class Service:
    """The legacy service: an HTTP front end, an embedded MCP server, one shared client."""

    def __init__(self) -> None:
        server_end, client_end = memory_pair()
        self.mcp_handle = mcp.serve_in_thread(server_end)
        self.client = Client.connect(client_end, name="legacy-service")
        service = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                url = urllib.parse.urlsplit(self.path)
                item = urllib.parse.parse_qs(url.query).get("item", [""])[0]
                result = service.client.call_tool("stock", {"item": item}, timeout=5)
                if result.is_error:
                    status, body = 404, {"error": result.content[0].text}  # type: ignore[union-attr]
                else:
                    status, body = 200, result.structured_content
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # keep the example's output readable

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http_thread = threading.Thread(
            target=self.httpd.serve_forever, name="http", daemon=False
        )

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> None:
        self.http_thread.start()

    def shutdown(self) -> None:
        """Stop HTTP first (no new work), then the MCP server, then the client."""
        self.httpd.shutdown()
        self.httpd.server_close()
        self.http_thread.join()
        self.mcp_handle.stop()  # cancels running handlers, joins the server's threads
        self.client.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=4, help="HTTP requests to make")
    options = parser.parse_args(argv)

    service = Service()
    service.start()
    print(
        f"legacy service on {service.url}, embedding MCP server {service.client.server_info.name!r}",
        flush=True,
    )
    items = ["apple", "pear", "plum", "kiwi"]
    try:
        for i in range(options.requests):
            item = items[i % len(items)]
            try:
                with urllib.request.urlopen(
                    f"{service.url}/stock?item={item}", timeout=10
                ) as response:
                    print(
                        f"GET /stock?item={item} -> {response.status} {response.read().decode()}",
                        flush=True,
                    )
            except urllib.error.HTTPError as exc:
                print(f"GET /stock?item={item} -> {exc.code} {exc.read().decode()}", flush=True)

        # A long job is running when the service shuts down: stop() cancels it.
        job = service.client.call_tool_future("reindex")
        if not reindex_started.wait(10):
            print("reindex never started", flush=True)
            return 1
        print("reindex running; shutting the service down", flush=True)
    finally:
        service.shutdown()
    try:
        job.result(timeout=5)
        print("reindex: completed (unexpected)", flush=True)
    except ConnectionClosed as exc:
        print(f"reindex caller got ConnectionClosed: {exc}", flush=True)
    print(
        f"server side: reindex {reindex_outcome[0] if reindex_outcome else 'still running?'}",
        flush=True,
    )
    deadlines.stop_idle_scheduler(5)  # the process-wide timeout thread would linger 3 s more
    left = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
    print(f"stopped cleanly; threads left: {left or 'none'}", flush=True)
    return 0 if not left and reindex_outcome[:1] != ["completed"] else 1


if __name__ == "__main__":
    sys.exit(main())
