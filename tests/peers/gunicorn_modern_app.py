"""A WSGI module (``gunicorn_modern_app:app``) for running a 2026-07-28 server under a real
gunicorn with several workers.

The ``requestState`` key ring comes from ``MCP_SYNC_STATE_KEYS`` (every worker reads the same
value, so a retry opens on whichever worker receives it). Every handler appends markers to
``$PEER_EVENTS_FILE`` (:mod:`peer_events`), each naming the worker's pid:

    hold(tag)   "STARTED hold TAG PID", then waits for its token: "CANCELLED hold TAG PID"
                (or "EXPIRED hold TAG PID" if nothing cancels it within HOLD_LIMIT seconds)
    quick(tag)  "DONE quick TAG PID"; answers {"tag": TAG, "pid": PID}
    book(tag)   "ROUND book TAG PID" on every entry, asks for a name (an input round), then
                "DONE book TAG PID"; answers {"tag": TAG, "pid": PID, "name": NAME}

A long call is answered as SSE after ``modern_json_window`` (50 ms) with keep-alive comments
every 50 ms, so a client closing the stream is noticed at the next comment.
"""

from __future__ import annotations

import json
import os

from peer_events import event

from mcp_sync import Context, Server
from mcp_sync.request_state import KeyRing

HOLD_LIMIT = 60.0
NAME_FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}

server = Server("gunicorn-modern", version="1.0.0", request_state_keys=KeyRing.from_env())


def mark(kind: str, tool: str, tag: str) -> None:
    event(kind, tool, tag, str(os.getpid()))


@server.tool()
def hold(tag: str, ctx: Context) -> str:
    """Run until cancelled (at most HOLD_LIMIT seconds)."""
    mark("STARTED", "hold", tag)
    if ctx.wait(HOLD_LIMIT):
        mark("CANCELLED", "hold", tag)
        return "cancelled"
    mark("EXPIRED", "hold", tag)
    return "expired"


@server.tool()
def quick(tag: str) -> str:
    """Answer at once with this worker's pid."""
    mark("DONE", "quick", tag)
    return json.dumps({"tag": tag, "pid": os.getpid()})


@server.tool()
def book(tag: str, ctx: Context) -> str:
    """Ask for a name (an input round), then answer with it and this worker's pid."""
    mark("ROUND", "book", tag)
    answer = ctx.session.elicit("Your name?", NAME_FORM)
    name = answer.content["name"] if answer.action == "accept" and answer.content else "nobody"
    mark("DONE", "book", tag)
    return json.dumps({"tag": tag, "pid": os.getpid(), "name": name})


app = server.wsgi_app(path="/mcp", modern_json_window=0.05, keepalive=0.05)
