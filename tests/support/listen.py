"""Shared pieces of the subscriptions/listen tests."""

from __future__ import annotations

from typing import Any

from mcp_sync import Endpoint, Server
from mcp_sync.listen import ListenRouter

TAG = "io.modelcontextprotocol/subscriptionId"
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "0"},
}
"""A 2026-07-28 request envelope, stamped by hand."""


def closing_ids(messages: list[dict[str, Any]]) -> list[Any]:
    """The ids of the listen requests that ``messages`` (what a server wrote) end with the
    graceful result (``resultType: complete`` tagged with its own id; other ``_meta`` members,
    such as the server's identity, may be there too); fails on any other response."""
    ids = []
    for message in messages:
        if "method" in message:
            continue
        assert set(message) == {"jsonrpc", "id", "result"}, message
        result = message["result"]
        assert result["resultType"] == "complete" and set(result) <= {"resultType", "_meta"}, message
        assert result["_meta"][TAG] == message["id"], message
        ids.append(message["id"])
    return ids


def make_server(name: str = "listen-test", **options: Any) -> Server:
    """A server with one tool and one resource (``file:///a``)."""
    server = Server(name, **options)

    @server.tool()
    def echo(text: str) -> str:
        return text

    @server.resource("file:///a")
    def a() -> str:
        return "a"

    return server


def tools_only_server() -> Server:
    """A server that declares tools only (no prompts, no resources)."""
    server = Server("tools-only")

    @server.tool()
    def echo(text: str) -> str:
        return text

    return server


def routed_endpoint(transport: Any) -> tuple[Endpoint, ListenRouter]:
    """A started client endpoint whose notifications go through a :class:`ListenRouter`."""
    holder: dict[str, ListenRouter] = {}
    endpoint = Endpoint(
        transport, notification_handler=lambda n: holder["router"].route(n), name="client"
    )
    router = holder["router"] = ListenRouter(endpoint)
    endpoint.start()
    return endpoint, router
