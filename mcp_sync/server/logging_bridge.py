"""Logging towards the client: ``logging/setLevel`` and the bridge from :mod:`logging`."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ..cancel import CancelToken
from ..errors import McpError
from ..jsonrpc import INVALID_PARAMS
from ..protocol import InboundRequest
from ..session import LOG_LEVELS

if TYPE_CHECKING:  # pragma: no cover
    from .dispatch import ServerSession
    from .server import Server

__all__ = ["McpLogHandler", "set_level"]


def set_level(
    session: ServerSession, request: InboundRequest, token: CancelToken
) -> dict[str, Any]:
    """``logging/setLevel``: the least severe level the session's client is sent."""
    level = request.params.get("level")
    if level not in LOG_LEVELS:
        raise McpError(INVALID_PARAMS, f"Invalid log level: {level!r}")
    session.log_level = level
    return {}


_LEVELS = (
    (logging.CRITICAL, "critical"),
    (logging.ERROR, "error"),
    (logging.WARNING, "warning"),
    (logging.INFO, "info"),
)


class McpLogHandler(logging.Handler):
    """Forwards :mod:`logging` records to connected clients as ``notifications/message``.

    Records of mcp_sync's own loggers are not forwarded (no feedback loops).
    """

    def __init__(self, server: Server, level: int = logging.NOTSET) -> None:
        super().__init__(level)
        self.server = server

    def emit(self, record: logging.LogRecord) -> None:
        if record.name == "mcp_sync" or record.name.startswith("mcp_sync."):
            return
        level = next((name for number, name in _LEVELS if record.levelno >= number), "debug")
        try:
            message = self.format(record)
        except Exception:
            self.handleError(record)
            return
        for session in self.server.sessions():
            if session.initialized and not session.closed:
                try:
                    session.send_log(level, message, record.name)
                except Exception:
                    pass
