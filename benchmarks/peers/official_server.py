"""Official MCP SDK benchmark server with the same tools: stdio, or Streamable HTTP with --http PORT."""

from __future__ import annotations

import sys
import time
import warnings

import anyio
from mcp.server.mcpserver import Context, MCPServer

warnings.simplefilter("ignore")

mcp = MCPServer("bench-official", version="1", log_level="WARNING")
_observed: list[int] = []
_started: list[int] = []


@mcp.tool()
def echo(text: str) -> str:
    """Return the text."""
    return text


@mcp.tool()
async def hold() -> str:
    """Block until the call is cancelled (at most 120 s)."""
    await anyio.sleep(120)
    return "released"


@mcp.tool()
async def probe(ctx: Context) -> str:
    """Report progress once, then wait for cancellation and record when it was seen."""
    _started.append(time.monotonic_ns())
    await ctx.report_progress(1)
    try:
        await anyio.sleep(60)
    except anyio.get_cancelled_exc_class():
        _observed.append(time.monotonic_ns())
        raise
    return "not cancelled"


@mcp.tool()
def probe_started() -> int:
    """How many `probe` handlers have started (progress does not reach every client)."""
    return len(_started)


@mcp.tool()
def probe_times() -> list[int]:
    """Monotonic times (ns) at which `probe` handlers saw their cancellation."""
    return list(_observed)


if __name__ == "__main__":
    if "--http" in sys.argv:
        import uvicorn

        port = int(sys.argv[sys.argv.index("--http") + 1])
        app = mcp.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
        uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
    else:
        mcp.run("stdio")
