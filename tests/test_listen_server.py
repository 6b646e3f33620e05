"""subscriptions/listen on the server (2026-07-28), driven by hand over a memory pair."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from support.endpoints import RawPeer
from support.listen import ENVELOPE, TAG, closing_ids, make_server, tools_only_server
from support.waiting import WAIT, wait_until

from mcp_sync import Server
from mcp_sync.server.bus import InProcessBus
from mcp_sync.transports import memory_pair


@contextmanager
def connected(server: Server) -> Iterator[tuple[Any, RawPeer]]:
    a, b = memory_pair()
    session = server.connect(b)
    peer = RawPeer(a)
    try:
        yield session, peer
    finally:
        session.close(grace=WAIT)
        a.close()


def listen(peer: RawPeer, request_id: Any, **wanted: Any) -> None:
    peer.send(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "subscriptions/listen",
            "params": {"_meta": ENVELOPE, "notifications": wanted},
        }
    )


def cancel(peer: RawPeer, request_id: Any) -> None:
    peer.send(
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": request_id}}
    )


def test_acknowledgement_first_with_the_honoured_subset() -> None:
    server = tools_only_server()
    with connected(server) as (_session, peer):
        listen(
            peer,
            "L1",
            toolsListChanged=True,
            promptsListChanged=True,
            resourcesListChanged=True,
            resourceSubscriptions=["file:///x"],
        )
        ack = peer.recv()
        assert ack == {
            "jsonrpc": "2.0",
            "method": "notifications/subscriptions/acknowledged",
            "params": {"notifications": {"toolsListChanged": True}, "_meta": {TAG: "L1"}},
        }


def test_frames_are_tagged_and_only_what_was_asked_for() -> None:
    server = make_server()
    with connected(server) as (_session, peer):
        listen(peer, 7, toolsListChanged=True, resourceSubscriptions=["file:///a"])
        ack = peer.recv()
        assert ack["params"] == {
            "notifications": {"toolsListChanged": True, "resourceSubscriptions": ["file:///a"]},
            "_meta": {TAG: 7},
        }
        # changes it did not ask for come first: the bus delivers in order, so the next
        # frame proves they were not sent
        server.notify_list_changed("prompts")
        server.notify_resource_updated("file:///other")
        server.notify_resource_updated("file:///a")
        assert peer.recv() == {
            "jsonrpc": "2.0",
            "method": "notifications/resources/updated",
            "params": {"uri": "file:///a", "_meta": {TAG: 7}},
        }
        server.notify_list_changed("resources")
        server.add_tool(lambda: "x", name="later")
        assert peer.recv() == {
            "jsonrpc": "2.0",
            "method": "notifications/tools/list_changed",
            "params": {"_meta": {TAG: 7}},
        }


def test_cancel_ends_only_that_subscription_and_nothing_more_is_sent_for_it() -> None:
    server = make_server()
    with connected(server) as (session, peer):
        listen(peer, 1, toolsListChanged=True)
        listen(peer, 2, toolsListChanged=True)
        acks = [peer.recv(), peer.recv()]
        assert sorted(m["params"]["_meta"][TAG] for m in acks) == [1, 2]
        cancel(peer, 1)
        wait_until(
            lambda: [s.id for s in server.listens.streams(session)] == [2], "listen 1 not ended"
        )
        server.notify_list_changed("tools")
        frame = peer.recv()
        assert frame["method"] == "notifications/tools/list_changed"
        assert frame["params"]["_meta"] == {TAG: 2}
        session.close(grace=WAIT)
        rest = peer.drain()
    assert closing_ids(rest) == [2] and len(rest) == 1


def test_two_subscriptions_receive_their_own_kinds() -> None:
    server = make_server()
    with connected(server) as (_session, peer):
        listen(peer, "tools", toolsListChanged=True)
        listen(peer, "res", resourceSubscriptions=["file:///a"])
        assert {peer.recv()["params"]["_meta"][TAG] for _ in range(2)} == {"tools", "res"}
        server.notify_resource_updated("file:///a")
        server.notify_list_changed("tools")
        first, second = peer.recv(), peer.recv()
        assert (first["method"], first["params"]["_meta"][TAG]) == (
            "notifications/resources/updated",
            "res",
        )
        assert (second["method"], second["params"]["_meta"][TAG]) == (
            "notifications/tools/list_changed",
            "tools",
        )


def test_an_open_subscription_holds_no_thread() -> None:
    server = make_server(max_workers=1)
    with connected(server) as (session, peer):
        listen(peer, 0, toolsListChanged=True)  # starts the one worker and the bus thread
        peer.recv()
        before = threading.active_count()
        for n in range(1, 11):
            listen(peer, n, toolsListChanged=True)
            assert peer.recv()["params"]["_meta"] == {TAG: n}  # one worker serves them all
        assert threading.active_count() == before
        assert session.endpoint.pool.stats().busy == 0
        assert session.endpoint.in_flight() == (11, 0)  # all eleven requests stay open
        server.notify_list_changed("tools")
        assert sorted(peer.recv()["params"]["_meta"][TAG] for _ in range(11)) == list(range(11))


def test_shutdown_ends_every_subscription_with_the_graceful_result() -> None:
    server = make_server()
    with connected(server) as (session, peer):
        listen(peer, "a", toolsListChanged=True)
        listen(peer, "b", resourceSubscriptions=["file:///a"])
        peer.recv(), peer.recv()
        session.close(grace=WAIT)
        rest = peer.drain()
    assert sorted(closing_ids(rest)) == ["a", "b"] and len(rest) == 2
    assert not any(m.get("method") == "notifications/cancelled" for m in rest)
    assert server.listens.streams() == []


def test_bounded_per_connection_and_per_server() -> None:
    server = make_server(max_subscriptions_per_connection=2, max_subscriptions=3)
    with connected(server) as (_s1, p1), connected(server) as (_s2, p2):
        listen(p1, 1, toolsListChanged=True)
        listen(p1, 2, toolsListChanged=True)
        p1.recv(), p1.recv()
        listen(p1, 3, toolsListChanged=True)
        refused = p1.recv()
        assert refused["id"] == 3 and refused["error"]["code"] == -32603
        assert refused["error"]["data"] == {"limit": 2, "scope": "connection"}
        listen(p2, 1, toolsListChanged=True)
        p2.recv()
        listen(p2, 2, toolsListChanged=True)
        assert p2.recv()["error"]["data"] == {"limit": 3, "scope": "server"}
        cancel(p1, 1)
        wait_until(lambda: len(server.listens.streams()) == 2, "listen not ended")
        listen(p2, 3, toolsListChanged=True)
        assert p2.recv()["params"]["_meta"] == {TAG: 3}


def test_malformed_filter_is_invalid_params() -> None:
    with connected(make_server()) as (_session, peer):
        peer.send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "subscriptions/listen",
                "params": {"_meta": ENVELOPE},
            }
        )
        assert peer.recv()["error"]["code"] == -32602
        listen(peer, 2, toolsListChanged="yes")
        assert peer.recv()["error"]["code"] == -32602


def test_a_2025_session_has_no_listen_and_keeps_resources_subscribe() -> None:
    server = make_server()
    with connected(server) as (_session, peer):
        peer.send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "0"},
                },
            }
        )
        assert peer.recv()["result"]["protocolVersion"] == "2025-11-25"
        peer.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        peer.send(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "subscriptions/listen",
                "params": {"notifications": {"toolsListChanged": True}},
            }
        )
        refused = peer.recv()
        assert refused["error"]["code"] == -32601 and "2026-07-28" in refused["error"]["message"]
        peer.send(
            {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "resources/subscribe",
                "params": {"uri": "file:///a"},
            }
        )
        assert peer.recv() == {"jsonrpc": "2.0", "id": 3, "result": {}}
        server.notify_resource_updated("file:///a")
        assert peer.recv() == {
            "jsonrpc": "2.0",
            "method": "notifications/resources/updated",
            "params": {"uri": "file:///a"},
        }
        server.notify_list_changed("tools")
        assert peer.recv() == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}


def test_a_change_raised_by_another_server_on_the_same_bus_reaches_the_listener() -> None:
    """Two Server objects sharing one bus stand for two worker processes sharing Redis."""
    bus = InProcessBus()
    try:
        serving, raising = make_server(bus=bus), make_server(bus=bus)
        with connected(serving) as (_session, peer):
            listen(peer, 1, toolsListChanged=True)
            peer.recv()
            raising.notify_list_changed("tools")
            assert peer.recv()["params"] == {"_meta": {TAG: 1}}
    finally:
        bus.close()


def test_no_bus_thread_once_the_last_subscription_ended() -> None:
    server = make_server()
    with connected(server) as (_session, peer):
        listen(peer, 1, toolsListChanged=True)
        peer.recv()
        cancel(peer, 1)
        wait_until(lambda: not server.listens.streams(), "listen not ended")
        assert not any(t.name.startswith("mcp_sync-bus") for t in threading.enumerate())
        listen(peer, 2, toolsListChanged=True)  # and it comes back for the next one
        assert peer.recv()["params"]["_meta"] == {TAG: 2}
        server.notify_list_changed("tools")
        assert peer.recv()["params"]["_meta"] == {TAG: 2}


@pytest.mark.parametrize("when", ["before the ack", "after the ack"])
def test_cancel_in_any_order_leaves_no_stream(when: str) -> None:
    server = make_server()
    with connected(server) as (session, peer):
        listen(peer, 1, toolsListChanged=True)
        if when == "after the ack":
            peer.recv()
        cancel(peer, 1)
        wait_until(lambda: not server.listens.streams(), "listen not ended")
        assert session.endpoint.in_flight() == (0, 0)


def test_race_of_changes_listens_and_cancels(fast_switching: None) -> None:
    """Changes raised without pause while listens open and are cancelled at once or after
    their acknowledgement: each stream's first frame is its acknowledgement, no listen is
    answered, and every stream and bus thread is gone at the end."""
    server = make_server()
    stop = threading.Event()

    def raise_changes() -> None:
        while not stop.is_set():
            server.notify_list_changed("tools")

    a, b = memory_pair()
    session = server.connect(b)
    peer = RawPeer(a)
    frames: list[dict[str, Any]] = []
    publisher = threading.Thread(target=raise_changes, name="publisher")
    publisher.start()
    try:
        for n in range(60):
            listen(peer, n, toolsListChanged=True)
            if n % 2:
                while True:  # until its acknowledgement
                    frames.append(peer.recv())
                    if (
                        frames[-1].get("method", "").endswith("acknowledged")
                        and frames[-1]["params"]["_meta"][TAG] == n
                    ):
                        break
            cancel(peer, n)
        wait_until(lambda: not server.listens.streams(), "streams left after their cancels")
    finally:
        stop.set()
        publisher.join(WAIT)
        session.close(grace=WAIT)
        a.close()
    frames += peer.drain()
    first: dict[Any, str] = {}
    for frame in frames:
        assert "method" in frame, f"a listen was answered: {frame}"
        first.setdefault(frame["params"]["_meta"][TAG], frame["method"])
    assert set(first.values()) == {"notifications/subscriptions/acknowledged"}
    assert {n for n in range(60) if n % 2} <= set(first)
    assert session.endpoint.in_flight() == (0, 0)


def test_registrations_before_the_first_connection_are_not_published() -> None:
    server = make_server()  # registers a tool and a resource
    assert server.listens.bus.stats().published == 0
    with connected(server) as (_session, peer):
        listen(peer, 1, toolsListChanged=True)
        peer.recv()
        server.add_tool(lambda: "x", name="later")  # now a change
        assert peer.recv()["method"] == "notifications/tools/list_changed"
    assert server.listens.bus.stats().published == 1
