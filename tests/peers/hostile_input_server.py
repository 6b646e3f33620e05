"""A stdio MCP server for the hardening tests: tools that misbehave, and a custom method that
echoes whatever it is sent (spawned by tests/test_handler_base_exceptions.py and
tests/test_nesting_depth.py).

Tools: ``raise_base(kind)`` raises ``SystemExit(3)``, ``KeyboardInterrupt`` or a bare
``BaseException`` subclass; ``echo_value(value)`` returns ``value`` as structured content;
``flood(count, size)`` sends ``count`` log notifications (``{"n": i, "pad": "x" * size}``)
before it answers; ``pid()``. Custom methods: ``test/echo`` answers its params, ``test/raise_base`` raises like
the tool.
"""

from __future__ import annotations

import os
from typing import Any

from mcp_sync import Context, Server


class Unusual(BaseException):
    """Neither an Exception nor one of Python's own BaseExceptions."""


def _raise(kind: str) -> None:
    if kind == "exit":
        raise SystemExit(3)
    if kind == "interrupt":
        raise KeyboardInterrupt
    raise Unusual("unusual")


server = Server("hostile-input", version="1.0.0")


@server.tool()
def raise_base(kind: str) -> str:
    """Raise SystemExit (``exit``), KeyboardInterrupt (``interrupt``) or a BaseException."""
    _raise(kind)
    return "unreachable"


@server.tool()
def echo_value(value: Any) -> dict[str, Any]:
    """Return ``{"value": value}``."""
    return {"value": value}


@server.tool()
def flood(count: int, size: int, ctx: Context) -> int:
    """Send ``count`` log notifications of about ``size`` bytes each, then answer ``count``."""
    pad = "x" * size
    for n in range(count):
        ctx.log("info", {"n": n, "pad": pad})
    return count


@server.tool()
def pid() -> int:
    """This process's id."""
    return os.getpid()


server.add_method("test/echo", lambda session, request, token: request.params)
server.add_method(
    "test/raise_base", lambda session, request, token: _raise(request.params.get("kind", "exit"))
)


if __name__ == "__main__":
    server.run()
