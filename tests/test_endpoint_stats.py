"""Endpoint.stats() and Client.stats(): what a running service can see of one connection.

Before the change neither method existed; ``in_flight()`` (kept, and used by the HTTP app)
could not tell queued handlers from running ones.
"""

from __future__ import annotations

import dataclasses
import threading

import pytest
from support.endpoints import Blocker, endpoint_pair, raw_server
from support.sessions import connected, holding_server
from support.waiting import WAIT, wait_until

from mcp_sync.endpoint import EndpointStats
from mcp_sync.workers import MAX_QUEUED_CALLBACKS


def test_queued_and_running_inbound_requests_and_outbound_calls_are_counted():
    blocker = Blocker()
    with endpoint_pair({"block": blocker}, server_workers=1) as pair:
        calls = [pair.client.submit("block", {"n": n}) for n in range(3)]
        blocker.wait_started(1)
        wait_until(lambda: pair.server.stats().inbound_in_flight == 3, "three requests registered")
        stats = pair.server.stats()
        assert (stats.inbound_queued, stats.inbound_running, stats.outbound_in_flight) == (2, 1, 0)
        assert pair.client.stats().outbound_in_flight == 3
        assert pair.server.in_flight() == (3, 0)  # the older view still works
        calls[2].cancel("enough")  # cancelled while queued: it never starts
        wait_until(
            lambda: pair.server.stats().inbound_queued == 1,
            "the cancelled request to leave the queue",
        )
        blocker.release_all()
        calls[0].result(WAIT)
        blocker.wait_started(2)
        blocker.release_all()
        calls[1].result(WAIT)
        wait_until(lambda: pair.server.stats().inbound_in_flight == 0, "all requests to end")
        final = pair.server.stats()
        assert (final.inbound_queued, final.inbound_running) == (0, 0)
        assert pair.client.stats().outbound_in_flight == 0


def test_dropped_messages_by_reason_and_a_frozen_snapshot():
    with raw_server() as s:
        s.peer.send({"jsonrpc": "2.0", "id": 99, "result": {}})  # a response to nothing
        s.peer.send(
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5}}
        )
        s.peer.send({"jsonrpc": "2.0", "id": 1, "method": "ping"})
        s.peer.recv()  # the ping's answer: everything before it was processed
        stats = s.server.stats()
        assert stats.dropped["response to an unknown id"] == 1
        assert stats.dropped["cancellation of an unknown or finished request"] == 1
        assert stats.callback_queue_limit == MAX_QUEUED_CALLBACKS
        assert stats.callback_queue_depth == 0 and not stats.closed
        with pytest.raises(dataclasses.FrozenInstanceError):
            stats.inbound_running = 3  # type: ignore[misc]
        with pytest.raises(TypeError):
            stats.dropped["x"] = 1  # type: ignore[index]
        s.peer.send({"jsonrpc": "2.0", "id": 98, "result": {}})
        s.peer.send({"jsonrpc": "2.0", "id": 2, "method": "ping"})
        s.peer.recv()
        assert stats.dropped["response to an unknown id"] == 1, "a snapshot must not change"
        assert s.server.stats().dropped["response to an unknown id"] == 2
    assert s.server.stats().closed


def test_client_stats_show_a_running_tool_call_and_the_server_side_agrees():
    release = threading.Event()
    server, started = holding_server("stats", release)
    with connected(server) as conn:
        pending = conn.client.call_tool_future("hold")
        assert started.wait(WAIT)
        assert isinstance(conn.client.stats(), EndpointStats)
        assert conn.client.stats().outbound_in_flight == 1
        server_side = conn.handle.session.endpoint.stats()
        assert (server_side.inbound_running, server_side.inbound_queued) == (1, 0)
        release.set()
        pending.result(WAIT)
        assert conn.client.stats().outbound_in_flight == 0


def test_dropped_reasons_do_not_grow_with_what_the_peer_sends():
    with raw_server() as s:
        for n in range(50):
            s.peer.send(f"not json {n} " + "x" * n)
            s.peer.recv()  # each gets its -32700
        assert s.server.stats().dropped == {"parse error": 50}
