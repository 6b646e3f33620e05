"""Hostile or unusual requests against a served app: chunked bodies, foreign ``Host``
headers (DNS rebinding), media types that only look like JSON, crafted ``Last-Event-ID``.

Each is answered with the right HTTP status, nothing runs, and the session stays usable.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from support.http import make_server
from support.messages import call_tool, initialize_request
from support.waiting import WAIT

from mcp_sync import Server
from mcp_sync.http import McpWsgiApp, serve_http


def chunks(body: bytes, size: int = 7) -> Iterator[bytes]:
    """A body httpx sends with ``Transfer-Encoding: chunked`` (no Content-Length)."""
    for start in range(0, len(body), size):
        yield body[start : start + size]


# -- request bodies --------------------------------------------------------------------------------
def test_a_chunked_body_is_411_where_the_server_cannot_frame_it(probe, serve, raw):
    """wsgiref (serve_http) passes the raw chunked bytes on without ``wsgi.input_terminated``:
    the app cannot tell where the body ends, so it asks for a length instead of guessing."""
    handle = serve(make_server(probe))
    session = raw(handle.url)
    session.initialize()
    body = json.dumps(call_tool("touch", {"tag": "ran"}, 2)).encode()
    answer = session.http.post(handle.url, content=chunks(body), headers=session.headers())
    assert answer.status_code == 411, answer.text
    assert not probe.event("ran").is_set()
    assert (
        session.call(call_tool("echo", {"text": "still here"}, 3))["result"]["content"][0]["text"]
        == "still here"
    )


# -- Host (DNS rebinding) --------------------------------------------------------------------------
def test_a_loopback_server_refuses_a_foreign_host_with_421_and_runs_nothing(probe, serve, raw):
    handle = serve(make_server(probe))
    session = raw(handle.url)
    session.initialize()
    touch = json.dumps(call_tool("touch", {"tag": "ran"}, 2)).encode()
    for host in (
        "evil.example",
        f"evil.example:{handle.port}",
        "localhost.evil.example",
        "127.0.0.1.evil.example",
    ):
        answer = session.http.post(handle.url, content=touch, headers=session.headers(Host=host))
        assert answer.status_code == 421, (host, answer.status_code)
    assert not probe.event("ran").is_set()
    # nor may a rebinding page open a session
    hello = json.dumps(initialize_request()).encode()
    answer = session.http.post(
        handle.url, content=hello, headers=session.headers(session=False, Host="evil.example")
    )
    assert answer.status_code == 421
    assert len(handle.app.sessions()) == 1


@pytest.mark.parametrize(
    "host",
    ["localhost", "LOCALHOST:{port}", "127.0.0.1:{port}", "localhost.:{port}", "[::1]:{port}"],
)
def test_loopback_host_names_are_allowed(probe, serve, raw, host):
    handle = serve(make_server(probe))
    session = raw(handle.url, headers={"Host": host.format(port=handle.port)})
    session.initialize()
    assert (
        session.call(call_tool("echo", {"text": "hi"}, 2))["result"]["content"][0]["text"] == "hi"
    )


def test_allowed_hosts_are_configurable(probe, serve, raw):
    handle = serve(make_server(probe), allowed_hosts=["mcp.example", "other.example:8443"])
    for host in (
        "mcp.example",
        f"mcp.example:{handle.port}",
        "other.example:8443",
        f"localhost:{handle.port}",
    ):
        raw(handle.url, headers={"Host": host}).initialize()
    session = raw(handle.url, headers={"Host": "other.example:9999"})
    hello = json.dumps(initialize_request()).encode()
    assert (
        session.post(None, content=hello, headers=session.headers(session=False)).status_code == 421
    )
    anything = serve(make_server(probe), allowed_hosts=["*"])
    raw(anything.url, headers={"Host": "whatever.example"}).initialize()


def test_a_mounted_app_serving_through_serve_http_is_guarded_too(probe):
    """serve_http guards any app it serves on loopback, not only a bare McpWsgiApp."""
    mcp = McpWsgiApp(make_server(probe))

    def outer(environ, start_response):  # an app that mounts the MCP one, as Flask would
        return mcp(environ, start_response)

    with serve_http(outer, "127.0.0.1", 0) as handle:
        hello = json.dumps(initialize_request()).encode()
        headers = {"Accept": "application/json", "Content-Type": "application/json"}
        refused = httpx.post(
            handle.url, content=hello, headers={**headers, "Host": "evil.example"}, timeout=WAIT
        )
        assert refused.status_code == 421
        served = httpx.post(handle.url, content=hello, headers=headers, timeout=WAIT)
        assert served.status_code == 200
    mcp.close()


def _call_app(app: McpWsgiApp, host: str) -> int:
    """POST an initialize to the app directly, as a WSGI server we know nothing of would."""
    import io
    from wsgiref.util import setup_testing_defaults

    body = json.dumps(initialize_request()).encode()
    environ = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": "/mcp",
        "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": str(len(body)),
        "HTTP_ACCEPT": "application/json",
        "HTTP_HOST": host,
        "wsgi.input": io.BytesIO(body),
    }
    setup_testing_defaults(environ)
    seen: list[str] = []
    b"".join(app(environ, lambda status, headers, exc_info=None: seen.append(status)))
    return int(seen[0].split()[0])


def test_an_app_under_another_server_checks_host_only_when_told_to(probe):
    """Mounted elsewhere, the app cannot know where it is bound (behind a proxy, ``Host`` is a
    public name): it checks ``Host`` when given ``allowed_hosts`` (``[]``: loopback only)."""
    server: Server = make_server(probe)
    unchecked = McpWsgiApp(server)
    checked = McpWsgiApp(server, allowed_hosts=[])
    try:
        assert _call_app(unchecked, "public.example") == 200
        assert _call_app(checked, "public.example") == 421
        assert _call_app(checked, "localhost:8000") == 200
    finally:
        unchecked.close()
        checked.close()


# -- media types -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain; charset=application/json",
        "application/jsonx",
        "application/json-seq",
        "text/application/json",
        "",
        "json",
    ],
)
def test_a_body_that_is_not_declared_application_json_is_415(probe, serve, raw, content_type):
    handle = serve(make_server(probe))
    session = raw(handle.url)
    session.initialize()
    body = json.dumps(call_tool("touch", {"tag": "ran"}, 2)).encode()
    answer = session.post(
        None, content=body, headers=session.headers(**{"Content-Type": content_type})
    )
    assert answer.status_code == 415, (content_type, answer.status_code)
    assert not probe.event("ran").is_set()


@pytest.mark.parametrize(
    "content_type",
    [
        "application/json",
        "Application/JSON",
        "application/json; charset=utf-8",
        "application/json ;charset=UTF-8",
    ],
)
def test_application_json_with_parameters_is_accepted(probe, serve, raw, content_type):
    handle = serve(make_server(probe))
    session = raw(handle.url, headers={"Content-Type": content_type})
    session.initialize()
    assert (
        session.call(call_tool("echo", {"text": "ok"}, 2))["result"]["content"][0]["text"] == "ok"
    )


# -- crafted Last-Event-ID -------------------------------------------------------------------------
@pytest.mark.parametrize(
    "last_event_id",
    # header bytes; a WSGI server decodes them as latin-1, so b"\xb2" arrives as "\u00b2"
    [
        b"x:\xb2",
        b"r-1:" + b"9" * 5000,
        b"s:-1",
        b"s:+1",
        b"s:1_0",
        b":",
        "s:\u0661".encode(),
        b"s: 1",
    ],
)
def test_a_crafted_last_event_id_is_400_and_the_session_lives_on(probe, serve, raw, last_event_id):
    handle = serve(make_server(probe))
    session = raw(handle.url)
    session.initialize()
    hdrs: dict = session.headers(accept="text/event-stream")
    hdrs.pop("Content-Type")
    hdrs["Last-Event-ID"] = last_event_id
    answer = session.http.get(handle.url, headers=hdrs)
    assert answer.status_code == 400, (last_event_id[:20], answer.status_code, answer.text[:200])
    assert (
        session.call(call_tool("echo", {"text": "alive"}, 2))["result"]["content"][0]["text"]
        == "alive"
    )
