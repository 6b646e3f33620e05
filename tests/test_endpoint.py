"""The threaded Endpoint over an in-memory pair.

Handlers are gated on events (``Blocker``): a test cancels between "started" and "finished",
so every interleaving below is certain, not likely. No sleeps.
"""

from __future__ import annotations

import concurrent.futures
import gc
import signal
import threading
import time
import weakref

import pytest
from support.endpoints import Blocker, endpoint_pair, raw_server
from support.threads import wait_until_blocked_in
from support.waiting import WAIT, wait_until

from mcp_sync import deadlines
from mcp_sync.cancel import CancelToken
from mcp_sync.endpoint import Endpoint, PendingCall
from mcp_sync.errors import Cancelled, ConnectionClosed, McpError, RequestTimeout
from mcp_sync.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
)
from mcp_sync.transports.memory import memory_pair


def echo(req):
    return req.params


def settle_and_close(p) -> None:
    """Close the server (joining its workers, so every write it would make is made) and let the
    client read everything up to the end of the stream."""
    assert p.server.close(grace=WAIT) == []
    assert p.client.wait_closed(WAIT), "client did not see the end of the stream"


# =========================================================================================
# basics
# =========================================================================================
def test_call_round_trip():
    with endpoint_pair({"echo": echo}) as p:
        assert p.client.request("echo", {"text": "hi"}) == {"text": "hi"}
        call = p.client.submit("echo", {"n": 1})
        assert isinstance(call, PendingCall) and isinstance(call, concurrent.futures.Future)
        assert call.result(WAIT) == {"n": 1}
        assert call.request_id == 2
        assert call.method == "echo"
        assert p.client.in_flight() == (0, 0)


def test_a_settled_call_is_freed_without_the_garbage_collector():
    """Nothing of a settled call is kept in a reference cycle (its request's link back to
    it, the done-callbacks that ran): it is freed once dropped, with the collector off."""
    with endpoint_pair({"echo": echo}) as p:
        seen: list[object] = []
        gc.collect()
        gc.disable()
        try:
            call = p.client.submit("echo", {"n": 1})
            call.add_done_callback(lambda done, seen=seen: seen.append(done.result()))
            assert call.result(WAIT) == {"n": 1}
            wait_until(lambda: seen == [{"n": 1}], "the done-callback")
            freed = weakref.ref(call)
            del call
            assert freed() is None
        finally:
            gc.enable()


def test_a_pending_call_is_waited_for_through_its_own_methods_only():
    """A PendingCall's future lock has nothing to notify: waiting on it through the base
    class (which no method of the call does) fails loudly instead of waiting for nothing."""
    gate = threading.Event()
    with endpoint_pair({"gated": lambda req: gate.wait(WAIT) and {}}) as p:
        call = p.client.submit("gated")
        try:
            with pytest.raises(RuntimeError, match="waited for with result"):
                concurrent.futures.Future.result(call, 0.01)
            done, not_done = concurrent.futures.wait([call], timeout=0)  # takes the lock
            assert not done and not_done == {call}
        finally:
            gate.set()
        assert call.result(WAIT) == {}
        assert concurrent.futures.Future.result(call, 0) == {}  # done: answered at once


def test_handler_returning_none_gives_empty_result():
    with endpoint_pair({"nothing": lambda req: None}) as p:
        assert p.client.request("nothing") == {}


def test_handler_errors_become_json_rpc_errors():
    def bad_params(req):
        raise McpError(INVALID_PARAMS, "Unknown tool", {"name": "nope"})

    def crash(req):
        raise ValueError("handler blew up")

    with endpoint_pair({"bad": bad_params, "crash": crash}) as p:
        with pytest.raises(McpError) as info:
            p.client.request("bad")
        assert (info.value.code, info.value.message, info.value.data) == (
            INVALID_PARAMS,
            "Unknown tool",
            {"name": "nope"},
        )
        with pytest.raises(McpError) as info:
            p.client.request("crash")
        assert info.value.code == INTERNAL_ERROR
        assert info.value.message == "handler blew up"
        with pytest.raises(McpError) as info:
            p.client.request("no/such/method")
        assert info.value.code == METHOD_NOT_FOUND
        # exception() returns the error without raising
        assert isinstance(p.client.submit("bad").exception(WAIT), McpError)


def test_no_request_handler_answers_method_not_found():
    a, b = memory_pair()
    server = Endpoint(b, name="server").start()
    client = Endpoint(a, name="client").start()
    try:
        with pytest.raises(McpError) as info:
            client.request("tools/list")
        assert info.value.code == METHOD_NOT_FOUND
    finally:
        client.close()
        server.close()


def test_requests_in_both_directions():
    seen = []

    def sampling(req):
        seen.append(req.method)
        return {"role": "assistant"}

    with endpoint_pair({"echo": echo}, client_handlers={"sampling/createMessage": sampling}) as p:
        assert p.server.request("sampling/createMessage", {"m": 1}) == {"role": "assistant"}
        assert p.client.request("echo", {"x": 1}) == {"x": 1}
        assert seen == ["sampling/createMessage"]


def test_start_twice_and_context_manager():
    a, b = memory_pair()
    with Endpoint(b, request_handler=echo, name="server") as server:
        with pytest.raises(RuntimeError):
            server.start()
        with Endpoint(a, name="client") as client:
            assert client.request("x", {"k": 1}) == {"k": 1}
        assert client.closed
    assert server.closed


def test_result_wait_timeout_does_not_cancel_the_call():
    blocker = Blocker()
    with endpoint_pair({"block": blocker}) as p:
        call = p.client.submit("block")
        blocker.wait_started()
        with pytest.raises(TimeoutError):
            call.result(0.05)
        assert not call.done()
        assert p.client_t.cancels() == []
        blocker.release(call.request_id)
        assert call.result(WAIT) == {"released": call.request_id}


def test_notifications_are_delivered_in_order_on_a_worker():
    got = []
    all_in = threading.Event()
    reader_names = []

    def on_note(note):
        got.append((note.method, note.params["i"]))
        reader_names.append(threading.current_thread().name)
        if len(got) == 20:
            all_in.set()

    with endpoint_pair(notification_handler=on_note) as p:
        for i in range(20):
            p.client.notify("notifications/message", {"i": i})
        assert all_in.wait(WAIT), f"only {len(got)} notifications delivered"
        assert got == [("notifications/message", i) for i in range(20)]
        assert not any(name.endswith("-reader") for name in reader_names)


# =========================================================================================
# cancellation, inbound and outbound
# =========================================================================================
def test_cancel_while_handler_runs_sends_nothing_back():
    blocker = Blocker()
    with endpoint_pair({"block": blocker}) as p:
        call = p.client.submit("block", {"x": 1})
        (req,) = blocker.wait_started()
        assert call.cancel("user stop") is True
        woken, token_cancelled = blocker.wait_finished(call.request_id)
        assert woken and token_cancelled, "the handler's token did not fire"
        assert req.token.reason == "user stop"
        with pytest.raises(Cancelled) as info:
            call.result(WAIT)
        assert info.value.reason == "user stop"
        assert call.cancelled() and call.done()
        assert call.cancel_reason == "user stop"

        settle_and_close(p)
        assert p.server_t.responses_to(call.request_id) == [], "a cancelled request was answered"
        assert p.server_t.messages() == [], "the server wrote something for a cancelled request"
        assert p.client_t.cancels() == [
            {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": call.request_id, "reason": "user stop"},
            }
        ]
        assert sum(p.client.dropped.values()) == 0


def test_cancel_is_idempotent_and_sent_once():
    blocker = Blocker()
    with endpoint_pair({"block": blocker}) as p:
        call = p.client.submit("block")
        blocker.wait_started()
        assert call.cancel("one") is True
        assert call.cancel("two") is True
        assert call.cancel() is True
        blocker.wait_finished(call.request_id)
        settle_and_close(p)
        assert len(p.client_t.cancels()) == 1
        assert call.cancel_reason == "one"
        with pytest.raises(Cancelled):
            call.result()
        with pytest.raises(Cancelled):
            call.exception()


def test_completion_then_cancel_response_stands():
    with endpoint_pair({"echo": echo}) as p:
        call = p.client.submit("echo", {"v": 1})
        assert call.result(WAIT) == {"v": 1}
        assert call.cancel("too late") is False
        assert not call.cancelled()
        assert call.result() == {"v": 1}
        assert call.cancel_reason is None
        assert p.client_t.cancels() == [], "a completed call must not be cancelled on the wire"


def test_completed_on_server_but_cancelled_before_client_read_it():
    """The response is on the wire when the client cancels: the server ignores the cancel,
    the client settles as cancelled and drops the late response quietly."""
    handled = []

    def record(req):
        handled.append(req)
        return {"v": req.params["v"]}

    with endpoint_pair({"echo": record}) as p:
        gate = p.client_t.hold_reads(lambda m: "result" in m)
        call = p.client.submit("echo", {"v": 1})
        assert gate.arrived.wait(WAIT), "the response never reached the client transport"
        assert len(p.server_t.responses_to(call.request_id)) == 1  # the response was written
        assert call.cancel("raced") is True
        gate.release.set()
        with pytest.raises(Cancelled):
            call.result(WAIT)
        # barrier: a later call's answer means both readers processed everything before it
        assert p.client.request("echo", {"v": 2}) == {"v": 2}
        assert p.client.dropped["late response after cancellation"] == 1
        assert p.server.dropped["cancellation of an unknown or finished request"] == 1
        assert not handled[0].token.cancelled, "a cancel after completion must not fire the token"


def test_cancel_token_cancels_the_call():
    blocker = Blocker()
    with endpoint_pair({"block": blocker}) as p:
        token = CancelToken()
        call = p.client.submit("block", cancel_token=token)
        (req,) = blocker.wait_started()
        assert token.cancel("shutdown") is True
        woken, cancelled = blocker.wait_finished(call.request_id)
        assert woken and cancelled
        assert req.token.reason == "shutdown"
        with pytest.raises(Cancelled) as info:
            call.result(WAIT)
        assert info.value.reason == "shutdown"
        settle_and_close(p)
        assert [c["params"] for c in p.client_t.cancels()] == [
            {"requestId": call.request_id, "reason": "shutdown"}
        ]
        assert p.server_t.responses_to(call.request_id) == []


def test_pre_cancelled_token_sends_nothing():
    with endpoint_pair({"echo": echo}) as p:
        token = CancelToken()
        token.cancel("already")
        call = p.client.submit("echo", {"v": 1}, cancel_token=token)
        assert call.done() and call.cancelled()
        assert call.request_id is None
        with pytest.raises(Cancelled) as info:
            call.result(0)
        assert info.value.reason == "already"
        assert call.cancel() is True
        assert p.client_t.messages() == [], (
            "nothing may be sent for a call cancelled before it began"
        )


def test_cancel_token_after_completion_sends_nothing():
    with endpoint_pair({"echo": echo}) as p:
        token = CancelToken()
        call = p.client.submit("echo", {"v": 1}, cancel_token=token)
        assert call.result(WAIT) == {"v": 1}
        assert token._callbacks == [], "a finished call must unregister from the token"
        token.cancel("later")
        assert not call.cancelled()
        assert p.client_t.cancels() == []


class SettleFirstToken(CancelToken):
    """Holds each PendingCall's registration until that call has settled: forces the
    interleaving "the call finished before submit() registered on the token"."""

    def add_callback(self, callback):
        call = getattr(callback, "__self__", None)
        if isinstance(call, PendingCall):
            wait_until(call.done, "the call to settle")
        super().add_callback(callback)


def test_call_settled_before_token_registration_leaves_no_callback():
    with endpoint_pair({"echo": echo}) as p:
        token = SettleFirstToken()  # e.g. one application-wide shutdown token for many calls
        for _ in range(3):
            call = p.client.submit("echo", {"v": 1}, cancel_token=token, timeout=0)
            with pytest.raises(RequestTimeout):
                call.result(WAIT)
        assert token._callbacks == [], "finished calls still hang on the caller's token"


def test_timeout_raises_request_timeout_and_cancels_on_the_wire():
    blocker = Blocker()
    with endpoint_pair({"block": blocker}) as p:
        start = time.monotonic()
        call = p.client.submit("block", timeout=0.5)
        (req,) = blocker.wait_started()
        with pytest.raises(RequestTimeout) as info:
            call.result(WAIT)
        elapsed = time.monotonic() - start
        assert isinstance(info.value, TimeoutError)
        assert not isinstance(info.value, McpError)
        assert 0.45 <= elapsed < 3.0, elapsed
        woken, cancelled = blocker.wait_finished(call.request_id)
        assert woken and cancelled, "the server handler did not observe the timeout"
        assert req.token.reason == "timed out after 0.5 s"
        assert call.cancel() is False, "a timed-out call is not 'cancelled'"
        assert not call.cancelled()
        assert isinstance(call.exception(), RequestTimeout)
        settle_and_close(p)
        assert [c["params"] for c in p.client_t.cancels()] == [
            {"requestId": call.request_id, "reason": "timed out after 0.5 s"}
        ]
        assert p.server_t.responses_to(call.request_id) == []
    wait_until(lambda: deadlines.pending_deadlines() == 0, "the call timeouts to be gone")


def test_timeout_entry_removed_when_call_completes():
    with endpoint_pair({"echo": echo}) as p:
        assert p.client.request("echo", {"v": 1}, timeout=60) == {"v": 1}
        wait_until(
            lambda: deadlines.pending_deadlines() == 0,
            "the completed call's timeout to leave the scheduler",
        )


def test_call_with_timeout_that_completes_in_time():
    with endpoint_pair({"echo": echo}) as p:
        calls = [p.client.submit("echo", {"i": i}, timeout=30) for i in range(50)]
        assert [c.result(WAIT) for c in calls] == [{"i": i} for i in range(50)]
        assert p.client_t.cancels() == []


# =========================================================================================
# progress
# =========================================================================================
def test_on_progress_callbacks_in_order():
    reqs = []

    def work(req):
        reqs.append(req)
        for i in range(1, 11):
            assert p.server.report_progress(req, i, 10, f"step {i}") is True
        return "done"

    events = []
    names = []
    all_in = threading.Event()

    def on_progress(progress, total, message):
        events.append((progress, total, message))
        names.append(threading.current_thread().name)
        if progress == 10:
            all_in.set()

    with endpoint_pair({"work": work}) as p:
        call = p.client.submit("work", {"a": 1}, on_progress=on_progress)
        assert call.result(WAIT) == "done"
        assert all_in.wait(WAIT), f"progress callbacks missing: {events}"
        assert events == [(i, 10, f"step {i}") for i in range(1, 11)]
        assert not any(n.endswith("-reader") for n in names), "progress callback ran on the reader"
        assert reqs[0].params == {"a": 1, "_meta": {"progressToken": call.request_id}}
        # progress stops when the request ends
        assert p.server.report_progress(reqs[0], 11) is False
        assert p.server.dropped.total() == 0


def test_report_progress_without_token_sends_nothing():
    results = []

    def work(req):
        results.append(p.server.report_progress(req, 1))
        return "ok"

    with endpoint_pair({"work": work}) as p:
        assert p.client.request("work") == "ok"
        assert results == [False]
        assert not any(m.get("method") == "notifications/progress" for m in p.server_t.messages())


def _ticker(server_ref, ticks):
    """A handler that reports progress every 20 ms until its token fires."""

    def tick(req):
        n = 0
        while not req.token.wait(0.02):
            n += 1
            server_ref[0].report_progress(req, n)
            ticks.append(n)
        return {"ticks": n}

    return tick


def test_reset_timeout_on_progress_keeps_call_alive_until_max_total():
    server_ref, ticks = [], []
    seen = []
    with endpoint_pair({"tick": _ticker(server_ref, ticks)}) as p:
        server_ref.append(p.server)
        start = time.monotonic()
        call = p.client.submit(
            "tick",
            timeout=0.5,
            reset_timeout_on_progress=True,
            max_total_timeout=1.5,
            on_progress=lambda progress, total, message: seen.append(progress),
        )
        with pytest.raises(RequestTimeout) as info:
            call.result(WAIT)
        elapsed = time.monotonic() - start
        assert elapsed >= 1.45, f"progress did not keep the call alive ({elapsed:.2f} s)"
        assert elapsed < 4.0, f"max_total_timeout did not end the call ({elapsed:.2f} s)"
        assert "maximum total timeout" in str(info.value)
        settle_and_close(p)
        (cancel,) = p.client_t.cancels()
        assert cancel["params"] == {
            "requestId": call.request_id,
            "reason": "maximum total timeout reached",
        }
        assert len(ticks) > 10
    wait_until(lambda: deadlines.pending_deadlines() == 0, "the call timeouts to be gone")


def test_reset_timeout_on_progress_without_callback():
    server_ref, ticks = [], []
    with endpoint_pair({"tick": _ticker(server_ref, ticks)}) as p:
        server_ref.append(p.server)
        start = time.monotonic()
        call = p.client.submit(
            "tick", timeout=0.4, reset_timeout_on_progress=True, max_total_timeout=1.2
        )
        with pytest.raises(RequestTimeout) as info:
            call.result(WAIT)
        elapsed = time.monotonic() - start
        assert elapsed >= 1.15, f"progress did not keep the call alive ({elapsed:.2f} s)"
        assert "maximum total timeout" in str(info.value)


def test_timeout_without_reset_expires_even_while_progress_flows():
    server_ref, ticks = [], []
    seen = []
    with endpoint_pair({"tick": _ticker(server_ref, ticks)}) as p:
        server_ref.append(p.server)
        start = time.monotonic()
        call = p.client.submit(
            "tick", timeout=0.3, max_total_timeout=5, on_progress=lambda *a: seen.append(a)
        )
        with pytest.raises(RequestTimeout) as info:
            call.result(WAIT)
        elapsed = time.monotonic() - start
        assert 0.25 <= elapsed < 2.0, elapsed
        assert "timed out after 0.3 s" in str(info.value)
        wait_until(lambda: len(ticks) > 0, "the ticker to tick")


# =========================================================================================
# workers and the reader
# =========================================================================================
def test_queued_request_cancelled_while_workers_busy_never_starts():
    blocker = Blocker()
    ran = threading.Event()

    def record(req):
        ran.set()
        return "ran"

    with endpoint_pair(
        {"block": blocker, "record": record}, server_workers=1, inline={"ping": lambda req: {}}
    ) as p:
        first = p.client.submit("block")
        blocker.wait_started()  # the only worker is busy now
        queued = p.client.submit("record")
        assert queued.cancel("not needed") is True
        # ping is answered on the server's reader: once it returns, the reader has registered
        # the queued request and processed its cancellation
        assert p.client.request("ping", timeout=WAIT) == {}
        assert p.server.in_flight() == (1, 0)
        blocker.release(first.request_id)
        assert first.result(WAIT) == {"released": first.request_id}
        settle_and_close(p)
        assert not ran.is_set(), "a request cancelled while queued was started"
        assert p.server_t.responses_to(queued.request_id) == []


def test_cancel_is_seen_while_every_worker_is_busy():
    blocker = Blocker()
    fired_on = []
    with endpoint_pair({"block": blocker}, server_workers=1) as p:
        call = p.client.submit("block")
        (req,) = blocker.wait_started()
        req.token.add_callback(lambda _t: fired_on.append(threading.current_thread().name))
        call.cancel("now")
        woken, cancelled = blocker.wait_finished(call.request_id)
        assert woken and cancelled
        assert fired_on == ["server-reader"], "the reader must fire the token itself"


def test_inline_handler_answers_while_workers_busy():
    blocker = Blocker()
    with endpoint_pair({"block": blocker}, server_workers=1, inline={"ping": lambda req: {}}) as p:
        calls = [p.client.submit("block") for _ in range(3)]
        blocker.wait_started()
        assert p.client.request("ping", timeout=WAIT) == {}
        for c in calls:
            c.cancel()


def test_reader_survives_garbage_and_answers_with_the_right_errors():
    with raw_server({"echo": echo}) as s:
        peer = s.peer
        peer.send(b"this is not json")
        assert peer.recv() == {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": PARSE_ERROR, "message": "Parse error"},
        }
        peer.send(b'{"jsonrpc":"2.0","id":1,"method":"\xff\xfe"}')
        assert peer.recv()["error"]["code"] == PARSE_ERROR
        peer.send(b'{"jsonrpc":"2.0","id":true,"method":"echo"}')
        reply = peer.recv()
        assert reply["id"] is None and reply["error"]["code"] == INVALID_REQUEST
        peer.send(b'[{"jsonrpc":"2.0","id":2,"method":"echo"}]')
        assert peer.recv()["error"]["code"] == INVALID_REQUEST
        peer.send(b'{"jsonrpc":"2.0","id":3}')
        reply = peer.recv()
        assert reply["id"] == 3 and reply["error"]["code"] == INVALID_REQUEST
        peer.send(b'{"jsonrpc":"1.0","id":4,"method":"echo"}')
        reply = peer.recv()
        assert reply["id"] == 4 and reply["error"]["code"] == INVALID_REQUEST
        # things that must be ignored without any answer
        peer.send(b"")
        peer.send(b"   ")
        peer.send(b'{"jsonrpc":"2.0","id":999,"result":{}}')  # response to an unknown id
        peer.send(b'{"jsonrpc":"2.0","id":"abc","result":{}}')
        peer.send(b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}')
        peer.send(b'{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"x"}}')
        peer.send(b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":77}}')
        peer.send(b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":"bad"}')
        peer.send(
            b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1}}'
        )
        # ... and the connection keeps serving: the next thing written is this answer
        peer.send({"jsonrpc": "2.0", "id": 5, "method": "echo", "params": {"still": "alive"}})
        assert peer.recv() == {"jsonrpc": "2.0", "id": 5, "result": {"still": "alive"}}
        peer.send({"jsonrpc": "2.0", "id": 6, "method": "nope"})
        reply = peer.recv()
        assert reply["id"] == 6 and reply["error"]["code"] == METHOD_NOT_FOUND
        assert s.server.dropped["response to an unknown id"] == 2
        assert s.server.dropped["the peer reported an error without an id"] == 1
        assert s.server.dropped["cancellation of an unknown or finished request"] == 1
        assert not s.server.closed


def test_client_survives_garbage_from_server():
    with endpoint_pair({"echo": echo}) as p:
        p.server_t.write(b"garbage from the server\n")
        p.server_t.write(b'{"jsonrpc":"2.0","id":12345,"result":{}}\n')
        assert p.client.request("echo", {"ok": 1}) == {"ok": 1}
        # the client answered the garbage with -32700 and the server dropped that quietly
        parse_errors = [
            m for m in p.client_t.messages() if m.get("error", {}).get("code") == PARSE_ERROR
        ]
        assert len(parse_errors) == 1
        assert p.client.dropped["response to an unknown id"] == 1
        wait_until(
            lambda: p.server.dropped["the peer reported an error without an id"] == 1,
            "the id-less error to be counted as dropped",
        )


def test_late_response_from_peer_is_dropped_and_connection_keeps_serving():
    with raw_server({"echo": echo}) as s:
        call = s.server.submit("roots/list")
        sent = s.peer.recv()
        assert sent == {"jsonrpc": "2.0", "id": call.request_id, "method": "roots/list"}
        assert call.cancel("no longer needed") is True
        assert s.peer.recv() == {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": call.request_id, "reason": "no longer needed"},
        }
        s.peer.send({"jsonrpc": "2.0", "id": call.request_id, "result": {"roots": []}})
        s.peer.send({"jsonrpc": "2.0", "id": 1, "method": "echo", "params": {"a": 1}})
        assert s.peer.recv() == {"jsonrpc": "2.0", "id": 1, "result": {"a": 1}}
        assert s.server.dropped["late response after cancellation"] == 1
        with pytest.raises(Cancelled):
            call.result(0)


def test_peer_cancelling_our_outbound_id_does_not_touch_it():
    with raw_server() as s:
        call = s.server.submit("roots/list")
        msg = s.peer.recv()
        # wrong direction: the peer "cancels" the id of a request *we* sent
        s.peer.send(
            {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": msg["id"]},
            }
        )
        s.peer.send({"jsonrpc": "2.0", "id": msg["id"], "result": {"roots": ["file:///"]}})
        assert call.result(WAIT) == {"roots": ["file:///"]}
        assert s.server.dropped["cancellation of an unknown or finished request"] == 1


def test_response_echoing_string_id_is_matched():
    with raw_server() as s:
        call = s.server.submit("ping")
        msg = s.peer.recv()
        s.peer.send({"jsonrpc": "2.0", "id": str(msg["id"]), "result": {}})
        assert call.result(WAIT) == {}


def test_string_and_int_ids_in_flight_cancel_only_the_int():
    blocker = Blocker()
    with raw_server({"block": blocker}) as s:
        s.peer.send({"jsonrpc": "2.0", "id": "7", "method": "block"})
        s.peer.send({"jsonrpc": "2.0", "id": 7, "method": "block"})
        blocker.wait_started(2)
        s.peer.send(
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}
        )
        assert blocker.wait_finished(7) == (True, True)
        assert not blocker.request("7").token.cancelled
        blocker.release("7")
        assert s.peer.recv() == {"jsonrpc": "2.0", "id": "7", "result": {"released": "7"}}
        assert s.server.close() == []
        assert s.peer.drain() == [], "the cancelled integer-id request was answered"


def test_duplicate_inbound_id_gets_invalid_request():
    blocker = Blocker()
    with raw_server({"block": blocker, "echo": echo}) as s:
        s.peer.send({"jsonrpc": "2.0", "id": 5, "method": "block"})
        blocker.wait_started()
        s.peer.send({"jsonrpc": "2.0", "id": 5, "method": "echo", "params": {}})
        assert s.peer.recv() == {
            "jsonrpc": "2.0",
            "id": 5,
            "error": {"code": INVALID_REQUEST, "message": "request id is already in use"},
        }
        assert len(blocker.started) == 1
        blocker.release(5)
        assert s.peer.recv() == {"jsonrpc": "2.0", "id": 5, "result": {"released": 5}}


def test_inbound_cancel_of_initialize_is_ignored():
    blocker = Blocker()
    with raw_server({"initialize": blocker}) as s:
        s.peer.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}})
        (req,) = blocker.wait_started()
        s.peer.send(
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 0}}
        )
        s.peer.send({"jsonrpc": "2.0", "id": 1, "method": "nope"})
        assert s.peer.recv()["id"] == 1  # the reader has processed the cancellation by now
        assert not req.token.cancelled
        assert s.server.dropped["initialize cannot be cancelled"] == 1
        blocker.release(0)
        assert s.peer.recv() == {"jsonrpc": "2.0", "id": 0, "result": {"released": 0}}


def test_outbound_initialize_is_not_cancelled_on_the_wire():
    with raw_server() as s:
        call = s.server.submit("initialize", {"protocolVersion": "2025-11-25"}, timeout=WAIT)
        assert s.peer.recv()["method"] == "initialize"
        assert call.cancel("interrupted") is True
        with pytest.raises(Cancelled):
            call.result(0)
        s.peer.send({"jsonrpc": "2.0", "id": 99, "method": "nope"})
        assert s.peer.recv()["id"] == 99, "something was sent for the cancelled initialize"


# =========================================================================================
# the end of a connection
# =========================================================================================
def test_peer_closing_fails_every_pending_call_at_once():
    blocker = Blocker()
    with endpoint_pair({"block": blocker}) as p:
        calls = [p.client.submit("block") for _ in range(3)]
        blocker.wait_started(3)
        start = time.monotonic()
        p.server_t.inner.close()  # the peer's end goes away
        for call in calls:
            with pytest.raises(ConnectionClosed):
                call.result(WAIT)
        assert time.monotonic() - start < 2.0, "pending calls did not fail promptly"
        errors = [c.exception() for c in calls]
        assert len({id(e) for e in errors}) == 3
        assert p.client.wait_closed(WAIT) and p.client.closed
        with pytest.raises(ConnectionClosed):
            p.client.submit("block")
        with pytest.raises(ConnectionClosed):
            p.client.notify("notifications/message", {})
        # the server's handlers were cancelled too
        for req in blocker.started:
            assert blocker.wait_finished(req.id) == (True, True)
            assert req.token.reason == "connection closed"
        for call in calls:
            assert call.cancel() is False


def test_server_close_cancels_handlers_and_fails_client_calls():
    blocker = Blocker()
    closed_callbacks = []
    with endpoint_pair({"block": blocker}) as p:
        p.client.add_close_callback(lambda: closed_callbacks.append("client"))
        call = p.client.submit("block")
        (req,) = blocker.wait_started()
        assert p.server.close(grace=WAIT) == []
        assert req.token.cancelled and req.token.reason == "connection closed"
        with pytest.raises(ConnectionClosed):
            call.result(WAIT)
        assert p.client.wait_closed(WAIT)
        assert closed_callbacks == ["client"]
        p.client.add_close_callback(lambda: closed_callbacks.append("late"))
        assert closed_callbacks == ["client", "late"]
        assert p.server_t.responses_to(call.request_id) == []


def test_local_close_fails_pending_calls():
    blocker = Blocker()
    with endpoint_pair({"block": blocker}) as p:
        call = p.client.submit("block")
        blocker.wait_started()
        assert p.client.close() == []
        with pytest.raises(ConnectionClosed):
            call.result(0)
        assert blocker.wait_finished(call.request_id) == (True, True)


def test_close_joins_every_thread():
    blocker = Blocker()
    before = set(threading.enumerate())
    with endpoint_pair({"block": blocker, "echo": echo}) as p:
        calls = [p.client.submit("block") for _ in range(3)]
        calls += [p.client.submit("echo", {"i": i}, on_progress=lambda *a: None) for i in range(5)]
        blocker.wait_started(3)
        started = [t for t in threading.enumerate() if t not in before]
        assert any(t.name == "server-reader" for t in started)
        assert any(t.name.startswith("server-worker") for t in started)
        assert p.client.close() == []
        assert p.server.close() == []
        assert p.client.close() == []  # idempotent
    # close() removed every timeout; the process-wide deadline thread then only lingers
    assert deadlines.stop_idle_scheduler(WAIT), "a closed endpoint left a deadline pending"
    left = [t.name for t in started if t.is_alive()]
    assert left == [], f"threads still running after close(): {left}"


def test_close_is_bounded_when_a_handler_ignores_cancellation():
    release = threading.Event()
    started = threading.Event()

    def stubborn(req):
        started.set()
        release.wait(WAIT * 2)
        return "finally"

    with endpoint_pair({"stubborn": stubborn}) as p:
        call = p.client.submit("stubborn")
        assert started.wait(WAIT)
        t0 = time.monotonic()
        stuck = p.server.close(grace=0.2)
        assert time.monotonic() - t0 < 2.0
        assert [t.name for t in stuck] == ["server-worker-1"]
        release.set()
        stuck[0].join(WAIT)
        assert not stuck[0].is_alive()
        with pytest.raises(ConnectionClosed):
            call.result(WAIT)
        assert p.server_t.responses_to(call.request_id) == []


# =========================================================================================
# futures API
# =========================================================================================
def test_wait_and_as_completed_with_cancelled_and_timed_out_calls():
    blocker = Blocker()
    with endpoint_pair({"block": blocker, "echo": echo}) as p:
        done_call = p.client.submit("echo", {"v": 1})
        to_cancel = p.client.submit("block")
        timed_out = p.client.submit("block", timeout=0.2)
        pending = p.client.submit("block")
        callbacks = []
        to_cancel.add_done_callback(lambda f: callbacks.append(f))
        blocker.wait_started(2)
        me = threading.current_thread()

        def cancel_when_blocked_in(function: str, call: PendingCall) -> threading.Thread:
            """Cancel ``call`` from another thread once this thread waits inside ``function``."""

            def run() -> None:
                wait_until_blocked_in(me, function)
                call.cancel("x")

            thread = threading.Thread(target=run, name="canceller")
            thread.start()
            return thread

        canceller = cancel_when_blocked_in("as_completed", to_cancel)
        try:
            finished = list(
                concurrent.futures.as_completed([done_call, to_cancel, timed_out], timeout=WAIT)
            )
        finally:
            canceller.join(WAIT)
        assert set(finished) == {done_call, to_cancel, timed_out}
        assert callbacks == [to_cancel], "done callback must run exactly once"
        assert to_cancel.cancelled()

        done, not_done = concurrent.futures.wait(
            [done_call, to_cancel, timed_out, pending], timeout=0
        )
        assert done == {done_call, to_cancel, timed_out} and not_done == {pending}

        canceller = cancel_when_blocked_in("wait", pending)
        try:
            done, not_done = concurrent.futures.wait(
                [pending], timeout=WAIT, return_when=concurrent.futures.FIRST_COMPLETED
            )
        finally:
            canceller.join(WAIT)
        assert done == {pending} and not_done == set()
        assert done_call.result() == {"v": 1}
        assert isinstance(timed_out.exception(), RequestTimeout)


def test_waiter_not_stranded_when_an_interrupted_waiter_kept_the_gate():
    """A KeyboardInterrupt between a waiter's successful acquire and its release leaves the
    call's wake-up gate held; other waiters (timeout=None) must still return."""
    blocker = Blocker()
    with endpoint_pair({"block": blocker}) as p:
        call = p.client.submit("block")
        blocker.wait_started()
        real = call._done_gate
        kept = threading.Event()

        class InterruptedWaiterGate:
            # the first acquire that succeeds keeps the lock, as an interrupted waiter would
            def acquire(self, blocking=True, timeout=-1):
                if not kept.is_set():
                    if real.acquire(blocking, timeout):
                        kept.set()
                    return False
                return real.acquire(blocking, timeout)

            def release(self):
                real.release()

        call._done_gate = InterruptedWaiterGate()
        results = []
        waiter = threading.Thread(
            target=lambda: results.append(call.result()), name="waiter", daemon=True
        )
        waiter.start()
        wait_until_blocked_in(waiter, "_wait_done")
        blocker.release(call.request_id)
        assert kept.wait(WAIT), "the call never settled"
        waiter.join(WAIT)
        assert not waiter.is_alive(), "a waiter was stranded by a gate left acquired"
        assert results == [{"released": call.request_id}]


@pytest.mark.skipif(
    threading.current_thread() is not threading.main_thread(),
    reason="signals reach the main thread only",
)
def test_keyboard_interrupt_while_blocked_cancels_on_the_wire():
    blocker = Blocker()
    main = threading.main_thread()
    old_handler = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with endpoint_pair({"block": blocker}) as p:
            call = p.client.submit("block")
            sent: list[bool] = []

            def interrupter() -> None:
                blocker.wait_started()
                wait_until_blocked_in(main, "_wait_done")
                signal.pthread_kill(main.ident, signal.SIGINT)
                sent.append(True)

            helper = threading.Thread(target=interrupter, name="interrupter")
            helper.start()
            try:
                with pytest.raises(KeyboardInterrupt):
                    call.result(WAIT * 2)
            finally:
                helper.join(WAIT)
            assert sent == [True]
            assert call.cancelled()
            assert call.cancel_reason == "interrupted"
            woken, cancelled = blocker.wait_finished(call.request_id)
            assert woken and cancelled, "the server handler's token did not fire"
            assert blocker.started[0].token.reason == "interrupted"
            settle_and_close(p)
            assert [c["params"] for c in p.client_t.cancels()] == [
                {"requestId": call.request_id, "reason": "interrupted"}
            ]
            assert p.server_t.responses_to(call.request_id) == []
    finally:
        signal.signal(signal.SIGINT, old_handler)
