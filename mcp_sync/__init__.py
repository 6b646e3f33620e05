"""mcp_sync: a synchronous, thread-based Model Context Protocol library.

Blocking code can issue, cancel and serve MCP requests from plain threads, without asyncio.

Everything in ``__all__`` is the public API. The Streamable HTTP names
(:class:`~mcp_sync.http.wsgi_app.McpWsgiApp`, :func:`~mcp_sync.http.embedded_server.serve_http`,
:class:`~mcp_sync.http.client_transport.HttpClientTransport`, ...) live in :mod:`mcp_sync.http` and are
imported from there on first use, so ``import mcp_sync`` loads no HTTP code (and the
client's ``httpx`` stays an optional extra).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .cancel import CancelToken
from .client import Client
from .context import Context
from .endpoint import Endpoint, EndpointStats, PendingCall
from .errors import (
    Cancelled,
    CapabilityError,
    ConnectionClosed,
    FeatureRemoved,
    HttpError,
    McpError,
    PeerMisbehaved,
    RequestNotSent,
    RequestTimeout,
    ResponseTooLarge,
    ServerExited,
    SessionEnded,
)
from .server import InputRequired, Server, ServerHandle, ServerSession, ServerStats, mcp_header
from .task_call import TaskCall, TaskState
from .transports import MemoryTransport, StdioTransport, SubprocessTransport, Transport, memory_pair

if TYPE_CHECKING:  # pragma: no cover
    from .http import (
        AppStats,
        AuthHook,
        HttpClientTransport,
        HttpServerHandle,
        McpWsgiApp,
        ReconnectPolicy,
        serve_http,
    )

from ._version import __version__

_HTTP_NAMES = (
    "AppStats",
    "AuthHook",
    "BearerAuth",
    "HttpClientTransport",
    "HttpServerHandle",
    "McpWsgiApp",
    "ReconnectPolicy",
    "serve_http",
)
"""Exported from :mod:`mcp_sync.http` (its ``__all__``), imported when first asked for."""

__all__ = [
    "TaskCall",
    "TaskState",
    "AppStats",
    "AuthHook",
    "BearerAuth",
    "CancelToken",
    "Cancelled",
    "CapabilityError",
    "FeatureRemoved",
    "Client",
    "ConnectionClosed",
    "Context",
    "Endpoint",
    "EndpointStats",
    "HttpClientTransport",
    "HttpError",
    "HttpServerHandle",
    "InputRequired",
    "McpError",
    "McpWsgiApp",
    "MemoryTransport",
    "PeerMisbehaved",
    "PendingCall",
    "ReconnectPolicy",
    "RequestNotSent",
    "RequestTimeout",
    "ResponseTooLarge",
    "Server",
    "ServerExited",
    "ServerHandle",
    "ServerSession",
    "ServerStats",
    "SessionEnded",
    "StdioTransport",
    "SubprocessTransport",
    "Transport",
    "memory_pair",
    "mcp_header",
    "serve_http",
    "__version__",
]


def __getattr__(name: str) -> Any:
    """The HTTP names, imported from :mod:`mcp_sync.http` on first use."""
    if name in _HTTP_NAMES:
        value = getattr(importlib.import_module(".http", __name__), name)
        globals()[name] = value  # later lookups do not come here
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
