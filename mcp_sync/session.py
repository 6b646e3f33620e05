"""The MCP lifecycle on an endpoint: versions, capabilities, ping, and the shared session base.

A :class:`Session` owns one :class:`~mcp_sync.endpoint.Endpoint` and knows what was
negotiated during ``initialize``: the protocol version and the peer's capabilities and
identity. :class:`~mcp_sync.server.ServerSession` and :class:`~mcp_sync.client.Client` build
on it.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Mapping

from typing_extensions import Unpack

from .call_options import CallOptions
from .endpoint import Endpoint, PendingCall
from .errors import CapabilityError
from .jsonrpc import RequestId

__all__ = [
    "LATEST_PROTOCOL_VERSION",
    "SUPPORTED_PROTOCOL_VERSIONS",
    "negotiate_version",
    "Session",
    "LOG_LEVELS",
]


SUPPORTED_PROTOCOL_VERSIONS: tuple[str, ...] = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
"""The handshake-era revisions mcp_sync speaks, newest first."""

LATEST_PROTOCOL_VERSION = SUPPORTED_PROTOCOL_VERSIONS[0]

LOG_LEVELS: tuple[str, ...] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)
"""MCP (syslog) log levels, least severe first."""


def negotiate_version(requested: object) -> str:
    """The version a server answers: the client's if supported, else the newest we speak."""
    if isinstance(requested, str) and requested in SUPPORTED_PROTOCOL_VERSIONS:
        return requested
    return LATEST_PROTOCOL_VERSION


class Session:
    """Shared plumbing of both sides of an MCP connection.

    Attributes:
        endpoint: the JSON-RPC endpoint.
        protocol_version: the negotiated version (``None`` before initialization).
        peer_capabilities: what the peer declared in the handshake (a plain dict).
        peer_info: the peer's ``clientInfo``/``serverInfo`` (a plain dict).
    """

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self.protocol_version: str | None = None
        self.peer_capabilities: dict[str, Any] = {}
        self.peer_info: dict[str, Any] = {}
        self._initialized = threading.Event()

    @property
    def initialized(self) -> bool:
        """True once the ``initialize`` handshake has completed."""
        return self._initialized.is_set()

    def peer_supports(self, capability: str, sub: str | None = None) -> bool:
        """True if the peer declared ``capability`` (and ``sub`` inside it, if given)."""
        value = self.peer_capabilities.get(capability)
        if value is None:
            return False
        if sub is None:
            return True
        # a sub-capability is declared by presence: {"url": {}} counts, only absent/false do not
        inner = value.get(sub) if isinstance(value, Mapping) else None
        return inner is not None and inner is not False

    def require_capability(self, capability: str, what: str) -> None:
        """Raise :class:`~mcp_sync.errors.CapabilityError` unless the peer declared it."""
        if not self.peer_supports(capability):
            raise CapabilityError(f"{what} needs the peer's {capability!r} capability, which it did not declare")

    # -- requests and notifications -----------------------------------------------------------
    def submit(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        related_request: RequestId | None = None,
        **options: Unpack[CallOptions],
    ) -> PendingCall:
        """Send any request; returns its :class:`~mcp_sync.endpoint.PendingCall`
        (``options``: the :class:`~mcp_sync.call_options.CallOptions`)."""
        return self.endpoint.submit(method, params, related_request=related_request, **options)

    def send_notification(
        self, method: str, params: dict[str, Any] | None = None, *, related_request: RequestId | None = None
    ) -> None:
        """Send a notification (``related_request``: the inbound request it belongs to)."""
        self.endpoint.notify(method, params, related_request=related_request)

    def ping(self, **options: Unpack[CallOptions]) -> None:
        """Send ``ping`` and wait for the (empty) answer."""
        self.submit("ping", None, **options).result()

    @property
    def closed(self) -> bool:
        """True once the connection has ended."""
        return self.endpoint.closed

    def add_close_callback(self, callback: Callable[[], Any]) -> None:
        """Run ``callback()`` when the connection ends."""
        self.endpoint.add_close_callback(callback)
