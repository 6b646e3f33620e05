"""The client side of subscriptions/listen: acknowledgement, demultiplexing, close, ends."""

from __future__ import annotations

import inspect
import queue
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

import pytest
from support.endpoints import Recorder
from support.listen import ENVELOPE, TAG, make_server, routed_endpoint, tools_only_server
from support.waiting import WAIT, wait_until

from mcp_sync import CapabilityError, Client, ConnectionClosed, McpError, RequestTimeout, Server
from mcp_sync.errors import WaitTimeout
from mcp_sync.listen import ListenEvent, ListenRouter, listen_params
from mcp_sync.transports import memory_pair


@contextmanager
def modern_link(server: Server) -> Iterator[SimpleNamespace]:
    """A client endpoint with a listen router, talking to ``server`` over a memory pair."""
    a, b = memory_pair()
    session = server.connect(b)
    wire = Recorder(a)
    endpoint, router = routed_endpoint(wire)
    try:
        yield SimpleNamespace(router=router, endpoint=endpoint, wire=wire, session=session)
    finally:
        endpoint.close(grace=WAIT)
        session.close(grace=WAIT)


def open_listen(router: ListenRouter, **options: Any) -> Any:
    callback = options.pop("on_notification", None)
    params = {**listen_params(**options), "_meta": ENVELOPE}
    return router.open(params, on_notification=callback, ack_timeout=WAIT)


def test_listen_returns_once_acknowledged_with_the_honoured_subset() -> None:
    server = tools_only_server()
    with modern_link(server) as link:
        sub = open_listen(link.router, tools=True, prompts=True, resources=["file:///x"])
        assert sub.active
        assert sub.requested == {
            "toolsListChanged": True,
            "promptsListChanged": True,
            "resourceSubscriptions": ["file:///x"],
        }
        assert sub.acknowledged == {"toolsListChanged": True}
        sent = [m for m in link.wire.messages() if m.get("method") == "subscriptions/listen"]
        assert [m["id"] for m in sent] == [sub.id]
        sub.close()


def test_two_subscriptions_are_demultiplexed_by_subscription_id() -> None:
    server = make_server()
    received: queue.Queue[ListenEvent] = queue.Queue()
    with modern_link(server) as link:
        tools = open_listen(link.router, tools=True)
        resources = open_listen(link.router, resources=["file:///a"], on_notification=received.put)
        server.notify_resource_updated("file:///a")
        server.notify_list_changed("tools")
        event = tools.next(timeout=WAIT)
        assert event.method == "notifications/tools/list_changed"
        assert event.params["_meta"] == {TAG: tools.id}
        update = received.get(timeout=WAIT)
        assert (update.method, update.uri, update.params["_meta"]) == (
            "notifications/resources/updated",
            "file:///a",
            {TAG: resources.id},
        )
        with pytest.raises(WaitTimeout):
            tools.next(timeout=0)
        assert received.empty()
        with pytest.raises(RuntimeError):
            resources.next(timeout=0)  # a callback subscription has no iterator
        tools.close()
        resources.close()


def test_close_is_idempotent_and_cancels_only_that_subscription() -> None:
    server = make_server()
    with modern_link(server) as link:
        first = open_listen(link.router, tools=True)
        second = open_listen(link.router, tools=True)
        first.close()
        first.close()
        link.wire.wait_for(
            lambda ms: any(m.get("method") == "notifications/cancelled" for m in ms),
            what="the cancel",
        )
        assert [m["params"]["requestId"] for m in link.wire.cancels()] == [first.id]
        wait_until(
            lambda: [s.id for s in server.listens.streams()] == [second.id], "server kept listen 1"
        )
        assert list(first) == []  # ended: iteration stops at once
        server.notify_list_changed("tools")
        assert second.next(timeout=WAIT).params["_meta"] == {TAG: second.id}
        assert link.router.subscriptions() == [second]
        second.close()
        assert len(link.wire.cancels()) == 2


def test_server_shutdown_ends_the_iteration_gracefully() -> None:
    server = make_server()
    with modern_link(server) as link:
        sub = open_listen(link.router, tools=True)
        server.notify_list_changed("tools")
        seen: list[str] = []
        finished = threading.Event()

        def consume() -> None:
            for event in sub:
                seen.append(event.method)
                link.session.close(grace=WAIT)  # the server ends it after the first event
            finished.set()

        consumer = threading.Thread(target=consume)
        consumer.start()
        consumer.join(WAIT)
        assert finished.is_set(), "iteration did not end"
        assert seen == ["notifications/tools/list_changed"]
        assert sub.ended_gracefully and not sub.active
        sub.close()  # nothing left to cancel
        assert link.wire.cancels() == []


def test_connection_loss_raises_from_the_iterator() -> None:
    server = make_server()
    with modern_link(server) as link:
        sub = open_listen(link.router, tools=True)
        link.session.endpoint.close(grace=WAIT)  # abrupt: no closing result
        with pytest.raises(ConnectionClosed):
            sub.next(timeout=WAIT)
        assert not sub.ended_gracefully


def test_a_refused_listen_raises_mcp_error() -> None:
    server = make_server(max_subscriptions_per_connection=1)
    with modern_link(server) as link:
        sub = open_listen(link.router, tools=True)
        with pytest.raises(McpError) as refused:
            open_listen(link.router, tools=True)
        assert refused.value.code == -32603
        assert link.router.subscriptions() == [sub]
        sub.close()


def test_no_acknowledgement_in_time_cancels_the_listen() -> None:
    a, b = memory_pair()
    wire = Recorder(a)
    endpoint, router = routed_endpoint(wire)
    try:
        with pytest.raises(RequestTimeout):
            router.open({**listen_params(tools=True), "_meta": ENVELOPE}, ack_timeout=0.05)
        assert [m["params"]["requestId"] for m in wire.cancels()] == [1]
        assert router.subscriptions() == []
    finally:
        endpoint.close(grace=WAIT)
        b.close()


def test_client_listen_at_2025_names_the_era() -> None:
    server = make_server()
    a, b = memory_pair()
    handle = server.serve_in_thread(b)
    # pinned to 2025-11-25 (``protocol=`` where the client negotiates the era)
    pin = "protocol" if "protocol" in inspect.signature(Client).parameters else "protocol_version"
    try:
        with Client.connect(a, **{pin: "2025-11-25"}) as client:
            assert client.protocol_version == "2025-11-25"
            with pytest.raises(CapabilityError, match=r"2026-07-28.*2025-11-25"):
                client.listen(tools=True)
            assert not any(s for s in server.listens.streams())
    finally:
        handle.stop()


def test_listen_params_reject_one_string_for_resources() -> None:
    with pytest.raises(TypeError):
        listen_params(resources="file:///a")
    assert listen_params(resources=["u", "u", "v"]) == {
        "notifications": {"resourceSubscriptions": ["u", "v"]}
    }


def test_client_listen_at_2026_end_to_end() -> None:
    server = make_server()
    a, b = memory_pair()
    handle = server.serve_in_thread(b)
    wire = Recorder(a)
    general: list[str] = []
    client = Client(wire, on_notification=lambda method, _params: general.append(method))
    client.endpoint.start()
    try:
        with client.lifecycle_lock:  # the era a negotiating client would choose
            client.lifecycle.choose_modern("2026-07-28")
        seen: queue.Queue[ListenEvent] = queue.Queue()
        with (
            client.listen(tools=True, on_notification=seen.put) as tools,
            client.listen(resources=["file:///a"]) as res,
        ):
            assert tools.acknowledged == {"toolsListChanged": True}
            server.notify_resource_updated("file:///a")
            server.notify_list_changed("tools")
            assert res.next(timeout=WAIT).uri == "file:///a"
            assert seen.get(timeout=WAIT).method == "notifications/tools/list_changed"
        listens = [m for m in wire.messages() if m.get("method") == "subscriptions/listen"]
        assert [
            m["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] for m in listens
        ] == ["2026-07-28"] * 2
        assert sorted(m["params"]["requestId"] for m in wire.cancels()) == sorted(
            m["id"] for m in listens
        )
        wait_until(lambda: not server.listens.streams(), "the server kept a closed stream")
        assert general == []  # stream notifications go to their subscription only
    finally:
        client.close()
        handle.stop()
