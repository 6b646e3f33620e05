"""Our client against our own server over stdio: by default they agree on 2026-07-28 (judged
on the wire), a cancel stops the server's handler and gets no answer; pinned to
``protocol="legacy"`` the same server speaks 2025-11-25 with the same typed API."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.messages import with_method
from support.paths import PEERS, PYTHON
from support.processes import user_env
from support.recording import RecordingTransport
from support.waiting import wait_until

from mcp_sync import Client
from mcp_sync.errors import Cancelled
from mcp_sync.lifecycle import Era
from mcp_sync.transports.subprocess import SubprocessTransport

LIMIT = 30.0
OUR_SERVER = [PYTHON, str(PEERS / "demo_server.py")]


def spawn(markers: Path) -> RecordingTransport:
    markers.write_text("")
    env = user_env(MCP_SYNC_TEST_MARKERS=str(markers))
    return RecordingTransport(SubprocessTransport(OUR_SERVER, env=env, stderr="discard"))


def test_our_client_and_our_server_speak_2026_and_a_cancel_stops_the_handler(tmp_path):
    markers = tmp_path / "markers"
    wire = spawn(markers)
    with Client.connect(
        wire, init_timeout=LIMIT, discover_timeout=LIMIT, default_timeout=LIMIT
    ) as client:
        assert (client.era, client.protocol_version) == (Era.MODERN, "2026-07-28")
        assert client.server_info.name == "demo-stdio"
        assert client.call_tool("echo", {"text": "hi"}).content[0].text == "hi"
        slow = client.call_tool_future("slow", {"seconds": 60})
        wait_until(lambda: "started" in markers.read_text(), "the handler to start", timeout=LIMIT)
        assert slow.cancel("enough")
        wait_until(
            lambda: "cancelled enough" in markers.read_text(), "the handler to stop", timeout=LIMIT
        )
        with pytest.raises(Cancelled):
            slow.result(LIMIT)
        assert client.call_tool("echo", {"text": "after"}).content[0].text == "after"
    sent = [m for m in wire.sent if isinstance(m, dict) and "id" in m and "method" in m]
    assert sent[0]["method"] == "server/discover"
    assert all(
        m["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
        for m in sent
    )
    assert not with_method(wire.sent, "initialize")
    answers = [m for m in wire.received if isinstance(m, dict) and "result" in m]
    assert all("resultType" in m["result"] for m in answers)
    (slow_call,) = [
        m for m in with_method(wire.sent, "tools/call") if m["params"]["name"] == "slow"
    ]
    assert [m for m in wire.received if m.get("id") == slow_call["id"]] == []


def test_pinned_to_legacy_our_server_speaks_2025_with_the_same_api(tmp_path):
    wire = spawn(tmp_path / "markers")
    with Client.connect(wire, protocol="legacy", init_timeout=LIMIT) as client:
        assert (client.era, client.protocol_version) == (Era.HANDSHAKE, "2025-11-25")
        assert client.call_tool("echo", {"text": "hi"}).content[0].text == "hi"
        client.ping()
    assert [m.get("method") for m in wire.sent][:2] == ["initialize", "notifications/initialized"]
