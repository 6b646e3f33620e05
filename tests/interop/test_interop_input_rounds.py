"""The official ``mcp`` 2.3.0 client, in its default mode (``server/discover`` first), against
``tests/peers/input_rounds_server.py``: it ends up speaking 2026-07-28, and a tool written with
``ctx.session.elicit`` completes through an ``input_required`` round driven by the client's
elicitation callback. Judged on the wire the client recorded."""

from __future__ import annotations

import json
from typing import Any

import pytest

from support.paths import PEERS, PYTHON
from support.processes import run, user_env

pytestmark = pytest.mark.interop

CLIENT = [PYTHON, str(PEERS / "official_client_2026.py")]
SERVER = [PYTHON, str(PEERS / "input_rounds_server.py")]
LIMIT = 90.0
MODERN = "2026-07-28"


def run_client(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    argv = [*CLIENT, "--elicit-json", json.dumps({"name": "Ada"}), json.dumps(steps), "--", *SERVER]
    finished = run(argv, LIMIT, env=user_env())
    assert finished.code == 0, finished.describe()
    return [json.loads(line) for line in finished.stdout.splitlines() if line.strip()]


def of(lines: list[dict[str, Any]], event: str) -> list[dict[str, Any]]:
    return [line for line in lines if line["event"] == event]


def wire(lines: list[dict[str, Any]], direction: str) -> list[dict[str, Any]]:
    return [line["msg"] for line in of(lines, "wire") if line["dir"] == direction]


def test_the_official_client_completes_a_round_against_a_ctx_session_elicit_tool():
    lines = run_client([{"op": "call", "name": "book", "arguments": {"room": "A1"}}])
    (connected,) = of(lines, "connected")
    assert connected["protocolVersion"] == MODERN, lines
    sent, received = wire(lines, ">>"), wire(lines, "<<")
    assert sent[0]["method"] == "server/discover"
    assert not [m for m in sent if m.get("method") == "initialize"]
    for message in sent:
        if "id" in message and "method" in message:
            assert message["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] == MODERN
    # the server never sent a request of its own: the input went through input_required
    assert [m for m in received if "method" in m and "id" in m] == []
    first, again = [m for m in sent if m.get("method") == "tools/call"]
    (interim,) = [m for m in received if m.get("id") == first["id"]]
    assert interim["result"]["resultType"] == "input_required"
    assert interim["result"]["inputRequests"]["elicit-1"]["method"] == "elicitation/create"
    assert again["id"] != first["id"]
    assert again["params"]["name"] == "book" and again["params"]["arguments"] == {"room": "A1"}
    assert again["params"]["requestState"] == interim["result"]["requestState"]
    assert again["params"]["inputResponses"] == {"elicit-1": {"action": "accept", "content": {"name": "Ada"}}}
    assert [e["params"]["message"] for e in of(lines, "elicitation")] == ["Your name?"]
    (final,) = [m for m in received if m.get("id") == again["id"]]
    assert final["result"]["resultType"] == "complete"
    (result,) = of(lines, "result")
    assert result["result"]["content"][0]["text"] == "A1 booked for Ada"
    assert of(lines, "done") == [{"event": "done", "t_ms": of(lines, "done")[0]["t_ms"], "ok": True}]
