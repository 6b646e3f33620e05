"""Nothing is written about an inbound request that is no longer running.

The sans-IO rule (:meth:`RequestRegistry.notify_related`): a notification about an inbound
request -- its progress, a log message its handler produced -- is emitted only while the
request is RUNNING. Cancelled, answered, still queued, or the connection gone: it is Dropped.
One interleaving per test, then the same rule through a real endpoint.
"""

from __future__ import annotations

import threading

import pytest
from support.endpoints import raw_server
from support.waiting import WAIT

from mcp_sync.jsonrpc import Notification, Request, Response
from mcp_sync.protocol import (
    CANCELLED_METHOD,
    NOT_RUNNING,
    Dispatch,
    Dropped,
    InboundRequest,
    InboundState,
    RequestRegistry,
    Send,
)

LOG = Notification("notifications/message", {"level": "info", "data": "x"})


@pytest.fixture
def core() -> RequestRegistry:
    return RequestRegistry(object)


def registered(core: RequestRegistry, id_: int | str, params: dict | None = None) -> InboundRequest:
    (action,) = core.receive(Request(id_, "tools/call", params))
    assert isinstance(action, Dispatch)
    return action.request


def cancel(core: RequestRegistry, id_: int | str) -> list:
    return core.receive(Notification(CANCELLED_METHOD, {"requestId": id_}))


def dropped_not_running(actions: list) -> None:
    assert len(actions) == 1 and isinstance(actions[0], Dropped), actions
    assert actions[0].detail == NOT_RUNNING


def test_a_running_request_may_send_notifications(core):
    request = registered(core, 1)
    assert core.start(request)
    assert core.notify_related(request, LOG) == [Send(LOG)]
    progress = Notification("notifications/progress", {"progressToken": 1, "progress": 1})
    assert core.notify_related(request, progress) == [Send(progress)]


def test_nothing_for_a_queued_request(core):
    request = registered(core, 1)
    dropped_not_running(core.notify_related(request, LOG))


def test_nothing_after_the_cancellation_of_a_running_request(core):
    request = registered(core, 1)
    core.start(request)
    cancel(core, 1)
    assert request.state is InboundState.CANCELLED
    dropped_not_running(core.notify_related(request, LOG))
    # and the handler's late answer is not written either
    assert core.complete(request, Response(1, {})) == []
    dropped_not_running(core.notify_related(request, LOG))


def test_nothing_after_the_cancellation_of_a_queued_request(core):
    request = registered(core, 1)
    cancel(core, 1)
    assert not core.start(request)
    dropped_not_running(core.notify_related(request, LOG))


def test_nothing_after_the_answer(core):
    request = registered(core, 1)
    core.start(request)
    reply = Response(1, {})
    assert core.complete(request, reply) == [Send(reply)]
    dropped_not_running(core.notify_related(request, LOG))
    # a cancellation after the answer changes nothing
    assert all(isinstance(a, Dropped) for a in cancel(core, 1))
    dropped_not_running(core.notify_related(request, LOG))


def test_a_reused_id_does_not_revive_the_finished_request(core):
    old = registered(core, 7)
    core.start(old)
    cancel(core, 7)
    new = registered(core, 7)  # the client may reuse an id once its request has ended
    core.start(new)
    dropped_not_running(core.notify_related(old, LOG))
    assert core.notify_related(new, LOG) == [Send(LOG)]


def test_nothing_after_the_connection_is_lost(core):
    request = registered(core, 1)
    core.start(request)
    core.connection_lost()
    (action,) = core.notify_related(request, LOG)
    assert isinstance(action, Dropped)


# -- through the threaded endpoint ------------------------------------------------------------
def test_progress_and_log_after_a_cancel_are_never_written():
    """A handler that ignores its cancellation and keeps reporting: the peer sees nothing
    more for that id; the endpoint counts the notifications it dropped."""
    started, cancelled_seen, finished = threading.Event(), threading.Event(), threading.Event()
    outcomes: dict[str, object] = {}

    def stubborn(request: InboundRequest) -> dict:
        started.set()
        assert request.token.wait(WAIT), "the cancellation never reached the handler"
        cancelled_seen.set()
        endpoint = holder["endpoint"]
        outcomes["progress"] = endpoint.report_progress(request, 1)
        outcomes["log"] = endpoint.notify_about(
            request, "notifications/message", {"level": "info", "data": "late"}
        )
        endpoint.notify(
            "notifications/message",
            {"level": "info", "data": "late by id"},
            related_request=request.id,
        )
        finished.set()
        return {"late": True}

    holder: dict = {}
    with raw_server({"slow": stubborn, "echo": lambda request: {"echo": True}}, max_workers=1) as s:
        holder["endpoint"] = s.server
        s.peer.send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "slow",
                "params": {"_meta": {"progressToken": "p"}},
            }
        )
        assert started.wait(WAIT)
        s.peer.send({"jsonrpc": "2.0", "method": CANCELLED_METHOD, "params": {"requestId": 1}})
        assert finished.wait(WAIT)
        # one worker: the follow-up runs after the stubborn handler's answer was decided
        s.peer.send({"jsonrpc": "2.0", "id": 2, "method": "echo"})
        reply = s.peer.recv()
        assert reply == {"jsonrpc": "2.0", "id": 2, "result": {"echo": True}}
        assert s.server.withheld[NOT_RUNNING] == 3
        assert s.server.dropped.total() == 0
    assert outcomes == {"progress": False, "log": False}
    assert s.peer.drain() == []  # nothing at all about request 1


def test_a_running_request_gets_its_notifications_in_order():
    release = threading.Event()

    def chatty(request: InboundRequest) -> dict:
        endpoint = holder["endpoint"]
        assert endpoint.report_progress(request, 1)
        assert endpoint.notify_about(
            request, "notifications/message", {"level": "info", "data": "hi"}
        )
        release.wait(WAIT)
        return {"done": True}

    holder: dict = {}
    with raw_server({"chatty": chatty}) as s:
        holder["endpoint"] = s.server
        s.peer.send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "chatty",
                "params": {"_meta": {"progressToken": 5}},
            }
        )
        first, second = s.peer.recv(), s.peer.recv()
        release.set()
        third = s.peer.recv()
    assert first["method"] == "notifications/progress" and first["params"]["progressToken"] == 5
    assert second["method"] == "notifications/message"
    assert third == {"jsonrpc": "2.0", "id": 1, "result": {"done": True}}
