"""The MCP server: register handlers with decorators, serve them over any transport.

Example::

    from mcp_sync import Server, Context

    server = Server("demo", version="1.0.0")

    @server.tool(timeout=30)
    def slow(seconds: float, ctx: Context) -> str:
        \"\"\"Work for `seconds`, stopping early when cancelled.\"\"\"
        if ctx.wait(seconds):
            return "stopped"
        return "done"

    if __name__ == "__main__":
        server.run()

Each connection gets a :class:`ServerSession`. Plain ``def`` handlers run on the session's
bounded worker pool (over HTTP, the app's pool shared by every session) with a
:class:`~mcp_sync.context.Context` injected by annotation.

The package's modules, one job each: :mod:`~mcp_sync.server.server` (the :class:`Server`),
:mod:`~mcp_sync.server.registry` and :mod:`~mcp_sync.server.records` (what is registered),
:mod:`~mcp_sync.server.dispatch` (the :class:`ServerSession` routing each request), the
feature handlers (:mod:`~mcp_sync.server.tools`, :mod:`~mcp_sync.server.resources`,
:mod:`~mcp_sync.server.prompts`, :mod:`~mcp_sync.server.completion`,
:mod:`~mcp_sync.server.logging_bridge`), :mod:`~mcp_sync.server.scope` (the
:class:`RequestScope`), :mod:`~mcp_sync.server.input_rounds` (input from the client at
2026-07-28: :class:`InputRequired`), :mod:`~mcp_sync.server.runner` (the foreground loop) and
:mod:`~mcp_sync.server.http_delegate` (the one lazy bridge to the HTTP layer).
"""

from .dispatch import ServerSession
from .input_rounds import InputRequired
from .logging_bridge import McpLogHandler
from .records import RegisteredPrompt, RegisteredResource, RegisteredTool
from .scope import RequestScope
from .server import Server, ServerHandle, ServerStats
from .signatures import mcp_header

__all__ = [
    "Server",
    "ServerStats",
    "ServerSession",
    "ServerHandle",
    "RegisteredTool",
    "RegisteredResource",
    "RegisteredPrompt",
    "RequestScope",
    "McpLogHandler",
    "InputRequired",
    "mcp_header",
]
