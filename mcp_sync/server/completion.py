"""The completion feature: ``completion/complete`` for prompt and resource-template arguments."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..cancel import CancelToken
from ..errors import McpError
from ..jsonrpc import INVALID_PARAMS
from ..protocol import InboundRequest

if TYPE_CHECKING:  # pragma: no cover
    from .dispatch import ServerSession

__all__ = ["complete"]


def complete(session: ServerSession, request: InboundRequest, token: CancelToken) -> dict[str, Any]:
    """``completion/complete``: the registered completer's values (at most 100), or none."""
    params = request.params
    ref = params.get("ref")
    argument = params.get("argument")
    if (
        not isinstance(ref, dict)
        or not isinstance(argument, dict)
        or not isinstance(argument.get("name"), str)
    ):
        raise McpError(INVALID_PARAMS, "completion/complete needs ref and argument")
    if ref.get("type") == "ref/prompt":
        key = ("prompt", str(ref.get("name")), argument["name"])
        if key[1] not in {p.name for p in session.server.registry.prompts()}:
            raise McpError(INVALID_PARAMS, f"Unknown prompt: {key[1]}")
    elif ref.get("type") == "ref/resource":
        key = ("resource", str(ref.get("uri")), argument["name"])
    else:
        raise McpError(INVALID_PARAMS, f"Unknown reference type: {ref.get('type')!r}")
    completer = session.server.registry.completer(key)
    if completer is None:
        return {"completion": {"values": [], "hasMore": False}}
    context = params.get("context")
    context_args = context.get("arguments", {}) if isinstance(context, dict) else {}
    found = completer(str(argument.get("value", "")), dict(context_args or {}))
    if isinstance(found, dict):
        values = [str(v) for v in found.get("values", [])]
        completion: dict[str, Any] = {"values": values[:100]}
        if "total" in found:
            completion["total"] = found["total"]
        completion["hasMore"] = bool(found.get("hasMore", len(values) > 100))
    else:
        values = [str(v) for v in found]
        completion = {"values": values[:100], "total": len(values), "hasMore": len(values) > 100}
    return {"completion": completion}
