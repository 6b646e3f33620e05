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
