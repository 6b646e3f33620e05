"""Dual-era serving on one connection, in process: a ServerSession fed raw messages by hand.

Requests are admitted in arrival order on the reader thread, so the first exchange pins the
era even when requests are pipelined; the handlers run later, on the workers.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from support.endpoints import RawPeer
from support.waiting import WAIT

from mcp_sync import Context, Server, memory_pair
from mcp_sync.lifecycle import Era, State

MODERN = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {"roots": {}},
}
INIT = {
    "protocolVersion": "2025-11-25",
    "capabilities": {},
    "clientInfo": {"name": "old", "version": "1"},
}


@contextmanager
def served(server: Server) -> Iterator[tuple[RawPeer, Any]]:
    a, b = memory_pair()
    handle = server.serve_in_thread(b, max_workers=1)
    try:
        yield RawPeer(a), handle.session
    finally:
        handle.stop(WAIT)
        a.close()


def probe_server(release: threading.Event | None = None) -> Server:
    server = Server("dual", "1.0")

    @server.tool()
    def echo(text: str) -> str:
        return text

    @server.tool()
    def hold(ctx: Context) -> str:
        assert release is not None and release.wait(WAIT)
        return ctx.era.value

    def roots_anyway(session: Any, request: Any, token: Any) -> dict:
        session.submit("roots/list")  # refused at 2026-07-28
        return {}

    server.add_method("x/roots", roots_anyway)
    return server


def send(peer: RawPeer, request_id: Any, method: str, params: dict | None = None) -> None:
    peer.send(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": method,
            **({"params": params} if params is not None else {}),
        }
    )


def by_id(peer: RawPeer, count: int) -> dict[Any, dict]:
    return {message["id"]: message for message in (peer.recv() for _ in range(count))}


def test_pipelined_initialize_then_envelope_pins_the_handshake_era():
    release = threading.Event()
    with served(probe_server(release)) as (peer, session):
        send(peer, 0, "initialize", INIT)
        send(peer, 1, "tools/list", {"_meta": META})
        send(peer, 2, "tools/list", {"_meta": META})
        # refused at admission, before the initialize handler even ran: in arrival order
        refused = by_id(peer, 3)
        assert refused[1]["error"]["code"] == -32600 and refused[2]["error"]["code"] == -32600
        assert refused[0]["result"]["protocolVersion"] == "2025-11-25"
        assert session.lifecycle.era is Era.HANDSHAKE


def test_pipelined_envelope_then_initialize_pins_the_modern_era():
    release = threading.Event()
    with served(probe_server(release)) as (peer, session):
        send(peer, 1, "tools/call", {"name": "hold", "arguments": {}, "_meta": META})
        send(peer, 0, "initialize", INIT)
        # the one worker is busy holding: the refusal came from admission, on the reader
        refused = peer.recv()
        assert refused["id"] == 0 and refused["error"]["code"] == -32022
        assert refused["error"]["data"] == {"supported": [MODERN], "requested": "2025-11-25"}
        release.set()
        answer = peer.recv()
        assert answer["id"] == 1 and answer["result"]["content"][0]["text"] == "modern"
        assert session.lifecycle.state is State.MODERN


def test_discover_does_not_pin_and_a_bare_ping_is_answered_until_a_pin():
    with served(probe_server()) as (peer, session):
        send(peer, 1, "server/discover", {"_meta": META})
        send(peer, 2, "ping")
        answers = by_id(peer, 2)
        assert MODERN in answers[1]["result"]["supportedVersions"] and answers[2]["result"] == {}
        assert session.lifecycle.era is None
        send(peer, 3, "tools/list", {"_meta": META})
        assert peer.recv()["result"]["resultType"] == "complete"
        send(peer, 4, "ping")  # pinned to 2026-07-28 now: no envelope, no ping
        assert peer.recv()["error"]["code"] == -32602
        send(peer, 5, "ping", {"_meta": META})
        assert peer.recv()["error"]["code"] == -32601


def test_no_request_and_no_session_wide_notification_at_2026():
    server = probe_server()
    with served(server) as (peer, session):
        send(peer, 1, "x/roots", {"_meta": META})
        refused = peer.recv()
        assert refused["id"] == 1 and "no requests to the client" in refused["error"]["message"]
        # what a 2025 session gets unasked -- list changes, forwarded log records -- a
        # 2026-07-28 connection does not
        server.add_tool(lambda: "x", name="late")
        handler = server.logging_handler()
        logger = logging.getLogger("dual-era-test")
        logger.addHandler(handler)
        try:
            logger.error("not for a 2026-07-28 client")
        finally:
            logger.removeHandler(handler)
        send(peer, 2, "tools/call", {"name": "echo", "arguments": {"text": "last"}, "_meta": META})
        assert peer.recv()["id"] == 2
        assert session.endpoint.stats().inbound_in_flight == 0
    assert peer.drain() == []
