"""The ``mcp_sync.wire`` logger: every JSON-RPC message in and out, at DEBUG, in both
directions and on both sides -- and no work at all while it is disabled."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from mcp_sync import Client, Server, endpoint, memory_pair


def _server() -> Server:
    server = Server("traced", version="1.0.0")

    @server.tool()
    def echo(text: str) -> str:
        """Return the text."""
        return text

    return server


def _messages(caplog: pytest.LogCaptureFixture, name: str, direction: str) -> list[dict[str, Any]]:
    prefix = f"{name} {direction} "
    return [
        json.loads(record.getMessage()[len(prefix) :])
        for record in caplog.records
        if record.name == "mcp_sync.wire" and record.getMessage().startswith(prefix)
    ]


def test_every_message_is_logged_once_where_it_is_sent_and_where_it_is_received(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="mcp_sync.wire")
    server_side, client_side = memory_pair()
    handle = _server().serve_in_thread(server_side)
    try:
        with Client.connect(client_side, protocol="legacy") as client:
            client.call_tool("echo", {"text": "hi"})
    finally:
        handle.stop()
    assert all(
        record.levelno == logging.DEBUG
        for record in caplog.records
        if record.name == "mcp_sync.wire"
    )
    client_sent = _messages(caplog, "mcp_sync-client", "->")
    client_received = _messages(caplog, "mcp_sync-client", "<-")
    server_sent = _messages(caplog, "mcp_sync-server-traced", "->")
    server_received = _messages(caplog, "mcp_sync-server-traced", "<-")
    assert [m.get("method") for m in client_sent] == [
        "initialize",
        "notifications/initialized",
        "tools/call",
    ]
    assert server_received == client_sent  # what one side wrote is what the other read
    assert client_received == server_sent
    assert [m["id"] for m in server_sent] == [client_sent[0]["id"], client_sent[2]["id"]]
    assert server_sent[1]["result"]["content"] == [{"type": "text", "text": "hi"}]


def test_nothing_is_formatted_while_the_logger_is_disabled(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[Any, ...]] = []
    monkeypatch.setattr(endpoint, "_trace", lambda *args: calls.append(args))
    wire = logging.getLogger("mcp_sync.wire")
    level = wire.level
    server_side, client_side = memory_pair()
    handle = _server().serve_in_thread(server_side)
    try:
        with Client.connect(client_side, protocol="legacy") as client:
            assert not wire.isEnabledFor(logging.DEBUG)
            client.ping()
            assert calls == []
            wire.setLevel(logging.DEBUG)
            client.ping()
            assert len(calls) == 4  # the ping and its answer, each written once and read once
    finally:
        handle.stop()
        wire.setLevel(level)
