"""``server/discover`` (2026-07-28): what this server serves, asked before anything else.

The result names every protocol version the server speaks (both eras: a dual-era server
also answers ``initialize``), its capabilities as a 2026-07-28 request sees them (extensions
included), its ``instructions``; :mod:`~mcp_sync.server.modern_result` adds ``resultType``,
``_meta["io.modelcontextprotocol/serverInfo"]`` and the caching hints (``ttlMs``,
``cacheScope``: :class:`~mcp_sync.server.Server` options). Answering it does not pin the
connection's era.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..cancel import CancelToken
from ..lifecycle import LISTEN_METHOD, SUPPORTED_VERSIONS, TASKS_EXTENSION
from ..protocol import InboundRequest

if TYPE_CHECKING:  # pragma: no cover
    from .dispatch import ServerSession
    from .server import Server

__all__ = ["LISTEN_METHOD", "modern_capabilities", "discover"]


def modern_capabilities(server: Server, serves: Callable[[str], bool]) -> dict[str, Any]:
    """The capabilities a 2026-07-28 request sees: :meth:`Server.capabilities
    <mcp_sync.server.Server.capabilities>` plus the server's ``extensions``.

    At 2026-07-28 change notifications travel only on ``subscriptions/listen``: unless
    ``serves(LISTEN_METHOD)``, ``listChanged`` and ``resources.subscribe`` are not claimed.
    """
    declared = server.capabilities()
    if not serves(LISTEN_METHOD):
        for name in ("tools", "prompts", "resources"):
            if isinstance(declared.get(name), dict):
                declared[name] = {
                    key: value
                    for key, value in declared[name].items()
                    if key not in ("listChanged", "subscribe")
                }
    declared.pop("tasks", None)  # the 2025-11-25 tasks capability; 2026 has the extension
    extensions = {name: dict(value) for name, value in server.extensions.items()}
    if server.tasks.enabled():
        extensions.setdefault(TASKS_EXTENSION, {})
    if extensions:
        declared["extensions"] = extensions
    return declared


def discover(session: ServerSession, request: InboundRequest, token: CancelToken) -> dict[str, Any]:
    """``server/discover``: the versions served (both eras), capabilities and instructions."""
    result: dict[str, Any] = {
        "supportedVersions": list(SUPPORTED_VERSIONS),
        "capabilities": session.modern_capabilities(),
    }
    if session.server.instructions:
        result["instructions"] = session.server.instructions
    return result
