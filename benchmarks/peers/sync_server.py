"""mcp_sync benchmark server: stdio by default, Streamable HTTP with --http PORT."""

from __future__ import annotations

import sys
import time

from mcp_sync import Context, Server

server = Server("bench-mcp_sync", version="1", max_workers=8)
_observed: list[int] = []
_started: list[int] = []
_started: list[int] = []


@server.tool()
def echo(text: str) -> str:
    """Return the text."""
    return text


@server.tool()
def hold(ctx: Context) -> str:
    """Block until the call is cancelled (at most 120 s)."""
    ctx.wait(120)
    return "released"


@server.tool()
def probe(ctx: Context) -> str:
    """Report progress once, then wait for cancellation and record when it was seen."""
    _started.append(time.monotonic_ns())
    ctx.report_progress(1)
    if ctx.wait(60):
        _observed.append(time.monotonic_ns())
        return "cancelled"
    return "not cancelled"


@server.tool()
def probe_started() -> int:
    """How many `probe` handlers have started (progress does not reach every client)."""
    return len(_started)


@server.tool()
def probe_times() -> list[int]:
    """Monotonic times (ns) at which `probe` handlers saw their cancellation."""
    return list(_observed)


if __name__ == "__main__":
    if "--http" in sys.argv:
        port = int(sys.argv[sys.argv.index("--http") + 1])
        server.run(transport="http", port=port)
    else:
        server.run()
