"""Exceptions raised by mcp_sync.

Two families, kept apart on purpose:

* errors the **peer** reported or caused (:class:`McpError` carries a JSON-RPC error object the
  peer sent; :class:`ConnectionClosed` means the transport ended under a pending call);
* errors of **local** origin (:class:`RequestTimeout`, :class:`~mcp_sync.cancel.Cancelled`, and
  ordinary ``ValueError``/``RuntimeError`` for API misuse).

A local failure is never an :class:`McpError`, so it cannot be mistaken for an answer from
the peer.
"""

from __future__ import annotations

from typing import Any

__all__ = ["McpError", "ConnectionClosed", "RequestTimeout", "CapabilityError"]


class McpError(Exception):
    """The peer answered a request with a JSON-RPC error.

    Attributes:
        code: the JSON-RPC error code (for example ``-32601``).
        message: the error message the peer sent.
        data: the optional ``data`` member, or ``None``.
        http_status: over Streamable HTTP, the HTTP status of an error answer that carried
            this JSON-RPC error (for example 400); ``None`` otherwise.
    """

    http_status: int | None = None

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"{message} (code {code})")
        self.code = code
        self.message = message
        self.data = data

    def to_error_object(self) -> dict[str, Any]:
        """The JSON-RPC ``error`` member for this error."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


class ConnectionClosed(ConnectionError):
    """The connection ended while a call was pending, or a call was made on a closed one."""


class RequestTimeout(TimeoutError):
    """A call's ``timeout=`` expired; ``notifications/cancelled`` was sent to the peer."""


class CapabilityError(RuntimeError):
    """A feature was used that the peer did not declare during initialization."""
