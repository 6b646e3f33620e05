"""mcp_sync benchmark server as a WSGI app, for waitress and gunicorn: ``sync_wsgi:app``."""

from __future__ import annotations

from sync_server import server

app = server.wsgi_app(path="/mcp", max_workers=32)
