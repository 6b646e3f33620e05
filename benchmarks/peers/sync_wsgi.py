"""mcp_sync benchmark server as a WSGI app, for waitress and gunicorn: ``sync_wsgi:app``."""

from __future__ import annotations

from sync_server import server

# a 2026-07-28 call that outlives 20 ms is answered as SSE with a keep-alive comment every
# 5 ms: writing one is how the app notices that the client closed the stream (cancelled)
app = server.wsgi_app(path="/mcp", max_workers=32, modern_json_window=0.02, keepalive=0.005)
