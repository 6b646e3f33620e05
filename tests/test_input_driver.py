"""The client's multi round-trip driver (2026-07-28) against a scripted server on a memory pair:
new id per round, params + inputResponses + byte-exact requestState, bounded rounds,
state-only rounds, cancellation and timeouts during a round and between rounds."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

import pytest
from support.endpoints import RawPeer
from support.waiting import WAIT

from mcp_sync.cancel import CancelToken
from mcp_sync.endpoint import Endpoint
from mcp_sync.errors import Cancelled, McpError, PeerMisbehaved, RequestTimeout
from mcp_sync.input_driver import InputRoundsCall
from mcp_sync.result_kinds import (
    Complete,
    InputRequest,
    InputRequired,
    classify_result,
    retry_params,
)
from mcp_sync.transports.memory import memory_pair

ELICIT = {
    "method": "elicitation/create",
    "params": {"message": "Your name?", "requestedSchema": {"type": "object"}},
}
FINAL = {"content": [{"type": "text", "text": "done"}], "resultType": "complete"}


class Answers:
    """The local input handler: records what it was asked, answers from a function."""

    def __init__(self, reply: Callable[[InputRequest, CancelToken], Any] | None = None) -> None:
        self.asked: list[InputRequest] = []
        self.tokens: list[CancelToken] = []
        self.reply = reply or (
            lambda request, _token: {"action": "accept", "content": {"name": "Ada"}}
        )

    def __call__(self, request: InputRequest, token: CancelToken) -> Any:
        self.asked.append(request)
        self.tokens.append(token)
        return self.reply(request, token)


@contextmanager
def driver_peer() -> Iterator[SimpleNamespace]:
    """A client endpoint whose server is a :class:`RawPeer` driven by the test."""
    ours, theirs = memory_pair()
    endpoint = Endpoint(ours, name="client").start()
    peer = RawPeer(theirs)
    try:
        yield SimpleNamespace(endpoint=endpoint, peer=peer)
    finally:
        endpoint.close(grace=WAIT)
        theirs.close()


def start(
    env: SimpleNamespace,
    answers: Answers,
    *,
    method: str = "tools/call",
    params: dict[str, Any] | None = None,
    **options: Any,
) -> InputRoundsCall:
    endpoint: Endpoint = env.endpoint
    kwargs = {
        k: options.pop(k)
        for k in ("max_rounds", "tasks_declared", "backoff", "resend_after")
        if k in options
    }
    call = InputRoundsCall(
        endpoint,
        method,
        params if params is not None else {"name": "ask", "arguments": {"q": 1}},
        submit_round=lambda p, o: endpoint.submit(method, p, **o),
        answer=answers,
        run=endpoint.pool.submit,
        options=options,
        **kwargs,
    )
    return call.start()


def reply(peer: RawPeer, request: dict[str, Any], result: dict[str, Any]) -> None:
    peer.send({"jsonrpc": "2.0", "id": request["id"], "result": result})


def input_required(**body: Any) -> dict[str, Any]:
    return {"resultType": "input_required", **body}


def assert_silent(peer: RawPeer, endpoint: Endpoint) -> None:
    """Nothing more was written to the peer (checked after closing our side)."""
    endpoint.close(grace=WAIT)
    assert peer.drain() == []


# -- classification (sans-IO) --------------------------------------------------------------------
def test_a_result_without_result_type_is_complete():
    assert classify_result("tools/call", {"content": []}) == Complete({"content": []})
    assert classify_result("tools/list", {"tools": [], "resultType": "complete"}).result == {
        "tools": [],
        "resultType": "complete",
    }


@pytest.mark.parametrize("kind", ["later", "", 3])
def test_an_unknown_result_type_is_refused(kind):
    with pytest.raises(PeerMisbehaved, match="unknown resultType"):
        classify_result("tools/call", {"resultType": kind})


def test_a_task_is_refused_unless_the_tasks_extension_was_declared():
    task = {"resultType": "task", "taskId": "t1", "status": "working"}
    with pytest.raises(PeerMisbehaved, match="tasks extension"):
        classify_result("tools/call", task)
    assert classify_result("tools/call", task, tasks_declared=True) == Complete(task)


def test_input_required_only_for_the_three_methods():
    with pytest.raises(PeerMisbehaved, match="only tools/call"):
        classify_result("tools/list", input_required(requestState="s"))
    for method in ("tools/call", "prompts/get", "resources/read"):
        assert classify_result(method, input_required(requestState="s")) == InputRequired((), "s")


@pytest.mark.parametrize(
    "body, problem",
    [
        ({}, "neither inputRequests nor requestState"),
        ({"inputRequests": []}, "not an object"),
        ({"inputRequests": {"a": {"params": {}}}}, "without a method"),
        ({"inputRequests": {"a": {"method": "tools/call"}}}, "not an input request"),
        (
            {"inputRequests": {"a": {"method": "roots/list", "params": 3}}},
            "params that are not an object",
        ),
        ({"requestState": 7}, "not a string"),
    ],
)
def test_a_malformed_input_required_is_refused(body, problem):
    with pytest.raises(PeerMisbehaved, match=problem):
        classify_result("tools/call", input_required(**body))


def test_retry_params_keep_the_original_and_add_responses_and_the_state():
    original = {"name": "ask", "arguments": {"q": 1}, "_meta": {"progressToken": 3}}
    assert retry_params(original, {"k": {"roots": []}}, "v1.x") == {
        **original,
        "inputResponses": {"k": {"roots": []}},
        "requestState": "v1.x",
    }
    assert retry_params(original, {}, None) == original
    again = retry_params(
        {**original, "inputResponses": {"old": {}}, "requestState": "old"}, {}, "new"
    )
    assert again == {**original, "requestState": "new"}


# -- the driver on a connection ------------------------------------------------------------------
def test_a_complete_result_ends_the_call_after_one_round():
    with driver_peer() as env:
        call = start(env, Answers())
        first = env.peer.recv()
        reply(env.peer, first, {"content": []})
        assert call.result(WAIT) == {"content": []}
        assert call.rounds == 0
        assert_silent(env.peer, env.endpoint)


def test_an_input_round_retries_with_a_new_id_the_answers_and_the_exact_state():
    answers = Answers()
    state = (
        "v1.eyJzdGVwIjoiYXNrZWQifQ==.\u00e9 sig"  # non-ASCII, padding, spaces: echoed byte-exact
    )
    with driver_peer() as env:
        call = start(env, answers)
        first = env.peer.recv()
        reply(env.peer, first, input_required(inputRequests={"name": ELICIT}, requestState=state))
        retry = env.peer.recv()
        assert retry["id"] != first["id"]
        assert retry["method"] == "tools/call"
        assert retry["params"] == {
            "name": "ask",
            "arguments": {"q": 1},
            "inputResponses": {"name": {"action": "accept", "content": {"name": "Ada"}}},
            "requestState": state,
        }
        assert call.request_id == retry["id"]
        reply(env.peer, retry, FINAL)
        assert call.result(WAIT) == FINAL
        assert [(a.key, a.method, a.params) for a in answers.asked] == [
            ("name", ELICIT["method"], ELICIT["params"])
        ]
        assert call.rounds == 1
        assert_silent(env.peer, env.endpoint)


def test_several_input_requests_are_all_answered_under_their_keys():
    roots = {"method": "roots/list"}
    sampling = {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 5}}
    answers = Answers(lambda request, _t: {"for": request.key})
    with driver_peer() as env:
        call = start(env, answers, method="prompts/get", params={"name": "p"})
        first = env.peer.recv()
        reply(
            env.peer, first, input_required(inputRequests={"r": roots, "s": sampling, "e": ELICIT})
        )
        retry = env.peer.recv()
        assert retry["params"] == {
            "name": "p",
            "inputResponses": {"r": {"for": "r"}, "s": {"for": "s"}, "e": {"for": "e"}},
        }
        assert "requestState" not in retry["params"]  # none was sent: none is echoed
        reply(env.peer, retry, {"messages": []})
        assert call.result(WAIT) == {"messages": []}


def test_a_state_only_round_is_retried_with_the_state_alone():
    answers = Answers()
    with driver_peer() as env:
        call = start(
            env, answers, method="resources/read", params={"uri": "x://1"}, backoff=(0.001, 0.002)
        )
        first = env.peer.recv()
        reply(env.peer, first, input_required(requestState="busy-1"))
        second = env.peer.recv()
        assert second["params"] == {"uri": "x://1", "requestState": "busy-1"}
        reply(env.peer, second, input_required(requestState="busy-2"))
        third = env.peer.recv()
        assert third["params"] == {"uri": "x://1", "requestState": "busy-2"}
        assert len({first["id"], second["id"], third["id"]}) == 3
        reply(env.peer, third, {"contents": []})
        assert call.result(WAIT) == {"contents": []}
        assert answers.asked == []


def test_rounds_are_bounded():
    with driver_peer() as env:
        call = start(env, Answers(), max_rounds=3, backoff=(0.001, 0.001))
        ids = []
        for _ in range(4):
            request = env.peer.recv()
            ids.append(request["id"])
            reply(env.peer, request, input_required(requestState="again"))
        with pytest.raises(PeerMisbehaved, match="after 3 rounds"):
            call.result(WAIT)
        assert len(set(ids)) == 4
        assert_silent(env.peer, env.endpoint)  # no fifth request, no cancellation


def test_an_error_in_a_round_fails_the_call():
    with driver_peer() as env:
        call = start(env, Answers())
        first = env.peer.recv()
        reply(env.peer, first, input_required(inputRequests={"name": ELICIT}))
        retry = env.peer.recv()
        env.peer.send(
            {
                "jsonrpc": "2.0",
                "id": retry["id"],
                "error": {"code": -32602, "message": "Invalid or expired requestState"},
            }
        )
        with pytest.raises(McpError) as caught:
            call.result(WAIT)
        assert caught.value.code == -32602


def test_an_unknown_result_type_fails_the_call():
    with driver_peer() as env:
        call = start(env, Answers())
        reply(env.peer, env.peer.recv(), {"resultType": "someday"})
        with pytest.raises(PeerMisbehaved, match="someday"):
            call.result(WAIT)


def test_a_failing_input_handler_fails_the_call_and_sends_nothing():
    def broken(_request: InputRequest, _token: CancelToken) -> Any:
        raise ValueError("no user here")

    with driver_peer() as env:
        call = start(env, Answers(broken))
        reply(env.peer, env.peer.recv(), input_required(inputRequests={"name": ELICIT}))
        with pytest.raises(ValueError, match="no user here"):
            call.result(WAIT)
        assert_silent(env.peer, env.endpoint)


def test_cancelling_during_a_round_cancels_that_round_on_the_wire():
    with driver_peer() as env:
        call = start(env, Answers())
        first = env.peer.recv()
        reply(env.peer, first, input_required(inputRequests={"name": ELICIT}, requestState="s"))
        retry = env.peer.recv()
        assert call.cancel("user pressed stop") is True
        cancel = env.peer.recv()
        assert cancel == {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": retry["id"], "reason": "user pressed stop"},
        }
        with pytest.raises(Cancelled, match="user pressed stop"):
            call.result(WAIT)
        reply(env.peer, retry, FINAL)  # a late answer is dropped
        assert call.cancelled()
        assert_silent(env.peer, env.endpoint)


def blocking_answers() -> tuple[Answers, threading.Event, threading.Event]:
    """An input handler that blocks until its token fires; (answers, started, stopped)."""
    started, stopped = threading.Event(), threading.Event()

    def wait_for_the_user(_request: InputRequest, token: CancelToken) -> Any:
        started.set()
        if token.wait(WAIT):
            stopped.set()
            raise Cancelled(token.reason)
        return {"action": "decline"}

    return Answers(wait_for_the_user), started, stopped


def test_cancelling_between_rounds_stops_the_input_handler_and_sends_nothing():
    answers, started, stopped = blocking_answers()
    with driver_peer() as env:
        call = start(env, answers)
        reply(
            env.peer,
            env.peer.recv(),
            input_required(inputRequests={"name": ELICIT}, requestState="s"),
        )
        assert started.wait(WAIT)
        assert call.cancel("never mind") is True
        assert stopped.wait(WAIT)
        assert answers.tokens[0].reason == "never mind"
        with pytest.raises(Cancelled):
            call.result(WAIT)
        assert_silent(env.peer, env.endpoint)  # no retry, no notifications/cancelled


def test_a_cancel_token_cancels_between_rounds_too():
    answers, started, stopped = blocking_answers()
    token = CancelToken()
    with driver_peer() as env:
        call = start(env, answers, cancel_token=token)
        reply(env.peer, env.peer.recv(), input_required(inputRequests={"name": ELICIT}))
        assert started.wait(WAIT)
        token.cancel("caller gave up")
        assert stopped.wait(WAIT)
        with pytest.raises(Cancelled, match="caller gave up"):
            call.result(WAIT)
        assert_silent(env.peer, env.endpoint)


def test_an_already_cancelled_token_sends_nothing():
    token = CancelToken()
    token.cancel("too late")
    with driver_peer() as env:
        call = start(env, Answers(), cancel_token=token)
        assert call.cancelled()
        assert_silent(env.peer, env.endpoint)


def test_the_timeout_between_rounds_stops_the_input_handler_and_sends_nothing():
    answers, started, stopped = blocking_answers()
    with driver_peer() as env:
        call = start(env, answers, timeout=1.5)  # ample for the first answer to arrive first
        reply(env.peer, env.peer.recv(), input_required(inputRequests={"name": ELICIT}))
        assert started.wait(WAIT)
        with pytest.raises(RequestTimeout, match=r"timed out after 1\.5 s"):
            call.result(WAIT)
        assert stopped.wait(WAIT)
        assert_silent(env.peer, env.endpoint)


def test_the_timeout_bounds_the_whole_call_and_cancels_the_round_in_flight():
    with driver_peer() as env:
        call = start(env, Answers(), timeout=1.5)  # ample for the retry to be sent first
        reply(env.peer, env.peer.recv(), input_required(inputRequests={"name": ELICIT}))
        retry = env.peer.recv()
        cancel = env.peer.recv()  # the timeout passes while the retry is in flight
        assert cancel["method"] == "notifications/cancelled"
        assert cancel["params"] == {"requestId": retry["id"], "reason": "timed out after 1.5 s"}
        with pytest.raises(RequestTimeout):
            call.result(WAIT)
        assert_silent(env.peer, env.endpoint)


def test_progress_of_every_round_reaches_the_caller():
    seen: list[float] = []
    progressed = threading.Event()

    def on_progress(progress: float, _total: Any, _message: Any) -> None:
        seen.append(progress)
        if len(seen) == 2:
            progressed.set()

    with driver_peer() as env:
        call = start(env, Answers(), on_progress=on_progress)
        first = env.peer.recv()
        env.peer.send(
            {
                "jsonrpc": "2.0",
                "method": "notifications/progress",
                "params": {
                    "progressToken": first["params"]["_meta"]["progressToken"],
                    "progress": 1,
                },
            }
        )
        reply(env.peer, first, input_required(inputRequests={"name": ELICIT}))
        retry = env.peer.recv()
        token = retry["params"]["_meta"]["progressToken"]
        assert token != first["params"]["_meta"]["progressToken"]
        env.peer.send(
            {
                "jsonrpc": "2.0",
                "method": "notifications/progress",
                "params": {"progressToken": token, "progress": 2},
            }
        )
        assert progressed.wait(WAIT)
        reply(env.peer, retry, FINAL)
        assert call.result(WAIT) == FINAL
        assert seen == [1, 2]


def test_a_refused_round_is_sent_again_once_when_the_client_says_so():
    refusals: list[int] = []

    def resend_after(error: BaseException) -> bool:
        assert isinstance(error, McpError)
        refusals.append(error.code)
        return error.code == -32022

    with driver_peer() as env:
        call = start(env, Answers(), resend_after=resend_after)
        unsupported = {
            "code": -32022,
            "message": "Unsupported protocol version",
            "data": {"supported": ["2026-07-28"]},
        }
        for _ in range(2):
            request = env.peer.recv()
            assert request["params"] == {"name": "ask", "arguments": {"q": 1}}
            env.peer.send({"jsonrpc": "2.0", "id": request["id"], "error": unsupported})
        with pytest.raises(McpError) as caught:
            call.result(WAIT)
        assert caught.value.code == -32022
        assert refusals == [-32022]  # asked once: the second refusal is the call's error
        assert_silent(env.peer, env.endpoint)
