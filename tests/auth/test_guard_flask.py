"""The guarded MCP app mounted in a Flask site (werkzeug's DispatcherMiddleware) under
waitress: the metadata is served from the site's root by ``BearerAuth.metadata_app``, the
MCP endpoint answers 401 without a token and serves a request with one; Flask's own routes
are untouched."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from guarded import (
    AS_URL,
    bearer,
    call,
    challenge,
    guarded_server,
    initialize,
    modern,
    post_modern,
    post_session,
)
from support.http import run_waitress
from support.waiting import WAIT

from mcp_sync.http import McpWsgiApp

flask = pytest.importorskip("flask")
from werkzeug.middleware.dispatcher import DispatcherMiddleware

METADATA = "/.well-known/oauth-protected-resource"


@pytest.fixture
def site() -> Iterator[str]:
    holder: list[Any] = []
    base, stop = run_waitress(lambda e, s: holder[0](e, s))
    auth = bearer(base + "/mcp")
    mcp_app = McpWsgiApp(guarded_server(), auth=auth)  # no path: it is mounted
    web = flask.Flask("guarded-site")

    @web.get("/hello")
    def hello() -> dict[str, str]:
        return {"hello": "world"}

    web.wsgi_app = DispatcherMiddleware(  # type: ignore[method-assign]
        web.wsgi_app, {"/mcp": mcp_app, METADATA: auth.metadata_app}
    )
    holder.append(web)
    try:
        yield base
    finally:
        mcp_app.close()
        stop()


def test_flask_mounted_guarded_app(site):
    url = site + "/mcp"
    assert httpx.get(site + "/hello", timeout=WAIT).json() == {"hello": "world"}
    document = httpx.get(site + METADATA + "/mcp", timeout=WAIT)
    assert document.status_code == 200
    assert document.json()["resource"] == url
    assert document.json()["authorization_servers"] == [AS_URL]
    assert httpx.get(site + METADATA, timeout=WAIT).status_code == 200
    assert httpx.get(site + METADATA + "/elsewhere", timeout=WAIT).status_code == 404
    refused = post_modern(url, modern("tools/list"), None)
    assert refused.status_code == 401
    assert challenge(refused)["resource_metadata"] == site + METADATA + "/mcp"
    served = post_modern(url, modern("tools/call", {"name": "whoami", "arguments": {}}), "valid")
    assert served.json()["result"]["structuredContent"]["subject"] == "alice"
    created = initialize(url, "valid")
    session_id = created.headers["Mcp-Session-Id"]
    post_session(
        url, session_id, {"jsonrpc": "2.0", "method": "notifications/initialized"}, "valid"
    )
    assert post_session(url, session_id, call("whoami", {}), "bob").status_code == 404
    forbidden = post_session(url, session_id, call("write_report", {"title": "t"}), "valid")
    assert forbidden.status_code == 403
    assert challenge(forbidden)["error"] == "insufficient_scope"
