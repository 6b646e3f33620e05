"""A response the peer got wrong fails the call it names at once, with PeerMisbehaved.

Before the fix such a response was only dropped, so the call waited for its timeout (for ever
without one): the sans-IO tests below saw no Settle, the end-to-end ones timed out.
"""

from __future__ import annotations

import json

import pytest
from support.endpoints import raw_server
from support.waiting import WAIT

from mcp_sync.errors import PeerMisbehaved
from mcp_sync.jsonrpc import decode
from mcp_sync.protocol import Dropped, OutboundState, RequestRegistry, Settle


def _line(obj) -> bytes:
    return json.dumps(obj).encode()


INVALID_RESPONSES = {
    "result and error": lambda i: {
        "jsonrpc": "2.0",
        "id": i,
        "result": {},
        "error": {"code": 1, "message": "x"},
    },
    "malformed error": lambda i: {"jsonrpc": "2.0", "id": i, "error": {"code": "x"}},
    "wrong jsonrpc": lambda i: {"jsonrpc": "1.0", "id": i, "result": {}},
    "too deep": lambda i: {"jsonrpc": "2.0", "id": i, "result": {"a": _nest(500)}},
    "id as string": lambda i: {
        "jsonrpc": "2.0",
        "id": str(i),
        "result": {},
        "error": {"code": 1, "message": "x"},
    },
}


def _nest(depth: int):
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("kind", sorted(INVALID_RESPONSES))
def test_core_fails_the_named_call_at_once(kind):
    proto = RequestRegistry(object)
    out, _ = proto.send_request("tools/call", None, context="ctx")
    other, _ = proto.send_request("tools/list", None)
    actions = proto.receive(decode(_line(INVALID_RESPONSES[kind](out.id))))
    settles = [a for a in actions if isinstance(a, Settle)]
    assert len(settles) == 1 and settles[0].request is out, actions
    failure = settles[0].exception
    assert isinstance(failure, PeerMisbehaved) and "tools/call" in str(failure), failure
    assert failure.detail
    assert any(isinstance(a, Dropped) for a in actions), "the bad message is still accounted for"
    assert out.state is OutboundState.FAILED
    assert proto.outbound(out.id) is None
    assert proto.outbound(other.id) is other, "only the named call fails"
    assert proto.in_flight() == (0, 1)


def test_core_invalid_response_for_an_unknown_id_is_only_dropped():
    proto = RequestRegistry(object)
    out, _ = proto.send_request("tools/call", None)
    actions = proto.receive(decode(_line(INVALID_RESPONSES["result and error"](out.id + 10))))
    assert all(isinstance(a, Dropped) for a in actions), actions
    assert proto.outbound(out.id) is out


def test_core_invalid_response_after_cancellation_is_only_dropped():
    proto = RequestRegistry(object)
    out, _ = proto.send_request("tools/call", None)
    proto.cancel_outbound(out, "user")
    actions = proto.receive(decode(_line(INVALID_RESPONSES["result and error"](out.id))))
    assert all(isinstance(a, Dropped) for a in actions), actions


@pytest.mark.parametrize("kind", sorted(INVALID_RESPONSES))
def test_end_to_end_the_caller_gets_peer_misbehaved_and_the_connection_stays_up(kind):
    # the raw peer plays a server that answers its first request wrongly
    with raw_server() as s:
        client = s.server  # an Endpoint; its peer is the raw side
        pending = client.submit("tools/call", {"name": "x"})
        request = s.peer.recv()
        assert request["method"] == "tools/call"
        s.peer.send(_line(INVALID_RESPONSES[kind](request["id"])))
        with pytest.raises(PeerMisbehaved) as info:
            pending.result(timeout=WAIT)
        assert "invalid response" in str(info.value)
        # nothing was written back in answer to the response, and the connection still works
        second = client.submit("ping")
        follow = s.peer.recv()
        assert follow["method"] == "ping", f"the endpoint answered the invalid response: {follow}"
        s.peer.send({"jsonrpc": "2.0", "id": follow["id"], "result": {}})
        assert second.result(timeout=WAIT) == {}
        assert client.in_flight() == (0, 0)
        assert sum(client.dropped.values()) >= 1
