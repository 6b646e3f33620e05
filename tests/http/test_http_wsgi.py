"""The WSGI server side of Streamable HTTP, driven with raw httpx requests.

Every test serves a real :class:`~mcp_sync.Server` with ``serve_http`` on a free loopback
port and judges it by status codes, headers and the SSE events it writes.
"""

from __future__ import annotations

import json
import re

import pytest
from support.http import ACCEPT_BOTH, Sse, legacy_http, make_server
from support.messages import PROTOCOL_VERSION, call_tool, initialize_request, notification, request
from support.waiting import WAIT, wait_until

from mcp_sync import ConnectionClosed
from mcp_sync.http import McpWsgiApp

VISIBLE_ASCII = re.compile(r"^[\x21-\x7e]+$")


# -- initialize and sessions ---------------------------------------------------------------------
def test_initialize_answers_with_sse_and_a_visible_ascii_session_id(probe, serve, raw):
    handle = serve(make_server(probe))
    session = raw(handle.url)
    stream = session.open(initialize_request(1), headers=session.headers(session=False))
    response = stream.response
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    session_id = response.headers["mcp-session-id"]
    assert VISIBLE_ASCII.match(session_id), session_id
    assert len(session_id) >= 32  # cryptographically random, not a counter
    events = stream.rest()
    assert len(events) == 1
    event_id, message = events[0]
    assert event_id  # resumable: every event has an id
    assert message["id"] == 1
    assert message["result"]["protocolVersion"] == PROTOCOL_VERSION
    assert message["result"]["serverInfo"]["name"] == "http-test"
    assert len(handle.app.sessions()) == 1


def test_initialize_answers_with_json_when_only_json_is_accepted(probe, serve, raw):
    handle = serve(make_server(probe))
    session = raw(handle.url)
    answer = session.post(
        initialize_request(1), headers=session.headers(session=False, accept="application/json")
    )
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("application/json")
    assert VISIBLE_ASCII.match(answer.headers["mcp-session-id"])
    message = answer.json()
    assert message["id"] == 1 and message["result"]["protocolVersion"] == PROTOCOL_VERSION
    # later requests of that session may ask for JSON too
    session.session_id = answer.headers["mcp-session-id"]
    assert session.post(notification("notifications/initialized")).status_code == 202
    listed = session.post(
        request("tools/list", None, 2), headers=session.headers(accept="application/json")
    )
    assert listed.status_code == 200 and listed.headers["content-type"].startswith(
        "application/json"
    )
    assert "echo" in [tool["name"] for tool in listed.json()["result"]["tools"]]


def test_sessions_get_distinct_ids(probe, serve, raw):
    handle = serve(make_server(probe))
    first, second = raw(handle.url), raw(handle.url)
    first.initialize()
    second.initialize()
    assert first.session_id != second.session_id
    assert len(handle.app.sessions()) == 2


def test_notification_is_accepted_with_202(probe, serve, raw):
    handle = serve(make_server(probe))
    session = raw(handle.url)
    session.initialize()  # asserts 202 for notifications/initialized
    answer = session.post(notification("notifications/roots/list_changed"))
    assert answer.status_code == 202
    assert answer.content == b""


def test_request_after_initialize_without_session_header_is_400(probe, serve, raw):
    handle = serve(make_server(probe))
    session = raw(handle.url)
    session.initialize()
    answer = session.post(
        call_tool("touch", {"tag": "ran"}, 2), headers=session.headers(session=False)
    )
    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == -32600
    assert not probe.event("ran").is_set()


def test_unknown_session_is_404(probe, serve, raw):
    handle = serve(make_server(probe))
    session = raw(handle.url)
    session.initialize()
    answer = session.post(
        call_tool("touch", {"tag": "ran"}, 2),
        headers=session.headers(**{"Mcp-Session-Id": "no-such-session"}),
    )
    assert answer.status_code == 404
    assert not probe.event("ran").is_set()
    get = session.get(headers={"Accept": "text/event-stream", "Mcp-Session-Id": "no-such-session"})
    assert get.status_code == 404
    get.close()


def test_delete_ends_the_session_and_cancels_its_running_handlers(probe, serve, raw):
    handle = serve(make_server(probe))
    session = raw(handle.url)
    session.initialize()
    running = session.open(call_tool("gated", {"tag": "g"}, 5))
    assert probe.started("g").wait(WAIT)
    answer = session.delete()
    assert answer.status_code == 200
    assert probe.cancelled("g").wait(WAIT), "DELETE must cancel the session's running handlers"
    assert running.rest() == []  # its stream ended, with no response
    assert handle.app.sessions() == []
    later = session.post(call_tool("touch", {"tag": "ran"}, 6))
    assert later.status_code == 404
    assert session.delete().status_code == 404
    get = session.get()
    assert get.status_code == 404
    get.close()
    assert not probe.event("ran").is_set()


def test_wrong_protocol_version_header_is_400(probe, serve, raw):
    handle = serve(make_server(probe))
    session = raw(handle.url)
    session.initialize()
    answer = session.post(
        call_tool("touch", {"tag": "ran"}, 2),
        headers=session.headers(**{"MCP-Protocol-Version": "1999-01-01"}),
    )
    assert answer.status_code == 400
    assert "1999-01-01" in answer.json()["error"]["message"]
    assert not probe.event("ran").is_set()
    # an older revision we speak is fine
    answer = session.post(
        call_tool("touch", {"tag": "ran"}, 3),
        headers=session.headers(**{"MCP-Protocol-Version": "2025-06-18"}),
    )
    assert answer.status_code == 200
    assert probe.event("ran").is_set()


# -- origin and auth -----------------------------------------------------------------------------
def test_evil_origin_is_403_and_nothing_runs(probe, serve, raw):
    handle = serve(make_server(probe))
    evil = {"Origin": "http://evil.example"}
    session = raw(handle.url)
    # no session can even be created from that origin
    refused = session.post(initialize_request(0), headers=session.headers(session=False, **evil))
    assert refused.status_code == 403
    assert handle.app.sessions() == []
    session.initialize()
    for tool_call in (
        call_tool("touch", {"tag": "ran"}, 2),
        notification("notifications/initialized"),
    ):
        answer = session.post(tool_call, headers=session.headers(**evil))
        assert answer.status_code == 403
    get = session.get(headers={**session.headers(accept="text/event-stream"), **evil})
    assert get.status_code == 403
    get.close()
    assert session.http.delete(handle.url, headers=session.headers(**evil)).status_code == 403
    assert len(handle.app.sessions()) == 1  # the DELETE was refused too
    # the same tools/call without the bad origin runs: so the refusal is what stopped it
    assert not probe.event("ran").is_set()
    assert (
        session.call(call_tool("touch", {"tag": "ran"}, 3))["result"]["content"][0]["text"]
        == "touched"
    )
    assert probe.event("ran").is_set()


@pytest.mark.parametrize(
    "origin",
    ["http://localhost", "http://localhost:3000", "https://127.0.0.1:8443", "http://[::1]:8080"],
)
def test_localhost_origins_are_allowed(probe, serve, raw, origin):
    handle = serve(make_server(probe))
    session = raw(handle.url, headers={"Origin": origin})
    session.initialize()
    assert (
        session.call(call_tool("echo", {"text": "hi"}, 2))["result"]["content"][0]["text"] == "hi"
    )


@pytest.mark.parametrize(
    "origin", ["http://localhost.evil.example", "null", "http://127.0.0.1.evil.example"]
)
def test_lookalike_origins_are_refused(probe, serve, raw, origin):
    handle = serve(make_server(probe))
    session = raw(handle.url)
    answer = session.post(
        initialize_request(0), headers=session.headers(session=False, Origin=origin)
    )
    assert answer.status_code == 403


def test_allowed_origins_are_configurable(probe, serve, raw):
    handle = serve(make_server(probe), allowed_origins=["https://app.example"])
    session = raw(handle.url, headers={"Origin": "https://app.example"})
    session.initialize()
    assert (
        session.call(call_tool("echo", {"text": "ok"}, 2))["result"]["content"][0]["text"] == "ok"
    )
    other = session.post(
        call_tool("echo", {"text": "no"}, 3),
        headers=session.headers(Origin="https://other.example"),
    )
    assert other.status_code == 403
    # a wildcard allows any origin
    open_handle = serve(make_server(probe, name="open"), allowed_origins=["*"])
    anyone = raw(open_handle.url, headers={"Origin": "https://anyone.example"})
    anyone.initialize()


def test_auth_hook_refuses_with_401_and_403(probe, serve, raw):
    seen: list[str | None] = []

    def auth(environ):
        token = environ.get("HTTP_AUTHORIZATION")
        seen.append(token)
        if token is None:
            return False  # 401
        if token == "Bearer blocked":
            raise PermissionError("this token is blocked")
        if token != "Bearer good":
            return 403
        return None

    handle = serve(make_server(probe), auth=auth)
    nobody = raw(handle.url)
    answer = nobody.post(initialize_request(0), headers=nobody.headers(session=False))
    assert answer.status_code == 401
    assert answer.headers["www-authenticate"].startswith("Bearer")
    for token, status in (("Bearer wrong", 403), ("Bearer blocked", 403)):
        answer = nobody.post(
            initialize_request(0), headers=nobody.headers(session=False, Authorization=token)
        )
        assert answer.status_code == status
    assert handle.app.sessions() == []  # the hook runs before anything else
    good = raw(handle.url, headers={"Authorization": "Bearer good"})
    good.initialize()
    # a refused tools/call in a valid session does not run
    answer = good.post(
        call_tool("touch", {"tag": "ran"}, 2), headers=good.headers(Authorization="Bearer wrong")
    )
    assert answer.status_code == 403
    assert not probe.event("ran").is_set()
    assert (
        good.call(call_tool("touch", {"tag": "ran"}, 3))["result"]["content"][0]["text"]
        == "touched"
    )
    assert seen.count("Bearer good") >= 3


# -- bodies --------------------------------------------------------------------------------------
def test_body_over_max_body_bytes_is_413_and_not_run(probe, serve, raw):
    handle = serve(make_server(probe), max_body_bytes=1024)
    session = raw(handle.url)
    session.initialize()
    big = call_tool("touch", {"tag": "ran", "padding": "x" * 2000}, 2)
    answer = session.post(big)
    assert answer.status_code == 413
    assert not probe.event("ran").is_set()
    assert (
        session.call(call_tool("echo", {"text": "small"}, 3))["result"]["content"][0]["text"]
        == "small"
    )


def test_bad_json_is_400_with_parse_error(probe, serve, raw):
    handle = serve(make_server(probe))
    session = raw(handle.url)
    session.initialize()
    answer = session.post(None, content=b'{"jsonrpc": "2.0", "id": 1, "method": ')
    assert answer.status_code == 400
    error = answer.json()
    assert error["error"]["code"] == -32700
    assert error["id"] is None
    # also before any session exists
    answer = session.post(None, content=b"not json", headers=session.headers(session=False))
    assert answer.status_code == 400 and answer.json()["error"]["code"] == -32700


def test_other_refusals(probe, serve, raw):
    handle = serve(make_server(probe))
    session = raw(handle.url)
    session.initialize()
    body = json.dumps(call_tool("echo", {"text": "x"}, 2)).encode()
    assert (
        session.post(
            None, content=body, headers=session.headers(**{"Content-Type": "text/plain"})
        ).status_code
        == 415
    )
    assert (
        session.post(None, content=body, headers=session.headers(accept="text/html")).status_code
        == 406
    )
    assert session.http.put(handle.url, content=body, headers=session.headers()).status_code == 405
    invalid = session.post({"jsonrpc": "2.0", "id": 3})
    assert invalid.status_code == 400 and invalid.json()["error"]["code"] == -32600
    wrong_path = session.http.post(
        handle.url.replace("/mcp", "/other"), content=body, headers=session.headers()
    )
    assert wrong_path.status_code == 404


# -- the standalone GET stream -------------------------------------------------------------------
def test_get_stream_carries_server_initiated_messages(probe, serve, raw):
    server = make_server(probe)
    handle = serve(server)
    session = raw(handle.url)
    session.initialize()
    response = session.get()
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    stream = Sse(response)

    def later(text: str) -> str:
        return text

    server.add_tool(later)
    event_id, message = stream.next()  # bounded by the 5 s read timeout
    assert message == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    assert event_id
    server.remove_tool("later")
    assert stream.next()[1]["method"] == "notifications/tools/list_changed"
    stream.close()


def test_second_concurrent_get_is_409(probe, serve, raw):
    handle = serve(make_server(probe))
    session = raw(handle.url)
    session.initialize()
    first = session.get()
    assert first.status_code == 200
    assert Sse(first).next_priming()  # the stream is open on the server
    second = session.get()
    assert second.status_code == 409
    second.close()
    first.close()


def test_get_without_event_stream_accept_is_406(probe, serve, raw):
    handle = serve(make_server(probe))
    session = raw(handle.url)
    session.initialize()
    answer = session.get(headers=session.headers(accept="application/json"))
    assert answer.status_code == 406
    answer.close()


# -- resumption and keep-alive -------------------------------------------------------------------
def test_last_event_id_resumes_a_dropped_post_stream(probe, serve, raw, wire):
    handle = serve(make_server(probe))
    session = raw(handle.url)
    session.initialize()
    stream = session.open(call_tool("progress_gated", {"tag": "p"}, 7, progress_token="tok"))
    first = stream.next()
    second = stream.next()
    assert [m["params"]["progress"] for _, m in (first, second)] == [1, 2]
    assert probe.started("p").wait(WAIT)
    last_id = second[0]
    assert last_id is not None
    stream.close()  # the connection drops while the tool still runs
    probe.release("p")
    assert probe.completed("p").wait(WAIT)
    assert not probe.cancelled("p").is_set()  # a dropped connection is not a cancellation
    resumed = session.get(last_event_id=last_id)
    assert resumed.status_code == 200
    events = Sse(resumed).rest()
    assert [m.get("params", {}).get("progress") for _, m in events[:1]] == [3]
    assert events[1][1]["id"] == 7 and events[1][1]["result"]["content"][0]["text"] == "p: done"
    assert len(events) == 2  # nothing before Last-Event-ID is replayed
    assert len(wire.responses(7)) == 1
    # the ids continue the dropped stream's ids
    assert all(
        event_id and event_id.rsplit(":", 1)[0] == last_id.rsplit(":", 1)[0]
        for event_id, _ in events
    )


def test_last_event_id_resumes_the_standalone_stream(probe, serve, raw):
    server = make_server(probe)
    handle = serve(server)
    session = raw(handle.url)
    session.initialize()
    response = session.get()
    stream = Sse(response)
    server.add_tool(lambda: "a", name="a")
    event_id, _ = stream.next()
    stream.close()
    server.add_tool(lambda: "b", name="b")  # sent while nobody listens
    server.add_tool(lambda: "c", name="c")
    resumed = Sse(session.get(last_event_id=event_id))
    assert [m["method"] for _, m in (resumed.next(), resumed.next())] == [
        "notifications/tools/list_changed"
    ] * 2
    resumed.close()


def test_unknown_last_event_id_is_refused(probe, serve, raw):
    handle = serve(make_server(probe))
    session = raw(handle.url)
    session.initialize()
    answer = session.get(last_event_id="r-nosuchstream:3")
    assert answer.status_code == 400  # not 404: that would tell the client its session is gone
    answer.close()
    malformed = session.get(last_event_id="garbage")
    assert malformed.status_code == 400
    malformed.close()


def test_resuming_a_finished_stream_says_204_stop_reconnecting(probe, serve, raw):
    handle = serve(make_server(probe))
    session = raw(handle.url)
    session.initialize()
    # answered: every event delivered
    answered = session.open(call_tool("progress_gated", {"tag": "a"}, 1, progress_token="a"))
    probe.release("a")
    events = answered.rest()
    assert events[-1][1]["id"] == 1
    last = session.get(last_event_id=events[-1][0])
    assert last.status_code == 204
    last.close()
    # resuming from an earlier event still replays what came after it
    replay = Sse(session.get(last_event_id=events[0][0]))
    assert [m.get("id") for _, m in replay.rest()][-1] == 1
    # cancelled: the stream ended with no answer, and never will have one
    cancelled = session.open(call_tool("progress_gated", {"tag": "c"}, 2, progress_token="c"))
    progress_id = cancelled.next()[0]
    assert probe.started("c").wait(WAIT)
    assert (
        session.post(notification("notifications/cancelled", {"requestId": 2})).status_code == 202
    )
    assert probe.cancelled("c").wait(WAIT)
    rest = cancelled.rest()
    assert all(m.get("method") == "notifications/progress" for _, m in rest)
    last_id = rest[-1][0] if rest else progress_id
    resumed = session.get(last_event_id=last_id)
    assert resumed.status_code == 204
    resumed.close()


def test_idle_streams_get_keepalive_comments(probe, serve, raw):
    server = make_server(probe)
    app = server.wsgi_app(path="/mcp", keepalive=0.2)
    handle = serve(app)
    session = raw(handle.url)
    session.initialize()
    get = Sse(session.get())
    assert get.next_priming()  # every stream opens with a priming event
    assert [get.next_comment() for _ in range(2)] == [": keep-alive", ": keep-alive"]
    # a POST stream whose handler is busy gets them too
    busy = session.open(call_tool("gated", {"tag": "k"}, 9))
    assert probe.started("k").wait(WAIT)
    assert busy.next_priming()
    assert [busy.next_comment() for _ in range(2)] == [": keep-alive", ": keep-alive"]
    probe.release("k")
    assert [m["id"] for _, m in busy.rest()] == [9]
    get.close()


# -- the app as a plain WSGI callable (no server: stream lifetimes are exact) ------------------------
def _wsgi(app, method: str, body: bytes = b"", **headers: str):
    """Call the WSGI app; returns (status code, headers dict, body iterator)."""
    import io
    from wsgiref.util import setup_testing_defaults

    environ: dict = {"REQUEST_METHOD": method, "PATH_INFO": "/mcp", "wsgi.input": io.BytesIO(body)}
    if body:
        environ["CONTENT_LENGTH"] = str(len(body))
        environ["CONTENT_TYPE"] = "application/json"
    for name, value in headers.items():
        environ["HTTP_" + name.upper()] = value
    setup_testing_defaults(environ)
    seen: dict = {}

    def start_response(status, response_headers, exc_info=None):
        seen["status"] = int(status.split()[0])
        seen["headers"] = {k.lower(): v for k, v in response_headers}

    iterator = iter(app(environ, start_response))
    first = next(iterator, b"")  # a generator calls start_response on its first step
    return seen["status"], seen["headers"], first, iterator


def test_a_resumed_standalone_stream_ending_does_not_unlock_a_second_get(probe):
    server = make_server(probe)
    app = server.wsgi_app(path="/mcp")
    try:
        accept = ACCEPT_BOTH
        status, headers, _, body = _wsgi(
            app, "POST", json.dumps(initialize_request(0)).encode(), accept=accept
        )
        assert status == 200
        list(body)
        session = {
            "mcp_session_id": headers["mcp-session-id"],
            "mcp_protocol_version": PROTOCOL_VERSION,
        }
        status, _, _, _ = _wsgi(
            app,
            "POST",
            json.dumps(notification("notifications/initialized")).encode(),
            accept=accept,
            **session,
        )
        assert status == 202
        status, _, first, get_body = _wsgi(app, "GET", accept="text/event-stream", **session)
        assert status == 200 and first.startswith(b"id: ")  # the priming event
        server.add_tool(lambda: "x", name="x")  # one event on the standalone stream
        event = next(get_body).decode()
        event_id = next(line[4:] for line in event.splitlines() if line.startswith("id: "))
        # a resumption of the standalone stream, which then ends (its client went away)
        status, _, _, resumed = _wsgi(
            app, "GET", accept="text/event-stream", last_event_id=event_id, **session
        )
        assert status == 200
        resumed.close()
        # the first GET is still open: another plain GET must still be refused
        status, _, _, _ = _wsgi(app, "GET", accept="text/event-stream", **session)
        assert status == 409
        get_body.close()
        status, _, _, again = _wsgi(app, "GET", accept="text/event-stream", **session)
        assert status == 200  # once it is gone, a new GET may open
        again.close()
    finally:
        app.close()


def test_idle_sessions_expire_but_busy_ones_do_not(probe, serve):
    """A client that vanishes without DELETE must not keep its session for ever."""
    now = [1000.0]
    app = McpWsgiApp(make_server(probe), session_timeout=60.0, clock=lambda: now[0])
    handle = serve(app)
    idle = legacy_http(handle.url, open_get_stream=False)
    busy = legacy_http(handle.url, open_get_stream=False)
    try:
        assert len(app.sessions()) == 2
        pending = busy.call_tool_future("gated", {"tag": "busy"})
        assert probe.started("busy").wait(WAIT)
        now[0] += 61.0
        assert app.expire_idle_sessions() == 1, "only the session with nothing running expires"
        with pytest.raises(ConnectionClosed):
            idle.ping(timeout=WAIT)  # its session is gone: 404
        probe.release("busy")
        assert pending.result(WAIT).content[0].text == "busy: released"

        def response_finished() -> bool:  # the client has the answer before the server's
            stats = app.stats()  # WSGI thread has finished sending the POST's stream
            return stats.inbound_in_flight == 0 and stats.open_streams == 0

        wait_until(response_finished, "the server to finish the busy call's response")
        now[0] += 30.0
        assert app.expire_idle_sessions() == 0, "the busy session was seen 30 s ago"
        now[0] += 31.0
        assert app.expire_idle_sessions() == 1
        assert app.sessions() == []
    finally:
        idle.close()
        busy.close()


def test_servers_bind_to_loopback_unless_told_otherwise(probe):
    import inspect

    from mcp_sync import Server
    from mcp_sync.http import serve_http

    handle = make_server(probe).serve_http(port=0)
    try:
        assert handle.host == "127.0.0.1"
    finally:
        handle.stop()
    for function in (Server.serve_http, Server.run, serve_http):
        assert inspect.signature(function).parameters["host"].default == "127.0.0.1", function


def test_every_stream_opens_with_a_priming_event_that_allows_resumption(probe, serve, raw):
    """2025-11-25: the server SHOULD send an event id with empty data at once, so a client
    that loses the stream before the first message can still resume it."""
    handle = serve(make_server(probe))
    session = raw(handle.url)
    session.initialize()
    stream = session.open(call_tool("gated", {"tag": "p"}, 31))
    priming = stream.next_priming()
    assert priming is not None and priming.endswith(":0")
    assert probe.started("p").wait(WAIT)
    stream.close()  # lost before any message
    probe.release("p")
    resumed = Sse(
        session.get(
            headers={**session.headers(accept="text/event-stream"), "Last-Event-ID": priming}
        )
    )
    assert resumed.next_priming()
    assert [m["id"] for _, m in resumed.rest()] == [31]
