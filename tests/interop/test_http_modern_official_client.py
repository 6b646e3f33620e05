"""The official ``mcp`` 2.3.0 client in its default mode against an mcp_sync WSGI app over
Streamable HTTP ends up speaking 2026-07-28: it probes ``server/discover``, every later
request carries the envelope, and the app mints no session. Judged on the wire the client
recorded.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.paths import PEERS, PYTHON
from support.processes import run, user_env

from mcp_sync import Server

pytestmark = pytest.mark.interop

CLIENT = [PYTHON, str(PEERS / "official_client_2026.py")]
MODERN = "2026-07-28"
LIMIT = 90.0


def of(lines: list[dict[str, Any]], event: str) -> list[dict[str, Any]]:
    return [line for line in lines if line["event"] == event]


def test_the_official_client_speaks_2026_with_our_wsgi_app() -> None:
    server = Server("modern-wsgi", version="1.0.0")

    @server.tool()
    def echo(text: str) -> str:
        """Echo the text."""
        return text

    handle = server.serve_http("127.0.0.1", 0)
    try:
        steps = [{"op": "list"}, {"op": "call", "name": "echo", "arguments": {"text": "over http"}}]
        finished = run([*CLIENT, "--url", handle.url, json.dumps(steps)], LIMIT, env=user_env())
        sessions_left = len(handle.app.sessions())
    finally:
        handle.stop()
    assert finished.code == 0, finished.describe()
    lines = [json.loads(line) for line in finished.stdout.splitlines() if line.strip()]
    (connected,) = of(lines, "connected")
    assert connected["protocolVersion"] == MODERN
    sent = [
        line["msg"] for line in of(lines, "wire") if line["dir"] == ">>" and "id" in line["msg"]
    ]
    assert sent[0]["method"] == "server/discover"
    assert all(m["method"] != "initialize" for m in sent)
    assert all(
        m["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] == MODERN for m in sent
    )
    (result,) = [line["result"] for line in of(lines, "result")]
    assert result["content"][0]["text"] == "over http"
    assert sessions_left == 0  # stateless: no session was kept
    (done,) = of(lines, "done")
    assert done["ok"] is True
