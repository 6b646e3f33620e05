"""The Client: blocking calls that can be cancelled, timed out and interrupted, from any thread.

Every test judges by what the server's handler saw (its token) and by what crossed the wire
(the server's transport is recorded): a cancelled request is never answered.
"""

from __future__ import annotations

import concurrent.futures
import random
import signal
import threading
from collections import Counter
from typing import Any

import pytest
from support.messages import as_wire, is_response, responses_to, with_method
from support.probes import HandlerProbe
from support.sessions import Connection, connected
from support.waiting import WAIT, wait_event, wait_until

from mcp_sync import (
    Cancelled,
    CancelToken,
    Client,
    ConnectionClosed,
    Context,
    McpError,
    RequestTimeout,
    Server,
)
from mcp_sync.call_options import USE_CLIENT_DEFAULT


def gated_server(probe: HandlerProbe, **tool_options: Any) -> Server:
    """A server whose ``waiter`` tool blocks until cancelled (bounded) and records it.

    With ``max_workers=1`` (see :func:`settle`) a later ``noop`` call runs only after the
    ``waiter`` request has been fully processed, including any (wrong) response.
    """
    server = Server("gated", max_workers=1)

    @server.tool(**tool_options)
    def waiter(ctx: Context) -> str:
        probe.values["request_id"] = ctx.request_id
        probe.values["token"] = ctx.cancel_token
        probe.started.set()
        try:
            probe.values["cancelled"] = ctx.wait(WAIT)
            probe.values["reason"] = ctx.cancel_token.reason
            return "finished"
        finally:
            probe.finished.set()

    @server.tool()
    def noop() -> str:
        return "noop"

    return server


def settle(conn: Connection, probe: HandlerProbe) -> None:
    """Return once the gated request is fully processed and its output (if any) delivered."""
    wait_event(probe.finished, "the handler to return")
    assert conn.client.call_tool("noop", timeout=WAIT).content[0].text == "noop"
    conn.barrier()


def assert_never_answered(conn: Connection, request_id: int) -> None:
    assert not responses_to(conn.wire.sent, request_id), (
        f"the server answered cancelled request {request_id}"
    )
    assert conn.client.endpoint.dropped["late response after cancellation"] == 0
    assert conn.client.endpoint.dropped["response to an unknown id"] == 0


def cancellations_for(conn: Connection, request_id: int) -> list[dict]:
    return [
        m
        for m in with_method(conn.wire.received, "notifications/cancelled")
        if m["params"]["requestId"] == request_id
    ]


# -- cancelling a call -------------------------------------------------------------------------------
def test_pending_call_cancel_from_another_thread():
    probe = HandlerProbe()
    with connected(gated_server(probe)) as conn:
        pending = conn.client.call_tool_future("waiter")
        wait_event(probe.started, "the handler to start")
        outcome: list[bool] = []
        canceller = threading.Thread(
            target=lambda: outcome.append(pending.cancel("changed my mind"))
        )
        canceller.start()
        canceller.join(WAIT)
        assert outcome == [True]
        assert pending.cancelled() and pending.done()
        with pytest.raises(Cancelled) as info:
            pending.result(WAIT)
        assert isinstance(info.value, concurrent.futures.CancelledError)
        assert info.value.reason == "changed my mind"
        settle(conn, probe)
        assert probe.values["cancelled"] is True
        assert probe.values["reason"] == "changed my mind"
        assert probe.values["request_id"] == pending.request_id
        assert_never_answered(conn, pending.request_id)
        notes = cancellations_for(conn, pending.request_id)
        assert notes == [
            {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": pending.request_id, "reason": "changed my mind"},
            }
        ]
        # idempotent: a second cancel sends nothing more
        assert pending.cancel() is True
        conn.barrier()
        assert len(cancellations_for(conn, pending.request_id)) == 1


def test_cancel_token_cancels_a_blocking_call():
    probe = HandlerProbe()
    token = CancelToken()
    with connected(gated_server(probe)) as conn:

        def cancel_when_started() -> None:
            if probe.started.wait(WAIT):
                token.cancel("user pressed stop")

        canceller = threading.Thread(target=cancel_when_started)
        canceller.start()
        try:
            with pytest.raises(concurrent.futures.CancelledError) as info:
                conn.client.call_tool("waiter", cancel_token=token)
        finally:
            canceller.join(WAIT)
        assert isinstance(info.value, Cancelled) and info.value.reason == "user pressed stop"
        settle(conn, probe)
        assert probe.values["cancelled"] is True
        assert probe.values["reason"] == "user pressed stop"
        assert_never_answered(conn, probe.values["request_id"])
        assert len(cancellations_for(conn, probe.values["request_id"])) == 1


def test_an_already_cancelled_token_sends_nothing():
    probe = HandlerProbe()
    token = CancelToken()
    token.cancel("too late")
    with connected(gated_server(probe)) as conn:
        with pytest.raises(Cancelled):
            conn.client.call_tool("waiter", cancel_token=token)
        conn.barrier()
        assert not with_method(conn.wire.received, "tools/call")
        assert not probe.started.is_set()


def test_timeout_cancels_on_the_wire_and_raises_request_timeout():
    probe = HandlerProbe()
    with connected(gated_server(probe)) as conn:
        with pytest.raises(RequestTimeout) as info:
            conn.client.call_tool("waiter", timeout=0.2)
        assert isinstance(info.value, TimeoutError)
        assert not isinstance(info.value, McpError), (
            "a local timeout must not look like a peer error"
        )
        settle(conn, probe)
        assert probe.values["cancelled"] is True
        request_id = probe.values["request_id"]
        notes = cancellations_for(conn, request_id)
        assert len(notes) == 1 and "timed out" in notes[0]["params"]["reason"]
        assert probe.values["reason"] == notes[0]["params"]["reason"]
        assert_never_answered(conn, request_id)


def test_default_timeout_applies_to_every_call():
    probe = HandlerProbe()
    with connected(gated_server(probe), default_timeout=0.2) as conn:
        with pytest.raises(RequestTimeout):
            conn.client.call_tool("waiter")
        settle(conn, probe)
        assert probe.values["cancelled"] is True


def test_timeout_none_waits_past_the_default_timeout():
    """``timeout=None`` means no timeout, even on a client with a default_timeout."""
    probe = HandlerProbe()
    with connected(gated_server(probe), default_timeout=0.1) as conn:
        pending = conn.client.call_tool_future("waiter", timeout=None)
        wait_event(probe.started, "the handler to start")
        with pytest.raises(concurrent.futures.TimeoutError):  # waits well past 0.1 s
            pending.result(timeout=0.5)
        assert not pending.done() and not probe.values["token"].cancelled
        assert not with_method(conn.wire.received, "notifications/cancelled")
        assert pending.cancel() is True
        settle(conn, probe)


def test_use_client_default_follows_the_current_default_timeout():
    probe = HandlerProbe()
    with connected(gated_server(probe)) as conn:
        assert conn.client.default_timeout is None
        conn.client.default_timeout = 0.2
        assert conn.client.endpoint.default_timeout == 0.2
        with pytest.raises(RequestTimeout, match=r"timed out after 0\.2 s"):
            conn.client.call_tool("waiter", timeout=USE_CLIENT_DEFAULT)
        settle(conn, probe)
        assert probe.values["cancelled"] is True
        with pytest.raises(ValueError, match="default_timeout"):
            conn.client.default_timeout = -1


def test_cancel_after_completion_returns_false_and_sends_nothing():
    probe = HandlerProbe()
    with connected(gated_server(probe)) as conn:
        pending = conn.client.call_tool_future("noop")
        assert pending.result(WAIT).content[0].text == "noop"
        assert pending.cancel() is False
        assert not pending.cancelled()
        conn.barrier()
        assert not with_method(conn.wire.received, "notifications/cancelled")


def test_a_local_wait_timeout_does_not_cancel_the_call():
    probe = HandlerProbe()
    with connected(gated_server(probe)) as conn:
        pending = conn.client.call_tool_future("waiter")
        wait_event(probe.started, "the handler to start")
        with pytest.raises(concurrent.futures.TimeoutError):
            pending.result(timeout=0.05)
        assert not pending.done()
        assert not probe.values["token"].cancelled
        assert pending.cancel() is True
        settle(conn, probe)
        assert probe.values["cancelled"] is True


def test_futures_work_with_wait_and_as_completed():
    server = Server("futures")

    @server.tool()
    def square(n: int) -> int:
        return n * n

    with connected(server) as conn:
        calls = {conn.client.call_tool_future("square", {"n": n}): n for n in range(6)}
        _done, not_done = concurrent.futures.wait(calls, timeout=WAIT)
        assert not not_done
        for future in concurrent.futures.as_completed(calls, timeout=WAIT):
            assert future.result().structured_content == {"result": calls[future] ** 2}


def test_closing_the_client_fails_pending_calls_and_cancels_the_handler():
    probe = HandlerProbe()
    with connected(gated_server(probe)) as conn:
        pending = conn.client.call_tool_future("waiter")
        wait_event(probe.started, "the handler to start")
        conn.client.close()
        with pytest.raises(ConnectionClosed):
            pending.result(WAIT)
        wait_event(probe.finished, "the handler to be cancelled by the closed connection")
        assert probe.values["cancelled"] is True
        with pytest.raises(ConnectionClosed):
            conn.client.call_tool_future("noop")
        assert conn.handle.wait(WAIT)


# -- server-side tool timeouts ------------------------------------------------------------------------
def test_tool_timeout_answers_even_when_the_handler_ignores_its_token():
    probe = HandlerProbe()
    server = Server("stubborn", max_workers=1)

    @server.tool(timeout=0.2)
    def stubborn() -> str:
        probe.started.set()
        probe.release.wait(WAIT)  # ignores its token on purpose
        probe.finished.set()
        return "too late"

    @server.tool()
    def noop() -> str:
        return "noop"

    with connected(server) as conn:
        pending = conn.client.call_tool_future("stubborn")
        try:
            result = pending.result(WAIT)
            assert not probe.finished.is_set(), "the answer must not wait for the handler"
        finally:
            probe.release.set()
        assert result.is_error is True
        text = result.content[0].text
        assert "timed out" in text and "stubborn" in text
        settle(conn, probe)
        answers = responses_to(conn.wire.sent, pending.request_id)
        assert len(answers) == 1, answers
        assert not with_method(conn.wire.received, "notifications/cancelled")
        assert conn.client.endpoint.dropped["response to an unknown id"] == 0


@pytest.mark.parametrize("raise_it", [False, True])
def test_tool_timeout_fires_a_cooperative_handlers_token(raise_it):
    probe = HandlerProbe()
    server = Server("polite", max_workers=1)

    @server.tool(timeout=0.2)
    def polite(ctx: Context) -> str:
        probe.started.set()
        try:
            probe.values["cancelled"] = ctx.wait(WAIT)
            probe.values["reason"] = ctx.cancel_token.reason
            if raise_it:
                ctx.raise_if_cancelled()
            return "finished anyway"
        finally:
            probe.finished.set()

    @server.tool()
    def noop() -> str:
        return "noop"

    with connected(server) as conn:
        pending = conn.client.call_tool_future("polite")
        answer = pending.result(WAIT)
        assert answer.is_error is True and "timed out after 0.2 s" in answer.content[0].text
        settle(conn, probe)
        assert probe.values["cancelled"] is True
        assert "timed out" in probe.values["reason"]
        assert len(responses_to(conn.wire.sent, pending.request_id)) == 1


def test_tool_timeout_does_not_fire_for_a_quick_tool():
    server = Server("quick")
    tokens: list[CancelToken] = []

    @server.tool(timeout=0.5)
    def quick(ctx: Context) -> str:
        tokens.append(ctx.cancel_token)
        return "fast"

    with connected(server) as conn:
        assert conn.client.call_tool("quick", timeout=WAIT).content[0].text == "fast"
    assert not tokens[0].cancelled


def test_client_cancel_beats_a_tool_timeout():
    probe = HandlerProbe()
    with connected(gated_server(probe, timeout=WAIT)) as conn:
        pending = conn.client.call_tool_future("waiter")
        wait_event(probe.started, "the handler to start")
        pending.cancel("not needed")
        settle(conn, probe)
        assert probe.values["reason"] == "not needed"
        assert_never_answered(conn, pending.request_id)


# -- progress and timeouts ------------------------------------------------------------------------------
def ticking_server() -> Server:
    server = Server("ticks")

    @server.tool()
    def ticks(n: int, ctx: Context) -> str:
        for i in range(n):
            if ctx.wait(0.05):
                return "stopped"
            ctx.report_progress(i + 1, n)
        return "done"

    return server


def test_progress_resets_the_timeout():
    seen: list[float] = []
    with connected(ticking_server()) as conn:
        result = conn.client.call_tool(
            "ticks",
            {"n": 12},
            timeout=0.3,
            reset_timeout_on_progress=True,
            on_progress=lambda p, t, m: seen.append(p),
        )
        assert result.content[0].text == "done"  # 0.6 s of work under a 0.3 s timeout


def test_progress_resets_the_timeout_without_a_progress_callback():
    with connected(ticking_server()) as conn:
        result = conn.client.call_tool(
            "ticks", {"n": 12}, timeout=0.3, reset_timeout_on_progress=True
        )
        assert result.content[0].text == "done"


def test_without_reset_the_timeout_holds_despite_progress():
    with connected(ticking_server()) as conn, pytest.raises(RequestTimeout, match="timed out"):
        conn.client.call_tool("ticks", {"n": 12}, timeout=0.3, on_progress=lambda *a: None)


def test_max_total_timeout_holds_whatever_progress_arrives():
    with connected(ticking_server()) as conn:
        with pytest.raises(RequestTimeout, match="maximum total timeout"):
            conn.client.call_tool(
                "ticks",
                {"n": 40},
                timeout=0.3,
                reset_timeout_on_progress=True,
                max_total_timeout=0.5,
                on_progress=lambda *a: None,
            )
        conn.barrier()
        notes = with_method(conn.wire.received, "notifications/cancelled")
        assert len(notes) == 1 and notes[0]["params"]["reason"] == "maximum total timeout reached"


# -- Ctrl-C ---------------------------------------------------------------------------------------
def test_ctrl_c_during_call_tool_cancels_on_the_wire_and_propagates():
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("needs the main thread")
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal
    try:
        _ctrl_c_during_call_tool()
    finally:
        signal.signal(signal.SIGINT, previous)


def _ctrl_c_during_call_tool() -> None:
    probe = HandlerProbe()
    main_ident = threading.main_thread().ident
    assert main_ident is not None

    def interrupt_when_started() -> None:
        if probe.started.wait(WAIT):
            signal.pthread_kill(main_ident, signal.SIGINT)

    with connected(gated_server(probe)) as conn:
        helper = threading.Thread(target=interrupt_when_started)
        helper.start()
        try:
            with pytest.raises(KeyboardInterrupt):
                conn.client.call_tool("waiter", timeout=WAIT * 2)
        finally:
            helper.join(WAIT)
        settle(conn, probe)
        request_id = probe.values["request_id"]
        assert probe.values["cancelled"] is True
        assert probe.values["reason"] == "interrupted"
        assert [n["params"] for n in cancellations_for(conn, request_id)] == [
            {"requestId": request_id, "reason": "interrupted"}
        ]
        assert_never_answered(conn, request_id)
        # the client is still usable
        assert conn.client.call_tool("noop", timeout=WAIT).content[0].text == "noop"


# -- nested requests -------------------------------------------------------------------------------
def test_cancelling_a_tool_call_cancels_its_nested_request_to_the_client():
    server = Server("nested")
    server_saw: dict[str, Any] = {}
    tool_done = threading.Event()

    @server.tool()
    def ask(ctx: Context) -> str:
        try:
            ctx.session.create_message(
                [{"role": "user", "content": {"type": "text", "text": "hi"}}], max_tokens=5
            )
            server_saw["outcome"] = "answered"
        except BaseException as exc:
            server_saw["outcome"] = exc
        finally:
            tool_done.set()
        return "ignored"

    sampling_started, sampling_done = threading.Event(), threading.Event()
    client_saw: dict[str, Any] = {}

    def sampling(params: dict, ctx: Context) -> dict:
        client_saw["id"] = ctx.request_id
        sampling_started.set()
        try:
            client_saw["cancelled"] = ctx.wait(WAIT)
            client_saw["reason"] = ctx.cancel_token.reason
            return {"role": "assistant", "content": {"type": "text", "text": "late"}, "model": "m"}
        finally:
            sampling_done.set()

    # one client worker: the roots/list below runs only after the sampling request is done
    with connected(server, sampling_handler=sampling, roots=["/r"], max_workers=1) as conn:
        pending = conn.client.call_tool_future("ask")
        wait_event(sampling_started, "the nested sampling request at the client")
        pending.cancel("abandoned")
        wait_event(sampling_done, "the client's sampling handler to be cancelled")
        wait_event(tool_done, "the tool to finish")
        assert client_saw["cancelled"] is True
        assert isinstance(server_saw["outcome"], Cancelled)
        nested_cancels = [
            m
            for m in with_method(conn.wire.sent, "notifications/cancelled")
            if m["params"]["requestId"] == client_saw["id"]
        ]
        assert len(nested_cancels) == 1
        assert as_wire(conn.handle.session.list_roots(timeout=WAIT)) == [{"uri": "file:///r"}]
        assert not responses_to(conn.wire.received, client_saw["id"]), (
            "the client answered a cancelled request"
        )


# -- many threads, one client ---------------------------------------------------------------------------
def test_one_client_shared_by_16_threads(fast_switching):
    server = Server("shared", max_workers=8)
    tokens: dict[int, CancelToken] = {}
    active = [0]
    lock = threading.Lock()

    @server.tool()
    def work(ms: int, ctx: Context) -> str:
        with lock:
            tokens[ctx.request_id] = ctx.cancel_token
            active[0] += 1
        try:
            ctx.wait(ms / 1000)
            return f"done {ms}"
        finally:
            with lock:
                active[0] -= 1

    calls: list[tuple[str, Any]] = []  # (mode, PendingCall or result)
    callbacks: Counter[int] = Counter()
    errors: list[BaseException] = []

    def count_callback(future: Any) -> None:
        with lock:
            callbacks[id(future)] += 1

    def run(thread_no: int, client: Client) -> None:
        rng = random.Random(thread_no)
        try:
            for j in range(12):
                mode = ("plain", "cancel_now", "cancel_running", "token_race", "timeout")[
                    (thread_no + j) % 5
                ]
                if mode == "plain":
                    result = client.call_tool("work", {"ms": 0}, timeout=WAIT)
                    assert result.content[0].text == "done 0"
                    with lock:
                        calls.append((mode, result))
                    continue
                token = CancelToken() if mode == "token_race" else None
                ms = {
                    "cancel_now": 50,
                    "cancel_running": 2000,
                    "token_race": rng.choice([0, 1, 4]),
                    "timeout": rng.choice([0, 40]),
                }[mode]
                future = client.call_tool_future(
                    "work",
                    {"ms": ms},
                    cancel_token=token,
                    timeout=0.01 if mode == "timeout" else None,
                )
                future.add_done_callback(count_callback)
                with lock:
                    calls.append((mode, future))
                if mode == "cancel_now":
                    future.cancel("now")
                elif mode == "cancel_running":
                    with pytest.raises(concurrent.futures.TimeoutError):
                        future.result(timeout=0.005)
                    assert future.cancel("running") is True
                elif mode == "token_race":
                    threading.Event().wait(rng.random() * 0.003)
                    token.cancel("race")  # type: ignore[union-attr]
        except BaseException as exc:  # reported below
            errors.append(exc)

    with connected(server, max_workers=4) as conn:
        threads = [
            threading.Thread(target=run, args=(n, conn.client), name=f"caller-{n}")
            for n in range(16)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(WAIT * 2)
        assert not errors, errors
        assert not any(t.is_alive() for t in threads)

        outcomes: dict[int, str] = {}
        for mode, item in calls:
            if mode == "plain":
                continue
            future = item
            try:
                result = future.result(WAIT)
                assert result.content[0].text.startswith("done")
                outcome = "result"
            except Cancelled:
                outcome = "cancelled"
            except RequestTimeout:
                outcome = "timeout"
            assert future.done()
            outcomes[future.request_id] = outcome
            if mode == "cancel_running":
                assert outcome == "cancelled"
        wait_until(
            lambda: callbacks and sum(callbacks.values()) == len(outcomes), "every done-callback"
        )
        assert set(callbacks.values()) == {1}, "a call settled more than once"

        # let the server finish, then make sure everything it wrote has arrived
        endpoint = conn.handle.session.endpoint
        wait_until(lambda: endpoint.in_flight()[0] == 0 and active[0] == 0, "the server to go idle")
        conn.client.ping(timeout=WAIT)
        assert conn.client.endpoint.in_flight() == (0, 0)

        sent, received = conn.wire.snapshot()
        answered = Counter(m["id"] for m in sent if is_response(m))
        assert all(n == 1 for n in answered.values()), "a request was answered twice"
        cancel_notes = Counter(
            m["params"]["requestId"] for m in with_method(received, "notifications/cancelled")
        )
        late = 0
        for request_id, outcome in outcomes.items():
            token = tokens.get(request_id)
            if outcome == "result":
                assert answered[request_id] == 1
                assert token is not None and not token.cancelled
                assert cancel_notes[request_id] == 0
            else:
                assert cancel_notes[request_id] == 1, (
                    f"call {request_id} ({outcome}) was not cancelled exactly once on the wire"
                )
                if answered[request_id]:
                    late += 1  # completion won the race at the server
                    assert token is not None and not token.cancelled
                else:
                    # the cancellation won: the handler's token fired, or it never started
                    assert token is None or token.cancelled
        # the client quietly dropped exactly the answers that lost the race
        assert conn.client.endpoint.dropped["late response after cancellation"] == late
        assert conn.client.endpoint.dropped["response to an unknown id"] == 0
        # every server-side cancellation corresponds to a call the client cancelled
        for request_id, token in tokens.items():
            if token.cancelled:
                assert outcomes.get(request_id) in ("cancelled", "timeout")
        kinds = Counter(outcomes.values())
        assert kinds["cancelled"] >= 16 * 12 // 5, kinds


def test_tool_timeout_error_always_beats_a_handler_that_returns_when_its_token_fires(
    fast_switching,
):
    """The deadline answers before it fires the token, so the handler's own late answer
    (sent the moment it sees the token) can never reach the caller first."""
    server = Server("racer", max_workers=4)

    @server.tool(timeout=0.02)
    def racer(ctx: Context) -> str:
        ctx.wait(WAIT)
        return "the handler's own answer"

    with connected(server) as conn:
        pending = [conn.client.call_tool_future("racer") for _ in range(200)]
        texts = [p.result(WAIT).content[0].text for p in pending]
    assert all("timed out" in text for text in texts), texts
