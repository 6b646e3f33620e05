"""A WSGI module for the JSON-disconnect test under gunicorn (``gunicorn_disconnect_app:app``).

``hold(tag)`` writes ``STARTED hold <tag>`` and waits for its cancellation (bounded), then
writes ``CANCELLED hold <tag>`` (or ``COMPLETED hold <tag>`` if it was never cancelled), in
``$PEER_EVENTS_FILE`` (see peer_events.py).
"""

from peer_events import event

from mcp_sync import Context, Server

server = Server("gunicorn-disconnect", version="1.0.0")


@server.tool()
def hold(tag: str, ctx: Context) -> str:
    """Wait until cancelled (at most 20 s)."""
    event("STARTED hold", tag)
    if ctx.wait(20.0):
        event("CANCELLED hold", tag)
        return "cancelled"
    event("COMPLETED hold", tag)
    return "completed"


app = server.wsgi_app(path="/mcp", modern_only=True, modern_json_window=0.2)
