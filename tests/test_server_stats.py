"""Server.stats(): sessions, requests in flight per direction, queued and running handlers,
over connections that each have a pool of their own (memory transports)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from support.sessions import connected
from support.waiting import WAIT, wait_until

from mcp_sync import Context, Server, ServerStats


def test_stats_sum_over_sessions_and_their_pools():
    server = Server("stats")
    started = {name: threading.Event() for name in ("a", "b", "queued")}
    release = threading.Event()
    asked = threading.Event()

    @server.tool()
    def hold(tag: str, ctx: Context) -> str:
        """Block until released; ``b`` until cancelled."""
        started[tag].set()
        if tag == "b":
            ctx.wait(WAIT)
        else:
            release.wait(WAIT)
        return tag

    @server.tool()
    def ask_roots(ctx: Context) -> int:
        """Ask the client for its roots (an outbound request while the client blocks)."""
        return len(ctx.session.list_roots(timeout=WAIT))

    def roots() -> list[Any]:
        asked.set()
        release.wait(WAIT)
        return []

    assert server.stats() == ServerStats(0, 0, 0, 0, 0, 0)
    with (
        connected(server, server_workers=1) as first,
        connected(server, server_workers=2, roots=roots) as second,
    ):
        held = first.client.call_tool_future("hold", {"tag": "a"})
        queued = first.client.call_tool_future("hold", {"tag": "queued"})  # its one worker is busy
        running_b = second.client.call_tool_future("hold", {"tag": "b"})
        roots_call = second.client.call_tool_future("ask_roots")
        assert started["a"].wait(WAIT) and started["b"].wait(WAIT) and asked.wait(WAIT)
        wait_until(lambda: server.stats().handlers_queued == 1, "the queued call")
        stats = server.stats()
        assert stats.sessions == 2
        assert stats.inbound_in_flight == 4  # a, queued, b, ask_roots
        assert stats.outbound_in_flight == 1  # roots/list, waiting on the client
        assert (stats.handlers_queued, stats.handlers_running) == (1, 3)
        with pytest.raises(AttributeError):
            stats.sessions = 0  # type: ignore[misc]

        assert running_b.cancel() is True
        release.set()
        assert held.result(WAIT).content[0].text == "a"
        assert queued.result(WAIT).content[0].text == "queued"
        assert roots_call.result(WAIT).structured_content["result"] == 0
        wait_until(
            lambda: server.stats().inbound_in_flight == 0 and server.stats().handlers_running == 0,
            "the server to finish every request",
        )
        assert server.stats().outbound_in_flight == 0
    assert server.stats().sessions == 0
