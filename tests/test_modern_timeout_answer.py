"""A tool timeout's early answer (Endpoint.respond, while the handler still runs) is a
2026-07-28 result like any other: it goes through the same stamp."""

from __future__ import annotations

import threading

from support.endpoints import RawPeer
from support.waiting import WAIT

from mcp_sync import Context, Server, memory_pair

META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def test_an_answer_given_before_the_handler_returns_is_stamped_too():
    release = threading.Event()
    server = Server("dual", "1.0")

    @server.tool(timeout=0.05)
    def sluggish(ctx: Context) -> str:
        ctx.wait(WAIT)
        release.set()
        return "late"

    a, b = memory_pair()
    handle = server.serve_in_thread(b, max_workers=1)
    peer = RawPeer(a)
    try:
        call = {"name": "sluggish", "arguments": {}, "_meta": META}
        peer.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call})
        answer = peer.recv()
        assert release.wait(WAIT)
    finally:
        handle.stop(WAIT)
        a.close()
    result = answer["result"]
    assert result["isError"] is True and "timed out" in result["content"][0]["text"]
    assert result["resultType"] == "complete"
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"] == {
        "name": "dual",
        "version": "1.0",
    }
    assert peer.drain() == []  # the handler's late value was never written
