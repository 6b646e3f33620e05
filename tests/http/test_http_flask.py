"""The MCP app mounted in a Flask application, next to the app's own routes.

The Flask app keeps its routes; werkzeug's ``DispatcherMiddleware`` sends ``/mcp`` to
mcp_sync's WSGI app. Served by a real threaded WSGI server — werkzeug's
``make_server(threaded=True)`` or mcp_sync's ``serve_http`` — and reached with plain
``httpx`` (the Flask route) and ``Client.http`` (MCP).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from support.http import legacy_http, make_server, run_waitress
from support.probes import GateProbe
from support.waiting import WAIT

from mcp_sync import Cancelled
from mcp_sync.http import McpWsgiApp, serve_http

flask = pytest.importorskip("flask")
from werkzeug.middleware.dispatcher import DispatcherMiddleware
from werkzeug.serving import make_server as werkzeug_server


def build_app(probe: GateProbe) -> tuple[Any, McpWsgiApp]:
    """A Flask app with its own routes and the MCP server mounted at /mcp."""
    mcp_app = make_server(probe, name="flask-mounted").wsgi_app()  # any path: it is mounted
    web = flask.Flask("legacy-web-app")

    @web.get("/hello")
    def hello() -> dict[str, Any]:
        return {"hello": "world", "mcp_sessions": len(mcp_app.sessions())}

    @web.post("/orders")
    def create_order() -> tuple[dict[str, Any], int]:
        return {"order": flask.request.get_json()["item"]}, 201

    web.wsgi_app = DispatcherMiddleware(web.wsgi_app, {"/mcp": mcp_app})  # type: ignore[method-assign]
    return web, mcp_app


def run_werkzeug(web: Any) -> tuple[str, Callable[[], None]]:
    server = werkzeug_server("127.0.0.1", 0, web, threaded=True)
    thread = threading.Thread(target=server.serve_forever, name="werkzeug-server")
    thread.start()

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join(WAIT)

    return f"http://127.0.0.1:{server.server_port}", stop


def run_serve_http(web: Any) -> tuple[str, Callable[[], None]]:
    handle = serve_http(web, "127.0.0.1", 0)
    return f"http://127.0.0.1:{handle.port}", handle.stop


RUNNERS = {"werkzeug": run_werkzeug, "serve_http": run_serve_http, "waitress": run_waitress}


@pytest.fixture(params=list(RUNNERS))
def flask_site(request, probe) -> Iterator[tuple[str, McpWsgiApp]]:
    web, mcp_app = build_app(probe)
    base, stop = RUNNERS[request.param](web)
    try:
        yield base, mcp_app
    finally:
        mcp_app.close()  # ends the sessions and their streams, so the request threads end
        stop()


def test_flask_routes_and_mcp_side_by_side(flask_site, probe):
    base, mcp_app = flask_site
    with httpx.Client(base_url=base, timeout=WAIT) as web:
        assert web.get("/hello").json() == {"hello": "world", "mcp_sessions": 0}
        assert web.post("/orders", json={"item": "pear"}).status_code == 201
        assert web.get("/nope").status_code == 404  # Flask's own 404, not the MCP app's

        progress: list[float] = []
        done = threading.Event()

        def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.append(value)
            if value == 10:
                done.set()

        with legacy_http(base + "/mcp") as client:
            assert client.server_info.name == "flask-mounted"
            assert {"echo", "gated"} <= {tool.name for tool in client.list_tools()}
            assert client.call_tool("echo", {"text": "via flask"}).content[0].text == "via flask"
            assert (
                client.call_tool("slow", {"seconds": 0.2}, on_progress=on_progress).content[0].text
                == "done"
            )
            assert done.wait(WAIT) and progress == list(range(1, 11))

            # a blocked MCP call does not block the web app's other requests
            future = client.call_tool_future("gated", {"tag": "f"})
            assert probe.started("f").wait(WAIT)
            assert web.get("/hello").json()["mcp_sessions"] == 1
            assert future.cancel() is True
            with pytest.raises(Cancelled):
                future.result(WAIT)
            assert probe.cancelled("f").wait(WAIT)
        # close() sent DELETE through the mount
        assert mcp_app.sessions() == []
        assert web.get("/hello").json()["mcp_sessions"] == 0


def test_mounted_app_still_refuses_foreign_origins(flask_site, probe):
    base, mcp_app = flask_site
    headers = {"Origin": "http://evil.example", "Accept": "application/json, text/event-stream"}
    with httpx.Client(base_url=base, timeout=WAIT) as web:
        body = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}
        assert web.post("/mcp", json=body, headers=headers).status_code == 403
        assert web.get("/hello", headers=headers).status_code == 200  # Flask decides for its routes
    assert mcp_app.sessions() == []
