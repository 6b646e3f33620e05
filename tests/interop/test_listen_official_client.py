"""The official ``mcp`` 2.3.0 client's ``Client.listen`` against an mcp_sync server over
stdio (2026-07-28): acknowledgement, tagged frames, the client's cancel, the graceful end.

The server (``tests/peers/listen_server.py``) raises its changes on signals, so the test
decides when a change happens: only after the client printed the acknowledgement.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.listen import LISTEN_SERVER, assert_listen_wire, drive_two_listens
from support.paths import PEERS, PYTHON
from support.processes import Proc, user_env

pytestmark = pytest.mark.interop

OFFICIAL_CLIENT_2026 = [PYTHON, str(PEERS / "official_client_2026.py")]
STEPS = [
    {"op": "listen", "tools": True, "resources": ["file:///a", "file:///b"], "events": 2},
    {"op": "listen", "tools": True, "events": 0},
]


def test_official_client_listen_against_our_stdio_server(tmp_path: Path) -> None:
    marks = tmp_path / "events"
    argv = [*OFFICIAL_CLIENT_2026, "--mode", "2026-07-28", json.dumps(STEPS), "--", *LISTEN_SERVER]
    with Proc(argv, env=user_env(PEER_EVENTS_FILE=str(marks))) as client:
        events = drive_two_listens(
            client, marks, ('"kind": "ToolsListChanged"', '"kind": "ResourceUpdated"')
        )
    acks = [e for e in events if e["event"] == "acknowledged"]
    first, second = acks[0]["subscription_id"], acks[1]["subscription_id"]
    assert acks[0]["honored"] == {
        "toolsListChanged": True,
        "resourceSubscriptions": ["file:///a", "file:///b"],
    }
    assert [(e["step"], e["kind"], e["uri"]) for e in events if e["event"] == "listen_event"] == [
        (0, "ToolsListChanged", None),
        (0, "ResourceUpdated", "file:///a"),
    ]
    assert [e["step"] for e in events if e["event"] == "listen_ended"] == [1]
    assert_listen_wire(events, first, second)
