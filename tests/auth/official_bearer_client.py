"""The official ``mcp`` client over Streamable HTTP with a bearer token: connects in the
given mode, lists the tools and calls ``whoami``; prints one JSON object per line.

    python official_bearer_client.py URL MODE [TOKEN]

Without TOKEN it sends no Authorization header (the server should answer 401).
"""

from __future__ import annotations

import builtins
import json
import sys
from typing import Any

import anyio
import httpx2
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client


def emit(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


async def main(url: str, mode: str, token: str | None) -> int:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with anyio.fail_after(60):
            async with (
                httpx2.AsyncClient(headers=headers, timeout=30) as http,
                Client(streamable_http_client(url, http_client=http), mode=mode) as client,  # type: ignore[arg-type]
            ):
                emit("connected", protocolVersion=client.protocol_version)
                tools = await client.list_tools()
                emit("tools", names=sorted(t.name for t in tools.tools))
                result = await client.call_tool("whoami", {})
                emit("whoami", result=result.structured_content)
    except BaseException as exc:  # noqa: BLE001 - reported for the test to judge
        while isinstance(exc, getattr(builtins, "BaseExceptionGroup", ())) and exc.exceptions:
            exc = exc.exceptions[0]
        status = getattr(getattr(exc, "response", None), "status_code", None)
        emit("error", type=type(exc).__name__, status=status, text=str(exc))
        return 1
    return 0


if __name__ == "__main__":
    args = sys.argv[1:]
    sys.exit(anyio.run(main, args[0], args[1], args[2] if len(args) > 2 else None))
