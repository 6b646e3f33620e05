"""The official ``mcp`` 2.3.0 client's ``Client.listen`` over Streamable HTTP at 2026-07-28
against an mcp_sync WSGI app: the listen POST is answered with an SSE stream held open, the
client reads the acknowledgement and a ``tools/list_changed`` raised after it, then leaves
(closing the stream), which frees the app's listen slot."""

from __future__ import annotations

import json

import pytest
from support.paths import PEERS, PYTHON
from support.processes import Proc, user_env
from support.waiting import wait_until

from mcp_sync import Server

pytestmark = pytest.mark.interop

CLIENT = [PYTHON, str(PEERS / "official_client_2026.py")]
LIMIT = 90.0


def test_the_official_client_listens_over_http() -> None:
    server = Server("listen-wsgi", version="1.0.0")

    @server.tool()
    def echo(text: str) -> str:
        """Echo the text."""
        return text

    handle = server.serve_http("127.0.0.1", 0, keepalive=0.1, max_listen_streams=1)
    try:
        steps = [{"op": "listen", "tools": True, "events": 1}]
        argv = [*CLIENT, "--url", handle.url, json.dumps(steps)]
        with Proc(argv, env=user_env()) as client:
            client.wait_for("stdout", '"acknowledged"', LIMIT)
            assert handle.app.listen_slots.open == 1
            server.add_tool(lambda: "x", name="added")
            client.wait_for("stdout", '"listen_event"', LIMIT)
            finished = client.finish(LIMIT)
        assert finished.code == 0, finished.describe()
        lines = [json.loads(line) for line in finished.stdout.splitlines() if line.strip()]
        (ack,) = [line for line in lines if line["event"] == "acknowledged"]
        assert ack["honored"]["toolsListChanged"] is True
        (event,) = [line for line in lines if line["event"] == "listen_event"]
        assert event["kind"] == "ToolsListChanged"
        wait_until(lambda: handle.app.listen_slots.open == 0, "the listen slot is given back")
        assert handle.app.sessions() == []
    finally:
        handle.stop()
