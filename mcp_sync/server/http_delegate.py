"""The one bridge from the server to the HTTP layer above it.

:meth:`Server.wsgi_app <mcp_sync.server.Server.wsgi_app>`, :meth:`Server.serve_http
<mcp_sync.server.Server.serve_http>` and ``Server.run(transport="http")`` reach the HTTP
package through this module only. It imports that package inside its functions, never at
module level, so importing :mod:`mcp_sync.server` does not load the HTTP code (nor its
optional dependencies), and the layers stay one-way: HTTP builds on the server, and the server
asks for HTTP only when a program calls one of these.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from ..http.embedded_server import HttpServerHandle as HttpServerHandle
    from ..http.wsgi_app import McpWsgiApp as McpWsgiApp
    from .server import Server

__all__ = ["wsgi_app", "serve_http"]


def wsgi_app(server: Server, **options: Any) -> McpWsgiApp:
    """A :class:`~mcp_sync.http.wsgi_app.McpWsgiApp` serving ``server`` with ``options``."""
    from ..http.wsgi_app import McpWsgiApp

    return McpWsgiApp(server, **options)


def serve_http(
    server: Server, host: str, port: int, path: str, options: dict[str, Any]
) -> HttpServerHandle:
    """Serve ``server.wsgi_app(path=path, ...)`` on the embedded HTTP server in a background
    thread. The options the embedded server takes (its ``SERVER_OPTIONS``) go to it, the
    others to the app."""
    from ..http.embedded_server import SERVER_OPTIONS
    from ..http.embedded_server import serve_http as serve_app

    server_options = {name: options.pop(name) for name in SERVER_OPTIONS if name in options}
    return serve_app(server.wsgi_app(path=path, **options), host, port, **server_options)
