"""mcp_sync benchmark server as a WSGI app, for waitress and gunicorn: ``sync_wsgi:app``."""

from __future__ import annotations

from sync_server import server

# A 2026-07-28 call that answers within 3 ms is sent whole (JSON, Content-Length: the
# connection is kept); a longer one as SSE with a keep-alive comment every 2 ms while the
# handler runs -- writing one is how the app notices that the client closed the stream (its
# cancellation), so these bound cancel -> handler. The defaults (1 s and 15 s) suit
# production; docs/benchmarks.rst.
app = server.wsgi_app(path="/mcp", max_workers=32, modern_json_window=0.003, keepalive=0.002)
