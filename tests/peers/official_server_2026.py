#!/usr/bin/env python
"""A stdio MCP server built with the official MCP Python SDK (``mcp`` 2.3.x), served in the
SDK's default dual-era mode: a client that opens with the 2026-07-28 envelope is served
statelessly at 2026-07-28, one that opens with ``initialize`` at 2025-11-25.

Run it with the interpreter that has ``mcp``::

    python official_server_2026.py              # stdio
    python official_server_2026.py --http       # Streamable HTTP on a free loopback port;
                                                # "serving at http://127.0.0.1:PORT/mcp" on
                                                # stderr once it accepts connections

Env:
    PEER_EVENTS_FILE  optional path; markers are appended there, one per line, flushed and
                      fsynced at once (they always go to stderr as well)

Tools:
    echo(text)              the text back
    slow(seconds, tag="")   waits ``seconds``; "STARTED slow <tag>", then "CANCELLED slow <tag>"
                            when the SDK cancelled the handler, or "FINISHED slow <tag>"
    ask_name(question="Your name?")
                            multi round-trip (explicit form): answers ``InputRequiredResult``
                            with one form elicitation (key "name", {name: string}) and the
                            request state "asked" (sealed on the wire by the SDK); on the retry
                            returns "accept:<name> state:<state>" or the action when the user
                            did not accept
"""

from __future__ import annotations

import functools
import os
import sys
import warnings
from typing import Any

import anyio
import mcp_types as types
import peer_events
from mcp.server.mcpserver import Context, MCPServer

warnings.simplefilter("ignore")

event = functools.partial(peer_events.event, echo=True)  # markers also go to stderr


mcp = MCPServer("official-peer-2026", version="2.3.0-peer", log_level="WARNING")


@mcp.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    return text


@mcp.tool()
async def slow(seconds: float, tag: str = "") -> str:
    """Wait ``seconds`` unless cancelled; records STARTED/CANCELLED/FINISHED markers."""
    event("STARTED slow", tag)
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        with anyio.CancelScope(shield=True):
            event("CANCELLED slow", tag)
        raise
    event("FINISHED slow", tag)
    return f"slept {seconds}"


NAME_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string"}},
    "required": ["name"],
}


def _field(value: Any, name: str) -> Any:
    return value.get(name) if isinstance(value, dict) else getattr(value, name, None)


@mcp.tool()
async def ask_name(ctx: Context, question: str = "Your name?") -> str | types.InputRequiredResult:
    """Ask the user for a name through an input_required round (2026-07-28)."""
    answer = (ctx.input_responses or {}).get("name")
    if answer is None:
        request = types.ElicitRequest(
            params=types.ElicitRequestFormParams(message=question, requested_schema=NAME_SCHEMA)
        )
        return types.InputRequiredResult(input_requests={"name": request}, request_state="asked")
    action = _field(answer, "action")
    if action != "accept":
        return str(action)
    return f"accept:{_field(_field(answer, 'content'), 'name')} state:{ctx.request_state}"


def serve_http() -> None:
    """Serve the SDK's Streamable HTTP app with uvicorn on a socket bound here, so the address
    is known (and connections queue) before the announcement."""
    import socket

    import uvicorn

    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    app = mcp.streamable_http_app(host="127.0.0.1")
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    event(f"serving at http://127.0.0.1:{port}/mcp")
    server.run(sockets=[listener])


if __name__ == "__main__":
    event(f"official-peer-2026 starting pid={os.getpid()}")
    if sys.argv[1:] == ["--http"]:
        serve_http()
    else:
        mcp.run("stdio")
