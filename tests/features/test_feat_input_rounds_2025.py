"""The explicit input form (a handler returning ``InputRequired``) on a 2025-11-25 session: the
library sends the input requests to the client as real requests, then runs the handler again
with the answers in ``ctx.input_responses`` and its state in ``ctx.request_state_payload``.
The implicit form (``ctx.session.elicit`` and the others) stays what it always was there: see
test_feat_client_requests.py."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from support.messages import cancels_of, requests, responses_to
from support.sessions import pair
from support.waiting import WAIT, wait_event

from mcp_sync import Context, InputRequired, McpError, Server

FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def explicit_server(runs: list[tuple[dict[str, Any], Any]]) -> Server:
    server = Server("explicit")

    @server.tool()
    def deploy(env: str, ctx: Context) -> str | InputRequired:
        runs.append((dict(ctx.input_responses), ctx.request_state_payload))
        if "confirm" not in ctx.input_responses:
            return InputRequired(
                {
                    "confirm": {
                        "method": "elicitation/create",
                        "params": {"message": f"Deploy to {env}?", "requestedSchema": FORM},
                    },
                    "where": {"method": "roots/list", "params": {}},
                },
                state={"env": env},
            )
        roots = [root["uri"] for root in ctx.input_responses["where"]["roots"]]
        return f"{ctx.request_state_payload['env']} by {ctx.input_responses['confirm']['content']['name']} in {roots}"

    return server


def test_an_input_required_result_is_fulfilled_with_real_requests_on_a_2025_session():
    runs: list[tuple[dict[str, Any], Any]] = []
    asked: list[dict[str, Any]] = []

    def elicitation(params: dict[str, Any], ctx: Context) -> dict[str, Any]:
        asked.append(params)
        return {"action": "accept", "content": {"name": "Ann"}}

    with pair(explicit_server(runs), elicitation_handler=elicitation, roots=["file:///srv"]) as p:
        result = p.client.call_tool("deploy", {"env": "prod"}, timeout=WAIT)
        assert not result.is_error
        assert result.content[0].text == "prod by Ann in ['file:///srv']"
        sent = p.server_wire.sent
        call_id = next(m["id"] for m in requests(p.client_wire.sent, "tools/call"))
    assert asked == [{"message": "Deploy to prod?", "requestedSchema": FORM}]
    assert runs[0] == ({}, None)
    assert runs[1][1] == {"env": "prod"} and set(runs[1][0]) == {"confirm", "where"}
    assert len(runs) == 2
    # real server->client requests, no input_required result on the wire
    assert len(requests(sent, "elicitation/create")) == 1 and len(requests(sent, "roots/list")) == 1
    assert not any(
        isinstance(m, dict) and (m.get("result") or {}).get("resultType") == "input_required"
        for m in sent
    )
    assert [m for m in sent if isinstance(m, dict) and m.get("id") == call_id and "result" in m]


def test_input_the_client_did_not_declare_makes_the_request_fail():
    runs: list[tuple[dict[str, Any], Any]] = []
    with pair(explicit_server(runs)) as p:  # no elicitation handler, no roots
        with pytest.raises(McpError) as info:
            p.client.call_tool("deploy", {"env": "prod"}, timeout=WAIT)
        assert "elicitation" in info.value.message
        assert requests(p.server_wire.sent, "elicitation/create") == []
    assert len(runs) == 1


def test_cancelling_the_call_cancels_the_input_requests_on_the_wire_and_nothing_is_answered():
    runs: list[tuple[dict[str, Any], Any]] = []
    started, finished = threading.Event(), threading.Event()
    seen: dict[str, Any] = {}

    def elicitation(params: dict[str, Any], ctx: Context) -> dict[str, Any]:
        started.set()
        seen["cancelled"] = ctx.wait(WAIT)
        finished.set()
        return {"action": "decline"}

    with pair(
        explicit_server(runs),
        server_workers=1,
        max_workers=1,
        elicitation_handler=elicitation,
        roots=["file:///srv"],
    ) as p:
        call = p.client.call_tool_future("deploy", {"env": "prod"})
        wait_event(started, "the client's elicitation handler to start")
        (nested,) = requests(p.client_wire.snapshot()[1], "elicitation/create")
        assert call.cancel("stop") is True
        wait_event(finished, "the elicitation handler to see its token fire")
        assert seen["cancelled"] is True
        assert cancels_of(p.client_wire.snapshot()[1], nested["id"]), (
            "the input request must be cancelled on the wire"
        )
        # a follow-up call on the one worker: the cancelled one has finished by now
        assert p.client.list_tools(timeout=WAIT)
        assert responses_to(p.server_wire.snapshot()[0], call.request_id) == []
        assert responses_to(p.client_wire.snapshot()[0], nested["id"]) == []
    assert len(runs) == 1, "the handler does not run again after a cancel"
