"""mcp_sync: a synchronous, thread-based Model Context Protocol library.

Blocking code can issue, cancel and serve MCP requests from plain threads, without asyncio.
"""

from .cancel import CancelToken
from .client import Client
from .context import Context
from .endpoint import Endpoint, EndpointStats, PendingCall
from .errors import Cancelled, CapabilityError, ConnectionClosed, McpError, PeerMisbehaved, RequestTimeout, ServerExited
from .server import Server, ServerHandle, ServerSession, ServerStats
from .transports import MemoryTransport, StdioTransport, SubprocessTransport, memory_pair

__version__ = "0.1.0"

__all__ = [
    "CancelToken",
    "Cancelled",
    "CapabilityError",
    "Client",
    "ConnectionClosed",
    "Context",
    "Endpoint",
    "EndpointStats",
    "McpError",
    "MemoryTransport",
    "PeerMisbehaved",
    "PendingCall",
    "RequestTimeout",
    "Server",
    "ServerExited",
    "ServerHandle",
    "ServerSession",
    "ServerStats",
    "StdioTransport",
    "SubprocessTransport",
    "memory_pair",
    "__version__",
]
