#!/usr/bin/env python
"""The official MCP Python SDK's Streamable HTTP server app (mcp 2.3.x) under uvicorn: the
real peer for mcp_sync's HTTP client. It serves the same MCPServer (same tools, same
PEER_EVENTS_FILE markers) as the stdio peer in ``tests/peers/official_server.py``.
Adapted from the team's reference script.

    python official_http_server.py [--host 127.0.0.1] [--port 0] [--path /mcp] [--json-response]

``--port 0`` picks a free port. Once listening it prints ONE line to stdout:
``READY http://127.0.0.1:PORT/mcp``. Stops on SIGINT/SIGTERM (uvicorn handles them).
"""

from __future__ import annotations

import argparse
import os
import sys

import anyio
import uvicorn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from official_server import mcp


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--path", default="/mcp")
    ap.add_argument("--json-response", action="store_true")
    ns = ap.parse_args()

    # host= drives the SDK's DNS-rebinding protection (a Host/Origin allow-list for
    # 127.0.0.1/localhost/[::1]); it binds nothing.
    app = mcp.streamable_http_app(
        streamable_http_path=ns.path, json_response=ns.json_response, host=ns.host
    )
    server = uvicorn.Server(
        uvicorn.Config(app, host=ns.host, port=ns.port, log_level="warning", lifespan="on")
    )

    async def announce() -> None:
        while not server.started:
            await anyio.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        print(f"READY http://{ns.host}:{port}{ns.path}", flush=True)

    async with anyio.create_task_group() as tg:
        tg.start_soon(announce)
        await server.serve()
        tg.cancel_scope.cancel()


if __name__ == "__main__":
    anyio.run(main)
