"""The sans-IO core, one interleaving per test. No threads, no sleeps: events in, actions out."""

from __future__ import annotations

import pytest

from mcp_sync.cancel import CancelToken
from mcp_sync.errors import ConnectionClosed, RequestTimeout
from mcp_sync.jsonrpc import (
    INVALID_REQUEST,
    ErrorResponse,
    InvalidMessage,
    Notification,
    Request,
    Response,
    decode,
)
from mcp_sync.protocol import (
    CANCELLED_METHOD,
    CancelInbound,
    Deliver,
    Dispatch,
    Dropped,
    InboundState,
    OutboundState,
    Progress,
    RequestRegistry,
    Send,
    Settle,
)


class FakeToken:
    """Stands in for CancelToken: the core must only create it, never fire it itself."""

    made = 0

    def __init__(self) -> None:
        FakeToken.made += 1
        self.serial = FakeToken.made


@pytest.fixture
def proto() -> RequestRegistry:
    return RequestRegistry(FakeToken)


def req(id_, method="tools/call", params=None) -> Request:
    return Request(id_, method, params)


def cancel_note(request_id, reason=None) -> Notification:
    params = {"requestId": request_id}
    if reason is not None:
        params["reason"] = reason
    return Notification(CANCELLED_METHOD, params)


def sends(actions) -> list:
    return [a.message for a in actions if isinstance(a, Send)]


def only_dropped(actions, detail: str | None = None) -> Dropped:
    assert len(actions) == 1, actions
    (action,) = actions
    assert isinstance(action, Dropped), actions
    if detail is not None:
        assert action.detail == detail
    return action


def dispatch(proto: RequestRegistry, id_, method="tools/call", params=None):
    actions = proto.receive(req(id_, method, params))
    assert len(actions) == 1 and isinstance(actions[0], Dispatch), actions
    return actions[0].request


# =========================================================================================
# inbound requests
# =========================================================================================
def test_request_is_registered_then_dispatched(proto):
    made_before = FakeToken.made
    actions = proto.receive(req(1, params={"name": "t"}))
    assert len(actions) == 1
    (action,) = actions
    assert isinstance(action, Dispatch)
    request = action.request
    assert request.id == 1 and request.method == "tools/call"
    assert request.params == {"name": "t"}
    assert request.state is InboundState.QUEUED
    # the token exists from registration, before any work is scheduled
    assert isinstance(request.token, FakeToken) and FakeToken.made == made_before + 1
    assert proto.inbound(1) is request
    assert proto.in_flight() == (1, 0)


def test_request_without_params_gets_empty_params(proto):
    request = dispatch(proto, 1, "ping")
    assert request.params == {}
    assert request.progress_token is None


def test_start_then_complete_sends_response(proto):
    request = dispatch(proto, 1)
    assert proto.start(request) is True
    assert request.state is InboundState.RUNNING
    reply = Response(1, {"ok": True})
    assert proto.complete(request, reply) == [Send(reply)]
    assert request.state is InboundState.COMPLETED
    assert proto.inbound(1) is None
    assert proto.in_flight() == (0, 0)


def test_start_twice_is_refused(proto):
    request = dispatch(proto, 1)
    assert proto.start(request) is True
    assert proto.start(request) is False


def test_complete_with_pre_encoded_bytes(proto):
    request = dispatch(proto, 1)
    proto.start(request)
    assert proto.complete(request, b'{"jsonrpc":"2.0","id":1,"result":{}}\n') == [
        Send(b'{"jsonrpc":"2.0","id":1,"result":{}}\n')
    ]


def test_cancel_while_queued(proto):
    request = dispatch(proto, 1)
    actions = proto.receive(cancel_note(1, "user gave up"))
    assert actions == [CancelInbound(request, "user gave up")]
    assert request.state is InboundState.CANCELLED
    assert request.cancel_reason == "user gave up"
    assert proto.start(request) is False, "a request cancelled while queued must never start"
    assert proto.complete(request, Response(1, {})) == [], "a cancelled request is never answered"
    assert proto.in_flight() == (0, 0)


def test_cancel_while_running(proto):
    request = dispatch(proto, 1)
    assert proto.start(request)
    actions = proto.receive(cancel_note(1))
    assert actions == [CancelInbound(request, None)]
    assert request.state is InboundState.CANCELLED
    assert proto.complete(request, Response(1, {"late": True})) == []
    assert proto.complete(request, ErrorResponse(1, -32603, "handler failed after cancel")) == []
    assert proto.in_flight() == (0, 0)


def test_complete_then_late_cancel(proto):
    request = dispatch(proto, 1)
    proto.start(request)
    reply = Response(1, {"done": 1})
    assert proto.complete(request, reply) == [Send(reply)]
    actions = proto.receive(cancel_note(1, "too late"))
    only_dropped(actions, "cancellation of an unknown or finished request")
    assert request.state is InboundState.COMPLETED
    assert request.cancel_reason is None


def test_cancel_twice(proto):
    request = dispatch(proto, 1)
    proto.start(request)
    assert proto.receive(cancel_note(1, "first")) == [CancelInbound(request, "first")]
    only_dropped(
        proto.receive(cancel_note(1, "second")), "cancellation of an unknown or finished request"
    )
    assert request.cancel_reason == "first"


def test_cancel_reason_that_is_not_a_string_is_ignored(proto):
    request = dispatch(proto, 1)
    actions = proto.receive(Notification(CANCELLED_METHOD, {"requestId": 1, "reason": 42}))
    assert actions == [CancelInbound(request, None)]


def test_cancel_unknown_id(proto):
    request = dispatch(proto, 1)
    only_dropped(proto.receive(cancel_note(2)), "cancellation of an unknown or finished request")
    assert request.state is InboundState.QUEUED
    assert proto.inbound(1) is request


@pytest.mark.parametrize(
    "params",
    [
        None,
        {},
        {"reason": "no id"},
        {"requestId": None},
        {"requestId": True},
        {"requestId": False},
        {"requestId": 1.0},
        {"requestId": 1.5},
        {"requestId": [1]},
        {"requestId": {"id": 1}},
    ],
    ids=lambda p: repr(p),
)
def test_malformed_cancellation_is_dropped(proto, params):
    request = dispatch(proto, 1)
    proto.start(request)
    only_dropped(proto.receive(Notification(CANCELLED_METHOD, params)), "malformed cancellation")
    assert request.state is InboundState.RUNNING
    assert proto.inbound(1) is request


def test_cancellation_with_params_not_an_object_is_dropped(proto):
    request = dispatch(proto, 1)
    decoded = decode(b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":[1]}')
    assert isinstance(decoded, InvalidMessage)
    actions = proto.receive(decoded)
    only_dropped(actions)
    assert sends(actions) == []
    assert request.state is InboundState.QUEUED


def test_bool_request_id_true_does_not_cancel_id_1(proto):
    request = dispatch(proto, 1)
    only_dropped(proto.receive(cancel_note(True)), "malformed cancellation")
    assert proto.inbound(1) is request


def test_wrong_direction_cancel_does_not_touch_outbound(proto):
    out, _ = proto.send_request("tools/call", {"name": "x"})
    assert out.id == 1
    # the peer "cancels" id 1, but id 1 is *our* request: the peer may only cancel its own
    only_dropped(proto.receive(cancel_note(1)), "cancellation of an unknown or finished request")
    assert out.state is OutboundState.PENDING
    assert proto.outbound(1) is out
    # our request still completes normally
    assert proto.receive(Response(1, {"r": 1})) == [Settle(out, response=Response(1, {"r": 1}))]


def test_same_id_in_both_directions_is_kept_apart(proto):
    out, _ = proto.send_request("sampling/createMessage", None)
    inbound = dispatch(proto, out.id)
    assert proto.receive(cancel_note(out.id)) == [CancelInbound(inbound, None)]
    assert out.state is OutboundState.PENDING
    assert proto.outbound(out.id) is out


def test_string_and_int_ids_in_flight_together(proto):
    as_str = dispatch(proto, "7")
    as_int = dispatch(proto, 7)
    assert as_str is not as_int
    assert proto.in_flight() == (2, 0)
    assert proto.receive(cancel_note(7, "int only")) == [CancelInbound(as_int, "int only")]
    assert as_str.state is InboundState.QUEUED
    assert proto.inbound("7") is as_str
    assert proto.inbound(7) is None
    proto.start(as_str)
    reply = Response("7", {"text": "string id answered"})
    assert proto.complete(as_str, reply) == [Send(reply)]


def test_cancel_of_string_id_does_not_cancel_int(proto):
    as_int = dispatch(proto, 7)
    only_dropped(proto.receive(cancel_note("7")))
    assert as_int.state is InboundState.QUEUED


def test_duplicate_inbound_id_is_invalid_request(proto):
    first = dispatch(proto, 5)
    actions = proto.receive(req(5, "tools/list"))
    assert sends(actions) == [ErrorResponse(5, INVALID_REQUEST, "request id is already in use")]
    assert [type(a) for a in actions] == [Send, Dropped]
    assert proto.inbound(5) is first and first.method == "tools/call"
    # the same id may be used again once the first request is finished
    proto.start(first)
    proto.complete(first, Response(5, {}))
    second = dispatch(proto, 5, "tools/list")
    assert second is not first


def test_inbound_initialize_cannot_be_cancelled(proto):
    init = dispatch(proto, 0, "initialize")
    proto.start(init)
    only_dropped(proto.receive(cancel_note(0)), "initialize cannot be cancelled")
    assert init.state is InboundState.RUNNING
    reply = Response(0, {"protocolVersion": "2025-11-25"})
    assert proto.complete(init, reply) == [Send(reply)]


def test_progress_token_of_inbound_request(proto):
    request = dispatch(proto, 1, params={"_meta": {"progressToken": "abc"}})
    assert request.progress_token == "abc"
    assert not proto.may_report_progress(request)  # queued
    proto.start(request)
    assert proto.may_report_progress(request)
    proto.complete(request, Response(1, {}))
    assert not proto.may_report_progress(request)  # progress stops when the request ends
    bad = dispatch(proto, 2, params={"_meta": {"progressToken": True}})
    assert bad.progress_token is None
    proto.start(bad)
    assert not proto.may_report_progress(bad)


def test_no_progress_after_cancellation(proto):
    request = dispatch(proto, 1, params={"_meta": {"progressToken": 9}})
    proto.start(request)
    proto.receive(cancel_note(1))
    assert not proto.may_report_progress(request)


# =========================================================================================
# outbound requests
# =========================================================================================
def test_send_request_emits_request_with_fresh_integer_ids(proto):
    first, actions = proto.send_request("tools/list", None)
    assert actions == [Send(Request(first.id, "tools/list", None))]
    second, actions2 = proto.send_request("tools/call", {"name": "x"})
    assert actions2 == [Send(Request(second.id, "tools/call", {"name": "x"}))]
    assert type(first.id) is int and type(second.id) is int
    assert first.id != second.id
    assert first.state is OutboundState.PENDING
    assert proto.in_flight() == (0, 2)


def test_response_settles(proto):
    out, _ = proto.send_request("tools/list", None, context="ctx")
    response = Response(out.id, {"tools": []})
    assert proto.receive(response) == [Settle(out, response=response)]
    assert out.state is OutboundState.COMPLETED
    assert out.context == "ctx"
    assert proto.outbound(out.id) is None
    # a second response to the same id is unknown now
    only_dropped(proto.receive(response), "response to an unknown id")


def test_error_response_settles(proto):
    out, _ = proto.send_request("tools/call", None)
    error = ErrorResponse(out.id, -32602, "Unknown tool", {"name": "x"})
    assert proto.receive(error) == [Settle(out, response=error)]
    assert out.state is OutboundState.COMPLETED


def test_cancel_outbound_sends_notification_once_then_settles(proto):
    out, _ = proto.send_request("tools/call", None)
    actions = proto.cancel_outbound(out, "user")
    assert actions == [
        Send(Notification(CANCELLED_METHOD, {"requestId": out.id, "reason": "user"})),
        Settle(out, cancelled=True, reason="user"),
    ]
    assert out.state is OutboundState.CANCEL_REQUESTED
    assert proto.cancel_outbound(out, "again") == []
    assert proto.in_flight() == (0, 0)


def test_cancel_outbound_without_reason(proto):
    out, _ = proto.send_request("tools/call", None)
    actions = proto.cancel_outbound(out)
    assert sends(actions) == [Notification(CANCELLED_METHOD, {"requestId": out.id})]
    assert actions[-1] == Settle(out, cancelled=True, reason=None)


def test_cancel_outbound_with_exception_settles_with_it(proto):
    out, _ = proto.send_request("tools/call", None)
    timeout = RequestTimeout("tools/call: timed out after 1 s")
    actions = proto.cancel_outbound(out, "timed out after 1 s", timeout)
    assert actions == [
        Send(
            Notification(CANCELLED_METHOD, {"requestId": out.id, "reason": "timed out after 1 s"})
        ),
        Settle(out, exception=timeout, reason="timed out after 1 s"),
    ]


def test_outbound_remembers_how_it_ended_for_every_canceller(proto):
    """A second canceller loses the race but must still learn that the call ended cancelled;
    a timeout or a response is not a cancellation."""
    out, _ = proto.send_request("tools/call", None)
    assert proto.cancel_outbound(out, "first") and out.cancelled
    assert proto.cancel_outbound(out, "second") == [] and out.cancelled
    timed, _ = proto.send_request("tools/call", None)
    proto.cancel_outbound(timed, "timed out", RequestTimeout("timed out"))
    assert proto.cancel_outbound(timed, "late cancel") == [] and not timed.cancelled
    answered, _ = proto.send_request("tools/call", None)
    proto.receive(Response(answered.id, {}))
    assert proto.cancel_outbound(answered, "too late") == [] and not answered.cancelled


def test_late_response_after_cancel_is_dropped(proto):
    out, _ = proto.send_request("tools/call", None)
    proto.cancel_outbound(out, "user")
    late = proto.receive(Response(out.id, {"too": "late"}))
    only_dropped(late, "late response after cancellation")
    late_err = proto.receive(ErrorResponse(out.id, -32603, "late error"))
    only_dropped(late_err, "late response after cancellation")
    assert out.state is OutboundState.CANCEL_REQUESTED


def test_cancel_after_completion_emits_nothing(proto):
    out, _ = proto.send_request("tools/call", None)
    proto.receive(Response(out.id, {}))
    assert proto.cancel_outbound(out, "too late") == []
    assert out.state is OutboundState.COMPLETED


def test_outbound_initialize_is_never_cancelled_on_the_wire(proto):
    init, _ = proto.send_request("initialize", {"protocolVersion": "2025-11-25"})
    actions = proto.cancel_outbound(init, "interrupted")
    assert sends(actions) == [], "initialize must never be cancelled on the wire"
    assert actions == [Settle(init, cancelled=True, reason="interrupted")]
    timeout = RequestTimeout("initialize: timed out")
    init2, _ = proto.send_request("initialize", {})
    assert proto.cancel_outbound(init2, "timeout", timeout) == [
        Settle(init2, exception=timeout, reason="timeout")
    ]


def test_response_id_echoed_as_string_is_matched(proto):
    for _ in range(6):
        proto.send_request("ping", None)
    out, _ = proto.send_request("tools/list", None)
    assert out.id == 7
    response = Response("7", {"tools": []})
    assert proto.receive(response) == [Settle(out, response=response)]


def test_non_numeric_string_response_id_is_unknown(proto):
    out, _ = proto.send_request("tools/list", None)
    for bad in ("x", " 1", "1.0", "-1", "\u0661"):  # ARABIC-INDIC DIGIT ONE is not ASCII
        only_dropped(proto.receive(Response(bad, {})), "response to an unknown id")
    assert out.state is OutboundState.PENDING


def test_late_string_response_after_cancel_is_dropped(proto):
    out, _ = proto.send_request("tools/list", None)
    proto.cancel_outbound(out)
    only_dropped(proto.receive(Response(str(out.id), {})), "late response after cancellation")


def test_error_without_id_is_dropped(proto):
    out, _ = proto.send_request("tools/list", None)
    only_dropped(proto.receive(ErrorResponse(None, -32700, "Parse error")))
    assert out.state is OutboundState.PENDING


def test_response_to_unknown_id(proto):
    only_dropped(proto.receive(Response(99, {})), "response to an unknown id")


# -- progress ---------------------------------------------------------------------------------
def test_progress_token_added_and_routed_while_pending(proto):
    out, actions = proto.send_request(
        "tools/call", {"name": "x", "_meta": {"other": 1}}, with_progress=True
    )
    (send,) = actions
    assert send.message.params == {"name": "x", "_meta": {"other": 1, "progressToken": out.id}}
    assert out.progress_token == out.id
    params = {"progressToken": out.id, "progress": 1, "total": 3}
    assert proto.receive(Notification("notifications/progress", params)) == [Progress(out, params)]
    proto.receive(Response(out.id, {}))
    only_dropped(
        proto.receive(
            Notification("notifications/progress", {"progressToken": out.id, "progress": 2})
        ),
        "progress for an unknown or finished request",
    )


def test_send_request_with_progress_does_not_mutate_callers_params(proto):
    params = {"name": "x", "_meta": {"k": "v"}}
    proto.send_request("tools/call", params, with_progress=True)
    assert params == {"name": "x", "_meta": {"k": "v"}}


def test_progress_not_routed_after_cancel(proto):
    out, _ = proto.send_request("tools/call", None, with_progress=True)
    proto.cancel_outbound(out)
    only_dropped(
        proto.receive(
            Notification("notifications/progress", {"progressToken": out.id, "progress": 1})
        ),
        "progress for an unknown or finished request",
    )


def test_progress_for_request_without_token_is_dropped(proto):
    out, _ = proto.send_request("tools/call", None)  # no progress asked
    only_dropped(
        proto.receive(
            Notification("notifications/progress", {"progressToken": out.id, "progress": 1})
        ),
        "progress for an unknown or finished request",
    )


@pytest.mark.parametrize("params", [None, {}, {"progressToken": None}, {"progressToken": True}])
def test_malformed_progress_is_dropped(proto, params):
    proto.send_request("tools/call", None, with_progress=True)
    only_dropped(
        proto.receive(Notification("notifications/progress", params)),
        "malformed progress notification",
    )


def test_progress_token_string_form_is_not_matched(proto):
    out, _ = proto.send_request("tools/call", None, with_progress=True)
    only_dropped(
        proto.receive(
            Notification("notifications/progress", {"progressToken": str(out.id), "progress": 1})
        )
    )


# -- other notifications and invalid input ----------------------------------------------------
def test_other_notifications_are_delivered(proto):
    note = Notification("notifications/tools/list_changed")
    assert proto.receive(note) == [Deliver(note)]


def test_invalid_message_with_reply_sends_it(proto):
    invalid = decode(b"{not json")
    actions = proto.receive(invalid)
    assert actions[0] == Send(ErrorResponse(None, -32700, "Parse error"))
    assert isinstance(actions[1], Dropped)
    assert len(actions) == 2


def test_invalid_message_without_reply_is_only_dropped(proto):
    actions = proto.receive(
        decode(b'{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"m"}}')
    )
    only_dropped(actions)


# =========================================================================================
# connection lost
# =========================================================================================
def test_connection_lost_fails_outbound_and_cancels_inbound(proto):
    outs = [proto.send_request("tools/call", None)[0] for _ in range(3)]
    queued = dispatch(proto, "a")
    running = dispatch(proto, "b")
    proto.start(running)
    cause = OSError("pipe broke")
    actions = proto.connection_lost(cause)

    cancels = [a for a in actions if isinstance(a, CancelInbound)]
    assert {a.request.id for a in cancels} == {"a", "b"}
    assert all(a.reason == "connection closed" for a in cancels)
    assert queued.state is InboundState.CANCELLED and running.state is InboundState.CANCELLED

    settles = [a for a in actions if isinstance(a, Settle)]
    assert [s.request for s in settles] == outs
    excs = [s.exception for s in settles]
    assert all(isinstance(e, ConnectionClosed) for e in excs)
    assert len({id(e) for e in excs}) == 3, "each pending call needs its own exception object"
    assert all(e.__cause__ is cause for e in excs)
    assert all(o.state is OutboundState.FAILED for o in outs)
    assert sends(actions) == [], "nothing is sent on a lost connection"
    assert proto.closed
    assert proto.in_flight() == (0, 0)

    # afterwards: nothing runs, nothing is sent
    assert proto.start(queued) is False
    assert proto.complete(running, Response("b", {})) == []
    assert proto.connection_lost() == []
    only_dropped(proto.receive(Response(outs[0].id, {})), "connection closed")
    only_dropped(proto.receive(req(50)), "connection closed")
    assert proto.cancel_outbound(outs[0]) == []


def test_connection_lost_default_exception(proto):
    out, _ = proto.send_request("tools/call", None)
    (settle,) = proto.connection_lost()
    assert isinstance(settle.exception, ConnectionClosed)
    assert settle.request is out


def test_send_request_after_connection_lost_raises(proto):
    proto.connection_lost()
    with pytest.raises(ConnectionClosed):
        proto.send_request("ping", None)
    assert proto.in_flight() == (0, 0)


def test_real_cancel_token_factory():
    proto = RequestRegistry(CancelToken)
    request = dispatch(proto, 1)
    assert isinstance(request.token, CancelToken)
    assert not request.token.cancelled, "the core never fires tokens itself"
    (action,) = proto.receive(cancel_note(1, "r"))
    assert isinstance(action, CancelInbound)
    assert not request.token.cancelled, "firing the token is the driver's job"


# -- a transport fails one call ------------------------------------------------------------------
def test_fail_outbound_settles_with_the_exception_and_sends_nothing(proto):
    out, _ = proto.send_request("tools/call", None)
    failure = ConnectionError("the request never reached the server")
    assert proto.fail_outbound(out, failure) == [Settle(out, exception=failure)]
    assert out.state is OutboundState.FAILED and not out.cancelled
    assert proto.in_flight() == (0, 0)


def test_fail_outbound_loses_to_an_earlier_end_and_a_late_response_is_dropped(proto):
    answered, _ = proto.send_request("tools/call", None)
    proto.receive(Response(answered.id, {}))
    assert proto.fail_outbound(answered, ConnectionError("late")) == []
    cancelled, _ = proto.send_request("tools/call", None)
    proto.cancel_outbound(cancelled, "user")
    assert proto.fail_outbound(cancelled, ConnectionError("late")) == []
    failed, _ = proto.send_request("tools/call", None)
    proto.fail_outbound(failed, ConnectionError("not sent"))
    assert proto.cancel_outbound(failed, "too late") == []
    late = Response(failed.id, {})
    assert proto.receive(late) == [Dropped("late response after cancellation", late)]
