"""The official ``mcp`` 2.3.0 client in its default mode against an mcp_sync server ends up
speaking 2026-07-28 on stdio: it probes ``server/discover`` on the connection, gets a
DiscoverResult, and every later request carries the envelope. A cancellation is honoured:
the handler stops and nothing is ever written for that id. Judged on the wire the client
recorded and on the markers the server's handler wrote.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.paths import PEERS, PYTHON
from support.processes import run, user_env

pytestmark = pytest.mark.interop

CLIENT = [PYTHON, str(PEERS / "official_client_2026.py")]
SERVER = [PYTHON, str(PEERS / "modern_server.py")]
MODERN = "2026-07-28"
LIMIT = 90.0

STEPS = [
    {"op": "list"},
    {"op": "call", "name": "echo", "arguments": {"text": "hello 2026"}},
    {
        "op": "cancel",
        "name": "slow",
        "arguments": {"seconds": 60, "tag": "c1"},
        "after_marker": "STARTED slow c1",
    },
    {"op": "wait_marker", "marker": "CANCELLED slow c1"},
    {"op": "call", "name": "echo", "arguments": {"text": "after cancel"}},
]


def of(lines: list[dict[str, Any]], event: str) -> list[dict[str, Any]]:
    return [line for line in lines if line["event"] == event]


def wire(lines: list[dict[str, Any]], direction: str) -> list[dict[str, Any]]:
    return [line["msg"] for line in of(lines, "wire") if line["dir"] == direction]


def answers(lines: list[dict[str, Any]], request_id: Any) -> list[dict[str, Any]]:
    return [m for m in wire(lines, "<<") if "method" not in m and m.get("id") == request_id]


def result_text(lines: list[dict[str, Any]], step: int) -> str:
    (result,) = [line["result"] for line in of(lines, "result") if line["step"] == step]
    return "".join(block["text"] for block in result["content"] if block["type"] == "text")


def test_the_official_client_speaks_2026_with_our_server(tmp_path: Path) -> None:
    events = tmp_path / "events"
    finished = run(
        [*CLIENT, json.dumps(STEPS), "--", *SERVER],
        LIMIT,
        env=user_env(PEER_EVENTS_FILE=str(events)),
    )
    assert finished.code == 0, finished.describe()
    lines = [json.loads(line) for line in finished.stdout.splitlines() if line.strip()]
    (connected,) = of(lines, "connected")
    assert connected["protocolVersion"] == MODERN
    assert connected["serverInfo"]["name"] == "modern-probe"

    sent = [m for m in wire(lines, ">>") if "id" in m]
    probe = sent[0]
    assert probe["method"] == "server/discover"
    (discovered,) = answers(lines, probe["id"])
    assert MODERN in discovered["result"]["supportedVersions"]
    assert "2025-11-25" in discovered["result"]["supportedVersions"]
    for message in sent:
        assert message["method"] != "initialize", message
        meta = message["params"]["_meta"]
        assert meta["io.modelcontextprotocol/protocolVersion"] == MODERN, message
        assert "io.modelcontextprotocol/clientCapabilities" in meta, message
    received = wire(lines, "<<")
    for message in received:  # only responses, each saying what it is
        assert "method" not in message, message
        assert "result" in message and message["result"]["resultType"] == "complete", message
        assert (
            message["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"]
            == "modern-probe"
        )
    listed = next(m for m in sent if m["method"] == "tools/list")
    (tools,) = answers(lines, listed["id"])
    assert (tools["result"]["ttlMs"], tools["result"]["cacheScope"]) == (60000, "public")

    assert result_text(lines, 1) == "hello 2026"
    # the cancel: notifications/cancelled on the wire, the handler stopped, no answer ever
    (slow,) = [m for m in sent if m["method"] == "tools/call" and m["params"]["name"] == "slow"]
    cancels = [m for m in wire(lines, ">>") if m.get("method") == "notifications/cancelled"]
    assert [c["params"]["requestId"] for c in cancels] == [slow["id"]]
    assert answers(lines, slow["id"]) == []
    markers = events.read_text(encoding="utf-8").splitlines()
    assert "CANCELLED slow c1" in markers and "FINISHED slow c1" not in markers
    assert result_text(lines, 4) == "after cancel"
    assert [done["ok"] for done in of(lines, "done")] == [True]
