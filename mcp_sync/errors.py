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

__all__ = [
    "McpError",
    "ConnectionClosed",
    "RequestTimeout",
    "CapabilityError",
    "PeerMisbehaved",
    "ServerExited",
    "describe_base_exception",
]


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


class ServerExited(ConnectionClosed):
    """A spawned server process ended its output on its own (it exited or crashed).

    The message gives its exit status (or signal) and the end of its stderr.

    Attributes:
        returncode: the exit status, negative for a signal, ``None`` if it had not exited.
        stderr_tail: the last few KiB it wrote to stderr (may be empty).
        what: the message without the stderr, e.g. "the server process 42 exited with
            status 3" (for callers that show the stderr their own way).
    """

    def __init__(
        self,
        message: str = "the server process exited",
        *,
        returncode: int | None = None,
        stderr_tail: str = "",
        what: str | None = None,
    ) -> None:
        super().__init__(message)
        self.returncode = returncode
        self.stderr_tail = stderr_tail
        self.what = message if what is None else what


class RequestTimeout(TimeoutError):
    """A call's ``timeout=`` expired; ``notifications/cancelled`` was sent to the peer."""


class CapabilityError(RuntimeError):
    """A feature was used that the peer did not declare during initialization."""


class PeerMisbehaved(Exception):
    """The peer broke the protocol in a way that ends one call: for example it answered the
    call with a response that carries both ``result`` and ``error``, or one nested deeper than
    :data:`~mcp_sync.jsonrpc.MAX_NESTING_DEPTH`. The connection stays up.

    Attributes:
        detail: what was wrong with the peer's message.
    """

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail


def describe_base_exception(exc: BaseException) -> str:
    """The error message sent for a handler that raised ``SystemExit``, ``KeyboardInterrupt``
    or another exception that is not an :class:`Exception`."""
    text = str(exc)
    return f"the handler raised {type(exc).__name__}" + (f": {text}" if text else "")
