"""The ``mcp_sync.wire`` logger over Streamable HTTP: the client's endpoint and the server's
session each log every message once, and what one side sent is what the other received."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import pytest
from support.http import legacy_http

from mcp_sync import Server
from mcp_sync.http import HttpServerHandle


def _logged(caplog: pytest.LogCaptureFixture, prefix: str) -> list[dict[str, Any]]:
    return [
        json.loads(record.getMessage()[len(prefix) :])
        for record in caplog.records
        if record.name == "mcp_sync.wire" and record.getMessage().startswith(prefix)
    ]


def test_both_ends_of_an_http_session_log_every_message(
    caplog: pytest.LogCaptureFixture, serve: Callable[..., HttpServerHandle]
) -> None:
    server = Server("traced-http", version="1.0.0")

    @server.tool()
    def echo(text: str) -> str:
        """Return the text."""
        return text

    caplog.set_level(logging.DEBUG, logger="mcp_sync.wire")
    handle = serve(server)
    with legacy_http(handle.url, open_get_stream=False) as client:
        client.call_tool("echo", {"text": "over http"}, timeout=10)
    sent = _logged(caplog, "mcp_sync-client -> ")
    received = _logged(caplog, "mcp_sync-client <- ")
    assert [m.get("method") for m in sent] == [
        "initialize",
        "notifications/initialized",
        "tools/call",
    ]
    assert _logged(caplog, "mcp_sync-server-traced-http <- ") == sent
    assert _logged(caplog, "mcp_sync-server-traced-http -> ") == received
    assert received[-1]["result"]["content"] == [{"type": "text", "text": "over http"}]
