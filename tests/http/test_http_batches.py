"""JSON-RPC batches over Streamable HTTP: answered in sessions at revision 2025-03-26 (whose
receivers MUST support them), refused with -32600 at later revisions."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from support.http import RawSession, make_server
from support.messages import call_tool, notification, request
from support.waiting import WAIT

from mcp_sync.http import McpWsgiApp

OLD = "2025-03-26"
JSON_ONLY = "application/json"


def open_session(raw: Any, url: str, version: str) -> RawSession:
    """A raw session whose initialize negotiated ``version``."""
    session = raw(url)
    init = request(
        "initialize",
        {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"},
        },
        0,
    )
    answer = session.post(init, headers=session.headers(session=False, accept=JSON_ONLY))
    assert answer.status_code == 200, answer.text
    assert answer.json()["result"]["protocolVersion"] == version
    session.session_id = answer.headers["mcp-session-id"]
    session.extra["MCP-Protocol-Version"] = version
    assert session.post(notification("notifications/initialized")).status_code == 202
    return session


def by_id(answers: list[dict[str, Any]]) -> dict[Any, dict[str, Any]]:
    return {(type(a["id"]).__name__, a["id"]): a for a in answers}


def test_a_batch_of_requests_gets_an_array_of_responses_at_2025_03_26(probe, serve, raw):
    handle = serve(make_server(probe))
    session = open_session(raw, handle.url, OLD)
    batch = [
        call_tool("echo", {"text": "one"}, 1),
        call_tool("echo", {"text": "two"}, "1"),  # "1" and 1 are two requests
        notification("notifications/roots/list_changed"),
        request("tools/list", None, 3),
    ]
    answer = session.post(batch)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("application/json")
    answers = answer.json()
    assert isinstance(answers, list) and len(answers) == 3
    got = by_id(answers)
    assert got[("int", 1)]["result"]["content"][0]["text"] == "one"
    assert got[("str", "1")]["result"]["content"][0]["text"] == "two"
    assert {t["name"] for t in got[("int", 3)]["result"]["tools"]} >= {"echo", "gated"}


def test_a_batch_of_notifications_only_gets_202(probe, serve, raw):
    handle = serve(make_server(probe))
    session = open_session(raw, handle.url, OLD)
    answer = session.post(
        [
            notification("notifications/roots/list_changed"),
            notification("notifications/initialized"),
        ]
    )
    assert answer.status_code == 202 and answer.content == b""


def test_batch_elements_that_are_invalid_or_initialize_get_their_own_errors(probe, serve, raw):
    handle = serve(make_server(probe))
    session = open_session(raw, handle.url, OLD)
    init = request(
        "initialize",
        {"protocolVersion": OLD, "capabilities": {}, "clientInfo": {"name": "x", "version": "0"}},
        9,
    )
    answer = session.post([42, init, call_tool("echo", {"text": "ok"}, 2)])
    assert answer.status_code == 200, answer.text
    answers = answer.json()
    assert len(answers) == 3
    errors = {a["id"]: a["error"] for a in answers if "error" in a}
    assert errors[None]["code"] == -32600  # 42 is not a message
    assert errors[9]["code"] == -32600 and "batch" in errors[9]["message"]
    assert [a["result"]["content"][0]["text"] for a in answers if "result" in a] == ["ok"]


def test_an_empty_batch_is_an_invalid_request(probe, serve, raw):
    handle = serve(make_server(probe))
    session = open_session(raw, handle.url, OLD)
    answer = session.post([])
    assert answer.status_code == 400
    body = answer.json()
    assert body["id"] is None and body["error"]["code"] == -32600


def test_a_cancelled_request_of_a_batch_is_left_out_of_the_answer(probe, serve, raw, wire):
    handle = serve(make_server(probe))
    session = open_session(raw, handle.url, OLD)
    outcome: dict[str, Any] = {}

    def post_batch() -> None:
        outcome["answer"] = session.post(
            [call_tool("gated", {"tag": "g"}, 1), call_tool("echo", {"text": "kept"}, 2)]
        )

    poster = threading.Thread(target=post_batch, name="batch-poster")
    poster.start()
    assert probe.started("g").wait(WAIT)
    cancel = notification("notifications/cancelled", {"requestId": 1, "reason": "not needed"})
    assert session.post(cancel).status_code == 202
    poster.join(WAIT)
    assert not poster.is_alive()
    assert probe.cancelled("g").wait(WAIT)
    answers = outcome["answer"].json()
    assert [a["id"] for a in answers] == [2]
    assert wire.responses(1) == []


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
def test_batches_are_refused_at_later_revisions(probe, serve, raw, version):
    handle = serve(make_server(probe))
    session = open_session(raw, handle.url, version)
    answer = session.post([call_tool("touch", {"tag": "never"}, 1)])
    assert answer.status_code == 400
    body = answer.json()
    assert body["id"] is None and body["error"]["code"] == -32600
    assert "batch" in body["error"]["message"] and version in body["error"]["message"]
    assert not probe.event("never").is_set()


def test_a_batch_without_a_session_is_refused(probe, serve, raw):
    app = McpWsgiApp(make_server(probe))
    handle = serve(app)
    session = raw(handle.url)
    answer = session.post(
        [call_tool("touch", {"tag": "never"}, 1)], headers=session.headers(session=False)
    )
    assert answer.status_code == 400
    assert app.stats().sessions == 0
    assert not probe.event("never").is_set()


def test_a_batch_cannot_take_more_than_max_session_requests(probe, serve, raw):
    handle = serve(McpWsgiApp(make_server(probe), max_session_requests=3))
    session = open_session(raw, handle.url, OLD)
    answer = session.post([call_tool("echo", {"text": str(n)}, n) for n in range(5)])
    answers = answer.json()
    assert sorted(a["result"]["content"][0]["text"] for a in answers if "result" in a) == [
        "0",
        "1",
        "2",
    ]
    refused = [a for a in answers if "error" in a]
    assert sorted(a["id"] for a in refused) == [3, 4]
    assert all("max_session_requests=3" in a["error"]["message"] for a in refused)
