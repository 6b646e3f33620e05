"""mcp_sync speaks MCP 2026-07-28 over stdio with the real SDKs, both directions.

* The official ``mcp`` 2.3.0 client in its default mode (``mode="auto"``) and the TypeScript
  SDK v2 client pinned to 2026-07-28, against mcp_sync's server (``tests/peers/sync_server_2026.py``,
  whose ``ask_name`` tool is written with ``ctx.session.elicit`` as for a 2025 session).
* mcp_sync's client in its default mode against the official server (dual-era) and the
  TypeScript SDK v2 server (2026-07-28 only).

Each run does the same things on one connection: list, a call, a multi round-trip (MRTR)
elicitation round, a cancelled call, and a call after it. They are judged on the wire: what
the client recorded, and what mcp_sync's server recorded of its own stdin and stdout (complete,
since it is read once the server process has ended) -- the 2026 envelope on every request,
``resultType`` on every result, no ``initialize``, the MRTR retry under a new id with the
state echoed byte for byte, and nothing ever written for the cancelled id. The handler saw
each cancellation: the servers' markers say so.

Without ``tests/node/node_modules`` the TypeScript tests skip (fail when ``CI`` is set, see
:mod:`support.node`); the others never skip.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from support.interop import read_events, wait_for_marker
from support.peers_2026 import (
    ENVELOPE_KEYS,
    LIMIT,
    MODERN,
    OFFICIAL_CLIENT_2026,
    OFFICIAL_SERVER_2026,
    STEPS,
    SYNC_SERVER_2026,
    of,
    run_client,
    server_wire,
    step,
    text_of,
    ts_client_2026,
    ts_server_2026,
    wire,
)
from support.processes import user_env
from support.recording import WireRecorder

from mcp_sync import Client, Context
from mcp_sync.errors import Cancelled
from mcp_sync.lifecycle import Era
from mcp_sync.transports.subprocess import SubprocessTransport

pytestmark = pytest.mark.interop

CANCELLED_METHOD = "notifications/cancelled"


# -- judging a wire (client -> server: ``sent``; server -> client: ``received``) -----------------
def requests_in(messages: list[Any], method: str | None = None) -> list[dict[str, Any]]:
    return [
        m
        for m in messages
        if isinstance(m, dict) and "id" in m and "method" in m and method in (None, m["method"])
    ]


def answers_to(messages: list[Any], request_id: Any) -> list[dict[str, Any]]:
    return [
        m
        for m in messages
        if isinstance(m, dict) and "method" not in m and m.get("id") == request_id
    ]


def about(messages: list[Any], request_id: Any) -> list[dict[str, Any]]:
    """Every message that is for ``request_id``: its answer, or a notification naming it."""
    return [
        m
        for m in messages
        if isinstance(m, dict)
        and (
            ("method" not in m and m.get("id") == request_id)
            or ("method" in m and "id" not in m and request_id in _named_ids(m.get("params") or {}))
        )
    ]


def _named_ids(params: dict[str, Any]) -> list[Any]:
    meta = params.get("_meta") or {}
    return [params.get("requestId"), params.get("progressToken"), meta.get("relatedRequestId")]


def calls_of(sent: list[Any], tool: str) -> list[dict[str, Any]]:
    return [m for m in requests_in(sent, "tools/call") if m["params"]["name"] == tool]


def assert_spoke_2026(
    sent: list[Any], received: list[Any], *, capabilities: dict[str, Any] | None = None
) -> None:
    """Every request carried the 2026-07-28 envelope; no handshake; every answer is a result with
    ``resultType``; the server wrote no request (the only notification a 2026 client may get here
    is none: no log level and no progress token were asked for)."""
    sent_requests = requests_in(sent)
    assert sent_requests, sent
    for message in sent_requests:
        meta = message["params"]["_meta"]
        assert [key for key in ENVELOPE_KEYS if key not in meta] == [], message
        assert meta[ENVELOPE_KEYS[0]] == MODERN, message
        if capabilities is not None:
            assert meta[ENVELOPE_KEYS[1]] == capabilities, message
    methods = [m.get("method") for m in sent if isinstance(m, dict)]
    assert "initialize" not in methods and "notifications/initialized" not in methods, methods
    assert received, sent
    for message in received:
        assert isinstance(message, dict) and "method" not in message, message
        assert "result" in message and "resultType" in message["result"], message


def assert_discovered(
    probe: dict[str, Any], received: list[Any], server_name: str
) -> dict[str, Any]:
    """The probe was enveloped and its answer is a 2026-07-28 ``DiscoverResult``."""
    assert probe["params"]["_meta"][ENVELOPE_KEYS[0]] == MODERN, probe
    (answer,) = answers_to(received, probe["id"])
    result = answer["result"]
    assert MODERN in result["supportedVersions"], result
    assert result["resultType"] == "complete", result
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == server_name, result
    assert isinstance(result["capabilities"], dict) and "tools" in result["capabilities"], result
    assert result["ttlMs"] >= 0 and result["cacheScope"] in ("public", "private"), result
    return dict(result)


def assert_input_round(sent: list[Any], received: list[Any]) -> str:
    """``ask_name`` took one MRTR round: ``input_required`` with one form elicitation and a
    state; the retry under a new id with the original arguments, the answer under the key asked,
    the state byte for byte; then a complete result. Returns its text."""
    calls = calls_of(sent, "ask_name")
    answers = [answers_to(received, call["id"]) for call in calls]
    assert len(calls) == 2, f"ask_name was not one input round and its retry: {answers}"
    first, retry = calls
    (interim,) = answers[0]
    asked = interim["result"]
    assert asked["resultType"] == "input_required", interim
    ((key, question),) = asked["inputRequests"].items()
    assert question["method"] == "elicitation/create", question
    assert "id" not in question and "jsonrpc" not in question, question
    assert question["params"]["message"] == "Your name?", question
    assert isinstance(asked["requestState"], str) and asked["requestState"], asked
    assert "ttlMs" not in asked and "cacheScope" not in asked, asked
    assert retry["id"] != first["id"]
    assert retry["params"]["arguments"] == first["params"]["arguments"]
    assert retry["params"]["requestState"] == asked["requestState"]
    assert retry["params"]["inputResponses"] == {
        key: {"action": "accept", "content": {"name": "Ada"}}
    }
    (final,) = answers_to(received, retry["id"])
    assert final["result"]["resultType"] == "complete", final
    return text_of(final["result"])


def assert_cancel_silenced(sent: list[Any], received: list[Any], tool: str = "slow") -> Any:
    """The client cancelled the ``tool`` call once with ``notifications/cancelled`` naming it and
    nothing was ever received for that id. Returns the id."""
    (call,) = calls_of(sent, tool)
    cancels = [m for m in sent if isinstance(m, dict) and m.get("method") == CANCELLED_METHOD]
    assert [c["params"]["requestId"] for c in cancels] == [call["id"]], cancels
    assert about(received, call["id"]) == [], about(received, call["id"])
    return call["id"]


def peer_wire(lines: list[dict[str, Any]]) -> tuple[list[Any], list[Any]]:
    return wire(lines, ">>"), wire(lines, "<<")


def typed_text(result: Any) -> str:
    """The text blocks of a typed ``CallToolResult``."""
    return "".join(block.text for block in result.content if block.type == "text")


# -- peer clients against our server -------------------------------------------------------------
def run_against_our_server(
    client: list[str], tmp_path: Path
) -> tuple[list[dict[str, Any]], list[str], dict[int, list[tuple[str, Any]]]]:
    events, tap = tmp_path / "events", tmp_path / "wire"
    lines = run_client(
        client,
        ["--", *SYNC_SERVER_2026],
        STEPS,
        PEER_EVENTS_FILE=str(events),
        PEER_WIRE_FILE=str(tap),
    )
    return lines, read_events(events), server_wire(tap)


def assert_our_server_served(
    lines: list[dict[str, Any]], markers: list[str], written: list[tuple[str, Any]]
) -> None:
    """What every peer client run against our server must show, on both sides of the wire."""
    sent, received = peer_wire(lines)
    (connected,) = of(lines, "connected")
    assert connected["protocolVersion"] == MODERN, connected
    assert connected["serverInfo"]["name"] == "mcp-sync-peer-2026", connected
    assert_spoke_2026(sent, received)
    assert step(lines, 0)[-1]["tools"] == ["echo", "slow", "ask_name"]
    assert text_of(step(lines, 1)[-1]["result"]) == "hello 2026"
    # the handler calls ctx.session.elicit: at 2026 it runs once per round, the client's
    # elicitation callback once, and the same call returns the answer
    assert assert_input_round(sent, received) == "accept:Ada"
    assert [e["params"]["message"] for e in of(lines, "elicitation")] == ["Your name?"]
    assert markers.count("RAN ask_name") == 2 and markers.count("ASKED ask_name accept") == 1, (
        markers
    )
    # the cancel reached the handler (it carried on: progress, a log, a result) and nothing of it
    # was written, neither seen by the client nor on our server's stdout
    slow_id = assert_cancel_silenced(sent, received)
    assert markers.index("STARTED slow c1") < markers.index("CANCELLED slow c1"), markers
    assert "FINISHED slow c1" not in markers, markers
    ours = [msg for direction, msg in written if direction == ">>"]
    assert about(ours, slow_id) == [], about(ours, slow_id)
    assert [m for m in ours if "method" in m] == [], ours  # 38a: no request, no notification
    assert text_of(step(lines, 5)[-1]["result"]) == "after cancel"
    assert [done["ok"] for done in of(lines, "done")] == [True]


def test_the_official_client_in_its_default_mode_speaks_2026_with_our_server(
    tmp_path: Path,
) -> None:
    lines, markers, by_pid = run_against_our_server(OFFICIAL_CLIENT_2026, tmp_path)
    ((_pid, written),) = by_pid.items()
    assert_our_server_served(lines, markers, written)
    sent, received = peer_wire(lines)
    # mode="auto": the server/discover probe is the first message; our DiscoverResult names both
    # eras, and the client settles on 2026-07-28 on this connection
    probe = sent[0]
    assert probe["method"] == "server/discover", probe
    discovered = assert_discovered(probe, received, "mcp-sync-peer-2026")
    assert "2025-11-25" in discovered["supportedVersions"], discovered
    # the official client cancels without the envelope: accepted all the same
    (cancel,) = [m for m in sent if m.get("method") == CANCELLED_METHOD]
    assert "_meta" not in cancel["params"], cancel
    (cancelled,) = of(step(lines, 3), "cancelled")
    assert cancelled["call_task_cancelled"] is True, cancelled


def test_the_ts_v2_client_pinned_to_2026_speaks_it_with_our_server(tmp_path: Path) -> None:
    lines, markers, by_pid = run_against_our_server(ts_client_2026(), tmp_path)
    # the pinned client probes on a sibling process, then serves the connection from another one
    # that never sees server/discover: its first request is already stamped 2026-07-28
    (_probed, probe_wire), (_served, written) = by_pid.items()
    inbound = [msg for direction, msg in probe_wire if direction == "<<"]
    assert [m["method"] for m in inbound] == ["server/discover"], inbound
    assert_discovered(
        inbound[0],
        [msg for direction, msg in probe_wire if direction == ">>"],
        "mcp-sync-peer-2026",
    )
    served_inbound = [msg for direction, msg in written if direction == "<<"]
    assert served_inbound[0]["method"] == "tools/list", served_inbound[0]
    assert requests_in(served_inbound, "server/discover") == []
    (connected,) = of(lines, "connected")
    assert connected["era"] == "modern" and MODERN in connected["supportedVersions"], connected
    assert_our_server_served(lines, markers, written)
    # the TypeScript client's cancel carries the envelope; the aborted call fails in the client
    sent, _ = peer_wire(lines)
    (cancel,) = [m for m in sent if m.get("method") == CANCELLED_METHOD]
    assert cancel["params"]["_meta"][ENVELOPE_KEYS[0]] == MODERN, cancel
    (failed,) = of(step(lines, 3), "error")
    assert failed["name"] == "SdkError", failed


# -- our client against peer servers -------------------------------------------------------------
@pytest.fixture(params=["official", "typescript"])
def modern_server(request: pytest.FixtureRequest) -> tuple[list[str], str]:
    if request.param == "official":
        return list(OFFICIAL_SERVER_2026), "official-peer-2026"
    return ts_server_2026(), "ts-v2-peer-2026"


def test_our_client_in_its_default_mode_speaks_2026_with_real_servers(
    modern_server: tuple[list[str], str], tmp_path: Path
) -> None:
    command, server_name = modern_server
    events = tmp_path / "events"
    events.write_text("")
    asked: list[dict[str, Any]] = []
    asked_lock = threading.Lock()

    def elicit(params: dict[str, Any], ctx: Context) -> dict[str, Any]:
        with asked_lock:
            asked.append(params)
        return {"action": "accept", "content": {"name": "Ada"}}

    tap = WireRecorder(
        SubprocessTransport(command, env=user_env(PEER_EVENTS_FILE=str(events)), stderr="discard")
    )
    try:
        client = Client.connect(
            tap,
            elicitation_handler=elicit,
            init_timeout=LIMIT,
            discover_timeout=LIMIT,
            default_timeout=LIMIT,
        )
    except BaseException:
        tap.close()  # the client did not take the transport: stop the server process here
        raise
    with client:
        assert (client.era, client.protocol_version) == (Era.MODERN, MODERN)
        assert client.server_info.name == server_name
        assert [tool.name for tool in client.list_tools()] == ["echo", "slow", "ask_name"]
        assert typed_text(client.call_tool("echo", {"text": "hello 2026"})) == "hello 2026"
        answered = client.call_tool("ask_name", {})
        slow = client.call_tool_future("slow", {"seconds": 60, "tag": "c1"})
        wait_for_marker(events, "STARTED slow c1", LIMIT)
        assert slow.cancel("enough") is True
        wait_for_marker(events, "CANCELLED slow c1", LIMIT)  # the server's handler saw it
        with pytest.raises(Cancelled):
            slow.result(LIMIT)
        after = client.call_tool("echo", {"text": "after cancel"})
    sent, received = tap.snapshot()
    assert_spoke_2026(sent, received, capabilities={"elicitation": {"form": {}, "url": {}}})
    probe = requests_in(sent)[0]
    assert probe["method"] == "server/discover", probe
    assert_discovered(probe, received, server_name)
    # the MRTR driver called our elicitation handler once, with the server's question
    assert assert_input_round(sent, received) == "accept:Ada state:asked"
    assert typed_text(answered) == "accept:Ada state:asked"
    assert [params["message"] for params in asked] == ["Your name?"]
    assert_cancel_silenced(sent, received)
    assert "FINISHED slow c1" not in read_events(events)
    assert typed_text(after) == "after cancel"
