"""A Flask web app that also serves MCP (Streamable HTTP) at ``/mcp`` — no asyncio anywhere.

Run it::

    python examples/flask_app.py --port 8000          # serve until Ctrl-C (or SIGTERM)
    python examples/http_client.py http://127.0.0.1:8000/mcp
    curl -s -X POST localhost:8000/orders -H 'Content-Type: application/json' -d '{"item": "pear"}'
    python examples/flask_app.py --demo               # start, call itself once, stop (exit 0)

The Flask app keeps its own routes (``/`` and ``/orders``). werkzeug's ``DispatcherMiddleware``
mounts mcp_sync's WSGI app at ``/mcp``; the MCP tools and the Flask views share the same
in-process state (the orders). Every MCP request runs on a worker thread; a client can cancel
a running tool (``notifications/cancelled``, or a ``timeout=`` on its side) and the tool's
``ctx.wait()`` returns True at once.

Any threaded WSGI server can serve the combined app (gunicorn with ``--threads``, waitress, or
Flask's own ``app.run(threaded=True)`` during development). This example uses mcp_sync's
``serve_http`` (the standard library's wsgiref, one thread per connection), bound to
127.0.0.1. On shutdown it closes the MCP app first — ending the sessions, cancelling running
tools and ending open SSE streams — then stops the server.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from typing import Any

from flask import Flask, jsonify, request
from werkzeug.middleware.dispatcher import DispatcherMiddleware

from mcp_sync import Client, Context, Server
from mcp_sync.http import serve_http

# -- the state the web app and the MCP tools share -----------------------------------------------
_orders: dict[int, dict[str, Any]] = {}
_orders_lock = threading.Lock()


def _add_order(item: str, quantity: int = 1) -> dict[str, Any]:
    with _orders_lock:
        order = {"id": len(_orders) + 1, "item": item, "quantity": quantity}
        _orders[order["id"]] = order
        return order


# -- the MCP server --------------------------------------------------------------------------------
mcp = Server("shop", version="1.0.0", instructions="Tools over the shop's orders.")


@mcp.tool()
def list_orders() -> list[dict[str, Any]]:
    """Every order placed so far (through the web app or MCP)."""
    with _orders_lock:
        return list(_orders.values())


@mcp.tool()
def place_order(item: str, quantity: int = 1) -> dict[str, Any]:
    """Place an order for `quantity` of `item`."""
    return _add_order(item, quantity)


@mcp.tool()
def slow_report(seconds: float, ctx: Context) -> str:
    """Build a report for `seconds`, reporting progress; stops early when cancelled."""
    steps = 10
    for step in range(steps):
        if ctx.wait(seconds / steps):
            return "cancelled"  # discarded: a cancelled request gets no answer
        ctx.report_progress(step + 1, steps, f"section {step + 1}/{steps}")
    with _orders_lock:
        return f"report: {len(_orders)} orders"


# -- the web app -----------------------------------------------------------------------------------
def create_app() -> tuple[Flask, Any]:
    """The Flask app with the MCP app mounted at /mcp; returns (flask_app, mcp_app)."""
    app = Flask(__name__)
    mcp_app = mcp.wsgi_app()  # no path: it answers wherever it is mounted

    @app.get("/")
    def index() -> Any:
        return jsonify(service="shop", mcp_endpoint="/mcp", mcp_sessions=len(mcp_app.sessions()))

    @app.post("/orders")
    def create_order() -> Any:
        data = request.get_json(force=True)
        return jsonify(_add_order(str(data["item"]), int(data.get("quantity", 1)))), 201

    @app.get("/orders")
    def orders() -> Any:
        return jsonify(list_orders())

    app.wsgi_app = DispatcherMiddleware(app.wsgi_app, {"/mcp": mcp_app})  # type: ignore[method-assign]
    return app, mcp_app


def demo(base: str) -> None:
    """Use both faces of the running app once, as a client would."""
    import httpx

    print("GET /          ->", httpx.get(base + "/", timeout=10).json(), flush=True)
    print(
        "POST /orders   ->",
        httpx.post(base + "/orders", json={"item": "pear"}, timeout=10).json(),
        flush=True,
    )
    with Client.http(base + "/mcp") as client:
        print("MCP tools      ->", [tool.name for tool in client.list_tools()], flush=True)
        print("MCP orders     ->", client.call_tool("list_orders").structured_content, flush=True)
        report = client.call_tool("slow_report", {"seconds": 0.3}, timeout=10)
        print("MCP report     ->", report.content[0].text, flush=True)  # type: ignore[union-attr]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--host", default="127.0.0.1", help="interface to bind (default: loopback only)"
    )
    parser.add_argument("--port", type=int, default=8000, help="port (0: any free port)")
    parser.add_argument(
        "--demo", action="store_true", help="serve on a free port, call it once, stop"
    )
    options = parser.parse_args(argv)

    app, mcp_app = create_app()
    handle = serve_http(app, options.host, 0 if options.demo else options.port)
    base = f"http://{options.host}:{handle.port}"
    print(
        f"serving the shop on {base}/ (MCP at {base}/mcp); Ctrl-C stops",
        file=sys.stderr,
        flush=True,
    )
    stop = threading.Event()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        if options.demo:
            demo(base)
        else:
            while not stop.wait(0.5):
                pass
    except KeyboardInterrupt:
        pass
    finally:
        mcp_app.close()  # end the MCP sessions and their streams first
        handle.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
