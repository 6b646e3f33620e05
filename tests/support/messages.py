"""JSON-RPC messages in the tests: building requests and notifications, and picking messages
out of a recorded wire (lists of decoded messages, anything that was not JSON included)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from mcp_sync.wire import model_to_wire

PROTOCOL_VERSION = "2025-11-25"
"""The protocol version the raw test clients ask for."""


# -- building ----------------------------------------------------------------------------------------
def request(method: str, params: dict[str, Any] | None, request_id: Any) -> dict[str, Any]:
    """A JSON-RPC request (``params`` left out when ``None``)."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def notification(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """A JSON-RPC notification (``params`` left out when ``None``)."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return message


def initialize_request(request_id: Any = 0) -> dict[str, Any]:
    """The ``initialize`` request of a raw client asking for :data:`PROTOCOL_VERSION`."""
    return request(
        "initialize",
        {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"},
        },
        request_id,
    )


def call_tool(
    name: str, arguments: dict[str, Any], request_id: Any, progress_token: Any = None
) -> dict[str, Any]:
    """A ``tools/call`` request (with a progress token in ``_meta`` when given)."""
    params: dict[str, Any] = {"name": name, "arguments": arguments}
    if progress_token is not None:
        params["_meta"] = {"progressToken": progress_token}
    return request("tools/call", params, request_id)


# -- picking -------------------------------------------------------------------------------------------
def same_id(a: Any, b: Any) -> bool:
    """JSON-RPC id equality: type and value (``"7"`` is not ``7``, ``True`` is not ``1``)."""
    return type(a) is type(b) and a == b


def is_response(message: Any, request_id: Any = None) -> bool:
    """True for a JSON-RPC response (to ``request_id``, compared with its JSON type, if given)."""
    if not isinstance(message, dict) or "method" in message or "id" not in message:
        return False
    if "result" not in message and "error" not in message:
        return False
    return request_id is None or same_id(message["id"], request_id)


def responses_to(messages: Sequence[Any], request_id: Any) -> list[dict[str, Any]]:
    """The responses (result or error) to ``request_id`` among ``messages``."""
    return [m for m in messages if is_response(m, request_id)]


def with_method(messages: Sequence[Any], method: str) -> list[dict[str, Any]]:
    """The requests and notifications of ``method`` among ``messages``."""
    return [m for m in messages if isinstance(m, dict) and m.get("method") == method]


def methods(messages: Sequence[Any]) -> list[str]:
    """The method of every request and notification among ``messages``, in order."""
    return [m["method"] for m in messages if isinstance(m, dict) and "method" in m]


def requests(messages: Sequence[Any], method: str) -> list[dict[str, Any]]:
    """The requests (with an id) of ``method`` among ``messages``."""
    return [m for m in with_method(messages, method) if "id" in m]


def notifications(messages: Sequence[Any], method: str) -> list[dict[str, Any]]:
    """The notifications (no id) of ``method`` among ``messages``."""
    return [m for m in with_method(messages, method) if "id" not in m]


def cancelled_ids(messages: Sequence[Any]) -> list[Any]:
    """The ``requestId`` of every ``notifications/cancelled`` among ``messages``."""
    return [m["params"]["requestId"] for m in notifications(messages, "notifications/cancelled")]


def cancels_of(messages: Sequence[Any], request_id: Any) -> list[dict[str, Any]]:
    """The ``notifications/cancelled`` for ``request_id`` among ``messages``."""
    return [
        m
        for m in notifications(messages, "notifications/cancelled")
        if (m.get("params") or {}).get("requestId") == request_id
    ]


def as_wire(models: Any) -> Any:
    """``mcp_types`` models (or a list of them) as the JSON objects they were parsed from,
    checking that they are models: the typed API never hands out raw dicts."""
    if isinstance(models, list):
        return [as_wire(m) for m in models]
    assert isinstance(models, BaseModel), (
        f"expected an mcp_types model, got {type(models).__name__}"
    )
    return model_to_wire(models, result=True)
