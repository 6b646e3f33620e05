"""The ``mcp_types`` model that each known request's result is parsed into.

A blocking call (``client.list_tools_page()``, ``ctx.session.elicit(...)``) and the future of
the same request (``client.submit("tools/list")``) resolve to the same model: both parse the
raw result with :func:`parser_for`. Methods not listed here (custom methods) stay raw dicts.

``mcp_types`` is imported on first use: it takes a while to import, and a connection that
only pings never needs it.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from typing import Any

__all__ = ["CLIENT_REQUEST_RESULTS", "SERVER_REQUEST_RESULTS", "mcp_models", "parser_for"]

CLIENT_REQUEST_RESULTS: dict[str, str] = {
    "initialize": "InitializeResult",
    "ping": "EmptyResult",
    "tools/list": "ListToolsResult",
    "tools/call": "CallToolResult",
    "resources/list": "ListResourcesResult",
    "resources/templates/list": "ListResourceTemplatesResult",
    "resources/read": "ReadResourceResult",
    "resources/subscribe": "EmptyResult",
    "resources/unsubscribe": "EmptyResult",
    "prompts/list": "ListPromptsResult",
    "prompts/get": "GetPromptResult",
    "completion/complete": "CompleteResult",
    "logging/setLevel": "EmptyResult",
}
"""Requests a client sends -> the ``mcp_types`` model of their result."""

SERVER_REQUEST_RESULTS: dict[str, str] = {
    "ping": "EmptyResult",
    "roots/list": "ListRootsResult",
    "sampling/createMessage": "CreateMessageResult",
    "elicitation/create": "ElicitResult",
}
"""Requests a server sends -> the ``mcp_types`` model of their result. A sampling result
whose ``content`` is a list (tool use) is a ``CreateMessageResultWithTools``."""


@functools.cache
def mcp_models() -> Any:
    """The ``mcp_types`` module, imported on first use."""
    return importlib.import_module("mcp_types")


def _parse(model_name: str, raw: Any) -> Any:
    if (
        model_name == "CreateMessageResult"
        and isinstance(raw, dict)
        and isinstance(raw.get("content"), list)
    ):
        model_name = "CreateMessageResultWithTools"
    return getattr(mcp_models(), model_name).model_validate(raw)


@functools.cache
def parser_for(model_name: str) -> Callable[[Any], Any]:
    """A function that parses a raw result into the ``mcp_types`` model ``model_name``
    (a pydantic ``ValidationError`` for a result that does not fit)."""
    return functools.partial(_parse, model_name)
