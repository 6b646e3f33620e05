"""Cancellation over Streamable HTTP (2025-11-25), driven with raw httpx requests.

* A POSTed ``notifications/cancelled`` cancels the request *in that session*: the handler's
  token fires and the request's SSE stream ends with no response.
* The same notification POSTed in another session cancels nothing there.
* A client that disconnects does not cancel anything, and leaves nothing behind.
"""

from __future__ import annotations

import threading

from support.http import Sse, make_server
from support.messages import call_tool, initialize_request, notification
from support.threads import join_new_threads
from support.waiting import WAIT


def cancel(request_id, reason="test cancels"):
    return notification("notifications/cancelled", {"requestId": request_id, "reason": reason})


def test_posted_cancel_fires_the_token_and_ends_the_stream_without_response(
    probe, serve, raw, wire
):
    # one worker: a tools/call after the cancelled one runs only once the cancelled
    # handler's run (and any answer it might write) is over: a barrier, not a sleep
    handle = serve(make_server(probe, max_workers=1))
    session = raw(handle.url)
    session.initialize()
    stream = session.open(call_tool("gated", {"tag": "c"}, 7))
    assert probe.started("c").wait(WAIT)
    answer = session.post(cancel(7))
    assert answer.status_code == 202
    assert probe.cancelled("c").wait(WAIT), "the handler's token did not fire"
    assert probe.reasons["c"] == "test cancels"
    assert stream.rest() == [], "a cancelled request's stream must end with no event"
    assert stream.ended
    # barrier: the single worker is free again, so the cancelled run is completely over
    assert (
        session.call(call_tool("echo", {"text": "after"}, 8))["result"]["content"][0]["text"]
        == "after"
    )
    assert wire.responses(7) == [], "the cancelled request was answered"
    assert [rid for _, rid in wire.accepted_cancels] == [7]
    assert handle.app.sessions()[0].endpoint.in_flight() == (0, 0)


def test_cancel_for_a_string_id_does_not_touch_the_integer_id(probe, serve, raw, wire):
    handle = serve(make_server(probe))
    session = raw(handle.url)
    session.initialize()
    number = session.open(call_tool("gated", {"tag": "int"}, 7))
    text = session.open(call_tool("gated", {"tag": "str"}, "7"))
    assert probe.started("int").wait(WAIT) and probe.started("str").wait(WAIT)
    assert session.post(cancel("7")).status_code == 202
    assert probe.cancelled("str").wait(WAIT)
    assert text.rest() == []
    assert not probe.cancelled("int").is_set()
    probe.release("int")
    assert [m["id"] for _, m in number.rest()] == [7]
    assert wire.responses("7") == []


def test_cancel_posted_in_another_session_cancels_nothing_there(probe, serve, raw, wire):
    handle = serve(make_server(probe))
    alice, bob = raw(handle.url), raw(handle.url)
    alice.initialize()
    bob.initialize()
    # both sessions have a request with the same id in flight
    alice_stream = alice.open(call_tool("gated", {"tag": "alice"}, 5))
    bob_stream = bob.open(call_tool("gated", {"tag": "bob"}, 5))
    assert probe.started("alice").wait(WAIT) and probe.started("bob").wait(WAIT)
    # bob cancels *his* request 5: alice's request 5 must not notice
    assert bob.post(cancel(5)).status_code == 202
    assert probe.cancelled("bob").wait(WAIT)
    assert bob_stream.rest() == []
    assert not probe.cancelled("alice").is_set()
    # a cancel for an id bob never used cancels nothing anywhere
    assert bob.post(cancel(5)).status_code == 202
    assert not probe.cancelled("alice").is_set()
    probe.release("alice")
    events = alice_stream.rest()
    assert [(m["id"], m["result"]["content"][0]["text"]) for _, m in events] == [
        (5, "alice: released")
    ]
    assert probe.completed("alice").is_set() and not probe.cancelled("alice").is_set()
    assert [sid for sid, _ in wire.accepted_cancels] == [bob.session_id]


def test_cancel_posted_in_another_session_when_that_session_has_no_such_request(
    probe, serve, raw, wire
):
    handle = serve(make_server(probe))
    owner, stranger = raw(handle.url), raw(handle.url)
    owner.initialize()
    stranger.initialize()
    stream = owner.open(call_tool("gated", {"tag": "owned"}, 11))
    assert probe.started("owned").wait(WAIT)
    assert stranger.post(cancel(11)).status_code == 202
    probe.release("owned")
    assert [m["id"] for _, m in stream.rest()] == [11]
    assert probe.completed("owned").is_set() and not probe.cancelled("owned").is_set()
    assert wire.accepted_cancels == []
    assert len(handle.app.sessions()) == 2  # both sessions live on


def test_disconnect_mid_stream_does_not_cancel_and_leaks_nothing(probe, serve, raw, wire):
    handle = serve(make_server(probe))
    session = raw(handle.url)
    session.initialize()
    before = set(threading.enumerate())
    stream = session.open(call_tool("progress_gated", {"tag": "d"}, 3, progress_token=3))
    progress_event = stream.next()
    assert progress_event is not None and progress_event[1]["method"] == "notifications/progress"
    assert probe.started("d").wait(WAIT)
    stream.close()  # the client goes away mid-stream
    probe.release("d")
    assert probe.completed("d").wait(WAIT), "the handler did not complete"
    assert not probe.cancelled("d").is_set(), "a disconnect must not cancel the request"
    # the handler's answer was still produced, and can be fetched with Last-Event-ID
    assert len(wire.responses(3)) == 1
    resumed = Sse(session.get(last_event_id=progress_event[0]))
    assert [m.get("id") for _, m in resumed.rest()][-1] == 3
    # end the session: the server lets go of everything that belonged to it
    assert session.delete().status_code == 200
    assert handle.app.sessions() == []
    session.close()
    leaked = join_new_threads(before)
    assert not leaked, f"server threads left after the disconnect: {[t.name for t in leaked]}"


def test_disconnect_on_an_idle_stream_ends_its_request_thread_once_the_answer_comes(
    probe, serve, raw, wire
):
    handle = serve(make_server(probe))
    session = raw(handle.url)
    session.initialize()
    before = set(threading.enumerate())
    stream = session.open(call_tool("gated", {"tag": "idle"}, 4))
    assert probe.started("idle").wait(WAIT)
    stream.close()
    probe.release("idle")
    assert probe.completed("idle").wait(WAIT)
    assert len(wire.responses(4)) == 1
    session.close()  # no DELETE: the session stays, its request threads must not
    alive = join_new_threads(before)
    # what may remain is the session's worker pool, never a per-request HTTP thread
    assert all("worker" in t.name for t in alive), [t.name for t in alive]


def test_many_cancels_in_one_session(probe, serve, raw, wire):
    handle = serve(make_server(probe, max_workers=4))
    session = raw(handle.url)
    session.initialize()
    tags = [f"m{i}" for i in range(4)]
    streams = {
        tag: session.open(call_tool("gated", {"tag": tag}, 100 + i)) for i, tag in enumerate(tags)
    }
    for tag in tags:
        assert probe.started(tag).wait(WAIT)
    for i, tag in enumerate(tags):
        if i % 2 == 0:
            assert session.post(cancel(100 + i)).status_code == 202
        else:
            probe.release(tag)
    for i, tag in enumerate(tags):
        events = streams[tag].rest()
        if i % 2 == 0:
            assert probe.cancelled(tag).wait(WAIT) and events == []
        else:
            assert [m["id"] for _, m in events] == [100 + i]
    assert [len(wire.responses(100 + i)) for i in range(4)] == [0, 1, 0, 1]
    assert sorted(rid for _, rid in wire.accepted_cancels) == [100, 102]


def test_cancelled_request_with_a_json_only_accept_gets_204_and_no_body(probe, serve, raw, wire):
    handle = serve(make_server(probe))
    session = raw(handle.url)
    session.initialize()
    answers: list = []

    def post_json_only() -> None:
        answers.append(
            session.post(
                call_tool("gated", {"tag": "j"}, 21),
                headers=session.headers(accept="application/json"),
            )
        )

    poster = threading.Thread(target=post_json_only, name="json-poster")
    poster.start()
    try:
        assert probe.started("j").wait(WAIT)
        assert session.post(cancel(21)).status_code == 202
        assert probe.cancelled("j").wait(WAIT)
    finally:
        poster.join(WAIT)
    assert not poster.is_alive()
    assert answers[0].status_code == 204 and answers[0].content == b""
    assert wire.responses(21) == []


def test_a_json_answer_that_outlives_request_timeout_cancels_the_request(probe, serve, raw, wire):
    """The POST can carry no answer after request_timeout: the handler is cancelled, not
    left running for nobody."""
    handle = serve(
        make_server(probe).wsgi_app(path="/mcp", json_response=True, request_timeout=0.3)
    )
    session = raw(handle.url)
    hello = session.post(
        initialize_request(0), headers=session.headers(session=False, accept="application/json")
    )
    assert hello.status_code == 200 and hello.json()["id"] == 0
    session.session_id = hello.headers["mcp-session-id"]
    answer = session.post(
        call_tool("gated", {"tag": "t"}, 41), headers=session.headers(accept="application/json")
    )
    assert answer.status_code == 204 and answer.content == b""
    assert probe.cancelled("t").wait(WAIT)
    assert "request_timeout" in (probe.reasons.get("t") or "")
    assert wire.responses(41) == []
