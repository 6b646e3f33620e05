"""The MCP session on an endpoint: its lifecycle, ping, and the shared session base.

A :class:`Session` owns one :class:`~mcp_sync.endpoint.Endpoint` and one
:class:`~mcp_sync.lifecycle.Lifecycle`, which knows what was negotiated: the protocol version
and the peer's capabilities and identity. :class:`~mcp_sync.server.ServerSession` and
:class:`~mcp_sync.client.Client` build on it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from typing_extensions import Unpack

from .call_options import CallOptions
from .endpoint import Endpoint, PendingCall
from .jsonrpc import RequestId
from .lifecycle import Lifecycle, Role

__all__ = [
    "Session",
    "LOG_LEVELS",
]


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


class Session:
    """Shared plumbing of both sides of an MCP connection.

    Attributes:
        endpoint: the JSON-RPC endpoint.
        lifecycle: the connection's :class:`~mcp_sync.lifecycle.Lifecycle` (its state, era,
            version and the peer's declarations). Anything that changes it runs under
            :attr:`lifecycle_lock`; reading one of its attributes needs no lock.
        lifecycle_lock: serialises the threads that feed :attr:`lifecycle`.
    """

    def __init__(self, endpoint: Endpoint, role: Role) -> None:
        self.endpoint = endpoint
        self.lifecycle = Lifecycle(role)
        self.lifecycle_lock = threading.Lock()
        endpoint.add_close_callback(self._lifecycle_closed)

    def _lifecycle_closed(self) -> None:
        with self.lifecycle_lock:
            self.lifecycle.close()

    @property
    def initialized(self) -> bool:
        """True once the ``initialize`` handshake has completed."""
        return self.lifecycle.initialized

    @property
    def protocol_version(self) -> str | None:
        """The negotiated version (``None`` before initialization)."""
        return self.lifecycle.protocol_version

    @property
    def peer_capabilities(self) -> dict[str, Any]:
        """What the peer declared in the handshake (a plain dict)."""
        return self.lifecycle.peer_capabilities

    @peer_capabilities.setter
    def peer_capabilities(self, value: dict[str, Any]) -> None:
        self.lifecycle.peer_capabilities = value

    @property
    def peer_info(self) -> dict[str, Any]:
        """The peer's ``clientInfo``/``serverInfo`` (a plain dict)."""
        return self.lifecycle.peer_info

    def peer_supports(self, capability: str, sub: str | None = None) -> bool:
        """True if the peer declared ``capability`` (and ``sub`` inside it, if given)."""
        return self.lifecycle.peer_supports(capability, sub)

    def require_capability(self, capability: str, what: str) -> None:
        """Raise :class:`~mcp_sync.errors.CapabilityError` unless the peer declared it."""
        self.lifecycle.require_peer_capability(capability, what)

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
        self._check_request(method)
        return self.endpoint.submit(method, params, related_request=related_request, **options)

    def _check_request(self, method: str) -> None:
        """Raise (sending nothing) if this side may not send the request ``method`` now."""

    def send_notification(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        related_request: RequestId | None = None,
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
