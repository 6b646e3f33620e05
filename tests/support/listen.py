"""Shared pieces of the subscriptions/listen tests."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

from mcp_sync import Endpoint, Server
from mcp_sync.listen import ListenRouter
from support.interop import read_events
from support.paths import PEERS, PYTHON
from support.processes import Proc
from support.waiting import PEER_WAIT, wait_until

TAG = "io.modelcontextprotocol/subscriptionId"
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "0"},
}
"""A 2026-07-28 request envelope, stamped by hand."""


def closing_ids(messages: list[dict[str, Any]]) -> list[Any]:
    """The ids of the listen requests that ``messages`` (what a server wrote) end with the
    graceful result (``resultType: complete`` tagged with its own id; other ``_meta`` members,
    such as the server's identity, may be there too); fails on any other response."""
    ids = []
    for message in messages:
        if "method" in message:
            continue
        assert set(message) == {"jsonrpc", "id", "result"}, message
        result = message["result"]
        assert result["resultType"] == "complete" and set(result) <= {"resultType", "_meta"}, (
            message
        )
        assert result["_meta"][TAG] == message["id"], message
        ids.append(message["id"])
    return ids


def make_server(name: str = "listen-test", **options: Any) -> Server:
    """A server with one tool and one resource (``file:///a``)."""
    server = Server(name, **options)

    @server.tool()
    def echo(text: str) -> str:
        return text

    @server.resource("file:///a")
    def a() -> str:
        return "a"

    return server


def tools_only_server() -> Server:
    """A server that declares tools only (no prompts, no resources)."""
    server = Server("tools-only")

    @server.tool()
    def echo(text: str) -> str:
        return text

    return server


def routed_endpoint(transport: Any) -> tuple[Endpoint, ListenRouter]:
    """A started client endpoint whose notifications go through a :class:`ListenRouter`."""
    holder: dict[str, ListenRouter] = {}
    endpoint = Endpoint(
        transport, notification_handler=lambda n: holder["router"].route(n), name="client"
    )
    router = holder["router"] = ListenRouter(endpoint)
    endpoint.start()
    return endpoint, router


# -- a foreign client against tests/peers/listen_server.py ----------------------------------------
LISTEN_SERVER = [PYTHON, str(PEERS / "listen_server.py")]
"""The stdio server whose signals raise changes (see its docstring)."""


def peer_events(proc: Proc) -> list[dict[str, Any]]:
    """The JSON events a peer client printed so far, one per line."""
    return [json.loads(line) for line in proc.text("stdout").splitlines() if line.strip()]


def drive_two_listens(
    client: Proc, marks: Path, event_fragment: tuple[str, str]
) -> list[dict[str, Any]]:
    """Drive a peer client running two listen steps against :data:`LISTEN_SERVER`: after the
    first acknowledgement raise a tools change (SIGUSR1) and a resource update (SIGUSR2),
    each once the previous event was printed (``event_fragment``: a fragment of each
    printed event line); after the second acknowledgement stop the server (SIGTERM). Returns
    the client's events once it exited with 0."""
    client.wait_for("stdout", '"acknowledged"', PEER_WAIT)
    # the last server started (a client may probe on a sibling process first)
    pid = int([line for line in read_events(marks) if line.startswith("READY ")][-1].split()[1])
    os.kill(pid, signal.SIGUSR1)
    client.wait_for("stdout", event_fragment[0], PEER_WAIT)
    os.kill(pid, signal.SIGUSR2)
    client.wait_for("stdout", event_fragment[1], PEER_WAIT)
    wait_until(
        lambda: sum(e["event"] == "acknowledged" for e in peer_events(client)) == 2,
        "the second acknowledgement",
        timeout=PEER_WAIT,
    )
    os.kill(pid, signal.SIGTERM)  # the open stream gets the graceful result
    finished = client.finish(PEER_WAIT)
    assert finished.code == 0, finished.describe()
    return peer_events(client)


def assert_listen_wire(events: list[dict[str, Any]], first: Any, second: Any) -> None:
    """What a peer client recorded on the wire for two listens: every server frame tagged,
    each stream's acknowledgement first, no cancel from the server, the client's cancel for
    ``first`` only, and the graceful result for ``second`` only."""
    from_server = [e["msg"] for e in events if e["event"] == "wire" and e["dir"] == "<<"]
    to_server = [e["msg"] for e in events if e["event"] == "wire" and e["dir"] == ">>"]
    notes = [m for m in from_server if "method" in m]
    assert notes and all(m["params"]["_meta"][TAG] in (first, second) for m in notes), notes
    for sid in (first, second):
        mine = [m["method"] for m in notes if m["params"]["_meta"][TAG] == sid]
        assert mine[0] == "notifications/subscriptions/acknowledged", mine
    assert not any(m["method"] == "notifications/cancelled" for m in notes)
    cancels = [
        m["params"]["requestId"] for m in to_server if m.get("method") == "notifications/cancelled"
    ]
    assert cancels == [first]
    assert closing_ids(from_server) == [second]
