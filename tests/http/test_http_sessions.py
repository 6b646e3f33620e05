"""Sessions of the WSGI app: one shared handler pool, the session cap, DELETE and close that
never wait on stuck handlers, sessionless answers that echo the id, and the app's stats.

Driven with raw httpx requests against ``serve_http`` on a loopback port.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from support.http import make_server
from support.messages import call_tool, initialize_request, request
from support.probes import GateProbe
from support.waiting import WAIT, wait_until

from mcp_sync import Context, Server
from mcp_sync.http import McpWsgiApp, serve_http

JSON_ONLY = "application/json"


def stubborn_server(probe: GateProbe, **options: Any) -> Server:
    """The test tools, plus ``stubborn``: a handler that ignores its cancellation."""
    server = make_server(probe, **options)

    @server.tool()
    def stubborn(tag: str, ctx: Context) -> str:
        """Block until the test releases ``tag``, whatever the token says."""
        probe.started(tag).set()
        released = probe.wake(tag).wait(WAIT * 4)
        if ctx.cancelled:
            probe.cancelled(tag).set()
        return "released" if released else "stuck"

    return server


def initialize(http: httpx.Client, url: str, request_id: Any = 0) -> httpx.Response:
    """POST ``initialize`` asking for a JSON answer (no stream holds a server thread)."""
    return http.post(
        url,
        json=initialize_request(request_id),
        headers={"Accept": JSON_ONLY, "Content-Type": "application/json"},
    )


# -- one shared pool, no thread per idle session ------------------------------------------------------
def test_many_sessions_share_one_bounded_pool_and_idle_sessions_hold_no_thread(probe, serve):
    app = McpWsgiApp(make_server(probe), max_workers=4)
    handle = serve(app)
    with httpx.Client(timeout=WAIT) as http:
        assert initialize(http, handle.url).status_code == 200  # the connection's thread exists
        baseline = threading.active_count()
        for n in range(500):
            answer = initialize(http, handle.url, n)
            assert answer.status_code == 200, answer.text
    stats = app.stats()
    assert stats.sessions == 501
    assert stats.pool.max_workers == 4 and stats.pool.threads <= 4
    # 500 more sessions cost at most the pool's 4 threads (and the server's connection threads)
    assert threading.active_count() <= baseline + 4 + 2, threading.active_count() - baseline
    # and once the work is done, the pool's threads exit: idle sessions own no thread at all
    wait_until(lambda: app.stats().pool.threads == 0, "the pool's idle threads to exit")
    assert app.stats().sessions == 501


def test_handlers_of_different_sessions_run_on_the_apps_pool(probe, serve, raw):
    app = McpWsgiApp(stubborn_server(probe), max_workers=2)
    handle = serve(app)
    first, second = raw(handle.url), raw(handle.url)
    first.initialize()
    second.initialize()
    streams = [
        first.open(call_tool("gated", {"tag": "a"}, 1)),
        second.open(call_tool("gated", {"tag": "b"}, 1)),
    ]
    assert probe.started("a").wait(WAIT) and probe.started("b").wait(WAIT)
    worker_names = {
        t.name for t in threading.enumerate() if t.name.startswith("mcp_sync-http-worker-")
    }
    assert len(worker_names) == 2  # both handlers on the app's pool, none on a session's own
    third = second.open(call_tool("touch", {"tag": "t"}, 2))  # queued: both workers are busy
    wait_until(lambda: app.stats().pool.queued == 1, "one request to wait in the pool's queue")
    assert not probe.event("t").is_set()
    probe.release("a")
    assert probe.event("t").wait(WAIT)  # the freed worker takes the queued request
    probe.release("b")
    for stream in [*streams, third]:
        assert [m.get("id") for _, m in stream.rest()] in ([1], [2])


def test_a_request_waiting_for_the_shared_pool_is_logged_with_the_pools_state(
    probe, serve, raw, caplog
):
    """worker_wait_warning reaches the app's pool: a request stuck behind a handler that
    holds the only worker is logged, and the stats show it queued."""
    app = McpWsgiApp(stubborn_server(probe), max_workers=1, worker_wait_warning=0.05)
    handle = serve(app)
    session = raw(handle.url)
    session.initialize()
    caplog.set_level(logging.WARNING, logger="mcp_sync.workers")
    blocker = session.open(call_tool("stubborn", {"tag": "hold"}, 1))
    assert probe.started("hold").wait(WAIT)
    queued = session.open(call_tool("touch", {"tag": "late"}, 2))
    wait_until(
        lambda: any(
            "1 of 1 workers busy" in r.getMessage()
            for r in caplog.records
            if r.name == "mcp_sync.workers"
        ),
        "a warning for the request waiting for a worker",
    )
    stats = app.stats().pool
    assert (stats.queued, stats.busy, stats.max_workers) == (1, 1, 1) and stats.longest_wait >= 0.05
    probe.release("hold")
    assert [m["id"] for _, m in blocker.rest()] == [1]
    assert [m["id"] for _, m in queued.rest()] == [2]


def test_a_request_cancelled_while_queued_on_the_shared_pool_never_runs(probe, serve, raw, wire):
    app = McpWsgiApp(make_server(probe), max_workers=1)
    handle = serve(app)
    busy, waiting = raw(handle.url), raw(handle.url)
    busy.initialize()
    waiting.initialize()
    blocker = busy.open(call_tool("gated", {"tag": "block"}, 1))
    assert probe.started("block").wait(WAIT)
    queued = waiting.open(call_tool("touch", {"tag": "never"}, 7))
    wait_until(lambda: app.stats().pool.queued == 1, "one request to wait in the pool's queue")
    answer = waiting.post(
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}
    )
    assert answer.status_code == 202
    assert queued.rest() == []  # the stream ends with no response
    probe.release("block")
    assert [m["id"] for _, m in blocker.rest()] == [1]
    wait_until(
        lambda: app.stats().pool.queued == 0 and app.stats().pool.busy == 0, "the pool to go idle"
    )
    assert not probe.event("never").is_set()
    assert wire.responses(7) == []


def test_requests_beyond_max_queued_are_refused_at_once_and_the_session_goes_on(
    probe, serve, raw, wire
):
    app = McpWsgiApp(make_server(probe), max_workers=1, max_queued=2)
    handle = serve(app)
    session = raw(handle.url)
    session.initialize()
    blocker = session.open(call_tool("gated", {"tag": "block"}, 1))
    assert probe.started("block").wait(WAIT)
    waiting = [session.open(call_tool("touch", {"tag": f"q{n}"}, 10 + n)) for n in range(2)]
    wait_until(lambda: app.stats().pool.queued == 2, "two requests queued")
    refused = session.post(call_tool("touch", {"tag": "refused"}, 20))
    assert refused.status_code == 200  # an answer to the request, not an HTTP error
    body = refused.json()
    assert body["id"] == 20 and body["error"]["code"] == -32000
    assert "max_queued=2" in body["error"]["message"]
    ping = session.post(request("ping", None, 21), headers=session.headers(accept=JSON_ONLY))
    assert ping.json()["result"] == {}  # ping needs no worker
    with httpx.Client(timeout=WAIT) as http:  # no new session while the queue is full
        assert initialize(http, handle.url, "init").status_code == 503
    probe.release("block")
    assert [m["id"] for _, m in blocker.rest()] == [1]
    for n, stream in enumerate(waiting):
        assert [m["id"] for _, m in stream.rest()] == [10 + n]
    assert not probe.event("refused").is_set()  # the refused request never ran
    assert (
        session.call(call_tool("echo", {"text": "again"}, 22))["result"]["content"][0]["text"]
        == "again"
    )
    assert wire.responses(20) == []  # refused before it reached the session


def test_one_session_cannot_take_more_than_max_session_requests(probe, serve, raw):
    app = McpWsgiApp(make_server(probe), max_workers=1, max_session_requests=2)
    handle = serve(app)
    greedy, other = raw(handle.url), raw(handle.url)
    greedy.initialize()
    other.initialize()
    running = greedy.open(call_tool("gated", {"tag": "g"}, 1))
    assert probe.started("g").wait(WAIT)
    queued = greedy.open(call_tool("touch", {"tag": "q"}, 2))
    refused = greedy.post(call_tool("touch", {"tag": "never"}, 3)).json()
    assert refused["id"] == 3 and refused["error"]["code"] == -32000
    assert "max_session_requests=2" in refused["error"]["message"]
    fair = other.open(call_tool("touch", {"tag": "other"}, 1))  # another session still gets in
    wait_until(lambda: app.stats().pool.queued == 2, "the other session's request queued")
    probe.release("g")
    for stream, request_id in ((running, 1), (queued, 2), (fair, 1)):
        assert [m["id"] for _, m in stream.rest()] == [request_id]
    assert probe.event("other").is_set() and not probe.event("never").is_set()


# -- the session cap ---------------------------------------------------------------------------------
def test_initialize_beyond_max_sessions_gets_503_with_a_clear_error(probe, serve):
    app = McpWsgiApp(make_server(probe), max_sessions=3)
    handle = serve(app)
    with httpx.Client(timeout=WAIT) as http:
        ids = [initialize(http, handle.url, n).headers["mcp-session-id"] for n in range(3)]
        refused = initialize(http, handle.url, "four")
        assert refused.status_code == 503
        assert refused.headers["retry-after"]
        body = refused.json()
        assert body["id"] == "four"  # the request's id, echoed
        assert "max_sessions=3" in body["error"]["message"]
        assert app.stats().sessions == 3 and app.stats().max_sessions == 3
        # ending one session makes room
        http.delete(handle.url, headers={"Mcp-Session-Id": ids[0]})
        assert initialize(http, handle.url, "again").status_code == 200
        assert app.stats().sessions == 3


def test_at_the_cap_expired_sessions_are_reclaimed_first(probe):
    now = [1000.0]
    app = McpWsgiApp(make_server(probe), max_sessions=2, session_timeout=60.0, clock=lambda: now[0])
    handle = serve_http(app, "127.0.0.1", 0)
    try:
        with httpx.Client(timeout=WAIT) as http:
            assert initialize(http, handle.url, 1).status_code == 200
            assert initialize(http, handle.url, 2).status_code == 200
            scans = []
            expire = app.expire_idle_sessions
            app.expire_idle_sessions = lambda: scans.append(1) or expire()  # type: ignore[method-assign]
            for n in range(5):
                assert initialize(http, handle.url, 3 + n).status_code == 503
            assert len(scans) == 1  # a flood of refused initialize scans the sessions once a second
            now[0] += 61  # both sessions are idle for longer than session_timeout now
            assert initialize(http, handle.url, 10).status_code == 200
            assert app.stats().sessions == 1
    finally:
        handle.stop()


def test_a_closed_app_refuses_new_sessions_with_503(probe, serve):
    app = McpWsgiApp(make_server(probe))
    handle = serve(app)
    app.close()
    with httpx.Client(timeout=WAIT) as http:
        refused = initialize(http, handle.url, 1)
    assert refused.status_code == 503
    assert "shutting down" in refused.json()["error"]["message"]


# -- DELETE and close never wait on stuck handlers ---------------------------------------------------
def run_bounded(fn: Callable[[], Any], limit: float, what: str) -> Any:
    """Run ``fn`` in a thread; fail unless it returns within ``limit`` seconds."""
    outcome: list[Any] = []
    thread = threading.Thread(target=lambda: outcome.append(fn()), name="bounded")
    thread.start()
    thread.join(limit)
    assert not thread.is_alive(), f"{what} did not return within {limit} s"
    return outcome[0]


def test_delete_answers_at_once_while_a_handler_ignores_its_cancellation(probe, serve, raw, wire):
    # a grace far longer than the bound below: a DELETE that waited for the handler fails
    app = McpWsgiApp(stubborn_server(probe), shutdown_grace=60.0)
    handle = serve(app)
    session = raw(handle.url)
    session.initialize()
    stream = session.open(call_tool("stubborn", {"tag": "s"}, 5))
    assert probe.started("s").wait(WAIT)
    answer = run_bounded(session.delete, 2.5, "DELETE")
    assert answer.status_code == 200
    assert not probe.wake("s").is_set()  # the handler is still blocked: DELETE did not wait
    assert stream.rest() == []  # its stream ended with no response
    stats = app.stats()
    assert stats.sessions == 0
    assert stats.pool.busy == 1  # the cancelled handler still runs, on the shared pool
    probe.release("s")
    assert probe.cancelled("s").wait(WAIT)  # its token had fired
    wait_until(lambda: app.stats().pool.busy == 0, "every worker to be free")
    assert wire.responses(5) == []  # a cancelled request is never answered


def test_close_with_several_stuck_sessions_takes_one_grace_period_in_all(probe, serve, raw):
    grace = 1.5
    app = McpWsgiApp(stubborn_server(probe), shutdown_grace=grace)
    handle = serve(app)
    sessions = [raw(handle.url) for _ in range(4)]
    for n, session in enumerate(sessions):
        session.initialize()
        session.open(call_tool("stubborn", {"tag": f"s{n}"}, 1))
    for n in range(4):
        assert probe.started(f"s{n}").wait(WAIT)
    started = time.monotonic()
    # one grace per session would take 4 * 1.5 = 6 s; one grace in all, 1.5 s
    stuck = run_bounded(app.close, 2 * grace + 1.0, "close()")
    elapsed = time.monotonic() - started
    assert elapsed < 3 * grace, elapsed
    assert len(stuck) == 4 and all(t.is_alive() for t in stuck)
    assert app.stats().sessions == 0
    for n in range(4):
        probe.release(f"s{n}")
    for n in range(4):
        assert probe.cancelled(f"s{n}").wait(WAIT)  # every token fired at close
    for thread in stuck:
        thread.join(WAIT)
        assert not thread.is_alive()


def test_close_joins_handlers_that_honour_their_cancellation(probe, serve, raw):
    app = McpWsgiApp(make_server(probe), shutdown_grace=30.0)
    handle = serve(app)
    sessions = [raw(handle.url) for _ in range(3)]
    for n, session in enumerate(sessions):
        session.initialize()
        session.open(call_tool("gated", {"tag": f"g{n}"}, 1))
        assert probe.started(f"g{n}").wait(WAIT)
    assert run_bounded(app.close, WAIT, "close()") == []
    assert all(probe.cancelled(f"g{n}").is_set() for n in range(3))
    assert app.stats().pool.threads == 0


# -- sessionless requests ------------------------------------------------------------------------------
@pytest.mark.parametrize("request_id", [7, "seven"])
@pytest.mark.parametrize(
    "method", ["tools/list", "resources/list"]
)  # server/discover: served statelessly (test_http_modern)
def test_a_request_without_a_session_gets_its_id_echoed(probe, serve, method, request_id):
    handle = serve(make_server(probe))
    headers = {"Accept": JSON_ONLY, "Content-Type": "application/json"}
    with httpx.Client(timeout=WAIT) as http:
        missing = http.post(handle.url, json=request(method, None, request_id), headers=headers)
        unknown = http.post(
            handle.url,
            json=request(method, None, request_id),
            headers={**headers, "Mcp-Session-Id": "nope"},
        )
    assert missing.status_code == 400 and unknown.status_code == 404
    for answer in (missing, unknown):
        body = answer.json()
        assert body["id"] == request_id and type(body["id"]) is type(request_id)
        assert body["error"]["code"] == -32600


# -- stats -----------------------------------------------------------------------------------------------
def test_stats_count_sessions_requests_and_streams(probe, serve, raw):
    app = McpWsgiApp(make_server(probe), max_workers=3)
    handle = serve(app)
    assert app.stats().sessions == 0 and app.stats().open_streams == 0
    first, second = raw(handle.url), raw(handle.url)
    first.initialize()
    second.initialize()
    a = first.open(call_tool("gated", {"tag": "a"}, 1))
    b = second.open(call_tool("gated", {"tag": "b"}, 1))
    assert probe.started("a").wait(WAIT) and probe.started("b").wait(WAIT)
    stats = app.stats()
    assert stats.sessions == 2
    assert stats.inbound_in_flight == 2 and stats.outbound_in_flight == 0
    assert stats.pool.busy == 2 and stats.pool.queued == 0
    assert stats.open_streams == 2
    server_stats = app.server.stats()
    assert (
        server_stats.sessions,
        server_stats.inbound_in_flight,
        server_stats.handlers_running,
    ) == (2, 2, 2)
    probe.release("a")
    probe.release("b")
    a.rest()
    b.rest()
    wait_until(
        lambda: app.stats().inbound_in_flight == 0 and app.stats().open_streams == 0,
        "every request and stream to end",
    )
    assert app.stats().dropped == 0
    stray = {"jsonrpc": "2.0", "id": 999, "result": {}}
    assert first.post(stray).status_code == 202  # a response to nothing the server asked: ignored
    assert app.stats().dropped == 1 and app.server.stats().dropped == 1
