"""Streamable HTTP: the client transport, the WSGI application and the embedded server.

The client half (:class:`~mcp_sync.http.client_transport.HttpClientTransport`) needs the
``http`` extra (``httpx``) for ``https://`` URLs, ``auth=`` flows, a client of your own and
2025-11-25 sessions, imported when first needed; 2026-07-28 requests to an ``http://`` URL go
over the library's own HTTP/1.1 client (:mod:`~mcp_sync.http.plain_http`). The server half
(:class:`~mcp_sync.http.wsgi_app.McpWsgiApp`, :func:`~mcp_sync.http.embedded_server.serve_http`)
uses only the standard library.

Modules: :mod:`~mcp_sync.http.client_transport` (client), :mod:`~mcp_sync.http.plain_http` and
:mod:`~mcp_sync.http.http11_parser` (its own HTTP/1.1 client), :mod:`~mcp_sync.http.wsgi_app`
(the WSGI application), :mod:`~mcp_sync.http.session_transport` (one server session's
routing onto SSE streams), :mod:`~mcp_sync.http.embedded_server` (``serve_http``),
:mod:`~mcp_sync.http.checks` (request checks) and :mod:`~mcp_sync.http.sse` (SSE framing).
Its exceptions (:class:`~mcp_sync.errors.HttpError`, :class:`~mcp_sync.errors.SessionEnded`,
...) are in :mod:`mcp_sync.errors`, like every other.
"""

from .bearer import BearerAuth
from .client_transport import HttpClientTransport, ReconnectPolicy
from .embedded_server import HttpServerHandle, serve_http
from .wsgi_app import AppStats, AuthHook, McpWsgiApp

__all__ = [
    "AppStats",
    "AuthHook",
    "BearerAuth",
    "HttpClientTransport",
    "HttpServerHandle",
    "McpWsgiApp",
    "ReconnectPolicy",
    "serve_http",
]
