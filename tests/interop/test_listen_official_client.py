"""The official ``mcp`` 2.3.0 client's ``Client.listen`` against an mcp_sync server over
stdio (2026-07-28): acknowledgement, tagged frames, the client's cancel, the graceful end.

The server (``tests/peers/listen_server.py``) raises its changes on signals, so the test
decides when a change happens: only after the client printed the acknowledgement.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest
from support.interop import read_events
from support.listen import closing_ids
from support.paths import PEERS, PYTHON
from support.processes import Proc, user_env
from support.waiting import PEER_WAIT, wait_until

pytestmark = pytest.mark.interop

OFFICIAL_CLIENT_2026 = [PYTHON, str(PEERS / "official_client_2026.py")]
LISTEN_SERVER = [PYTHON, str(PEERS / "listen_server.py")]
TAG = "io.modelcontextprotocol/subscriptionId"
STEPS = [
    {"op": "listen", "tools": True, "resources": ["file:///a", "file:///b"], "events": 2},
    {"op": "listen", "tools": True, "events": 0},
]


def events_of(proc: Proc) -> list[dict[str, Any]]:
    return [json.loads(line) for line in proc.text("stdout").splitlines() if line.strip()]


def test_official_client_listen_against_our_stdio_server(tmp_path: Path) -> None:
    marks = tmp_path / "events"
    argv = [*OFFICIAL_CLIENT_2026, "--mode", "2026-07-28", json.dumps(STEPS), "--", *LISTEN_SERVER]
    with Proc(argv, env=user_env(PEER_EVENTS_FILE=str(marks))) as client:
        wait_until(
            lambda: any(line.startswith("READY ") for line in read_events(marks)),
            "the server start",
            timeout=PEER_WAIT,
        )
        server_pid = int(
            next(line for line in read_events(marks) if line.startswith("READY ")).split()[1]
        )

        client.wait_for("stdout", '"acknowledged", ', PEER_WAIT)
        os.kill(server_pid, signal.SIGUSR1)
        client.wait_for("stdout", '"kind": "ToolsListChanged"', PEER_WAIT)
        os.kill(server_pid, signal.SIGUSR2)
        client.wait_for("stdout", '"kind": "ResourceUpdated"', PEER_WAIT)
        # the first stream was left (cancelled); the second is acknowledged, then the server stops
        wait_until(
            lambda: len([e for e in events_of(client) if e["event"] == "acknowledged"]) == 2,
            "the second acknowledgement",
            timeout=PEER_WAIT,
        )
        os.kill(server_pid, signal.SIGTERM)
        client.wait_for("stdout", '"listen_ended"', PEER_WAIT)
        finished = client.finish(PEER_WAIT)
    assert finished.code == 0, finished.describe()
    events = events_of(client)
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

    from_server = [e["msg"] for e in events if e["event"] == "wire" and e["dir"] == "<<"]
    to_server = [e["msg"] for e in events if e["event"] == "wire" and e["dir"] == ">>"]
    # every frame of ours is tagged, and each stream's acknowledgement comes first
    notes = [m for m in from_server if "method" in m]
    assert notes and all(m["params"]["_meta"][TAG] in (first, second) for m in notes)
    for sid in (first, second):
        mine = [m["method"] for m in notes if m["params"]["_meta"][TAG] == sid]
        assert mine[0] == "notifications/subscriptions/acknowledged"
    assert not any(m["method"] == "notifications/cancelled" for m in notes)
    # the client's cancel names the first listen; the second ends with the graceful result
    assert [
        m["params"]["requestId"] for m in to_server if m.get("method") == "notifications/cancelled"
    ] == [first]
    assert closing_ids(from_server) == [second]
