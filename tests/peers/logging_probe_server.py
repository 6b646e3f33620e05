"""A server that reports, on exit, what ``Server.run()`` did to the process's logging.

``python logging_probe_server.py stdio|http REPORT_PATH``: serves one tool (over stdio, or
over HTTP on a free loopback port until SIGTERM), then writes a JSON report of the root
logger's and the ``mcp_sync`` logger's handlers and levels to ``REPORT_PATH``.
"""

from __future__ import annotations

import json
import logging
import sys

from mcp_sync import Server

server = Server("logging-probe")


@server.tool()
def echo(text: str) -> str:
    """Return the text."""
    return text


def describe(logger: logging.Logger) -> dict[str, object]:
    return {"handlers": [repr(h) for h in logger.handlers], "level": logger.level}


if __name__ == "__main__":
    transport, report = sys.argv[1], sys.argv[2]
    before = {
        "root": describe(logging.getLogger()),
        "mcp_sync": describe(logging.getLogger("mcp_sync")),
    }
    if transport == "http":
        server.run("http", port=0)
    else:
        server.run()
    after = {
        "root": describe(logging.getLogger()),
        "mcp_sync": describe(logging.getLogger("mcp_sync")),
    }
    with open(report, "w", encoding="utf-8") as f:
        json.dump({"before": before, "after": after}, f)
