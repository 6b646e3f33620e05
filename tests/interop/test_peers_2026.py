"""The 2026-07-28 peers work against each other: the TypeScript SDK v2 client against the
official Python SDK's server and the official Python client against the TypeScript SDK v2
server, each over stdio and Streamable HTTP, all speaking 2026-07-28.

These tests prove the peer scripts (``tests/node/ts_*_2026.mjs``,
``tests/peers/official_*_2026.py``) before mcp_sync is tested against them: a plain call, a
multi round-trip (MRTR) elicitation round and a cancellation each way, judged on the wire each
client recorded and on the markers the server's handler wrote. Without
``tests/node/node_modules`` they skip, unless ``CI`` is set (see :mod:`node_peers`).
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from support.node import node_package
from support.peers_2026 import (
    LIMIT,
    MODERN,
    OFFICIAL_CLIENT_2026,
    OFFICIAL_SERVER_2026,
    STEPS,
    call_requests,
    node22,
    of,
    requests,
    response,
    step,
    text_of,
    ts_client_2026,
    ts_server_2026,
    wire,
)
from support.peers_2026 import run_client as run_steps
from support.processes import Proc, run, user_env

pytestmark = pytest.mark.interop


@contextmanager
def http_server(command: list[str], events: Path) -> Iterator[str]:
    """Run a peer server with ``--http``; its URL (it announces it on stderr once listening)."""
    with Proc([*command, "--http"], env=user_env(PEER_EVENTS_FILE=str(events))) as server:
        yield server.wait_for("stderr", "serving at http://", LIMIT).split(" at ", 1)[1].strip()
        server.send_signal(signal.SIGINT)
        server.finish(LIMIT)


def run_client(client: list[str], target: list[str], events: Path) -> list[dict[str, Any]]:
    """Run a client CLI with :data:`STEPS` against ``target``; its events, one per line."""
    return run_steps(client, target, STEPS, PEER_EVENTS_FILE=str(events))


def assert_spoke_2026(lines: list[dict[str, Any]]) -> None:
    """Every request carried the 2026 envelope; every result has ``resultType``."""
    (connected,) = of(lines, "connected")
    assert connected["protocolVersion"] == MODERN, connected
    sent = [m for m in wire(lines, ">>") if "id" in m]
    assert sent, lines
    for message in sent:
        meta = message["params"]["_meta"]
        assert meta["io.modelcontextprotocol/protocolVersion"] == MODERN, message
        assert "io.modelcontextprotocol/clientCapabilities" in meta, message
        assert message["method"] != "initialize", message
    for message in wire(lines, "<<"):
        assert "result" in message and "resultType" in message["result"], message


def assert_echo_and_mrtr(lines: list[dict[str, Any]]) -> None:
    assert step(lines, 0)[-1]["tools"] == ["echo", "slow", "ask_name"]
    assert text_of(step(lines, 1)[-1]["result"]) == "hello 2026"
    # MRTR: input_required with one elicitation and a requestState, retried under a new id with
    # the answer and the state echoed byte for byte; the elicitation handler ran once
    first, retry = call_requests(lines, "ask_name")
    (interim,) = response(lines, first["id"])
    assert interim["result"]["resultType"] == "input_required", interim
    assert interim["result"]["inputRequests"]["name"]["method"] == "elicitation/create", interim
    assert retry["id"] != first["id"]
    assert retry["params"]["requestState"] == interim["result"]["requestState"]
    assert retry["params"]["inputResponses"] == {
        "name": {"action": "accept", "content": {"name": "Ada"}}
    }
    assert [e["params"]["message"] for e in of(lines, "elicitation")] == ["Your name?"]
    (final,) = response(lines, retry["id"])
    assert final["result"]["resultType"] == "complete"
    assert text_of(step(lines, 2)[-1]["result"]) == "accept:Ada state:asked"


def assert_cancelled(lines: list[dict[str, Any]], events: Path, *, notified: bool = True) -> None:
    """The client cancelled the slow call -- by ``notifications/cancelled`` (stdio) or only by
    closing its response stream (HTTP, ``notified=False``) -- the server's handler saw it, and
    nothing was ever answered for that id; the next call still worked."""
    (slow,) = call_requests(lines, "slow")
    cancels = [m for m in wire(lines, ">>") if m.get("method") == "notifications/cancelled"]
    assert [c["params"]["requestId"] for c in cancels] == ([slow["id"]] if notified else []), (
        cancels
    )
    assert response(lines, slow["id"]) == []
    assert "FINISHED slow c1" not in events.read_text(encoding="utf-8")
    assert of(lines, "marker")[-1]["marker"] == "CANCELLED slow c1"
    assert text_of(step(lines, 5)[-1]["result"]) == "after cancel"
    assert [done["ok"] for done in of(lines, "done")] == [True]


def test_ts_v2_client_against_the_official_python_server(tmp_path: Path) -> None:
    events = tmp_path / "events"
    lines = run_client(ts_client_2026(), ["--", *OFFICIAL_SERVER_2026], events)
    assert_spoke_2026(lines)
    (connected,) = of(lines, "connected")
    assert connected["era"] == "modern"
    assert connected["serverInfo"]["name"] == "official-peer-2026"
    assert MODERN in connected["supportedVersions"]
    # the pinned client probes on a sibling process: this connection's wire never carries
    # server/discover, and it begins with the envelope-stamped tools/list
    assert requests(lines, "server/discover") == []
    assert wire(lines, ">>")[0]["method"] == "tools/list"
    assert_echo_and_mrtr(lines)
    assert_cancelled(lines, events)
    # the abort surfaces in the TypeScript client as an SdkError of its own
    (failed,) = of(step(lines, 3), "error")
    assert failed["name"] == "SdkError", failed


def test_official_python_client_against_the_ts_v2_server(tmp_path: Path) -> None:
    events = tmp_path / "events"
    lines = run_client(OFFICIAL_CLIENT_2026, ["--", *ts_server_2026()], events)
    assert_spoke_2026(lines)
    (connected,) = of(lines, "connected")
    assert connected["serverInfo"]["name"] == "ts-v2-peer-2026"
    # mode="auto" probes on this very connection, first of all, and settles on 2026-07-28
    (probe,) = requests(lines, "server/discover")
    assert wire(lines, ">>")[0] == probe
    (discovered,) = response(lines, probe["id"])
    assert discovered["result"]["supportedVersions"] == [MODERN]
    assert_echo_and_mrtr(lines)
    assert_cancelled(lines, events)
    (cancelled,) = of(step(lines, 3), "cancelled")
    assert cancelled["call_task_cancelled"] is True, cancelled


def test_ts_v2_client_against_the_official_python_server_over_http(tmp_path: Path) -> None:
    events = tmp_path / "events"
    client = ts_client_2026()
    with http_server(OFFICIAL_SERVER_2026, events) as url:
        lines = run_client(client, ["--url", url], events)
    assert_spoke_2026(lines)
    # over HTTP the pinned client probes on the connection itself (one POST), first of all
    (probe,) = requests(lines, "server/discover")
    assert wire(lines, ">>")[0] == probe
    assert response(lines, probe["id"])[0]["result"]["supportedVersions"] == [MODERN]
    assert_echo_and_mrtr(lines)
    # at 2026 over HTTP the abort closes the call's response stream and POSTs nothing
    assert_cancelled(lines, events, notified=False)


def test_official_python_client_against_the_ts_v2_server_over_http(tmp_path: Path) -> None:
    events = tmp_path / "events"
    with http_server(ts_server_2026(), events) as url:
        lines = run_client(OFFICIAL_CLIENT_2026, ["--url", url], events)
    assert_spoke_2026(lines)
    assert requests(lines, "server/discover") == [wire(lines, ">>")[0]]
    assert_echo_and_mrtr(lines)
    # the SDK's session writes notifications/cancelled, and its HTTP transport turns that into
    # closing the call's response stream: the server saw the close and no notification POST
    (slow,) = call_requests(lines, "slow")
    cancels = [m for m in wire(lines, ">>") if m.get("method") == "notifications/cancelled"]
    assert [c["params"]["requestId"] for c in cancels] == [slow["id"]], cancels
    assert response(lines, slow["id"]) == []
    markers = events.read_text(encoding="utf-8").splitlines()
    assert "HTTP closed by the client tools/call" in markers, markers
    assert not [m for m in markers if m.startswith("HTTP POST notifications/")], markers
    assert markers.index("STARTED slow c1") < markers.index("CANCELLED slow c1"), markers
    assert "FINISHED slow c1" not in markers, markers
    assert text_of(step(lines, 5)[-1]["result"]) == "after cancel"


def test_the_pinned_conformance_suite_lists_2026_server_scenarios_on_the_pinned_node() -> None:
    """The lock installs a conformance release that has 2026-07-28 scenarios, and the Node 22
    it needs runs it (the machine's Node 20 cannot: it lacks ``fs.globSync``)."""
    suite = node_package("@modelcontextprotocol/conformance") / "dist" / "index.js"
    finished = run([node22(), str(suite), "list", "--server", "--spec-version", MODERN], LIMIT)
    assert finished.code == 0, finished.describe()
    for scenario in (
        "server-stateless",
        "input-required-result-basic-elicitation",
        "http-header-validation",
    ):
        assert f"- {scenario} [" in finished.stdout, finished.describe()
