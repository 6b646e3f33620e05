"""``ctx.principal`` where nobody is authenticated: ``None`` over an in-memory (stdio-like)
connection in both eras, and over HTTP from an app without ``BearerAuth``."""

from __future__ import annotations

import httpx
import pytest
from guarded import guarded_server, modern
from support.http import ACCEPT_BOTH
from support.sessions import connected
from support.waiting import WAIT

from mcp_sync.http import McpWsgiApp, serve_http


@pytest.mark.parametrize("protocol", ["legacy", "auto"])
def test_principal_is_none_without_http_auth(protocol):
    with connected(guarded_server(), protocol=protocol) as conn:
        result = conn.client.call_tool("whoami", {})
    assert result.structured_content == {"subject": None}


def test_principal_is_none_in_an_unguarded_app():
    app = McpWsgiApp(guarded_server(), path="/mcp")
    handle = serve_http(app, "127.0.0.1", 0)
    try:
        body = modern("tools/call", {"name": "whoami", "arguments": {}})
        headers = {
            "Accept": ACCEPT_BOTH,
            "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": "tools/call",
            "Mcp-Name": "whoami",
        }
        response = httpx.post(handle.url, json=body, headers=headers, timeout=WAIT)
    finally:
        handle.stop()
    assert response.json()["result"]["structuredContent"] == {"subject": None}
    # and a tool with scopes= is served: without BearerAuth nothing checks them
    assert app.bearer is None
